//! What is left of a run session once its host exited, and ending it: the
//! members (the cgroup's processes, or the wrapper's descendants when the
//! session is a subreaper only), terminated through [`crate::reap`] (pidfds,
//! SIGTERM → term timeout → SIGKILL), `cgroup.kill` as the last step.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::cgroup::Leaf;
use crate::ids::{Identity, Pid, StartTime};
use crate::policy::Verdict;
use crate::reap::{self, Order, Settings};
use crate::scan::ProcFs;

/// Where a session's processes are.
pub enum Session {
    /// In a cgroup leaf (made here, or a systemd scope).
    Cgroup(Leaf),
    /// Below the wrapper, a child subreaper: its descendants.
    Subreaper(Pid),
}

/// What ending the leftovers did.
#[derive(Debug, Default)]
pub struct Ended {
    /// Leftover processes found.
    pub found: usize,
    /// Of those, gone by the end.
    pub gone: usize,
    pub escalated: bool,
    /// `cgroup.kill` was needed.
    pub cgroup_killed: bool,
    /// Processes still in the session at the end (new ones kept coming).
    pub left: usize,
    pub errors: Vec<String>,
}

impl Session {
    /// The session's live processes now (zombies left out: nothing to end).
    pub fn members(&self, procfs: &ProcFs) -> Vec<Identity> {
        let pids = match self {
            Session::Cgroup(leaf) => leaf.members(),
            Session::Subreaper(wrapper) => descendants(procfs, *wrapper),
        };
        pids.into_iter()
            .filter_map(|pid| {
                let st = procfs.stat(pid)?;
                (!matches!(st.state, b'Z' | b'X')).then_some(Identity { pid, start_time: StartTime(st.start_time) })
            })
            .collect()
    }

    /// Terminates every leftover: a few rounds of SIGTERM → timeout →
    /// SIGKILL (processes forked meanwhile join the next round), then
    /// `cgroup.kill` for anything still there. `reap_zombies` runs between
    /// rounds (the wrapper, a subreaper, must wait for its adopted children).
    pub fn end(&self, procfs: &ProcFs, settings: &Settings, what: &str, reap_zombies: &dyn Fn()) -> Ended {
        let mut ended = Ended::default();
        let mut seen: HashSet<Identity> = HashSet::new();
        for round in 0..3 {
            reap_zombies();
            let members = self.members(procfs);
            if members.is_empty() {
                break;
            }
            if round > 0 {
                // Members started within the current clock tick are held
                // back by the reaper: let their identity settle.
                std::thread::sleep(Duration::from_millis(20));
            }
            seen.extend(members.iter().copied());
            let order = Order {
                verdict: Verdict::Orphan,
                reason: format!("left in the run session of {what} after it exited"),
                root: members[0],
                root_cmd: procfs.cmdline(members[0].pid).unwrap_or_default(),
                members,
                checked_tick: procfs.now_tick(),
                // A run session's leftovers are ended as processes; a
                // container a client left is the daemon's plan to find.
                containers: Vec::new(),
                pod_uid: None,
                cgroup_container: None,
                pod: None,
                container_name: None,
            };
            for o in reap::terminate(procfs, vec![order], settings) {
                ended.escalated |= o.escalated;
                ended.errors.extend(o.errors);
            }
        }
        reap_zombies();
        if let Session::Cgroup(leaf) = self
            && leaf.populated()
        {
            match leaf.kill() {
                Ok(true) => ended.cgroup_killed = true,
                Ok(false) => ended.errors.push("this kernel has no cgroup.kill".into()),
                Err(e) => ended.errors.push(format!("cgroup.kill in {}: {e}", leaf.dir.display())),
            }
            let until = Instant::now() + Duration::from_secs(2);
            while leaf.populated() && Instant::now() < until {
                reap_zombies();
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        reap_zombies();
        ended.found = seen.len();
        let left: HashSet<Identity> = self.members(procfs).into_iter().collect();
        ended.gone = seen.iter().filter(|id| !left.contains(id)).count();
        ended.left = left.len();
        ended
    }
}

/// Every descendant of `root`, through `task/*/children` (a whole `/proc`
/// scan where the kernel lacks those files).
fn descendants(procfs: &ProcFs, root: Pid) -> Vec<Pid> {
    let mut out = Vec::new();
    let mut seen = HashSet::from([root]);
    let mut stack = vec![root];
    let mut scanned: Option<crate::scan::Snapshot> = None;
    while let Some(p) = stack.pop() {
        let children = procfs.children(p).unwrap_or_else(|| {
            let snap = scanned.get_or_insert_with(|| procfs.snapshot().unwrap_or_default());
            snap.procs.iter().filter(|c| c.ppid == Some(p)).map(crate::scan::Process::pid).collect()
        });
        for c in children {
            if seen.insert(c) {
                out.push(c);
                stack.push(c);
            }
        }
    }
    out
}
