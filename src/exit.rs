//! sysexits-style exit codes, shared by both binaries.

pub const OK: u8 = 0;
/// Command line usage error.
pub const USAGE: u8 = 64;
/// Service unavailable (the daemon is not running).
pub const UNAVAILABLE: u8 = 69;
/// Internal software error.
pub const SOFTWARE: u8 = 70;
/// Cannot create or write an output file.
pub const CANTCREAT: u8 = 73;
/// Permission denied.
pub const NOPERM: u8 = 77;
/// Configuration error.
pub const CONFIG: u8 = 78;
/// Validation found problems (`reaperctl validate`): same as a config error.
pub const INVALID: u8 = CONFIG;
/// Temporary failure (another instance holds the lock).
pub const TEMPFAIL: u8 = 75;
