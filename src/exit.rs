//! sysexits-style exit codes, shared by both binaries, and the one mapping
//! of each failure both binaries can meet to its code. (Control-socket
//! failures map through `proto::ErrorKind::exit_code`; the lock through
//! `daemon::control::LockError::exit_code`.)

use crate::cycle::AssessError;
use crate::daemon::http::ListenError;

pub const OK: u8 = 0;
/// `reaperctl scan --exit-code`: a tree would be reaped now (as `git diff
/// --exit-code` says 1 for "there are differences").
pub const WOULD_REAP: u8 = 1;
/// Command line usage error.
pub const USAGE: u8 = 64;
/// Service unavailable (the daemon is not running).
pub const UNAVAILABLE: u8 = 69;
/// Internal software error.
pub const SOFTWARE: u8 = 70;
/// An operating-system error (`reaperctl run` cannot set up its session as asked).
pub const OSERR: u8 = 71;
/// A system file is missing or unreadable (`/proc`).
pub const OSFILE: u8 = 72;
/// Cannot create or write an output file.
pub const CANTCREAT: u8 = 73;
/// An input/output error (stdout failed other than by its reader leaving).
pub const IOERR: u8 = 74;
/// The daemon did not understand the request (a protocol mismatch).
pub const PROTOCOL: u8 = 76;
/// Permission denied.
pub const NOPERM: u8 = 77;
/// Configuration error.
pub const CONFIG: u8 = 78;
/// Validation found problems (`reaperctl validate`): same as a config error.
pub const INVALID: u8 = CONFIG;
/// Temporary failure (another instance holds the lock).
pub const TEMPFAIL: u8 = 75;

/// A judgement that could not be made, in `reaperctl scan` and `mcp-reaperd
/// --once` alike: a scope that does not exist is a usage error; `/proc`
/// that cannot be listed is a system file in trouble.
pub fn assess(e: &AssessError) -> u8 {
    match e {
        AssessError::ScopeNotFound(_) => USAGE,
        AssessError::Scan(_) => OSFILE,
    }
}

/// The metrics listener that cannot be had: `[metrics] listen` that cannot
/// be bound (another holds the port, the address is not this host's, the
/// unit allows no IP socket) or a socket passed by the service manager that
/// is no listening TCP socket. Either is the configuration's to fix, so a
/// configuration error (`status=78/CONFIG` under systemd), not a daemon
/// running on while another answers on its port.
pub fn metrics_listener(e: &ListenError) -> u8 {
    match e {
        ListenError::Bind { .. } | ListenError::Passed(_) => CONFIG,
    }
}

/// The command line, parsed, or the exit code for the text clap printed:
/// 0 after `--help` and `--version`, [`USAGE`] (64, as documented) for
/// every argument error (clap's own default would be 2).
pub fn parse_args<P: clap::Parser>() -> Result<P, std::process::ExitCode> {
    parse_args_from(std::env::args_os())
}

/// [`parse_args`] from a given argv.
pub fn parse_args_from<P, I, T>(argv: I) -> Result<P, std::process::ExitCode>
where
    P: clap::Parser,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    P::try_parse_from(argv).map_err(|e| {
        // A reader gone away is no reason to fail `--help | head -1`.
        let _ = e.print();
        std::process::ExitCode::from(if e.use_stderr() { USAGE } else { OK })
    })
}

/// The exit code when stdout fails: its reader gone away (`| head -1`) is a
/// quiet end, [`OK`]; anything else (a full disk) is [`IOERR`].
pub fn stdout_error(e: &std::io::Error) -> u8 {
    if e.kind() == std::io::ErrorKind::BrokenPipe { OK } else { IOERR }
}

/// This program's name for its messages (`reaperctl`, `mcp-reaperd`).
pub fn program_name() -> String {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "mcp-reaper".into())
}
