//! Stage 4: ending trees. The reaper never decides *which* trees: it is handed
//! member identities by the policy and only ever signals those identities (and
//! children they fork meanwhile), always through pidfds it has re-checked.
//!
//! All trees of a cycle are terminated together: one SIGTERM wave, one wait on
//! every pidfd at once, one SIGKILL wave, so ten stubborn trees cost one timeout.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::process::Signal;
use serde::Serialize;

use crate::ids::{Identity, Pid};
use crate::policy::Verdict;
use crate::scan::{MemInfo, ProcFs, Process, Snapshot};
use crate::sys;

/// A tree the policy wants gone.
#[derive(Clone, Debug)]
pub struct Order {
    pub verdict: Verdict,
    pub reason: String,
    pub root: Identity,
    /// The root's command line, for logs.
    pub root_cmd: String,
    pub members: Vec<Identity>,
    /// The clock tick at which the scan the members come from began. A
    /// member that started in that tick or later has no unambiguous identity
    /// yet (see [`crate::scan::Process::identity_settled`]) and is refused.
    pub checked_tick: u64,
}

impl Order {
    /// An order for a tree as one scan saw it: `members` root first.
    pub fn new(verdict: Verdict, reason: String, root: &Process, members: &[&Process]) -> Order {
        Order {
            verdict,
            reason,
            root: root.id,
            root_cmd: crate::policy::short_cmd(root, 60),
            members: members.iter().map(|p| p.id).collect(),
            checked_tick: members.iter().map(|p| p.checked_tick).min().unwrap_or(root.checked_tick),
        }
    }
}

/// How to terminate.
#[derive(Clone, Debug)]
pub struct Settings {
    pub term_timeout: Duration,
    /// How long to wait after SIGKILL before calling a member unkillable.
    pub kill_wait: Duration,
    pub dry_run: bool,
}

/// Memory a process held before the signal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Memory {
    pub pss_bytes: u64,
    pub swap_bytes: u64,
    /// Counted from RSS + `VmSwap` because `smaps_rollup` was unreadable.
    pub estimated_from_rss: bool,
}

impl Memory {
    pub fn total(&self) -> u64 {
        self.pss_bytes + self.swap_bytes
    }
}

/// What happened to one tree.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub verdict: Verdict,
    pub reason: String,
    pub root: Identity,
    pub root_cmd: String,
    pub dry_run: bool,
    /// Members that were alive (non-zombie) and verified when the signals began.
    pub members: usize,
    /// Children forked during the termination that joined the tree.
    pub joined: usize,
    /// Pids dropped because their start time changed (PID reuse) or gone before the signal.
    pub dropped: usize,
    /// Signals sent (or, in dry-run, that would be sent first): "TERM", "KILL".
    pub signals: Vec<&'static str>,
    pub escalated: bool,
    pub group_signals: usize,
    pub member_signals: usize,
    pub gone: usize,
    /// Members still there after SIGKILL, with their state letter.
    pub unkillable: Vec<(Identity, char)>,
    /// Signal failures (permission, …) by member.
    pub errors: Vec<String>,
    pub took_ms: u64,
    pub term_timeout_secs: f64,
    /// Memory of members that are gone (in dry-run: of all members).
    pub reclaimed: Memory,
    pub mem_available_delta: Option<i64>,
    pub swap_free_delta: Option<i64>,
}

impl Outcome {
    /// The one definition of "a tree reaped", for every total: something
    /// was ended and nothing was left behind unkillable.
    pub fn reaped(&self) -> bool {
        self.gone > 0 && self.unkillable.is_empty()
    }

    pub fn success(&self) -> bool {
        self.unkillable.is_empty() && self.errors.is_empty()
    }

    /// The one log line per tree.
    pub fn line(&self) -> String {
        let mem = format!(
            "{} (pss {}, swap {}{})",
            crate::report::bytes(self.reclaimed.total()),
            crate::report::bytes(self.reclaimed.pss_bytes),
            crate::report::bytes(self.reclaimed.swap_bytes),
            if self.reclaimed.estimated_from_rss { ", from rss" } else { "" }
        );
        if self.dry_run {
            return format!(
                "would reap {} tree root={} ({}) members={} signals=TERM,KILL after {:.1}s if still alive \
                 (group signals={}, member signals={}) estimate={mem}",
                self.verdict,
                self.root.pid,
                self.root_cmd,
                self.members,
                self.term_timeout_secs,
                self.group_signals,
                self.member_signals
            );
        }
        let verb = if self.success() {
            "reaped"
        } else if self.gone == 0 {
            "failed to reap"
        } else {
            "partly reaped"
        };
        let mut s = format!(
            "{verb} {} tree root={} ({}) members={} signals={} took={}ms reclaimed={mem}",
            self.verdict,
            self.root.pid,
            self.root_cmd,
            self.members + self.joined,
            self.signals.join(","),
            self.took_ms
        );
        if let Some(d) = self.mem_available_delta {
            let _ = write!(s, "; MemAvailable {}", crate::report::signed_mib(d));
        }
        if !self.unkillable.is_empty() {
            let u: Vec<String> = self.unkillable.iter().map(|(id, st)| format!("{} ({st})", id.pid)).collect();
            let _ = write!(s, "; unkillable: {}", u.join(", "));
        }
        if !self.errors.is_empty() {
            let _ = write!(s, "; errors: {}", self.errors.join("; "));
        }
        if self.dropped > 0 {
            let _ = write!(s, "; {} pid(s) dropped (exited or reused)", self.dropped);
        }
        s
    }
}

struct Target {
    id: Identity,
    pidfd: OwnedFd,
    mem: Memory,
    gone: bool,
    /// Joined during the termination.
    joined: bool,
    /// Has had its SIGTERM.
    signalled: bool,
}

struct Run {
    order: Order,
    targets: Vec<Target>,
    dropped: usize,
    signals: Vec<&'static str>,
    group_signals: usize,
    member_signals: usize,
    errors: Vec<String>,
    finished: Option<(Instant, Option<MemInfo>)>,
}

impl Run {
    fn live(&self) -> impl Iterator<Item = &Target> {
        self.targets.iter().filter(|t| !t.gone)
    }
}

/// Ends the given trees. Never blocks longer than `term_timeout + kill_wait`
/// plus scan time.
pub fn terminate(procfs: &ProcFs, orders: Vec<Order>, s: &Settings) -> Vec<Outcome> {
    terminate_with(procfs, orders, s, None)
}

/// [`terminate`], with the snapshot of the judgement made moments before, so
/// the process-group check needs no extra read of all of /proc.
pub fn terminate_with(procfs: &ProcFs, orders: Vec<Order>, s: &Settings, judged: Option<&Snapshot>) -> Vec<Outcome> {
    let mem_before = procfs.meminfo();
    let mut runs: Vec<Run> = orders.into_iter().map(|o| open_targets(procfs, o)).collect();
    let fresh;
    let snap = if let Some(snap) = judged {
        Some(snap)
    } else {
        fresh = procfs.snapshot().ok();
        fresh.as_ref()
    };
    if s.dry_run {
        // Same path up to here (pidfds opened, identities re-checked, memory
        // read); the plan for every group is computed, nothing is sent.
        let t0 = Instant::now();
        return runs
            .into_iter()
            .map(|mut r| {
                let groups = snap.map(|snap| plan_groups(&r, snap)).unwrap_or_default();
                let in_groups = r
                    .live()
                    .filter(|t| {
                        let pg = snap.and_then(|sn| sn.get(t.id.pid)).and_then(|p| p.pgid);
                        pg.is_some_and(|pg| groups.contains(&pg))
                    })
                    .count();
                r.group_signals = groups.len();
                r.member_signals = r.live().count() - in_groups;
                r.signals = vec!["TERM"];
                outcome(r, t0, mem_before, s, procfs)
            })
            .collect();
    }
    // Wave 1: SIGTERM (+SIGCONT so stopped members can act on it).
    for r in &mut runs {
        match snap {
            Some(snap) => signal_run(r, snap, &[Signal::TERM, Signal::CONT], "TERM"),
            None => signal_members(r, &[Signal::TERM, Signal::CONT], "TERM", |_| true),
        }
    }
    // The clock starts when SIGTERM is out: SIGKILL never comes sooner.
    let t0 = Instant::now();
    // One re-scan early in the wait for children forked meanwhile.
    wait(&mut runs, t0 + (s.term_timeout / 2).min(Duration::from_millis(100)), procfs);
    for r in &mut runs {
        if adopt_new_children(procfs, r) > 0 {
            signal_members(r, &[Signal::TERM, Signal::CONT], "TERM", |t| t.joined && !t.signalled);
            r.targets.iter_mut().for_each(|t| t.signalled = true);
        }
    }
    wait(&mut runs, t0 + s.term_timeout, procfs);
    // Wave 2: SIGKILL, member by member through the pidfds (a process group
    // may have changed since the check), children forked meanwhile included.
    if runs.iter().any(|r| r.live().next().is_some()) {
        for r in runs.iter_mut().filter(|r| r.live().next().is_some()) {
            adopt_new_children(procfs, r);
            signal_members(r, &[Signal::KILL], "KILL", |_| true);
        }
        wait(&mut runs, Instant::now() + s.kill_wait, procfs);
    }
    runs.into_iter().map(|r| outcome(r, t0, mem_before, s, procfs)).collect()
}

fn open_targets(procfs: &ProcFs, order: Order) -> Run {
    let mut run = Run {
        targets: Vec::new(),
        dropped: 0,
        signals: Vec::new(),
        group_signals: 0,
        member_signals: 0,
        errors: Vec::new(),
        finished: None,
        order,
    };
    for id in run.order.members.clone() {
        if id.start_time.0 >= run.order.checked_tick {
            run.dropped += 1; // the policy holds such trees back; never act on one
            continue;
        }
        match open_verified(procfs, id) {
            Some(t) => run.targets.push(t),
            None => run.dropped += 1,
        }
    }
    run
}

/// pidfd first, then the start time: if the pid was reused before the open,
/// the start time differs and the pidfd (of the new process) is dropped.
fn open_verified(procfs: &ProcFs, id: Identity) -> Option<Target> {
    let pidfd = sys::pidfd_open(id.pid).ok()?;
    let stat = procfs.stat(id.pid)?;
    if stat.start_time != id.start_time.0 || matches!(stat.state, b'Z' | b'X') {
        return None;
    }
    let mem = if let Some(r) = procfs.rollup(id) {
        Memory { pss_bytes: r.pss_bytes, swap_bytes: r.swap_pss_bytes, estimated_from_rss: false }
    } else {
        let d = procfs.details(id).unwrap_or_default();
        Memory {
            pss_bytes: stat.rss_pages * rustix::param::page_size() as u64,
            swap_bytes: d.swap_bytes.unwrap_or(0),
            estimated_from_rss: true,
        }
    };
    Some(Target { id, pidfd, mem, gone: false, joined: false, signalled: true })
}

/// Process groups that may be signalled as a whole: the leader is a live
/// target and every non-zombie process of the group (fresh scan) is a target.
fn plan_groups(r: &Run, snap: &Snapshot) -> HashSet<Pid> {
    let live: HashSet<Identity> = r.live().map(|t| t.id).collect();
    let mut groups: HashMap<Pid, bool> = HashMap::new();
    for t in r.live() {
        if let Some(pg) = snap.get(t.id.pid).filter(|p| p.id == t.id).and_then(|p| p.pgid) {
            groups.insert(pg, true);
        }
    }
    for p in &snap.procs {
        if let Some(pg) = p.pgid
            && let Some(pure) = groups.get_mut(&pg)
            && !p.state.is_zombie()
            && !live.contains(&p.id)
        {
            *pure = false;
        }
    }
    groups.into_iter().filter(|&(pg, pure)| pure && live.iter().any(|id| id.pid == pg)).map(|(pg, _)| pg).collect()
}

fn signal_run(r: &mut Run, snap: &Snapshot, sigs: &[Signal], name: &'static str) {
    let groups = plan_groups(r, snap);
    let mut covered: HashSet<Identity> = HashSet::new();
    for &pg in &groups {
        let Some(leader) = r.live().find(|t| t.id.pid == pg) else { continue };
        let mut ok = true;
        for &sig in sigs {
            match sys::pidfd_signal_group(leader.pidfd.as_fd(), sig) {
                Ok(()) => {}
                // The group is already gone (e.g. it died of the SIGTERM
                // before the SIGCONT): the signal did its job.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => break,
                Err(_) => {
                    ok = false; // kernel < 6.9 (EINVAL): per-member signals below
                    break;
                }
            }
        }
        if ok {
            r.group_signals += 1;
            for t in r.live() {
                if snap.get(t.id.pid).is_some_and(|p| p.id == t.id && p.pgid == Some(pg)) {
                    covered.insert(t.id);
                }
            }
        }
    }
    signal_members(r, sigs, name, |t| !covered.contains(&t.id));
    if !r.signals.contains(&name) {
        r.signals.push(name);
    }
}

fn signal_members(r: &mut Run, sigs: &[Signal], name: &'static str, which: impl Fn(&Target) -> bool) {
    let mut errors = Vec::new();
    let mut sent = 0;
    for t in r.targets.iter().filter(|t| !t.gone && which(t)) {
        for (i, &sig) in sigs.iter().enumerate() {
            match sys::pidfd_signal(t.pidfd.as_fd(), sig) {
                Ok(()) => sent += usize::from(i == 0),
                // Exited between the wait and now: that is success.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => break,
                Err(e) => {
                    errors.push(format!("SIG{name} to {}: {e}", t.id.pid));
                    break;
                }
            }
        }
    }
    r.member_signals += sent;
    r.errors.extend(errors);
    if !r.signals.contains(&name) {
        r.signals.push(name);
    }
}

/// Children forked by live targets since they were judged join the tree.
/// Read from each target's `task/*/children` (no scan of all of /proc).
fn adopt_new_children(procfs: &ProcFs, r: &mut Run) -> usize {
    let mut known: HashSet<Pid> = r.targets.iter().map(|t| t.id.pid).collect();
    let mut frontier: Vec<Pid> = r.live().map(|t| t.id.pid).collect();
    let mut added = 0;
    // Without task/*/children, one scan of /proc serves every parent.
    let mut scanned: Option<Snapshot> = None;
    while let Some(parent) = frontier.pop() {
        let children = procfs.children(parent).unwrap_or_else(|| {
            let snap = scanned.get_or_insert_with(|| procfs.snapshot().unwrap_or_default());
            snap.procs.iter().filter(|p| p.ppid == Some(parent)).map(super::scan::Process::pid).collect()
        });
        for child in children {
            if !known.insert(child) {
                continue;
            }
            let Some(st) = procfs.stat(child) else { continue };
            if st.ppid != parent.get() {
                continue;
            }
            let id = Identity { pid: child, start_time: crate::ids::StartTime(st.start_time) };
            if let Some(mut t) = open_verified(procfs, id) {
                t.joined = true;
                t.signalled = false;
                r.targets.push(t);
                frontier.push(child);
                added += 1;
            }
        }
    }
    added
}

/// Waits on every live pidfd until `deadline` or until all are gone.
fn wait(runs: &mut [Run], deadline: Instant, procfs: &ProcFs) {
    loop {
        finish_done(runs, procfs);
        // Past the deadline, still poll once without blocking: members that
        // exited while we were busy must be counted as gone, not killed.
        let left = deadline.saturating_duration_since(Instant::now());
        let mut idx = Vec::new();
        let mut fds = Vec::new();
        for (ri, r) in runs.iter().enumerate() {
            for (ti, t) in r.targets.iter().enumerate() {
                if !t.gone {
                    idx.push((ri, ti));
                    fds.push(PollFd::new(&t.pidfd, PollFlags::IN));
                }
            }
        }
        if fds.is_empty() {
            return;
        }
        let ts = rustix::fs::Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let ready = match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => 0,
            Err(_) => return,
        };
        let exited: Vec<(usize, usize)> =
            fds.iter().zip(&idx).filter(|(f, _)| !f.revents().is_empty()).map(|(_, &i)| i).collect();
        drop(fds);
        for (ri, ti) in exited {
            runs[ri].targets[ti].gone = true;
        }
        if Instant::now() >= deadline {
            finish_done(runs, procfs);
            return;
        }
        let _ = ready;
    }
}

fn finish_done(runs: &mut [Run], procfs: &ProcFs) {
    for r in runs {
        if r.finished.is_none() && r.live().next().is_none() {
            r.finished = Some((Instant::now(), procfs.meminfo()));
        }
    }
}

fn outcome(r: Run, t0: Instant, before: Option<MemInfo>, s: &Settings, procfs: &ProcFs) -> Outcome {
    let unkillable: Vec<(Identity, char)> = if s.dry_run {
        Vec::new()
    } else {
        r.live()
            .map(|t| {
                let state = procfs.stat(t.id.pid).filter(|st| st.start_time == t.id.start_time.0);
                (t.id, state.map_or('?', |st| st.state as char))
            })
            .collect()
    };
    let reclaimed = r.targets.iter().filter(|t| t.gone || s.dry_run).fold(Memory::default(), |mut m, t| {
        m.pss_bytes += t.mem.pss_bytes;
        m.swap_bytes += t.mem.swap_bytes;
        m.estimated_from_rss |= t.mem.estimated_from_rss;
        m
    });
    let (took, after) = match r.finished {
        Some((at, after)) if !s.dry_run => (at - t0, after),
        _ if s.dry_run => (Duration::ZERO, None),
        _ => (t0.elapsed(), None),
    };
    let delta = |f: fn(&MemInfo) -> u64| match (before, after) {
        (Some(b), Some(a)) => Some(i128::from(f(&a)) - i128::from(f(&b))).and_then(|d| i64::try_from(d).ok()),
        _ => None,
    };
    Outcome {
        verdict: r.order.verdict,
        reason: r.order.reason.clone(),
        root: r.order.root,
        root_cmd: r.order.root_cmd.clone(),
        dry_run: s.dry_run,
        members: r.targets.iter().filter(|t| !t.joined).count(),
        joined: r.targets.iter().filter(|t| t.joined).count(),
        dropped: r.dropped,
        escalated: r.signals.contains(&"KILL"),
        signals: r.signals,
        group_signals: r.group_signals,
        member_signals: r.member_signals,
        gone: r.targets.iter().filter(|t| t.gone).count(),
        unkillable,
        errors: r.errors,
        took_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        term_timeout_secs: s.term_timeout.as_secs_f64(),
        reclaimed,
        mem_available_delta: delta(|m| m.mem_available_bytes),
        swap_free_delta: delta(|m| m.swap_free_bytes),
    }
}
