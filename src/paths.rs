//! Where the daemon keeps its socket and state, by who runs it.

use std::path::PathBuf;

use crate::config::{Config, xdg_dir};

/// Whether this process runs as the system daemon / system-wide tool
/// (effective uid 0): that picks /etc, /run and /var/lib over the user's
/// XDG directories. One answer for every path.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The system daemon's control socket.
pub const SYSTEM_SOCKET: &str = "/run/mcp-reaper/control.sock";

/// Control socket: `daemon.socket`, else `/run/mcp-reaper/control.sock` for
/// root, `$XDG_RUNTIME_DIR/mcp-reaper/control.sock` for a user.
pub fn socket(cfg: &Config) -> PathBuf {
    if let Some(p) = &cfg.socket {
        return p.clone();
    }
    if is_root() { PathBuf::from(SYSTEM_SOCKET) } else { runtime_dir().join("mcp-reaper/control.sock") }
}

/// `$XDG_RUNTIME_DIR`, else a per-user directory under the temp dir (a
/// session without systemd-logind has no runtime dir).
fn runtime_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(p) if p.is_absolute() => p,
        _ => std::env::temp_dir().join(format!("mcp-reaper-{}", rustix::process::getuid().as_raw())),
    }
}

/// Grace state: `daemon.state_file`, else `/var/lib/mcp-reaper/state.json`
/// for root, `$XDG_STATE_HOME/mcp-reaper/state.json` for a user.
pub fn state_file(cfg: &Config) -> PathBuf {
    if let Some(p) = &cfg.state_file {
        return p.clone();
    }
    if is_root() {
        PathBuf::from("/var/lib/mcp-reaper/state.json")
    } else {
        xdg_dir("XDG_STATE_HOME", ".local/state").join("mcp-reaper/state.json")
    }
}
