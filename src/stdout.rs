//! What both binaries print on stdout. A reader that goes away early
//! (`reaperctl status | head -1`, `| grep -q enforce`) ends the program
//! quietly with status 0: nothing it had left to say was wanted, and a
//! pipeline under `set -o pipefail` should not fail for it. (Rust ignores
//! SIGPIPE, so `println!` would panic with exit 101 there; restoring the
//! signal's default instead would also end `reaperctl` on a control socket
//! the daemon closed, where an error message is wanted.)

use std::io::Write as _;

/// Writes `text` to stdout and flushes it; on failure, exits with the code
/// [`crate::exit::stdout_error`] gives (0 when the reader is gone).
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        let code = crate::exit::stdout_error(&e);
        if code != crate::exit::OK {
            eprintln!("{}: writing to stdout: {e}", crate::exit::program_name());
        }
        std::process::exit(i32::from(code));
    }
}

/// `print!` through [`print`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::print(&format!($($arg)*))
    };
}

/// `println!` through [`print`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::stdout::print(&(format!($($arg)*) + "\n"))
    };
}

pub(crate) use {out, outln};
