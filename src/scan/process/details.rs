//! The second-tier facts of a process ([`Details`]) and the small types they
//! are made of: what its fds 0–2 and its transport are, its unit and
//! container, who holds its stdin, whether it listens. Read only for the
//! processes a decision is about (by `scan/details.rs` and its helpers), so
//! kept apart from the first-tier [`super::Process`] every scan reads.

use serde::{Deserialize, Serialize};

use crate::ids::{Pid, Uid};

/// Where one of fds 0–2 points (`readlink /proc/PID/fd/N`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FdTarget(pub String);

impl FdTarget {
    /// A pseudo-terminal whose master side has gone (window closed).
    pub fn is_dead_terminal(&self) -> bool {
        self.0.starts_with("/dev/pts/") && self.0.ends_with(" (deleted)")
    }
    pub fn is_terminal(&self) -> bool {
        self.0.starts_with("/dev/pts/") || self.0.starts_with("/dev/tty")
    }

    pub fn kind(&self) -> FdKind {
        let t = self.0.as_str();
        if t.starts_with("pipe:[") {
            FdKind::Pipe
        } else if t.starts_with("socket:[") {
            FdKind::Socket
        } else if t == "/dev/null" {
            FdKind::Null
        } else if self.is_terminal() {
            FdKind::Tty
        } else if t.starts_with('/') {
            FdKind::File
        } else {
            FdKind::Other
        }
    }
}

/// What one of fds 0–1 is, as stdio evidence: an MCP stdio server talks to
/// its host over a pipe or a socket; `/dev/null`, a terminal or a file means
/// it was started (or redirected) on purpose to run on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FdKind {
    Pipe,
    Socket,
    Null,
    Tty,
    File,
    /// `anon_inode:…` and the like.
    Other,
    /// Not readable (another user's process, or non-dumpable).
    Unknown,
}

impl FdKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FdKind::Pipe => "pipe",
            FdKind::Socket => "socket",
            FdKind::Null => "/dev/null",
            FdKind::Tty => "terminal",
            FdKind::File => "file",
            FdKind::Other => "other",
            FdKind::Unknown => "unreadable",
        }
    }

    /// A link to another process: what a host gives its stdio servers.
    pub fn is_link(self) -> bool {
        matches!(self, FdKind::Pipe | FdKind::Socket)
    }
}

/// The systemd unit a process runs in, from `/proc/PID/cgroup`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unit {
    /// The innermost `*.service` or `*.scope` of its cgroup path.
    pub name: String,
    /// Whether it is the unit's main process: the oldest process of its
    /// cgroup (`None`: the cgroup's member list could not be read).
    pub main: Option<bool>,
}

impl Unit {
    pub fn is_service(&self) -> bool {
        self.name.ends_with(".service")
    }
}

/// Whether anyone can still write to a process's stdin (fd 0, a pipe or a
/// socket): read only for the servers of live hosts and for adopted hosts
/// without a terminal (see `scan/link.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StdinEnd {
    /// Someone can still write to it.
    Open(Holder),
    /// Nobody can: every write end of the pipe is closed, or the socket's
    /// peer closed or shut down its sending side. Says which.
    Gone(&'static str),
    /// Could not tell, and why: nothing is concluded from it.
    Unknown(&'static str),
}

/// Who holds the open far end of a stdin, when that was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// Not asked (no expected holder given).
    NotAsked,
    /// The process expected to hold it (a server's host) does.
    Expected,
    /// The expected process does not: another does, this one if it was found
    /// among those searched.
    Other(Option<Pid>),
    /// Someone holds it, but who could not be told: the peer was seen alive
    /// through a duplicate of the stdin, which does not name it.
    Unknown,
}

/// Whether a process listens on a socket of its own (`scan/listen.rs`):
/// read only for the hosts a `stale` rule weighs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listening {
    /// It does, on this (`TCP port 4500`, `unix socket /run/…`).
    Yes(String),
    /// It does not, but holds an established TCP connection (this one): a
    /// client or relay may drive it through that (Remote Control), or it is
    /// busy with its model's API.
    Connected(String),
    No,
    /// Could not tell, and why: unknown keeps.
    Unknown(&'static str),
}

/// Second-tier facts, read only where a decision needs them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Details {
    /// `None` when `status` could not be read.
    pub uid: Option<Uid>,
    pub swap_bytes: Option<u64>,
    pub nspid_depth: Option<usize>,
    /// Its pid in its own (innermost) PID namespace.
    pub nspid_inner: Option<u32>,
    /// The container its cgroup names (`docker 0123456789ab`), with its
    /// Kubernetes pod's UID where the cgroup names one.
    pub container: Option<CgroupContainer>,
    /// Inode of `/proc/PID/ns/pid`; needs ptrace access, so often unknown.
    pub pidns: Option<u64>,
    pub exe: Option<String>,
    pub fds: [Option<FdTarget>; 3],
    /// Its systemd unit, when its cgroup path names one.
    pub unit: Option<Unit>,
    /// The wrapper pid of the `reaperctl run` session whose cgroup it is in.
    pub run_session: Option<i32>,
    /// For a `reaperctl run` wrapper: the pid of the host it runs (from the
    /// pidfd it holds while the host lives), 0 once the host is gone; `None`
    /// for other processes, or when its fds cannot be read.
    pub run_host: Option<i32>,
    /// The far end of its stdin, when a decision needed it.
    pub stdin: Option<StdinEnd>,
    /// Whether it listens on a socket, when a decision needed it.
    pub listening: Option<Listening>,
    /// Pipes on fds 3 and up, read only when fds 0–2 are laid out as an
    /// SDK that moved its transport leaves them ([`Details::stdio_as_moved`]):
    /// a transport above fd 2 is a pair of pipes, so nothing else up there
    /// can make one (see [`Details::transport_fds`]).
    pub high_links: Vec<HighLink>,
    /// The clock tick they were read at (0: not read, the process was gone):
    /// details read once the process had settled are taken over by the
    /// next reads (see `incremental.rs`).
    pub read_tick: u64,
}

/// A pipe on an fd above 2, with its access mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HighLink {
    pub fd: u32,
    pub target: FdTarget,
    /// `O_ACCMODE` of its `fdinfo` flags: 0 read, 1 write, 2 both; `None`
    /// when unreadable.
    pub access: Option<u32>,
    /// Its other end is held by one of the process's own descendants (a
    /// worker pool's queue, a subprocess's stdin or stdout), or that could
    /// not be ruled out: a pipe of its own making, never a host's.
    pub kin: bool,
}

/// The fds a stdio server's protocol runs over: what it reads requests
/// from and writes replies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Transport {
    pub input: u32,
    pub output: u32,
}

/// The container a process's cgroup names: engine and short id
/// (`containerd 0123456789ab`), and for a Kubernetes pod's container the
/// pod's UID (`kubepods…pod<UID>` in the same path). Shown as its name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupContainer {
    pub name: String,
    pub pod_uid: Option<String>,
    /// The pod's namespace and name (and the container's), where the
    /// runtime's state names them ([`crate::scan::runtime`]).
    pub pod: Option<crate::scan::runtime::PodName>,
}

impl From<&str> for CgroupContainer {
    fn from(name: &str) -> CgroupContainer {
        CgroupContainer { name: name.to_string(), pod_uid: None, pod: None }
    }
}

impl std::fmt::Display for CgroupContainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl Details {
    /// Whether it is PID 1 of a PID namespace nested below the scanner's
    /// (`self_depth` entries on the scanner's own `NSpid:` line).
    pub fn is_namespace_init(&self, self_depth: Option<usize>) -> bool {
        self.nspid_inner == Some(1) && matches!((self.nspid_depth, self_depth), (Some(d), Some(s)) if d > s)
    }

    pub fn fd_kind(&self, fd: usize) -> FdKind {
        self.fds.get(fd).and_then(Option::as_ref).map_or(FdKind::Unknown, FdTarget::kind)
    }

    /// The fd the process reads its protocol from and where it points, when
    /// that is a pipe or socket: fd 0, else the pipe above fd 2 an SDK moved
    /// it to ([`Details::transport_fds`]).
    pub fn transport_input(&self) -> Option<(u32, &FdTarget)> {
        if let Some(t) = self.fds[0].as_ref().filter(|t| t.kind().is_link()) {
            return Some((0, t));
        }
        let input = self.transport_fds()?.input;
        self.high_links.iter().find(|h| h.fd == input).map(|h| (input, &h.target))
    }

    /// Whether fds 0–2 are laid out as the Python SDK 2.x leaves them while
    /// serving (see [`Details::transport_fds`]): fd 0 on `/dev/null`, fd 1
    /// the same file as fd 2 and not `/dev/null`. Only then can a transport
    /// sit above fd 2, so only then are those fds read ([`Details::high_links`]).
    pub fn stdio_as_moved(&self) -> bool {
        self.fd_kind(0) == FdKind::Null
            && self.fds[1].is_some()
            && self.fds[1] == self.fds[2]
            && self.fd_kind(1) != FdKind::Null
    }

    /// The fds its stdio transport runs over (issue 23). fds 0 and 1 when
    /// both are a pipe or a socket. Else the layout of the MCP Python SDK
    /// 2.x, which keeps the host's pipes on fds above 2 while serving and
    /// points fd 0 at `/dev/null` and fd 1 at its stderr (so stray prints
    /// cannot corrupt the protocol): fd 0 on `/dev/null`, fd 1 the same file
    /// as fd 2 and not `/dev/null` (a daemon has `/dev/null` on all three),
    /// and two distinct pipes above 2, one only read and one only written by
    /// this process (the lowest of each, the first the SDK made). A self-pipe
    /// (an event loop's wake-up, whose both ends it holds) is no transport.
    /// A batch job started `</dev/null` keeps its stdout apart from its
    /// stderr, or holds no such pipes: `None`, no transport — detached.
    ///
    /// That layout alone is no evidence: `nohup python pipeline.py &` with a
    /// worker pool and subprocesses on pipes has it too (issue 32). A
    /// transport's other ends are its host's: held outside the process's
    /// subtree while the host lives, by nobody once it died. A pipe whose
    /// other end one of its own descendants holds ([`HighLink::kin`], looked
    /// up when the details are read: the write end of a pipe it reads, the
    /// read end of one it writes) it made for its children, and is never a
    /// transport; the same ends held by a child it forked are no evidence
    /// either way.
    pub fn transport_fds(&self) -> Option<Transport> {
        if self.fd_kind(0).is_link() && self.fd_kind(1).is_link() {
            return Some(Transport { input: 0, output: 1 });
        }
        if !self.stdio_as_moved() {
            return None;
        }
        let held = |target: &FdTarget, mode: u32| {
            self.high_links.iter().any(|h| &h.target == target && h.access.is_some_and(|a| a == mode || a == 2))
        };
        let pipe = |mode: u32| {
            self.high_links
                .iter()
                .filter(|h| {
                    h.target.kind() == FdKind::Pipe && h.access == Some(mode) && !h.kin && !held(&h.target, 1 - mode)
                })
                .min_by_key(|h| h.fd)
        };
        let (input, output) = (pipe(0)?, pipe(1)?);
        (input.target != output.target).then_some(Transport { input: input.fd, output: output.fd })
    }
}
