//! The `mcp-reaperd` binary: a thin entry into `mcp_reaper::daemon`.

fn main() -> std::process::ExitCode {
    mcp_reaper::daemon::main()
}
