//! Where things live, by who runs us: the config file, the control socket,
//! the state file; and whether a directory in a shared place is safe to use.
//! Knows nothing of the config: callers pass what it configured.

use std::fmt;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
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

/// `$XDG_RUNTIME_DIR`, else [`shared_runtime_dir`] (a session without
/// systemd-logind has no runtime dir).
fn runtime_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(p) if p.is_absolute() => p,
        _ => shared_runtime_dir(),
    }
}

/// The stand-in for a runtime dir: `mcp-reaper-UID` in the temp dir, a
/// place where anyone may create that name first (see [`check_socket_dir`]).
pub fn shared_runtime_dir() -> PathBuf {
    std::env::temp_dir().join(format!("mcp-reaper-{}", rustix::process::getuid().as_raw()))
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

/// A directory we refuse to keep a socket in, and why.
#[derive(Debug)]
pub struct UnsafeDir {
    pub dir: PathBuf,
    pub problem: String,
}

impl fmt::Display for UnsafeDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "refusing the socket's directory {}: {} (set XDG_RUNTIME_DIR or daemon.socket, or remove it)",
            self.dir.display(),
            self.problem
        )
    }
}

impl std::error::Error for UnsafeDir {}

/// Before a socket is made or used under [`shared_runtime_dir`]: creates that
/// directory (0700) if missing, then refuses it unless [`check_private_dir`]
/// passes, so another user cannot own it first and redirect or spoof the
/// socket. A socket elsewhere (a runtime dir, `/run`, a chosen path) passes.
pub fn check_socket_dir(socket: &Path) -> Result<(), UnsafeDir> {
    let shared = shared_runtime_dir();
    if !socket.starts_with(&shared) {
        return Ok(());
    }
    match std::fs::DirBuilder::new().mode(0o700).create(&shared) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(UnsafeDir { dir: shared, problem: format!("cannot create it: {e}") });
        }
        _ => {}
    }
    check_private_dir(&shared)
}

/// `dir` must be a directory (not a symlink), owned by our effective uid and
/// not writable by group or others.
pub fn check_private_dir(dir: &Path) -> Result<(), UnsafeDir> {
    let refuse = |problem: String| Err(UnsafeDir { dir: dir.to_path_buf(), problem });
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) => return refuse(format!("cannot inspect it: {e}")),
    };
    let me = rustix::process::geteuid().as_raw();
    if meta.file_type().is_symlink() {
        refuse("it is a symbolic link".into())
    } else if !meta.is_dir() {
        refuse("it is not a directory".into())
    } else if meta.uid() != me {
        refuse(format!("it is owned by uid {}, not by us (uid {me})", meta.uid()))
    } else if meta.mode() & 0o022 != 0 {
        refuse(format!("it is writable by group or others (mode {:04o})", meta.mode() & 0o7777))
    } else {
        Ok(())
    }
}

/// The file a program name runs: itself when it is a path (has a `/`),
/// else the first `PATH` directory holding it, as `execvp` looks.
pub fn find_program(program: &std::ffi::OsStr) -> Option<PathBuf> {
    let p = Path::new(program);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(p)).find(|f| f.is_file())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// A fresh directory with `mode` in a temp dir of this test's own.
    fn dir_with_mode(tag: &str, mode: u32) -> (PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!("mcp-reaper-paths-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("run");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        (base, dir)
    }

    #[test]
    fn a_private_directory_of_ours_passes() {
        for mode in [0o700, 0o755, 0o711] {
            let (base, dir) = dir_with_mode("ok", mode);
            assert!(check_private_dir(&dir).is_ok(), "mode {mode:o}");
            std::fs::remove_dir_all(base).unwrap();
        }
    }

    #[test]
    fn a_directory_writable_by_group_or_others_is_refused() {
        for (mode, shown) in [(0o777, "0777"), (0o770, "0770"), (0o1733, "1733")] {
            let (base, dir) = dir_with_mode("writable", mode);
            let e = check_private_dir(&dir).unwrap_err().to_string();
            let want = format!(
                "refusing the socket's directory {}: it is writable by group or others (mode {shown})",
                dir.display()
            );
            assert!(e.starts_with(&want), "{e}");
            std::fs::remove_dir_all(base).unwrap();
        }
    }

    #[test]
    fn a_symlink_or_a_file_is_refused() {
        let (base, dir) = dir_with_mode("links", 0o700);
        let link = base.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(check_private_dir(&link).unwrap_err().to_string().contains("it is a symbolic link"));
        let file = base.join("file");
        std::fs::write(&file, "").unwrap();
        assert!(check_private_dir(&file).unwrap_err().to_string().contains("it is not a directory"));
        let gone = base.join("gone");
        assert!(check_private_dir(&gone).unwrap_err().to_string().contains("cannot inspect it"));
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn a_directory_another_user_owns_is_refused() {
        if !is_root() {
            eprintln!("SKIPPED a_directory_another_user_owns_is_refused: needs root (to chown to uid 65534)");
            return;
        }
        let (base, dir) = dir_with_mode("owner", 0o700);
        rustix::fs::chown(&dir, Some(rustix::fs::Uid::from_raw(65534)), None).unwrap();
        let e = check_private_dir(&dir).unwrap_err().to_string();
        assert!(e.contains(&format!("{}: it is owned by uid 65534, not by us (uid 0)", dir.display())), "{e}");
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn only_a_socket_under_the_shared_runtime_dir_is_checked() {
        assert!(check_socket_dir(Path::new("/run/mcp-reaper/control.sock")).is_ok());
        assert!(check_socket_dir(&std::env::temp_dir().join("elsewhere/control.sock")).is_ok());
    }
}
