//! Container engines: the Docker Engine API (and Podman's compatible API) on
//! a unix socket. A `docker|podman run -i` stdio server runs in a container
//! that is no process of the client's tree; ending the client leaves it
//! running. This module finds a client's container ([`find`]) and offers the
//! calls that end it (stop, kill, remove); *when* to call them is decided by
//! the cycle's plan and done by `reap`.
//!
//! HTTP with hyper (client + http1 features only), hyper-util for its tokio
//! I/O adapter, http-body-util to read a capped body: the well-kept stack the
//! Docker crates use, minus their TLS, TCP and JSON-model weight (no
//! bollard: it brings its own model of the whole API). Release
//! `mcp-reaperd` (`cargo build --release`, `x86_64`), this module and its use
//! in cycle/reap/report included: 4,894,624 → 5,613,128 bytes (+702 KiB,
//! +14.7 %); stripped 3,900,416 → 4,421,248 (+509 KiB, +13.4 %). Of that,
//! hyper, http and httparse are ~140 KiB of code, more tokio (a current-thread
//! runtime, `JoinSet`) ~55 KiB, the rest this crate's own code, much of it
//! hyper's generic connection code instantiated here (so `opt-level = "s"`
//! for the hyper crates in Cargo.toml saves only 25 KiB).
//!
//! Every call is capped (2 s; a stop waits for the engine's own timeout
//! first). Sockets: the engine the client names (`-H unix://…` or a docker
//! context in its argv, `DOCKER_HOST`/`CONTAINER_HOST`, `DOCKER_CONTEXT` or
//! the docker CLI's current context: [`context`]), else
//! `[containers] engine_sockets` and the usual places. Whichever way it is
//! named, an engine is asked for a client only when the client's own user
//! could connect to its socket: checked as that user (their uid, gid and
//! supplementary groups from `/proc/PID/status`, against the owner, group
//! and mode of the socket and of every directory on its path:
//! [`crate::access`]), at every call, the connection made through the
//! directory that was checked. A user outside the `docker` group never
//! leads a root reaper to root's engine, whatever their argv, environment
//! or contexts say; a user who may use an engine could stop its containers
//! themselves. Which container is the client's is [`find`]'s to prove.

mod api;
mod cidfile;
mod container;
pub mod context;
mod environ;
#[cfg(test)]
pub(crate) mod fake;
mod find;
mod http;
mod run_args;

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper::Method;

use crate::access::Cred;

pub use api::{Inspect, rfc3339};
pub use container::{Client, Container};
pub use environ::{host_var, local_socket, read as read_environ};
pub use find::find;
pub use http::{CALL_LIMIT, CallError, block_on};
pub use run_args::{EngineKind, RunArgs, same_image};

/// Why an engine call failed: the socket, and what went wrong.
#[derive(Debug)]
pub struct EngineError {
    pub socket: PathBuf,
    pub what: String,
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "engine at {}: {}", self.socket.display(), self.what)
    }
}

impl std::error::Error for EngineError {}

/// One engine, by its socket, and whose rights reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Engine {
    pub socket: PathBuf,
    /// The client's user: every connection is made only if they could make
    /// it. `None`: as the reaper itself (tests, and engines the reaper's
    /// own config names for its own use).
    pub user: Option<Cred>,
}

impl Engine {
    pub fn new(socket: impl Into<PathBuf>) -> Engine {
        Engine { socket: socket.into(), user: None }
    }

    /// An engine asked for `user`'s client.
    pub fn for_user(socket: impl Into<PathBuf>, user: Cred) -> Engine {
        Engine { socket: socket.into(), user: Some(user) }
    }

    fn err(&self, what: impl std::fmt::Display) -> EngineError {
        EngineError { socket: self.socket.clone(), what: what.to_string() }
    }

    async fn call(&self, method: Method, path: &str, limit: Duration) -> Result<http::Reply, EngineError> {
        http::call(&self.socket, self.user.as_ref(), method, path, limit).await.map_err(|e| self.err(e))
    }

    /// A 2xx answer's JSON, or `None` for 404.
    async fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<Option<T>, EngineError> {
        let r = self.call(Method::GET, path, CALL_LIMIT).await?;
        match r.status {
            404 => Ok(None),
            200..=299 => {
                serde_json::from_slice(&r.body).map(Some).map_err(|e| self.err(format!("bad answer to {path}: {e}")))
            }
            s => Err(self.err(format!("{path} answered HTTP {s}"))),
        }
    }

    /// The running containers.
    pub async fn list(&self) -> Result<Vec<api::Summary>, EngineError> {
        Ok(self.json("/containers/json").await?.unwrap_or_default())
    }

    /// A container by id or name; `None` when the engine has none such.
    pub async fn inspect(&self, id: &str) -> Result<Option<Inspect>, EngineError> {
        if !is_ref(id) {
            return Err(self.err(format!("{id:?} is no container name or id")));
        }
        self.json(&format!("/containers/{id}/json")).await
    }

    /// The argv that created a container, from Podman's own API (which
    /// needs a version in its path, and takes any): `None` from an engine
    /// without it (Docker answers an error) or that no longer has the
    /// container; empty for a container created through the API.
    pub async fn create_command(&self, id: &str) -> Result<Option<Vec<String>>, EngineError> {
        if !is_ref(id) {
            return Err(self.err(format!("{id:?} is no container name or id")));
        }
        let path = format!("/v4.0.0/libpod/containers/{id}/json");
        let r = self.call(Method::GET, &path, CALL_LIMIT).await?;
        if !(200..300).contains(&r.status) {
            return Ok(None);
        }
        let v: api::LibpodInspect =
            serde_json::from_slice(&r.body).map_err(|e| self.err(format!("bad answer to {path}: {e}")))?;
        Ok(Some(v.config.create_command.unwrap_or_default()))
    }

    /// `POST /containers/{id}/stop?t=N`: the engine sends the container's
    /// stop signal, waits `t` seconds, then SIGKILL. Capped at `t` + 2 s.
    pub async fn stop(&self, id: &str, t: u64) -> Result<(), EngineError> {
        let limit = Duration::from_secs(t) + CALL_LIMIT;
        self.action(Method::POST, &format!("/containers/{id}/stop?t={t}"), limit).await
    }

    pub async fn kill(&self, id: &str) -> Result<(), EngineError> {
        self.action(Method::POST, &format!("/containers/{id}/kill"), CALL_LIMIT).await
    }

    /// `DELETE /containers/{id}?force=1`.
    pub async fn remove(&self, id: &str) -> Result<(), EngineError> {
        self.action(Method::DELETE, &format!("/containers/{id}?force=1"), CALL_LIMIT).await
    }

    /// 2xx, 304 (already stopped) and 404 (already gone) are all done; 409 on
    /// kill means not running.
    async fn action(&self, method: Method, path: &str, limit: Duration) -> Result<(), EngineError> {
        if !is_ref(path.split('/').nth(2).unwrap_or_default()) {
            return Err(self.err(format!("bad container reference in {path}")));
        }
        let r = self.call(method, path, limit).await?;
        match r.status {
            200..=299 | 304 | 404 | 409 => Ok(()),
            s => Err(self.err(format!("{path} answered HTTP {s}: {}", String::from_utf8_lossy(&r.body).trim()))),
        }
    }
}

/// A container id or name, safe in a URL path: `[a-zA-Z0-9][a-zA-Z0-9_.-]*`
/// is what both engines allow.
fn is_ref(s: &str) -> bool {
    let s = s.split('?').next().unwrap_or(s);
    s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// The sockets to ask about a client of `kind` run by `user`: the one it
/// names, or the configured ones then the usual places (for a root reaper
/// also the client's user's rootless engine), each only if that user could
/// connect to it ([`crate::access::check_socket`]). `Err` says why none may
/// be asked.
pub fn sockets(
    kind: EngineKind,
    named: Option<PathBuf>,
    configured: &[PathBuf],
    user: &Cred,
) -> Result<Vec<Engine>, String> {
    let check = |p: &Path| crate::access::check_socket(p, user).map(drop).map_err(|e| e.to_string());
    if let Some(p) = named {
        return check(&p).map(|()| vec![Engine::for_user(p, user.clone())]);
    }
    let mut runtime: Vec<PathBuf> = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).into_iter().collect();
    if user.uid != 0 && rustix::process::geteuid().is_root() {
        runtime.push(PathBuf::from(format!("/run/user/{}", user.uid)));
    }
    let mut all: Vec<PathBuf> = configured.to_vec();
    match kind {
        EngineKind::Docker => {
            all.push("/var/run/docker.sock".into());
            all.extend(runtime.iter().map(|r| r.join("docker.sock")));
        }
        EngineKind::Podman => {
            all.push("/run/podman/podman.sock".into());
            all.extend(runtime.iter().map(|r| r.join("podman/podman.sock")));
        }
    }
    let mut out: Vec<Engine> = Vec::new();
    let mut why = Vec::new();
    for p in all {
        let canon = p.canonicalize().unwrap_or_else(|_| p.clone());
        if out.iter().any(|e| e.socket.canonicalize().unwrap_or_else(|_| e.socket.clone()) == canon) {
            continue;
        }
        match check(&p) {
            Ok(()) => out.push(Engine::for_user(p, user.clone())),
            Err(e) => why.push(e),
        }
    }
    if out.is_empty() {
        let why = if why.is_empty() { String::new() } else { format!(" ({})", why.join("; ")) };
        return Err(format!("no {} engine socket uid {} may use{why}", kind.as_str(), user.uid));
    }
    Ok(out)
}

/// Memory the cgroup of `pid` (a container's init) holds: cgroup v2
/// `memory.current`, else v1 `memory.usage_in_bytes`, wherever this mount
/// namespace mounts them.
pub fn cgroup_memory(pid: u32) -> Option<u64> {
    cgroup_memory_in(Path::new("/proc"), pid)
}

/// [`cgroup_memory`] with `/proc` elsewhere (tests): the mounts from its
/// `self/mountinfo`, the cgroups from its `PID/cgroup`.
fn cgroup_memory_in(proc: &Path, pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(proc.join(pid.to_string()).join("cgroup")).ok()?;
    crate::session::memory::Mounts::read(proc).memory(&text, |_| true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_references_reach_a_url() {
        assert!(is_ref("162a5695372143d5") && is_ref("my_srv.1-a"));
        assert!(!is_ref("../x") && !is_ref("a/b") && !is_ref("") && !is_ref("a b") && !is_ref("-x"));
    }

    #[test]
    fn sockets_skip_what_does_not_exist_and_say_why() {
        let me = crate::access::Cred::of_user(rustix::process::geteuid().as_raw());
        let e = sockets(EngineKind::Podman, None, &[PathBuf::from("/nonexistent/x.sock")], &me).unwrap_err();
        assert!(e.contains("no podman engine socket") && e.contains("/nonexistent/x.sock"), "{e}");
        let e = sockets(EngineKind::Docker, Some("/etc/passwd".into()), &[], &me).unwrap_err();
        assert!(e.contains("is no socket"), "{e}");
    }

    #[test]
    fn a_socket_is_used_only_when_the_clients_user_may_connect() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let p = dir.path().join("e.sock");
        let _l = std::os::unix::net::UnixListener::bind(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o660)).unwrap();
        let st = rustix::fs::stat(&p).unwrap();
        let owner = Cred { uid: st.st_uid, gid: st.st_gid, groups: vec![] };
        assert_eq!(sockets(EngineKind::Docker, Some(p.clone()), &[], &owner).unwrap()[0].socket, p);
        let member = Cred { uid: st.st_uid + 4242, gid: 4242, groups: vec![st.st_gid] };
        assert!(sockets(EngineKind::Docker, Some(p.clone()), &[], &member).is_ok());
        let stranger = Cred { uid: st.st_uid + 4242, gid: 4242, groups: vec![] };
        let e = sockets(EngineKind::Docker, Some(p.clone()), &[], &stranger).unwrap_err();
        assert!(e.starts_with(&format!("uid {} may not connect to {}", st.st_uid + 4242, p.display())), "{e}");
        // A call checks again: the stranger's engine answers nothing.
        let e = block_on(Engine::for_user(&p, stranger).list()).unwrap_err();
        assert!(e.to_string().contains("not used: uid"), "{e}");
    }

    #[test]
    fn cgroup_memory_of_v2_v1_and_hybrid_layouts() {
        use std::fmt::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let put = |p: PathBuf, text: &str| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        // Each layout: its own /proc (mountinfo naming fixture mount points,
        // escaped as the kernel writes them) and its own cgroup trees.
        let layout = |name: &str, mounts: &[(&str, &str, &str)]| {
            let proc = dir.path().join(name).join("proc");
            let mut mi = String::new();
            for (i, (point, fstype, options)) in mounts.iter().enumerate() {
                let point = dir.path().join(name).join(point);
                let point = point.to_str().unwrap().replace(' ', "\\040");
                let _ = writeln!(mi, "{} 1 0:{i} / {point} rw,relatime - {fstype} {fstype} {options}", 30 + i);
            }
            put(proc.join("self/mountinfo"), &mi);
            (proc, dir.path().join(name))
        };
        let scope = "system.slice/docker-abc.scope";
        // v2: one line, memory.current under the one tree.
        let (v2, root) = layout("v2", &[("cg", "cgroup2", "rw")]);
        put(v2.join("10/cgroup"), &format!("0::/{scope}\n"));
        put(root.join("cg").join(scope).join("memory.current"), "4096\n");
        // v1: memory.usage_in_bytes under the memory controller's tree.
        let (v1, root) =
            layout("v1", &[("cg", "tmpfs", "rw"), ("cg/pids", "cgroup", "rw,pids"), ("cg/mem", "cgroup", "rw,memory")]);
        put(v1.join("11/cgroup"), "12:pids:/docker/v1\n4:cpu,cpuacct:/docker/v1\n3:memory:/docker/v1\n");
        put(root.join("cg/mem/docker/v1/memory.usage_in_bytes"), "8192\n");
        put(root.join("cg/pids/docker/v1/memory.usage_in_bytes"), "1\n");
        // Hybrid: the unified tree (wherever mounted) has no memory.current; v1's counts.
        let (hy, root) = layout("hy", &[("cg/memory", "cgroup", "rw,memory"), ("cg/uni fied", "cgroup2", "rw")]);
        put(hy.join("12/cgroup"), "3:memory:/docker/hy\n0::/docker/hy\n");
        put(root.join("cg/memory/docker/hy/memory.usage_in_bytes"), "16384\n");
        std::fs::create_dir_all(root.join("cg/uni fied/docker/hy")).unwrap();
        // Gone, or no memory accounting at all.
        put(v1.join("13/cgroup"), "4:cpu:/docker/none\n");
        assert_eq!(cgroup_memory_in(&v2, 10), Some(4096));
        assert_eq!(cgroup_memory_in(&v1, 11), Some(8192));
        assert_eq!(cgroup_memory_in(&hy, 12), Some(16384));
        assert_eq!(cgroup_memory_in(&v1, 13), None);
        assert_eq!(cgroup_memory_in(&v1, 14), None);
        // The same cgroup text read against another layout's mounts finds
        // nothing: the directories come from the mounts, not a fixed path.
        put(v2.join("11/cgroup"), "3:memory:/docker/v1\n");
        assert_eq!(cgroup_memory_in(&v2, 11), None);
    }

    #[test]
    fn a_dead_socket_costs_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.sock");
        let l = std::os::unix::net::UnixListener::bind(&p).unwrap();
        drop(l); // bound, nobody listening: refused
        let e = block_on(Engine::new(&p).list()).unwrap_err();
        assert!(e.to_string().contains("cannot connect"), "{e}");
    }

    #[test]
    fn a_silent_engine_times_out_and_garbage_is_an_error() {
        use std::io::{Read as _, Write as _};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.sock");
        let l = std::os::unix::net::UnixListener::bind(&p).unwrap();
        let t = std::thread::spawn(move || {
            // First connection: accepted, never answered.
            let (silent, _) = l.accept().unwrap();
            // Second: an HTTP answer that is no JSON.
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").unwrap();
            drop(silent);
        });
        let e = block_on(Engine::new(&p).list()).unwrap_err();
        assert!(e.to_string().contains("no answer within 2.0 s"), "{e}");
        let e = block_on(Engine::new(&p).list()).unwrap_err();
        assert!(e.to_string().contains("bad answer to /containers/json"), "{e}");
        t.join().unwrap();
    }
}
