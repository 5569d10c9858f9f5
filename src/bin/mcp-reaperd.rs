fn main() -> std::process::ExitCode {
    mcp_reaper::daemon::main()
}
