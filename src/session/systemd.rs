//! A run session as a transient systemd scope: `systemd-run [--user] --scope
//! -- HOST…`, which moves itself into a new scope unit and then execs the
//! host. systemd's own tool rather than a D-Bus client of ours: it is on
//! every systemd machine, speaks to the user manager through its private
//! socket (or the bus), and keeps the bus client out of this binary.
//!
//! The manager counts as reachable only when its private socket answers a
//! connect (a socket file a dead manager left behind does not). Even then
//! `systemd-run` can fail: a user manager may not be allowed to move a
//! process from a cgroup outside its own delegated tree (an ssh session on a
//! machine without a system bus). That is told apart from a host that ran
//! and exited at once by the process's name when it exited: a `systemd-run`
//! that never exec'd is still called `systemd-run`.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::cgroup::{Hierarchy, Leaf, has_controller, v2_path};
use super::memory::Mounts;
use crate::ids::Pid;

/// A reachable service manager and the `systemd-run` to ask it.
#[derive(Debug, Clone)]
pub struct Manager {
    pub tool: PathBuf,
    /// The caller's user manager (not root), else the system manager.
    pub user: bool,
}

impl Manager {
    /// The manager a `reaperctl run` of this user would ask: only where
    /// systemd runs the machine (PID 1), `systemd-run` is on `PATH`, and the
    /// manager's private socket accepts a connection.
    pub fn find() -> Option<Manager> {
        let pid1 = std::fs::read_to_string("/proc/1/comm").ok()?;
        if pid1.trim() != "systemd" {
            return None;
        }
        let tool = crate::paths::find_program(std::ffi::OsStr::new("systemd-run"))?;
        let user = !rustix::process::getuid().is_root();
        let answers = |p: &Path| UnixStream::connect(p).is_ok();
        let reachable = if user {
            // The user manager also answers through the session bus.
            let rt = PathBuf::from(std::env::var_os("XDG_RUNTIME_DIR")?);
            answers(&rt.join("systemd/private")) || answers(&rt.join("bus"))
        } else {
            answers(Path::new("/run/systemd/private"))
        };
        reachable.then_some(Manager { tool, user })
    }

    /// Whether the manager can apply `MemoryMax=`: the memory controller is
    /// in the v2 hierarchy, or (the system manager on a hybrid machine) in
    /// the v1 one, which systemd drives itself there.
    pub fn can_limit_memory(&self) -> bool {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let v2 = Hierarchy::from_mountinfo(&mountinfo).is_some_and(|h| has_controller(&h.mount, "memory"));
        v2 || (!self.user && super::memcg_v1::hierarchy(&mountinfo).is_some())
    }

    /// `systemd-run … --scope --unit NAME [-p MemoryMax=B] -- COMMAND…`.
    pub fn command(
        &self,
        unit: &str,
        memory_max: Option<u64>,
        command: &[std::ffi::OsString],
    ) -> std::process::Command {
        let mut c = std::process::Command::new(&self.tool);
        if self.user {
            c.arg("--user");
        }
        c.args(["--scope", "--quiet", "--collect", "--unit", unit]);
        if let Some(bytes) = memory_max {
            c.arg("--property").arg(format!("MemoryMax={bytes}"));
        }
        c.arg("--").args(command);
        c
    }
}

/// What became of a `systemd-run` child.
#[derive(Debug)]
pub enum Started {
    /// The host runs in the scope.
    Scope(Leaf),
    /// `systemd-run` exited without running the host (it could not make
    /// the scope, and said why on stderr).
    Failed,
    /// The host ran and exited before it was seen in the scope (an exited
    /// process's cgroup reads as the root): what it left is below the
    /// wrapper, a subreaper.
    Exited,
    /// The scope was not seen within 30 s.
    Unseen,
}

/// Waits until `systemd-run` (pid `host`) has moved into its scope and exec'd
/// the host, or exited. Never reaps it: its status is the caller's to take.
pub fn started(host: Pid, wrapper: u32) -> Started {
    let until = Instant::now() + Duration::from_secs(30);
    let raw = rustix::process::Pid::from_raw(host.get()).expect("a child's pid is positive");
    while Instant::now() < until {
        let opts = rustix::process::WaitIdOptions::EXITED
            | rustix::process::WaitIdOptions::NOHANG
            | rustix::process::WaitIdOptions::NOWAIT;
        let exited = matches!(rustix::process::waitid(rustix::process::WaitId::Pid(raw), opts), Ok(Some(_)));
        let comm = std::fs::read_to_string(format!("/proc/{host}/comm")).unwrap_or_default();
        if comm.trim_end() == "systemd-run" {
            if exited {
                return Started::Failed;
            }
        } else if exited {
            return Started::Exited;
        } else if let Some(leaf) = scope_of(host, wrapper) {
            return Started::Scope(leaf);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Started::Unseen
}

/// The session's scope `host` is in, from its `/proc/PID/cgroup`.
fn scope_of(host: Pid, wrapper: u32) -> Option<Leaf> {
    let path = v2_path(&std::fs::read_to_string(format!("/proc/{host}/cgroup")).ok()?)?;
    (super::session_of_cgroup(&path) == Some(wrapper.cast_signed()))
        .then(|| Hierarchy::find()?.dir_of(&path))
        .flatten()
        .map(|dir| Leaf { dir, by_systemd: true })
}

/// The memory limit the session's cgroups hold: the scope's `memory.max`,
/// else (hybrid) the `memory.limit_in_bytes` of the v1 memory cgroup systemd
/// made for the scope (never the caller's, which may have a limit of its own).
pub fn memory_limit(scope: &Leaf, host: Pid, wrapper: u32) -> Option<u64> {
    let read = |p: PathBuf| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok();
    read(scope.dir.join("memory.max")).or_else(|| {
        let text = std::fs::read_to_string(format!("/proc/{host}/cgroup")).ok()?;
        let ours = |path: &str| super::session_of_cgroup(path) == Some(wrapper.cast_signed());
        let (_, v1) = Mounts::read(Path::new("/proc")).dirs(&text, ours);
        read(v1?.join("memory.limit_in_bytes"))
    })
}
