//! The `reaperctl` binary: a thin entry into `mcp_reaper::ctl`.

fn main() -> std::process::ExitCode {
    mcp_reaper::ctl::main()
}
