//! Reading one process (or one file of it) from a `/proc`: [`ProcFs`], the
//! directory-fd discipline, and the small parsers of paths and links.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use super::parse::{self, MemInfo, Rollup};
use super::process::{Context, ProcState, Process, boot_tick};
use crate::ids::{Identity, Pid, StartTime, Uid};
use crate::program::Program;

/// How much of a command line is read and kept per process, in bytes.
///
/// Any user can start processes whose argv is up to the kernel's limit (a
/// quarter of the stack limit: 2 MiB and more), and forks share one argv at
/// no cost to them: 1,500 forks of one 200 KB argv made `--once` hold 300 MiB.
/// So a scan reads at most this much of each `cmdline` and keeps the whole
/// arguments that fit (4 KiB: what the kernel itself showed before Linux 4.2);
/// a command line that did not fit ends in ` …` and its [`Program`] says it
/// was cut. Identical command lines are kept once per scan (see
/// `incremental.rs`), and distinct long ones up to [`CMDLINES_TOTAL`] in
/// all, then [`CMDLINE_SHORT`] each: a read keeps at most about
/// `CMDLINES_TOTAL + processes × (CMDLINE_SHORT + 128)` bytes of command
/// lines, far less when forks share one.
///
/// Why a cut never makes a process a server or host it is not: an argument
/// is kept whole or not at all, and the program and its leading arguments
/// (what roles are decided on, see [`crate::program`]) come first; the
/// ` …` ending stops a pattern anchored at the end (`$`) from matching a
/// shorter line than the real one. A cut line can only lose a role, which
/// keeps a tree. The one pattern list for which a miss would kill is
/// `protect` (it sees the whole command line): a cut process counts as
/// matching it whenever the config has protect patterns (see
/// `config::patterns`) until, as a member of a tree a decision is about,
/// its whole line is read again (one at a time, not kept, at most
/// [`CMDLINE_WHOLE`]) and matched (`cycle::settle_cut`).
pub const CMDLINE_KEEP: usize = 4096;

/// What one read keeps of distinct long command lines in all (see
/// `incremental.rs`): past it, a process not seen before keeps only
/// [`CMDLINE_SHORT`] bytes of its line. Distinct lines cost an attacker a
/// page each (a fork that writes its own argv), so without a total the
/// table's size alone would size the reaper: 10,000 such processes would be
/// 40 MiB. With it a read keeps at most `CMDLINES_TOTAL + processes ×
/// (CMDLINE_SHORT + 128)` bytes of command lines.
pub const CMDLINES_TOTAL: usize = 8 << 20;

/// What a process keeps of its command line once a read has kept
/// [`CMDLINES_TOTAL`]: enough for a program and its first arguments. Cut like
/// any long line (whole arguments, ` …`, counts as protected until read whole
/// as a tree member), and read again at the next full read.
pub const CMDLINE_SHORT: usize = 256;

/// The most of a cut command line read again, whole, to settle `protect`
/// for a tree member (see [`ProcFs::whole_cmdline`]); beyond it the member
/// stays protected.
pub const CMDLINE_WHOLE: usize = 8 << 20;

/// A `/proc` to read: the real one, or a fixture tree in tests.
#[derive(Clone, Debug)]
pub struct ProcFs {
    pub(super) root: PathBuf,
    page_size: u64,
    /// (mount root, mount point) of the cgroup hierarchies that name units.
    pub(super) cgroup_mounts: std::sync::OnceLock<Vec<(bool, String, String)>>,
    /// Who held each stdin's far end last time (see `link.rs`); shared by clones.
    pub(super) hints: Arc<super::link::Hints>,
    /// The container runtimes' state that names Kubernetes pods; shared by clones.
    pub(super) runtimes: Arc<super::runtime::Runtimes>,
}

impl Default for ProcFs {
    fn default() -> Self {
        ProcFs::new("/proc")
    }
}

/// Reading a file failed: the process is gone, or we may not look.
pub(super) enum ReadFail {
    Gone,
    Denied,
}

/// Why [`ProcFs::open_process_or_why`] opened nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unopened {
    /// No such process: its pid is free, or a thread's.
    Gone,
    /// The open or the read failed otherwise: it may be there.
    Failed,
}

/// A process opened by [`ProcFs::open_process`]: its directory and `stat`.
pub struct Opened {
    dir: OwnedFd,
    pid: Pid,
    pub stat: parse::Stat,
    /// `startstack`, when the kernel shows it (not to other users' readers).
    pub start_stack: Option<u64>,
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
            hints: Arc::default(),
            runtimes: Arc::new(super::runtime::Runtimes::default()),
        }
    }

    /// The name an engine gave container `id` when asked for `uid`'s tree
    /// (`Some(None)`: asked, unknown), remembered by [`ProcFs::remember_engine_name`].
    pub fn engine_name(&self, uid: u32, id: &str) -> Option<Option<String>> {
        self.runtimes.engine_name(uid, id)
    }

    pub fn remember_engine_name(&self, uid: u32, id: &str, name: Option<String>) {
        self.runtimes.remember_engine_name(uid, id, name);
    }

    /// This `/proc` with pods' names read from the runtime state below `root`
    /// alone (a fixture tree in tests); `None`: the usual places
    /// ([`super::runtime::DEFAULT_ROOTS`]).
    #[must_use]
    pub fn with_runtime_root(mut self, root: Option<&Path>) -> ProcFs {
        if let Some(root) = root {
            self.runtimes = Arc::new(super::runtime::Runtimes::new(root));
        }
        self
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

    pub(super) fn read_stat_path(path: &Path, buf: &mut Vec<u8>) -> Option<parse::Stat> {
        stat_of(&rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?, buf)
    }

    pub(super) fn process_from(&self, pid: Pid, stat: parse::Stat, cmdline: Arc<str>, checked_tick: u64) -> Process {
        Process {
            id: Identity { pid, start_time: StartTime(stat.start_time) },
            ppid: Pid::new(stat.ppid),
            pgid: Pid::new(stat.pgrp),
            sid: Pid::new(stat.session),
            tty_nr: stat.tty_nr,
            state: ProcState(stat.state),
            kernel_thread: stat.flags & parse::PF_KTHREAD != 0,
            comm: stat.comm,
            cmdline,
            program: Program::default(),
            rss_kib: u32::try_from(stat.rss_pages.saturating_mul(self.page_size) / 1024).unwrap_or(u32::MAX),
            details: None,
            role: None,
            dir_ino: 0,
            checked_tick,
        }
    }

    /// The `/proc/PID` dirfd of `id`, checked through that same fd to still be
    /// the process with `id`'s start time (not a reused pid).
    pub(super) fn open_verified(&self, id: Identity, buf: &mut Vec<u8>) -> Option<OwnedFd> {
        let dir = self.open_pid_dir(id.pid)?;
        read_at(&dir, "stat", buf).ok()?;
        (parse::parse_stat(buf).ok()?.start_time == id.start_time.0).then_some(dir)
    }

    pub(super) fn open_pid_dir(&self, pid: Pid) -> Option<OwnedFd> {
        let path = self.root.join(pid.to_string());
        rustix::fs::open(&path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()
    }

    pub(super) fn read_process(&self, pid: Pid, buf: &mut Vec<u8>, checked_tick: u64) -> Option<Process> {
        self.read_process_kept(pid, buf, checked_tick, CMDLINE_KEEP)
    }

    /// [`ProcFs::read_process`] keeping at most `keep` bytes of its command
    /// line ([`CMDLINE_KEEP`], or [`CMDLINE_SHORT`] once a read has kept
    /// [`CMDLINES_TOTAL`]).
    pub(super) fn read_process_kept(
        &self,
        pid: Pid,
        buf: &mut Vec<u8>,
        checked_tick: u64,
        keep: usize,
    ) -> Option<Process> {
        let dir = self.open_pid_dir(pid)?;
        let stat = stat_at(&dir, buf)?;
        self.rest_at(&dir, pid, stat, buf, checked_tick, keep)
    }

    /// The rest of a process whose `stat` was read through `dir`: its command line.
    fn rest_at(
        &self,
        dir: &OwnedFd,
        pid: Pid,
        stat: parse::Stat,
        buf: &mut Vec<u8>,
        checked_tick: u64,
        keep: usize,
    ) -> Option<Process> {
        let kernel_thread = stat.flags & parse::PF_KTHREAD != 0;
        let state = ProcState(stat.state);
        let mut program = Program::default();
        let cmdline: Arc<str> = if kernel_thread || state.is_zombie() {
            Arc::default()
        } else {
            match read_at_most(dir, "cmdline", buf, keep + 1) {
                Ok(()) => {
                    let mut spans = Vec::new();
                    let cut = buf.len() > keep;
                    let text = parse::join_argv_kept(buf, keep, &mut spans);
                    program = Program::from_argv(&text, &spans);
                    if cut {
                        program.set_cut();
                    }
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

    /// A process read as far as its `stat`, with its `startstack`
    /// ([`parse::stat_start_stack`]): what tells a fork that did not exec
    /// (`daemon/births.rs`). The rest, when wanted ([`ProcFs::read_opened`]),
    /// is read through the same directory, so of the same process.
    pub fn open_process(&self, pid: Pid) -> Option<Opened> {
        self.open_process_or_why(pid).ok()
    }

    /// [`ProcFs::open_process`], saying why nothing was opened: the kernel
    /// said there is no such process ([`Unopened::Gone`]), or the open or
    /// read failed otherwise (out of fds or memory: it may be there).
    pub fn open_process_or_why(&self, pid: Pid) -> Result<Opened, Unopened> {
        let missing = |e: rustix::io::Errno| {
            if e == rustix::io::Errno::NOENT || e == rustix::io::Errno::SRCH {
                Unopened::Gone
            } else {
                Unopened::Failed
            }
        };
        let path = self.root.join(pid.to_string());
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir = rustix::fs::open(&path, flags, Mode::empty()).map_err(missing)?;
        let fd = rustix::fs::openat(dir.as_fd(), "stat", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
            .map_err(missing)?;
        let mut buf = Vec::with_capacity(1024);
        let stat = stat_of(&fd, &mut buf).ok_or(Unopened::Failed)?;
        if parse::stat_is_thread(&buf) {
            return Err(Unopened::Gone); // a thread's id: no process of its own
        }
        let start_stack = parse::stat_start_stack(&buf);
        Ok(Opened { dir, pid, stat, start_stack })
    }

    /// The process [`ProcFs::open_process`] opened, read whole the way a scan reads it.
    pub fn read_opened(&self, o: Opened) -> Option<Process> {
        let mut buf = Vec::with_capacity(4096);
        self.rest_at(&o.dir, o.pid, o.stat, &mut buf, self.now_tick(), CMDLINE_KEEP)
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
    /// The pid most recently allocated in this `/proc`'s PID namespace
    /// (`loadavg`'s fifth field): whether anything was created since a look,
    /// and which pids to read, without listing `/proc`.
    pub fn last_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.root().join("loadavg")).ok()?;
        text.split_whitespace().nth(4)?.parse().ok()
    }

    pub fn process(&self, pid: Pid) -> Option<Process> {
        let tick = self.now_tick();
        self.read_process(pid, &mut Vec::with_capacity(4096), tick)
    }

    /// The command line of one pid, read now (joined, lossy).
    pub fn cmdline(&self, pid: Pid) -> Option<String> {
        let dir = self.open_pid_dir(pid)?;
        let mut buf = Vec::with_capacity(1024);
        read_at_most(&dir, "cmdline", &mut buf, CMDLINE_KEEP + 1).ok()?;
        Some(parse::join_argv_kept(&buf, CMDLINE_KEEP, &mut Vec::new()))
    }

    /// The whole command line of `id` (still that process), joined with its
    /// argv spans, read only for a process a decision is about whose kept
    /// line was cut ([`CMDLINE_KEEP`]): one at a time, dropped after use.
    /// `None` when gone, unreadable or longer than [`CMDLINE_WHOLE`].
    pub fn whole_cmdline(&self, id: crate::ids::Identity) -> Option<(String, Vec<crate::program::Span>)> {
        let mut buf = Vec::with_capacity(CMDLINE_KEEP * 2);
        let dir = self.open_verified(id, &mut buf)?;
        read_at_most(&dir, "cmdline", &mut buf, CMDLINE_WHOLE + 1).ok()?;
        if buf.len() > CMDLINE_WHOLE {
            return None;
        }
        let mut spans = Vec::new();
        let text = parse::join_argv(&buf, &mut spans);
        Some((text, spans))
    }

    /// A fresh `stat` of one pid (one open, one read), for re-checks right
    /// before acting. A thread's id reads as no process.
    pub fn stat(&self, pid: Pid) -> Option<parse::Stat> {
        let mut buf = Vec::with_capacity(1024);
        let path = self.root.join(pid.to_string()).join("stat");
        let st = Self::read_stat_path(&path, &mut buf)?;
        (!parse::stat_is_thread(&buf)).then_some(st)
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

    pub(super) fn context(&self) -> Context {
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
pub(super) fn parse_ns_inode(s: &str) -> Option<u64> {
    s.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// An open `stat` file read into `buf` and parsed, in one read: the kernel
/// emits the whole line at once.
fn stat_of(fd: &OwnedFd, buf: &mut Vec<u8>) -> Option<parse::Stat> {
    buf.clear();
    buf.resize(4096, 0);
    let n = rustix::io::read(fd, &mut buf[..]).ok()?;
    buf.truncate(n);
    if n == 4096 {
        return None; // cannot be a stat line; treat as unreadable
    }
    parse::parse_stat(buf).ok()
}

/// The `stat` of the process whose directory `dir` is; `None` when gone, or
/// when it is a thread that does not lead its group (`/proc/TID` answers
/// for any thread, and the pid counter hands out thread ids): no process.
fn stat_at(dir: &OwnedFd, buf: &mut Vec<u8>) -> Option<parse::Stat> {
    let fd = rustix::fs::openat(dir.as_fd(), "stat", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let st = stat_of(&fd, buf)?;
    (!parse::stat_is_thread(buf)).then_some(st)
}

/// Reads a whole file below a `/proc/PID` dirfd into `buf`.
pub(super) fn read_at(dir: &OwnedFd, name: &str, buf: &mut Vec<u8>) -> Result<(), ReadFail> {
    read_at_most(dir, name, buf, usize::MAX)
}

/// [`read_at`], stopping once `buf` holds `limit` bytes or more: what a
/// user sizes (a command line) is never read past what is kept.
pub(super) fn read_at_most(dir: &OwnedFd, name: &str, buf: &mut Vec<u8>, limit: usize) -> Result<(), ReadFail> {
    buf.clear();
    let fd =
        rustix::fs::openat(dir.as_fd(), name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).map_err(classify)?;
    let mut chunk = [0u8; 4096];
    loop {
        match rustix::io::read(&fd, &mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() >= limit {
                    return Ok(());
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(classify(e)),
        }
    }
}

pub(super) fn readlink_at(dir: &OwnedFd, name: &str) -> Option<String> {
    let target = rustix::fs::readlinkat(dir.as_fd(), name, Vec::new()).ok()?;
    Some(OsString::from_vec(target.into_bytes()).to_string_lossy().into_owned())
}
