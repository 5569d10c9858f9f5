//! Reading one process (or one file of it) from a [`ProcFs`]: the
//! directory-fd discipline. All files of one process are read through one
//! open `/proc/PID` directory, which stays bound to that process even if its
//! pid is reused, so they are consistent with each other.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use super::parse::{self, Rollup};
use super::process::{ProcState, Process};
use super::procfs::{CMDLINE_KEEP, CMDLINE_WHOLE, ProcFs};
use crate::ids::{Identity, Pid};
use crate::program::Program;

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
    pub(super) fn read_stat_path(path: &Path, buf: &mut Vec<u8>) -> Option<parse::Stat> {
        stat_of(&rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?, buf)
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
            match line_at(dir, buf, keep) {
                Ok((text, read)) => {
                    program = read;
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

    /// Whether the kernel has no task at `pid` now, asked without a walk of
    /// `/proc` (`getpriority`, which looks the task up and reads nothing of
    /// it). Pidfd mode's births look asks this first of every pid it
    /// counted: under churn most are gone by then, and an open of a gone
    /// pid's directory allocates and frees a dentry (issue 37: ~4 µs against
    /// ~0.2; 79 % of the pids opened in the load bench were gone). Only this
    /// process's own `/proc` answers for the pids `getpriority` sees: any
    /// other root (a fixture, another namespace's mount) says `false`, as
    /// does any answer but "no such process" (a thread's id is a task too,
    /// and told apart by its `stat`).
    pub fn surely_gone(&self, pid: Pid) -> bool {
        self.sweeps()
            && rustix::process::Pid::from_raw(pid.get())
                .is_some_and(|p| rustix::process::getpriority_process(Some(p)) == Err(rustix::io::Errno::SRCH))
    }

    /// Whether [`ProcFs::surely_gone`] can tell a pid is gone here.
    pub fn sweeps(&self) -> bool {
        self.root == Path::new("/proc")
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
    pub fn process(&self, pid: Pid) -> Option<Process> {
        let tick = self.now_tick();
        self.read_process(pid, &mut Vec::with_capacity(4096), tick)
    }

    /// A process just exec'd, its command line read first (joined, with its
    /// program): the rest, its `stat` through the same directory, only when
    /// `wanted` makes something of the line. Most execs are of no interest
    /// (a build's compilers, a shell's commands): each costs its line, not
    /// its line and a `stat` (issue 37). A zombie's or kernel thread's line
    /// is empty; a thread's id reads as no process.
    pub fn process_if<T>(&self, pid: Pid, wanted: impl FnOnce(&str, Program) -> Option<T>) -> Option<(Process, T)> {
        let tick = self.now_tick();
        let mut buf = Vec::with_capacity(4096);
        let dir = self.open_pid_dir(pid)?;
        let (text, program) = line_at(&dir, &mut buf, CMDLINE_KEEP).ok()?;
        let found = wanted(&text, program)?;
        let stat = stat_at(&dir, &mut buf)?;
        let mut p = self.process_from(pid, stat, text.into(), tick);
        p.program = program;
        Some((p, found))
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
}

/// The command line of the process behind `dir`, at most `keep` bytes of
/// it kept, joined, and what it runs.
fn line_at(dir: &OwnedFd, buf: &mut Vec<u8>, keep: usize) -> Result<(String, Program), ReadFail> {
    read_at_most(dir, "cmdline", buf, keep + 1)?;
    let mut spans = Vec::new();
    let cut = buf.len() > keep;
    let text = parse::join_argv_kept(buf, keep, &mut spans);
    let mut program = Program::from_argv(&text, &spans);
    if cut {
        program.set_cut();
    }
    Ok((text, program))
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
