//! The engine a client names through its environment, and where an engine
//! address leads. The docker CLI reads `DOCKER_HOST` (also when it talks to
//! Podman's compatible socket); podman reads `CONTAINER_HOST` and ignores
//! `DOCKER_HOST` (checked with podman 4.3). The docker CLI also takes a
//! context from `DOCKER_CONTEXT` and its config directory from
//! `DOCKER_CONFIG` (see [`super::context`]). Only those names are read from
//! `/proc/PID/environ`, and only for clients of trees to reap; no other
//! value is kept.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::EngineKind;

/// An environment is at most a few hundred KiB (`ARG_MAX` shares it with argv).
const MAX: u64 = 1 << 20;

/// The variable `kind`'s client takes its engine's address from.
pub fn host_var(kind: EngineKind) -> &'static str {
    match kind {
        EngineKind::Docker => "DOCKER_HOST",
        EngineKind::Podman => "CONTAINER_HOST",
    }
}

/// The raw `NAME=value\0…` environment of `/proc/PID` (`proc_dir`).
pub fn read(proc_dir: &Path) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    std::fs::File::open(proc_dir.join("environ")).ok()?.take(MAX).read_to_end(&mut buf).ok()?;
    Some(buf)
}

/// The engine address `kind`'s client takes from its environment; `None`
/// when unset or empty.
pub fn host(environ: &[u8], kind: EngineKind) -> Option<String> {
    var(environ, host_var(kind))
}

/// One variable of an environment, `None` when unset or empty. The last
/// setting wins, as in `getenv` of the programs that read it (Go's
/// `os.Getenv` takes the last).
pub fn var(environ: &[u8], name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    environ
        .split(|&b| b == 0)
        .filter_map(|v| v.strip_prefix(prefix.as_bytes()))
        .next_back()
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// The unix socket an engine address (`-H`, `DOCKER_HOST`, …) leads to;
/// `None` for an engine the reaper does not ask (tcp, ssh: not on this
/// host's filesystem, nor the reaper's to reach).
pub fn local_socket(address: &str) -> Option<PathBuf> {
    address.strip_prefix("unix://").filter(|p| p.starts_with('/')).map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_clients_own_variable_counts() {
        let env = b"PATH=/bin\0DOCKER_HOST=unix:///run/d.sock\0CONTAINER_HOST=unix:///run/p.sock\0SECRET=x\0";
        assert_eq!(host(env, EngineKind::Docker).as_deref(), Some("unix:///run/d.sock"));
        assert_eq!(host(env, EngineKind::Podman).as_deref(), Some("unix:///run/p.sock"));
        // podman ignores DOCKER_HOST; an empty one means the default.
        assert_eq!(host(b"DOCKER_HOST=unix:///run/d.sock\0", EngineKind::Podman), None);
        assert_eq!(host(b"DOCKER_HOST=\0", EngineKind::Docker), None);
        assert_eq!(host(b"XDOCKER_HOST=unix:///x\0MY_DOCKER_HOST=unix:///y", EngineKind::Docker), None);
        assert_eq!(
            host(b"DOCKER_HOST=unix:///a\0DOCKER_HOST=unix:///b", EngineKind::Docker).as_deref(),
            Some("unix:///b")
        );
    }

    #[test]
    fn only_unix_sockets_are_local() {
        assert_eq!(
            local_socket("unix:///run/user/1000/docker.sock"),
            Some(PathBuf::from("/run/user/1000/docker.sock"))
        );
        for remote in ["tcp://10.0.0.2:2376", "ssh://me@box", "unix://rel.sock", "npipe:////./pipe/x", "/run/d.sock"] {
            assert_eq!(local_socket(remote), None, "{remote}");
        }
    }

    #[test]
    fn read_takes_it_from_proc() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        std::fs::write(dir.path().join("environ"), b"HOME=/root\0CONTAINER_HOST=ssh://u@h/run/p.sock\0").unwrap();
        let env = read(dir.path()).unwrap();
        assert_eq!(host(&env, EngineKind::Podman).as_deref(), Some("ssh://u@h/run/p.sock"));
        assert_eq!(host(&env, EngineKind::Docker), None);
    }
}
