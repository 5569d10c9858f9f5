//! A `/proc` to read ([`ProcFs`]): where it is, its whole-system files
//! (uptime, loadavg, meminfo, the scanner's own entries), and how much of a
//! command line a read keeps. One process in it is read through its
//! directory fd (`pid_dir.rs`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::parse::{self, MemInfo};
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
            exec_mark: super::process::exec_mark(stat.start_stack),
            checked_tick,
        }
    }

    /// The pid most recently allocated in this `/proc`'s PID namespace
    /// (`loadavg`'s fifth field): whether anything was created since a look,
    /// and which pids to read, without listing `/proc`.
    pub fn last_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.root().join("loadavg")).ok()?;
        parse::parse_loadavg(&text).map(|(last, _)| last)
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
