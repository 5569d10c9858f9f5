//! sysexits-style exit codes, shared by both binaries, and the one mapping
//! of each failure both binaries can meet to its code. (Control-socket
//! failures map through `proto::ErrorKind::exit_code`; the lock through
//! `daemon::control::LockError::exit_code`.)

use crate::cycle::AssessError;

pub const OK: u8 = 0;
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
