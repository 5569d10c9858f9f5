//! Stage 4: ending trees. The reaper never decides *which* trees: it is handed
//! member identities by the policy and only ever signals those identities (and
//! children they fork meanwhile), always through pidfds it has re-checked.
//!
//! All trees of a cycle are terminated together: one SIGTERM wave, one wait on
//! every pidfd at once, one SIGKILL wave, so ten stubborn trees cost one timeout.
//! This file: orders, verified targets, the waves, children that join;
//! `signal` sends, `wait` waits, `outcome` counts what happened.

mod container;
mod outcome;
mod signal;
mod wait;

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::ids::{Identity, Pid};
use crate::policy::Verdict;
use crate::scan::{MemInfo, ProcFs, Process, Snapshot};
use crate::sys;
pub use container::{ContainerOutcome, ContainerPlan, Ended};
use outcome::outcome;
pub use outcome::{Memory, Outcome};
use signal::{plan_groups, signal_members, signal_run};
use wait::wait;

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
    /// The containers of the tree's `docker|podman run` clients, as the plan
    /// found them: ended beside the tree (see `container`).
    pub containers: Vec<ContainerPlan>,
    /// The Kubernetes pod UID and the container the members' cgroups name.
    pub pod_uid: Option<String>,
    pub cgroup_container: Option<String>,
    /// The pod's namespace and name, where the runtime's state names them.
    pub pod: Option<crate::scan::PodName>,
    /// The container's name: the Kubernetes container's in its pod, or a
    /// Docker/Podman container's as its engine names it.
    pub container_name: Option<String>,
}

impl Order {
    /// An order for a tree as one scan saw it: `members` root first.
    pub fn new(verdict: Verdict, reason: String, root: &Process, members: &[&Process]) -> Order {
        let w = crate::names::workload(members.iter().copied());
        Order {
            verdict,
            reason,
            root: root.id,
            root_cmd: crate::names::short_cmd(root, 60),
            members: members.iter().map(|p| p.id).collect(),
            checked_tick: members.iter().map(|p| p.checked_tick).min().unwrap_or(root.checked_tick),
            containers: Vec::new(),
            container_name: w.pod.as_ref().and_then(|p| p.container.clone()),
            pod_uid: w.pod_uid,
            cgroup_container: w.cgroup_container,
            pod: w.pod,
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
    /// When the SIGKILL wave began (the SIGTERM clock's other end).
    killed_at: Option<Instant>,
    containers: Vec<ContainerOutcome>,
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
    let plans: Vec<(usize, ContainerPlan)> = runs
        .iter_mut()
        .enumerate()
        .flat_map(|(i, r)| std::mem::take(&mut r.order.containers).into_iter().map(move |p| (i, p)))
        .collect();
    if s.dry_run {
        // Same path up to here (pidfds opened, identities re-checked, memory
        // read); the plan for every group is computed, nothing is sent.
        add_containers(&mut runs, container::end_all(plans, s.term_timeout, true));
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
    // Containers are ended by their engines meanwhile, on a thread of their own.
    let timeout = s.term_timeout;
    let containers = (!plans.is_empty()).then(|| std::thread::spawn(move || container::end_all(plans, timeout, false)));
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
            r.killed_at = Some(Instant::now());
            adopt_new_children(procfs, r);
            signal_members(r, &[Signal::KILL], "KILL", |_| true);
        }
        wait(&mut runs, Instant::now() + s.kill_wait, procfs);
    }
    if let Some(h) = containers {
        add_containers(&mut runs, h.join().unwrap_or_default());
    }
    runs.into_iter().map(|r| outcome(r, t0, mem_before, s, procfs)).collect()
}

fn add_containers(runs: &mut [Run], done: Vec<(usize, ContainerOutcome)>) {
    for (i, c) in done {
        if let Some(r) = runs.get_mut(i) {
            r.containers.push(c);
        }
    }
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
        killed_at: None,
        containers: Vec::new(),
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
