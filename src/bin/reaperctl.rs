fn main() -> std::process::ExitCode {
    mcp_reaper::ctl::main()
}
