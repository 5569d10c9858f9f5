//! The services the daemon talks to besides the kernel: journald, and the
//! container engines' API sockets.

use std::path::{Path, PathBuf};

use super::check::{Check, ok, warn};
use crate::config::Config;

pub fn journald() -> Check {
    let socket = crate::report::journal::SOCKET;
    if Path::new(socket).exists() {
        ok("journald", format!("{socket} exists"))
    } else {
        warn(
            "journald",
            format!("{socket} not found"),
            "the daemon logs to stderr: `journalctl REAPER_ACTION=reap` and the other field queries find nothing",
        )
    }
}

pub fn engines(cfg: &Config) -> Check {
    if !cfg.containers.stop {
        return ok("engine sockets", "containers are not stopped by configuration");
    }
    let mut candidates: Vec<PathBuf> = cfg.containers.engine_sockets.clone();
    candidates.extend([PathBuf::from("/var/run/docker.sock"), PathBuf::from("/run/podman/podman.sock")]);
    if let Some(rt) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        candidates.extend([rt.join("docker.sock"), rt.join("podman/podman.sock")]);
    }
    let found: Vec<String> = candidates
        .iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())))
        .map(|p| p.display().to_string())
        .collect();
    if found.is_empty() {
        warn(
            "engine sockets",
            "no docker or podman API socket found",
            "the container of an orphaned `docker run`/`podman run` server cannot be stopped through its \
             engine: the client is reaped, the container may keep running (fine where no such servers run)",
        )
    } else {
        ok("engine sockets", found.join(", "))
    }
}
