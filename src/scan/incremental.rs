//! Whole-table reads of `/proc` and the rules for building on the last
//! snapshot: what may be taken over, and what must be read again (pids the
//! kernel reported, the children of exited processes, unsettled identities).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use super::ScanError;
use super::family;
use super::process::{Details, Process, Snapshot};
use super::procfs::{CMDLINE_KEEP, CMDLINE_SHORT, CMDLINES_TOTAL, ProcFs};
use crate::ids::Pid;

/// Identical command lines, kept once per read: forks share one argv (the
/// attack of 1,500 forks of one 200 KB argv held 1,500 copies). Only lines
/// of [`Interner::LONG`] bytes or more are hashed; shorter ones cost less
/// than the lookup saves.
/// It also counts the bytes of distinct long lines kept: past
/// [`CMDLINES_TOTAL`] a newly read process keeps [`CMDLINE_SHORT`] bytes.
#[derive(Default)]
pub(super) struct Interner {
    lines: HashSet<Arc<str>>,
    bytes: usize,
}

impl Interner {
    const LONG: usize = 128;

    pub(super) fn share(&mut self, line: &mut Arc<str>) {
        if line.len() < Self::LONG {
            return;
        }
        if let Some(kept) = self.lines.get(&**line) {
            *line = Arc::clone(kept);
        } else {
            self.bytes += line.len();
            self.lines.insert(Arc::clone(line));
        }
    }

    /// How much of the next command line read may be kept.
    pub(super) fn keep(&self) -> usize {
        if self.bytes >= CMDLINES_TOTAL { CMDLINE_SHORT } else { CMDLINE_KEEP }
    }
}

/// A process forked without an exec has its parent's command line: it
/// shares the parent's `Arc` (read before it: `/proc` lists pids in order,
/// and a delta takes the parent over) instead of holding a copy. A worker
/// pool or a forking helper then holds one line for all its children; the
/// [`Interner`] hashes only long lines (issue 37: the load bench's 10,000
/// forks of ten helpers held 10,000 copies). `procs` is sorted by pid; a
/// parent not found there (not read yet) only leaves the copy.
fn share_parents_line(procs: &[Process], p: &mut Process) {
    let Some(pp) = p.ppid else { return };
    if let Ok(k) = procs.binary_search_by_key(&pp, Process::pid)
        && procs[k].cmdline == p.cmdline
    {
        p.cmdline = Arc::clone(&procs[k].cmdline);
    }
}

/// A line kept short under [`CMDLINES_TOTAL`]: read again, not taken over.
pub(super) fn kept_short(p: &Process) -> bool {
    p.program.is_cut() && p.cmdline.len() <= CMDLINE_SHORT + " …".len()
}

/// A process whose details are taken over had them read this long after it
/// started at least: younger ones are still settling in (an exec right
/// after the fork, which pidfd mode does not see; an SDK moving its stdio
/// to fds 3 and 4; a launcher renaming itself) and are read again at each
/// scan. Details read later than the `stat` count from their own read: a
/// server first read in its first second (most are, in pidfd mode) would
/// otherwise have them read again at every scan for as long as it lives.
pub const DETAILS_SETTLED_SECS: u64 = 1;

/// Details taken over keep their fds (when the process had settled, see
/// [`DETAILS_SETTLED_SECS`]), not the answer about who can still write to
/// the stdin nor whether it listens on a socket: a host drops its server's
/// pipes (and opens and closes listeners) without any process event, so
/// each scan asks again (a `poll` and a look at the holder's fd, for the
/// live trees only: see `scan/link.rs`).
pub(super) fn take_over_details(p: &mut Process) {
    let tck = rustix::param::clock_ticks_per_second();
    let start = p.id.start_time.0;
    match p.details.as_mut() {
        Some(d) if d.read_tick.max(p.checked_tick).saturating_sub(start) >= tck * DETAILS_SETTLED_SECS => {
            forget_answers(d);
        }
        _ => p.details = None,
    }
}

/// Details taken over moments after they were read, by the same cycle:
/// all but the answers [`take_over_details`] drops, however young the
/// process. Settling is a matter of seconds; a young process's details
/// read milliseconds ago are fresher than a settled one's that were
/// taken over, which may be an interval old (issue 37: under churn the
/// re-check before a reap read every young server's details twice).
pub(super) fn take_over_fresh_details(p: &mut Process) {
    if let Some(d) = p.details.as_mut() {
        forget_answers(d);
    }
}

/// Who can still write to the stdin, and whether it listens: asked afresh.
fn forget_answers(d: &mut Details) {
    d.stdin = None;
    d.listening = None;
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
    /// Its details are dropped (read again where a decision needs them).
    Unchanged,
    /// As [`Reuse::Unchanged`], details included: the scans between two
    /// that read details afresh (see [`Read::NewPids`]).
    Whole,
}

/// How a read builds on the last snapshot; [`ProcFs::read`] applies it. The
/// caller picks the kind; which pids must be read again is decided here.
#[derive(Debug)]
pub enum Read {
    /// Every process afresh, nothing taken over.
    Fresh,
    /// Every `stat`, taking command lines over ([`Reuse::Cmdlines`]), except
    /// for the pids in `changed` (the kernel reported them).
    Stats { prev: Option<Snapshot>, changed: HashSet<Pid> },
    /// Only new pids ([`Reuse::Unchanged`]), plus `changed`, plus the watched
    /// processes that `exited` and their children (they were re-parented).
    /// With `details`, a process taken over keeps the details last read
    /// ([`Reuse::Whole`]) but for its stdin's far end, asked afresh: a scan
    /// brought by an exit or an exec then reads status, fds and cgroups only
    /// of the processes it read again. Such
    /// details may be as old as the last read that did not keep them (the
    /// caller bounds that); nothing is killed on them: the re-check before
    /// acting ([`crate::cycle::plan_from`]) reads every detail afresh.
    /// The pids in `turn` (sorted) are read again as a full read reads them
    /// ([`ProcFs::read_again`]): pidfd mode's safety net, spread over quiet
    /// scans.
    NewPids { prev: Snapshot, changed: HashSet<Pid>, exited: HashSet<Pid>, details: bool, turn: Vec<Pid> },
    /// The last snapshot brought up to date from the pids the kernel reported
    /// as changed ([`ProcFs::refresh`]); `details` as for [`Read::NewPids`].
    /// `turn` as for [`Read::NewPids`].
    /// `sweep` (pidfd mode's periodic scan): see [`Sweep`].
    Delta { prev: Snapshot, changed: HashSet<Pid>, details: bool, turn: Vec<Pid>, sweep: Sweep },
}

/// Which pids of the last snapshot a [`Read::Delta`] asks the kernel about
/// (pidfd mode, which hears only the exits it watches). A pid with no task
/// now ([`ProcFs::surely_gone`]) counts as changed: it leaves the snapshot
/// and its children are read again (re-parented), as a listing of `/proc`
/// would have it, for ~0.2 µs a pid instead of ~1.6 (issue 37). A pid
/// reused since is no different to the sweep: the caller counts it among
/// the new ones. Where the sweep cannot answer (a `/proc` not this
/// process's own), `/proc` is listed instead, as [`Read::NewPids`] does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sweep {
    Off,
    /// These pids (the caller's choice: those whose exit would re-parent
    /// something, the members of trees, a turn of the rest).
    Only(Vec<Pid>),
}

impl Read {
    /// What kind of read this is, for a log line.
    pub fn kind(&self) -> &'static str {
        match self {
            Read::Fresh => "fresh",
            Read::Stats { .. } => "full",
            Read::NewPids { details: true, .. } | Read::Delta { details: true, .. } => "incremental",
            Read::Delta { sweep: Sweep::Only(_), .. } => "incremental, details afresh, swept",
            Read::NewPids { .. } | Read::Delta { .. } => "incremental, details afresh",
        }
    }
}

impl Snapshot {
    /// The processes that exited (among those watched) and their children:
    /// what a read that takes unchanged processes over must read again.
    pub fn after_exits(&self, exited: &HashSet<Pid>) -> impl Iterator<Item = Pid> {
        self.procs
            .iter()
            .filter(|p| p.ppid.is_some_and(|pp| exited.contains(&pp)))
            .map(Process::pid)
            .chain(exited.iter().copied())
    }
}

impl ProcFs {
    /// Reads processes the way `read` says.
    pub fn read(&self, read: Read) -> Result<Snapshot, ScanError> {
        match read {
            Read::Fresh => self.rescan(None, Reuse::Nothing, &HashSet::new(), &[]),
            Read::Stats { prev, changed } => self.rescan(prev.as_ref(), Reuse::Cmdlines, &changed, &[]),
            Read::NewPids { prev, mut changed, exited, details, turn } => {
                changed.extend(prev.after_exits(&exited));
                let reuse = if details { Reuse::Whole } else { Reuse::Unchanged };
                self.rescan(Some(&prev), reuse, &changed, &turn)
            }
            Read::Delta { prev, mut changed, details, turn, sweep } => {
                if sweep != Sweep::Off && !self.sweeps() {
                    let reuse = if details { Reuse::Whole } else { Reuse::Unchanged };
                    return self.rescan(Some(&prev), reuse, &changed, &turn);
                }
                if let Sweep::Only(pids) = sweep {
                    changed.extend(pids.into_iter().filter(|&pid| self.surely_gone(pid)));
                }
                Ok(self.refresh(prev, &changed, details, &turn))
            }
        }
    }

    /// Reads every process. Processes that vanish mid-read are skipped silently.
    pub fn snapshot(&self) -> Result<Snapshot, ScanError> {
        self.rescan(None, Reuse::Nothing, &HashSet::new(), &[])
    }

    /// Reads every process listed in `/proc`, taking over from `prev` what
    /// `reuse` allows. Only settled identities are taken over (an unsettled
    /// one may be a same-tick newcomer), and never a pid in `changed` (the
    /// kernel reported an exec or fork for it). The pids in `turn` (sorted)
    /// have their `stat` read again whatever `reuse` says.
    pub fn rescan(
        &self,
        prev: Option<&Snapshot>,
        reuse: Reuse,
        changed: &HashSet<Pid>,
        turn: &[Pid],
    ) -> Result<Snapshot, ScanError> {
        use std::os::unix::fs::DirEntryExt;
        let tick = self.now_tick();
        let dir =
            std::fs::read_dir(&self.root).map_err(|source| ScanError::ReadDir { path: self.root.clone(), source })?;
        let mut procs = Vec::with_capacity(prev.map_or(512, |p| p.len() + 64));
        let mut buf = Vec::with_capacity(4096);
        let mut path = PathBuf::new();
        let mut lines = Interner::default();
        // Read anew rather than taken over, when takeovers skip the `stat`.
        let mut read_now = HashSet::new();
        let unread = matches!(reuse, Reuse::Unchanged | Reuse::Whole);
        for entry in dir {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(Pid::parse) else { continue };
            // procfs inode numbers are 32-bit (see `Process::dir_ino`); 0 is unknown.
            let ino = u32::try_from(entry.ino()).unwrap_or(0);
            let old = prev
                .filter(|_| reuse != Reuse::Nothing)
                .and_then(|s| s.get(pid))
                .filter(|q| q.identity_settled() && !changed.contains(&pid) && !kept_short(q));
            let in_turn = turn.binary_search(&pid).is_ok();
            let mut read = true;
            let p = match old {
                // A kernel thread never execs nor changes parent: its `stat`
                // is not read again (a desktop runs hundreds).
                Some(q) if (unread || q.kernel_thread) && q.dir_ino == ino && ino != 0 && !in_turn => {
                    let mut q = q.clone();
                    if reuse != Reuse::Whole {
                        q.details = None;
                    }
                    take_over_details(&mut q);
                    read = false;
                    Some(q)
                }
                Some(q) => {
                    // Outside a turn, a new inode under an old pid: reused.
                    if unread && !in_turn {
                        read_now.insert(pid);
                    }
                    self.read_again(q, &mut path, &mut buf, tick, lines.keep())
                }
                None => {
                    if unread {
                        read_now.insert(pid);
                    }
                    self.read_process_kept(pid, &mut buf, tick, lines.keep())
                }
            };
            if let Some(mut p) = p {
                p.dir_ino = ino;
                lines.share(&mut p.cmdline);
                if read {
                    share_parents_line(&procs, &mut p);
                }
                procs.push(p);
            }
        }
        let mut snap = Snapshot::from_processes(procs, self.context());
        if let Some(prev) = prev.filter(|_| unread) {
            let mut again = family::orphaned_since(prev, &snap);
            again.retain(|p| !read_now.contains(p));
            again.extend(family::parents_of_newcomers(&snap, &read_now));
            self.read_again_among(&mut snap.procs, again, (tick, lines.keep()), reuse == Reuse::Whole);
        }
        Ok(snap)
    }

    /// `q`'s pid read again: its `stat` afresh, its command line (and role)
    /// taken over when start time, comm and exec mark are unchanged, else
    /// read whole (it exec'd, or the pid was reused).
    pub(super) fn read_again(
        &self,
        q: &Process,
        path: &mut PathBuf,
        buf: &mut Vec<u8>,
        tick: u64,
        keep: usize,
    ) -> Option<Process> {
        let pid = q.pid();
        path.clone_from(&self.root);
        path.push(pid.to_string());
        path.push("stat");
        match Self::read_stat_path(path, buf) {
            Some(st)
                if st.start_time == q.id.start_time.0
                    && st.comm == q.comm
                    && super::process::exec_mark(st.start_stack) == q.exec_mark =>
            {
                let mut p = self.process_from(pid, st, Arc::clone(&q.cmdline), tick);
                p.role = q.role;
                p.program = q.program;
                Some(p)
            }
            Some(_) => self.read_process_kept(pid, buf, tick, keep),
            None => None,
        }
    }

    /// Brings `prev` up to date from the pids the kernel reported as changed
    /// (forked, exec'd or exited) instead of reading every process: the
    /// daemon's tick in event mode. Children of an exited process are re-read
    /// too (they were re-parented). Details are dropped unless `details`
    /// (see [`Read::Delta`]): they are re-read for the processes a decision
    /// is about. Processes whose identity was not settled yet are re-read as
    /// well, so that it settles.
    /// The pids in `turn` (sorted) taken over have their `stat` read again.
    pub fn refresh(&self, prev: Snapshot, changed: &HashSet<Pid>, details: bool, turn: &[Pid]) -> Snapshot {
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
                if !details {
                    p.details = None;
                }
                take_over_details(&mut p);
                p
            })
            .collect();
        let mut buf = Vec::with_capacity(4096);
        let mut lines = Interner::default();
        for p in &mut procs {
            lines.share(&mut p.cmdline);
        }
        self.read_again_among(&mut procs, turn.iter().copied(), (tick, lines.keep()), false);
        // Room for what is read again, once: a push past the capacity
        // doubles it (a copy of the table, and twice its memory while the
        // snapshot is built; 1.4 MB at 10,000 processes).
        procs.reserve_exact(dirty.len());
        let taken = procs.len();
        for &pid in &dirty {
            // Most changed pids under churn are exits, and new pids that
            // died before this read: no walk to their directory.
            if self.surely_gone(pid) {
                continue;
            }
            if let Some(mut p) = self.read_process_kept(pid, &mut buf, tick, lines.keep()) {
                lines.share(&mut p.cmdline);
                share_parents_line(&procs[..taken], &mut p);
                procs.push(p);
            }
        }
        let mut snap = Snapshot::from_processes(procs, self.context());
        let parents = family::parents_of_newcomers(&snap, &dirty);
        self.read_again_among(&mut snap.procs, parents, (tick, lines.keep()), details);
        snap
    }
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
