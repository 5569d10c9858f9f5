//! Stage 1: read `/proc` into a [`Snapshot`].
//!
//! Two tiers keep a scan cheap: every process costs one `stat` and one
//! `cmdline` read; the rest ([`Details`]: uid, swap, exe, fds, namespace) is read
//! only for the processes a decision is about (tree members and their ancestors).
//! Each process is read through a directory fd on `/proc/PID`, which stays bound
//! to that process even if its pid is reused, so all files of one process are
//! consistent with each other.

pub mod events;
pub mod parse;

use std::collections::HashSet;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use rustix::fs::{Mode, OFlags};
use serde::{Deserialize, Serialize};

use crate::ids::{Identity, Pid, StartTime, Uid};
use crate::program::Program;
pub use parse::{MemInfo, Rollup};

/// Errors that stop a scan as a whole (a single vanished process never does).
#[derive(Debug)]
pub enum ScanError {
    ReadDir { path: PathBuf, source: io::Error },
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::ReadDir { path, source } => write!(f, "reading {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for ScanError {}

/// Process state letter from `stat` field 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcState(pub char);

impl ProcState {
    pub fn is_zombie(self) -> bool {
        matches!(self.0, 'Z' | 'X' | 'x')
    }
    /// Uninterruptible sleep: not even SIGKILL acts until it returns.
    pub fn is_uninterruptible(self) -> bool {
        self.0 == 'D'
    }
}

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

/// Second-tier facts, read only where a decision needs them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Details {
    /// `None` when `status` could not be read.
    pub uid: Option<Uid>,
    pub swap_bytes: Option<u64>,
    pub nspid_depth: Option<usize>,
    /// Inode of `/proc/PID/ns/pid`; needs ptrace access, so often unknown.
    pub pidns: Option<u64>,
    pub exe: Option<String>,
    pub fds: [Option<FdTarget>; 3],
    /// Its systemd unit, when its cgroup path names one.
    pub unit: Option<Unit>,
}

impl Details {
    pub fn fd_kind(&self, fd: usize) -> FdKind {
        self.fds.get(fd).and_then(Option::as_ref).map_or(FdKind::Unknown, FdTarget::kind)
    }
}

/// One process as first read.
#[derive(Clone, Debug)]
pub struct Process {
    pub id: Identity,
    /// `None` for PID 1 and kernel roots (ppid 0) and for parents outside our namespace.
    pub ppid: Option<Pid>,
    pub pgid: Option<Pid>,
    pub sid: Option<Pid>,
    pub tty_nr: u32,
    pub state: ProcState,
    pub kernel_thread: bool,
    pub comm: String,
    /// argv joined by spaces (lossy UTF-8). Empty for kernel threads and zombies.
    /// Raw, secrets included: for matching only; show [`Process::display_cmd`].
    pub cmdline: Arc<str>,
    /// What it runs, as spans of `cmdline` (see [`crate::program`]).
    pub program: Program,
    pub rss_bytes: u64,
    /// Boxed: most processes never get details, and a snapshot holds thousands.
    pub details: Option<Box<Details>>,
    /// Its role from the command line alone, kept with the command line
    /// across scans (see [`crate::config::Matcher::classify_cached`]).
    pub role: Option<crate::config::CachedRole>,
    /// Inode of its `/proc/PID` directory as listed (0 when unknown).
    pub dir_ino: u64,
    /// Clock tick (since boot) at which this process was last seen holding
    /// its pid, taken before the read. See [`Process::identity_settled`].
    pub checked_tick: u64,
}

impl Process {
    pub fn pid(&self) -> Pid {
        self.id.pid
    }

    /// What to show: the command line with secrets masked ([`crate::redact`]),
    /// or `[comm]` like ps does. Every command line a human, a log or JSON
    /// sees comes from here; match on the raw `cmdline` instead.
    pub fn display_cmd(&self) -> std::borrow::Cow<'_, str> {
        if self.cmdline.is_empty() {
            crate::redact::redact(&format!("[{}]", self.comm)).into_owned().into()
        } else {
            crate::redact::redact(&self.cmdline)
        }
    }

    pub fn uid(&self) -> Option<Uid> {
        self.details.as_ref().and_then(|d| d.uid)
    }

    pub fn swap_bytes(&self) -> u64 {
        self.details.as_ref().and_then(|d| d.swap_bytes).unwrap_or(0)
    }

    pub fn exe(&self) -> Option<&str> {
        self.details.as_ref().and_then(|d| d.exe.as_deref())
    }

    /// Whether `(pid, start time)` names this process and no other. Start
    /// times count 10 ms ticks, so a process read within its own start tick
    /// could still die and have its pid reused by a newcomer *in that same
    /// tick*, with an identical identity. Once a read that began after the
    /// start tick ended has seen it, any later holder of the pid starts in a
    /// later tick: the identity is unambiguous from then on.
    pub fn identity_settled(&self) -> bool {
        self.id.start_time.0 < self.checked_tick
    }
}

/// Clock ticks since boot, on the clock `stat`'s start times count
/// (`CLOCK_BOOTTIME` in `USER_HZ` units, rounded down like the kernel does).
pub fn boot_tick(clk_tck: u64) -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    // CLOCK_BOOTTIME is never negative.
    let ns = u128::from(t.tv_sec.cast_unsigned()) * 1_000_000_000 + u128::from(t.tv_nsec.cast_unsigned());
    u64::try_from(ns * u128::from(clk_tck.max(1)) / 1_000_000_000).unwrap_or(u64::MAX)
}

/// Facts about the scanning process itself and the clock, taken with the snapshot.
#[derive(Clone, Debug, Default)]
pub struct Context {
    pub self_pid: Option<Pid>,
    pub self_pidns: Option<u64>,
    pub self_nspid_depth: Option<usize>,
    pub self_uid: Option<Uid>,
    pub uptime_secs: f64,
    pub clk_tck: u64,
}

/// Every process of the namespace at one moment (as close to one as /proc allows).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Sorted by pid: lookups are binary searches, no index to hold.
    pub procs: Vec<Process>,
    pub ctx: Context,
    pub taken_at: Option<SystemTime>,
}

impl Snapshot {
    pub fn from_processes(mut procs: Vec<Process>, ctx: Context) -> Snapshot {
        // /proc lists pids in order already; a refresh appends the re-read ones.
        procs.sort_unstable_by_key(Process::pid);
        procs.dedup_by_key(|p| p.pid());
        procs.shrink_to_fit();
        Snapshot { procs, ctx, taken_at: Some(SystemTime::now()) }
    }

    pub fn get(&self, pid: Pid) -> Option<&Process> {
        self.index_of(pid).map(|i| &self.procs[i])
    }

    pub fn get_mut(&mut self, pid: Pid) -> Option<&mut Process> {
        self.index_of(pid).map(|i| &mut self.procs[i])
    }

    pub fn index_of(&self, pid: Pid) -> Option<usize> {
        self.procs.binary_search_by_key(&pid, Process::pid).ok()
    }

    pub fn len(&self) -> usize {
        self.procs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }

    /// Age of a process in seconds, from its start time and the uptime at scan.
    pub fn age_secs(&self, p: &Process) -> f64 {
        let tck = self.ctx.clk_tck.max(1) as f64;
        (self.ctx.uptime_secs - p.id.start_time.0 as f64 / tck).max(0.0)
    }
}

/// What a full read may take over from the previous snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reuse {
    /// Read every process afresh.
    Nothing,
    /// Read every `stat`; take the command line over when pid, start time
    /// and comm are unchanged (the daemon's periodic full read).
    Cmdlines,
    /// Take a process over whole when its `/proc/PID` directory is the same
    /// inode as before (the pidfd-mode tick): only new pids are read. A
    /// reused pid gets a new directory inode; an exec or re-parenting is not
    /// seen, which is why such ticks alternate with `Cmdlines` reads.
    Unchanged,
}

/// A `/proc` to read: the real one, or a fixture tree in tests.
#[derive(Clone, Debug)]
pub struct ProcFs {
    root: PathBuf,
    page_size: u64,
    /// (mount root, mount point) of the cgroup hierarchies that name units.
    cgroup_mounts: std::sync::OnceLock<Vec<(bool, String, String)>>,
}

impl Default for ProcFs {
    fn default() -> Self {
        ProcFs::new("/proc")
    }
}

/// Reading a file failed: the process is gone, or we may not look.
enum ReadFail {
    Gone,
    Denied,
}

fn classify(e: rustix::io::Errno) -> ReadFail {
    if e == rustix::io::Errno::ACCESS || e == rustix::io::Errno::PERM {
        ReadFail::Denied
    } else {
        // ENOENT, ESRCH, and anything odd: treat as vanished.
        ReadFail::Gone
    }
}

impl ProcFs {
    pub fn new(root: impl Into<PathBuf>) -> ProcFs {
        ProcFs {
            root: root.into(),
            page_size: rustix::param::page_size() as u64,
            cgroup_mounts: std::sync::OnceLock::new(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A note when this `/proc` hides other users' processes from us
    /// (mounted with `hidepid=1|2`, `invisible` or `noaccess`): every pid
    /// namespace has a PID 1, so not finding it, or not being allowed to
    /// read it, means the mount hides it. Then only our own uid's processes
    /// are judged, which is all a per-user reaper needs.
    pub fn hidden_notice(&self) -> Option<String> {
        let err = std::fs::File::open(self.root.join("1/stat")).err()?;
        if !matches!(err.kind(), io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied) {
            return None;
        }
        let uid = rustix::process::getuid().as_raw();
        Some(format!(
            "{} hides other users' processes (hidepid): this reaper sees only uid {uid}'s processes and \
             judges only their trees; a tree whose parent is hidden is kept, unless that parent is PID 1",
            self.root.display()
        ))
    }

    /// The clock tick now, on the clock of this `/proc`'s start times: the
    /// real boot-time clock, or a fixture tree's `uptime` file.
    pub fn now_tick(&self) -> u64 {
        let tck = rustix::param::clock_ticks_per_second();
        if self.root != Path::new("/proc")
            && let Some(t) = std::fs::read_to_string(self.root.join("uptime")).ok().and_then(|u| uptime_ticks(&u, tck))
        {
            return t;
        }
        boot_tick(tck)
    }

    /// Reads every process. Processes that vanish mid-read are skipped silently.
    pub fn snapshot(&self) -> Result<Snapshot, ScanError> {
        self.rescan(None, Reuse::Nothing, &HashSet::new())
    }

    /// Reads every process listed in `/proc`, taking over from `prev` what
    /// `reuse` allows. Only settled identities are taken over (an unsettled
    /// one may be a same-tick newcomer), and never a pid in `changed` (the
    /// kernel reported an exec or fork for it).
    pub fn rescan(&self, prev: Option<&Snapshot>, reuse: Reuse, changed: &HashSet<Pid>) -> Result<Snapshot, ScanError> {
        use std::os::unix::fs::DirEntryExt;
        let tick = self.now_tick();
        let dir =
            std::fs::read_dir(&self.root).map_err(|source| ScanError::ReadDir { path: self.root.clone(), source })?;
        let mut procs = Vec::with_capacity(prev.map_or(512, |p| p.len() + 64));
        let mut buf = Vec::with_capacity(4096);
        let mut path = PathBuf::new();
        for entry in dir {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(Pid::parse) else { continue };
            let ino = entry.ino();
            let old = prev
                .filter(|_| reuse != Reuse::Nothing)
                .and_then(|s| s.get(pid))
                .filter(|q| q.identity_settled() && !changed.contains(&pid));
            let p = match old {
                Some(q) if reuse == Reuse::Unchanged && q.dir_ino == ino && ino != 0 => {
                    let mut q = q.clone();
                    q.details = None;
                    Some(q)
                }
                Some(q) => {
                    path.clone_from(&self.root);
                    path.push(&name);
                    path.push("stat");
                    match Self::read_stat_path(&path, &mut buf) {
                        Some(st) if st.start_time == q.id.start_time.0 && st.comm == q.comm => {
                            let mut p = self.process_from(pid, st, Arc::clone(&q.cmdline), tick);
                            p.role = q.role;
                            p.program = q.program;
                            Some(p)
                        }
                        Some(_) => self.read_process(pid, &mut buf, tick), // exec'd or reused
                        None => None,
                    }
                }
                None => self.read_process(pid, &mut buf, tick),
            };
            if let Some(mut p) = p {
                p.dir_ino = ino;
                procs.push(p);
            }
        }
        let ctx = self.context();
        Ok(Snapshot::from_processes(procs, ctx))
    }

    /// Brings `prev` up to date from the pids the kernel reported as changed
    /// (forked, exec'd or exited) instead of reading every process: the
    /// daemon's tick in event mode. Children of an exited process are re-read
    /// too (they were re-parented). Details are dropped: they are re-read for
    /// the processes a decision is about. Processes whose identity was not
    /// settled yet are re-read as well, so that it settles.
    pub fn refresh(&self, prev: Snapshot, changed: &HashSet<Pid>) -> Snapshot {
        let tick = self.now_tick();
        let mut dirty = changed.clone();
        for p in &prev.procs {
            if p.ppid.is_some_and(|pp| changed.contains(&pp)) || !p.identity_settled() {
                dirty.insert(p.pid());
            }
        }
        let mut procs: Vec<Process> = prev
            .procs
            .into_iter()
            .filter(|p| !dirty.contains(&p.pid()))
            .map(|mut p| {
                p.details = None;
                p
            })
            .collect();
        let mut buf = Vec::with_capacity(4096);
        for &pid in &dirty {
            if let Some(p) = self.read_process(pid, &mut buf, tick) {
                procs.push(p);
            }
        }
        Snapshot::from_processes(procs, self.context())
    }

    fn read_stat_path(path: &Path, buf: &mut Vec<u8>) -> Option<parse::Stat> {
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
        buf.clear();
        buf.resize(4096, 0);
        // One read: the kernel emits the whole line at once when it fits.
        let n = rustix::io::read(&fd, &mut buf[..]).ok()?;
        buf.truncate(n);
        if n == 4096 {
            return None; // cannot be a stat line; treat as unreadable
        }
        parse::parse_stat(buf).ok()
    }

    fn process_from(&self, pid: Pid, stat: parse::Stat, cmdline: Arc<str>, checked_tick: u64) -> Process {
        Process {
            id: Identity { pid, start_time: StartTime(stat.start_time) },
            ppid: Pid::new(stat.ppid),
            pgid: Pid::new(stat.pgrp),
            sid: Pid::new(stat.session),
            tty_nr: stat.tty_nr,
            state: ProcState(stat.state as char),
            kernel_thread: stat.flags & parse::PF_KTHREAD != 0,
            comm: stat.comm,
            cmdline,
            program: Program::default(),
            rss_bytes: stat.rss_pages.saturating_mul(self.page_size),
            details: None,
            role: None,
            dir_ino: 0,
            checked_tick,
        }
    }

    /// The `/proc/PID` dirfd of `id`, checked through that same fd to still be
    /// the process with `id`'s start time (not a reused pid).
    fn open_verified(&self, id: Identity, buf: &mut Vec<u8>) -> Option<OwnedFd> {
        let dir = self.open_pid_dir(id.pid)?;
        read_at(&dir, "stat", buf).ok()?;
        (parse::parse_stat(buf).ok()?.start_time == id.start_time.0).then_some(dir)
    }

    fn open_pid_dir(&self, pid: Pid) -> Option<OwnedFd> {
        let path = self.root.join(pid.to_string());
        rustix::fs::open(&path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()
    }

    fn read_process(&self, pid: Pid, buf: &mut Vec<u8>, checked_tick: u64) -> Option<Process> {
        let dir = self.open_pid_dir(pid)?;
        read_at(&dir, "stat", buf).ok()?;
        let stat = parse::parse_stat(buf).ok()?;
        let kernel_thread = stat.flags & parse::PF_KTHREAD != 0;
        let state = ProcState(stat.state as char);
        let mut program = Program::default();
        let cmdline: Arc<str> = if kernel_thread || state.is_zombie() {
            Arc::default()
        } else {
            match read_at(&dir, "cmdline", buf) {
                Ok(()) => {
                    let mut spans = Vec::new();
                    let text = parse::join_argv(buf, &mut spans);
                    program = Program::from_argv(&text, &spans);
                    text.into()
                }
                Err(ReadFail::Denied) => Arc::default(),
                Err(ReadFail::Gone) => return None,
            }
        };
        let mut p = self.process_from(pid, stat, cmdline, checked_tick);
        p.program = program;
        Some(p)
    }

    /// Reads [`Details`] for one process, checking through the same directory fd
    /// that it is still the process we scanned. `None` if it is gone or reused.
    pub fn details(&self, id: Identity) -> Option<Details> {
        let mut buf = Vec::with_capacity(2048);
        let dir = self.open_verified(id, &mut buf)?;
        let mut d = Details::default();
        match read_at(&dir, "status", &mut buf) {
            Ok(()) => {
                let s = parse::parse_status(&buf);
                d.uid = s.real_uid.map(Uid);
                d.swap_bytes = s.vm_swap_bytes;
                d.nspid_depth = s.nspid_depth;
            }
            Err(ReadFail::Gone) => return None,
            Err(ReadFail::Denied) => {}
        }
        d.exe = readlink_at(&dir, "exe");
        d.pidns = readlink_at(&dir, "ns/pid").and_then(|s| parse_ns_inode(&s));
        for (i, slot) in d.fds.iter_mut().enumerate() {
            *slot = readlink_at(&dir, ["fd/0", "fd/1", "fd/2"][i]).map(FdTarget);
        }
        if read_at(&dir, "cgroup", &mut buf).is_ok()
            && let Some((v2, path, name)) = parse::cgroup_unit(&String::from_utf8_lossy(&buf))
        {
            let main = self.cgroup_oldest(v2, &path, id);
            d.unit = Some(Unit { name, main });
        }
        Some(d)
    }

    /// Whether `id` is the oldest process of the cgroup at `path` (as
    /// `/proc/PID/cgroup` names it), i.e. the unit's main process: a service
    /// manager starts the main process first; processes a crashed host left
    /// in a service's cgroup are younger than the service's own process.
    fn cgroup_oldest(&self, v2: bool, path: &str, id: Identity) -> Option<bool> {
        let dir = self.cgroup_dir(v2, path)?;
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
        let mut buf = Vec::with_capacity(512);
        for pid in procs.split_whitespace().filter_map(Pid::parse).filter(|&p| p != id.pid) {
            let Some(dirfd) = self.open_pid_dir(pid) else { continue };
            if read_at(&dirfd, "stat", &mut buf).is_err() {
                continue;
            }
            if parse::parse_stat(&buf).is_ok_and(|st| st.start_time < id.start_time.0) {
                return Some(false);
            }
        }
        Some(true)
    }

    /// The directory of a cgroup path, from this `/proc`'s view of its own
    /// mounts (the unified hierarchy, else systemd's v1 `name=systemd` one).
    fn cgroup_dir(&self, v2: bool, path: &str) -> Option<PathBuf> {
        let mounts = self.cgroup_mounts.get_or_init(|| {
            let text = std::fs::read_to_string(self.root.join("self/mountinfo")).unwrap_or_default();
            parse::cgroup_mounts(&text)
        });
        mounts.iter().filter(|m| m.0 == v2).find_map(|(_, root, point)| {
            let rest = if root == "/" { Some(path) } else { path.strip_prefix(root.as_str()) }?;
            let dir = PathBuf::from(format!("{point}/{}", rest.trim_start_matches('/')));
            dir.is_dir().then_some(dir)
        })
    }

    /// Fills in [`Details`] for the given pids (those not loaded yet).
    pub fn load_details(&self, snap: &mut Snapshot, pids: impl IntoIterator<Item = Pid>) {
        for pid in pids {
            let Some(p) = snap.get_mut(pid) else { continue };
            if p.details.is_some() || p.kernel_thread {
                continue;
            }
            // A process that vanished or was replaced keeps an empty Details:
            // every fact unknown, which the policy treats as "don't touch".
            p.details = Some(Box::new(self.details(p.id).unwrap_or_default()));
        }
    }

    /// Children of a process from `task/*/children`, or `None` when this
    /// kernel lacks them (`CONFIG_PROC_CHILDREN`) and the caller must scan.
    pub fn children(&self, pid: Pid) -> Option<Vec<Pid>> {
        let tasks = self.root.join(pid.to_string()).join("task");
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(&tasks) else { return Some(out) }; // gone
        let mut any_file = false;
        for t in rd.flatten() {
            if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
                any_file = true;
                out.extend(text.split_whitespace().filter_map(Pid::parse));
            }
        }
        any_file.then_some(out)
    }

    /// One process, read now the way a scan reads it.
    pub fn process(&self, pid: Pid) -> Option<Process> {
        let tick = self.now_tick();
        self.read_process(pid, &mut Vec::with_capacity(4096), tick)
    }

    /// The command line of one pid, read now (joined, lossy).
    pub fn cmdline(&self, pid: Pid) -> Option<String> {
        let dir = self.open_pid_dir(pid)?;
        let mut buf = Vec::with_capacity(1024);
        read_at(&dir, "cmdline", &mut buf).ok()?;
        Some(parse::join_cmdline(&buf))
    }

    /// A fresh `stat` of one pid, for re-checks right before acting.
    pub fn stat(&self, pid: Pid) -> Option<parse::Stat> {
        let dir = self.open_pid_dir(pid)?;
        let mut buf = Vec::with_capacity(1024);
        read_at(&dir, "stat", &mut buf).ok()?;
        parse::parse_stat(&buf).ok()
    }

    /// PSS + `SwapPss` of one process, or `None` when `smaps_rollup` is unreadable.
    pub fn rollup(&self, id: Identity) -> Option<Rollup> {
        let mut buf = Vec::with_capacity(1024);
        let dir = self.open_verified(id, &mut buf)?;
        read_at(&dir, "smaps_rollup", &mut buf).ok()?;
        parse::parse_smaps_rollup(&buf)
    }

    pub fn meminfo(&self) -> Option<MemInfo> {
        std::fs::read(self.root.join("meminfo")).ok().map(|b| parse::parse_meminfo(&b))
    }

    fn context(&self) -> Context {
        let self_pid = std::fs::read_link(self.root.join("self")).ok().and_then(|p| p.to_str().and_then(Pid::parse));
        let mut ctx = Context {
            self_pid,
            clk_tck: rustix::param::clock_ticks_per_second(),
            uptime_secs: std::fs::read_to_string(self.root.join("uptime"))
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|f| f.parse().ok()))
                .unwrap_or(0.0),
            ..Context::default()
        };
        if let Some(pid) = self_pid {
            let self_dir = self.root.join(pid.to_string());
            ctx.self_pidns =
                std::fs::read_link(self_dir.join("ns/pid")).ok().and_then(|p| p.to_str().and_then(parse_ns_inode));
            if let Ok(b) = std::fs::read(self_dir.join("status")) {
                let s = parse::parse_status(&b);
                ctx.self_nspid_depth = s.nspid_depth;
                ctx.self_uid = s.real_uid.map(Uid);
            }
        }
        ctx
    }
}

/// `/proc/uptime`'s first field (`12345.67`, centiseconds) in clock ticks.
fn uptime_ticks(text: &str, tck: u64) -> Option<u64> {
    let (secs, cs) = text.split_whitespace().next()?.split_once('.')?;
    let (secs, cs): (u64, u64) = (secs.parse().ok()?, cs.parse().ok()?);
    Some(secs * tck + cs * tck / 100)
}

/// `pid:[4026531836]` → 4026531836.
fn parse_ns_inode(s: &str) -> Option<u64> {
    s.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Reads a whole file below a `/proc/PID` dirfd into `buf`.
fn read_at(dir: &OwnedFd, name: &str, buf: &mut Vec<u8>) -> Result<(), ReadFail> {
    buf.clear();
    let fd =
        rustix::fs::openat(dir.as_fd(), name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).map_err(classify)?;
    let mut chunk = [0u8; 4096];
    loop {
        match rustix::io::read(&fd, &mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(classify(e)),
        }
    }
}

fn readlink_at(dir: &OwnedFd, name: &str) -> Option<String> {
    let target = rustix::fs::readlinkat(dir.as_fd(), name, Vec::new()).ok()?;
    Some(OsString::from_vec(target.into_bytes()).to_string_lossy().into_owned())
}
