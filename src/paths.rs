//! Where things live, by who runs us: the config file, the control socket,
//! the state file. Knows nothing of the config: callers pass what it configured.

use std::path::{Path, PathBuf};

/// Whether this process runs as the system daemon / system-wide tool
/// (effective uid 0): that picks /etc, /run and /var/lib over the user's
/// XDG directories. One answer for every path.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `$VAR` if set and absolute, else `$HOME/fallback`.
pub fn xdg_dir(var: &str, fallback: &str) -> PathBuf {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(p) if p.is_absolute() => p,
        _ => std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from).join(fallback),
    }
}

/// The main config file when none is named: the system file for root, the
/// XDG one for a user. It need not exist.
pub fn default_config_path() -> PathBuf {
    if is_root() {
        PathBuf::from("/etc/mcp-reaper/config.toml")
    } else {
        xdg_dir("XDG_CONFIG_HOME", ".config").join("mcp-reaper/config.toml")
    }
}

/// The system daemon's control socket.
pub const SYSTEM_SOCKET: &str = "/run/mcp-reaper/control.sock";

/// Control socket: `configured` (`daemon.socket`), else
/// `/run/mcp-reaper/control.sock` for root,
/// `$XDG_RUNTIME_DIR/mcp-reaper/control.sock` for a user.
pub fn socket(configured: Option<&Path>) -> PathBuf {
    if let Some(p) = configured {
        return p.to_path_buf();
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

/// Grace state: `configured` (`daemon.state_file`), else
/// `/var/lib/mcp-reaper/state.json` for root,
/// `$XDG_STATE_HOME/mcp-reaper/state.json` for a user.
pub fn state_file(configured: Option<&Path>) -> PathBuf {
    if let Some(p) = configured {
        return p.to_path_buf();
    }
    if is_root() {
        PathBuf::from("/var/lib/mcp-reaper/state.json")
    } else {
        xdg_dir("XDG_STATE_HOME", ".local/state").join("mcp-reaper/state.json")
    }
}
