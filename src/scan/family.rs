//! After a read that took processes over unread: the ones whose family
//! may have changed under them, read again (issue 37). Pidfd mode learns of
//! new pids from the pid counter and of watched exits from pidfds; what it
//! cannot see is an unwatched parent's exit (its children were re-parented)
//! and an exec under the same pid. Re-reading every `stat` every couple of
//! minutes caught both, at ~18 µs a process; these catch what a decision
//! needs at once, at the cost of the few processes concerned:
//! - a process taken over whose parent at the last read is gone or another
//!   process now, seen by comparing the two listings;
//! - the parent of a process read anew, when it was taken over: it may have
//!   exec'd into the host that started it (`exec claude` in a shell).

use std::collections::HashSet;

use super::process::{Process, Snapshot};
use super::procfs::ProcFs;
use crate::ids::Pid;

/// The processes of `now` whose parent at `prev` is no longer there: gone,
/// or its pid held by another process. Both are sorted by pid: one walk.
pub(super) fn orphaned_since(prev: &Snapshot, now: &Snapshot) -> HashSet<Pid> {
    let mut gone: HashSet<Pid> = HashSet::new();
    let mut later = now.procs.iter().peekable();
    for before in &prev.procs {
        while later.next_if(|p| p.pid() < before.pid()).is_some() {}
        let same = later.peek().is_some_and(|p| p.id == before.id);
        if !same {
            gone.insert(before.pid());
        }
    }
    if gone.is_empty() {
        return gone;
    }
    now.procs.iter().filter(|p| p.ppid.is_some_and(|pp| gone.contains(&pp))).map(Process::pid).collect()
}

/// The parents of processes read anew (`read`) that were taken over, but
/// kernel threads (`kthreadd` never execs, and its workers come and go).
pub(super) fn parents_of_newcomers(now: &Snapshot, read: &HashSet<Pid>) -> HashSet<Pid> {
    read.iter()
        .filter_map(|&pid| now.get(pid)?.ppid)
        .filter(|pp| !read.contains(pp) && now.get(*pp).is_some_and(|p| !p.kernel_thread))
        .collect()
}

impl ProcFs {
    /// Reads the processes of `procs` (sorted by pid) whose pids are in
    /// `pids` again, as a full read does ([`ProcFs::read_again`]: the
    /// command line taken over unless the process exec'd); one gone is
    /// dropped. Serves the reads above and pidfd mode's quiet turns. With
    /// `details`, a process found unchanged (same identity, comm and exec
    /// mark) keeps the details it was taken over with: it is read again
    /// for its parent's sake or its children's, and a read that keeps
    /// details keeps them for every process it did not read (issue 37:
    /// under churn, every parent of a newcomer had its status, fds and
    /// cgroup read again at each scan).
    pub(super) fn read_again_among(
        &self,
        procs: &mut Vec<Process>,
        pids: impl IntoIterator<Item = Pid>,
        (tick, keep): (u64, usize),
        details: bool,
    ) {
        let (mut path, mut buf) = (std::path::PathBuf::new(), Vec::with_capacity(1024));
        let mut gone: Vec<Pid> = Vec::new();
        for pid in pids {
            let Ok(i) = procs.binary_search_by_key(&pid, Process::pid) else { continue };
            match self.read_again(&procs[i], &mut path, &mut buf, tick, keep) {
                Some(mut p) => {
                    let was = &mut procs[i];
                    p.dir_ino = was.dir_ino;
                    if details && p.id == was.id && p.comm == was.comm && p.exec_mark == was.exec_mark {
                        p.details = was.details.take();
                    }
                    procs[i] = p;
                }
                None => gone.push(pid),
            }
        }
        if !gone.is_empty() {
            procs.retain(|p| !gone.contains(&p.pid()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::process::Context;

    fn snap(procs: &[(i32, i32, u64)]) -> Snapshot {
        let procs = procs.iter().map(|&(pid, ppid, start)| Process::synthetic(pid, ppid, start, "sh")).collect();
        Snapshot::from_processes(procs, Context::default())
    }

    fn pids(v: &[i32]) -> HashSet<Pid> {
        v.iter().map(|&p| Pid::new(p).expect("pid")).collect()
    }

    #[test]
    fn children_of_a_parent_gone_or_replaced_since_the_last_listing_are_found() {
        let prev = snap(&[(1, 0, 1), (10, 1, 5), (11, 10, 6), (20, 1, 7), (21, 20, 8), (30, 1, 9), (31, 30, 9)]);
        // 10 exited (11 still says so: taken over unread); 20's pid is another
        // process's now; 30 is as it was.
        let now = snap(&[(1, 0, 1), (11, 10, 6), (20, 1, 99), (21, 20, 8), (30, 1, 9), (31, 30, 9)]);
        assert_eq!(orphaned_since(&prev, &now), pids(&[11, 21]));
        assert!(orphaned_since(&prev, &prev).is_empty());
    }

    #[test]
    fn the_parent_of_a_newcomer_is_read_again_unless_read_anew_itself() {
        let now = snap(&[(1, 0, 1), (10, 1, 5), (11, 10, 6), (12, 11, 7), (40, 39, 8)]);
        // 11 and 12 read anew: 11's parent 10 was taken over; 12's parent 11
        // was read anew; 40's parent is not in the table.
        assert_eq!(parents_of_newcomers(&now, &pids(&[11, 12, 40])), pids(&[10]));
    }
}
