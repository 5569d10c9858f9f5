//! The read behind the re-check before a reap: the trees to reap afresh,
//! not the whole table (issue 24). At 10,000 processes a read of every
//! `stat` took ~100 ms before each reap: most of the daemon's CPU under
//! churn, and most of the time from a host's death to its orphans' SIGTERM.
//!
//! What a tree's verdict rests on is read afresh: its members, found again
//! from the kernel's list of each member's children (`task/*/children`), so
//! that children forked since the judgement join and the dead drop out; and
//! the chain above its root, up to the namespace's first process (owner,
//! adopter, scope, the host's terminal and session). Their details are
//! dropped, so the judgement reads them again. Every other process is taken
//! over from the judged read, which the same cycle made moments before,
//! with its details (a young process's too: they are milliseconds old) but
//! not its stdin answer ([`take_over_fresh_details`]): it
//! weighs in no order, since only trees that the first judgement wanted and
//! the fresh one still reaps are ordered ([`crate::cycle::plan_from`]), and
//! whether anyone can still write to a stdin is asked of the kernel afresh
//! (a poll), whoever holds it.
//!
//! Structure comes from each process's own fresh `stat` (its ppid), never
//! from the children lists, which only say which pids to read: a pid reused
//! meanwhile is read as the newcomer it is and hangs where its ppid says.

use std::collections::HashMap;
use std::path::PathBuf;

use super::incremental::{Interner, kept_short, take_over_fresh_details};
use super::process::{Process, Snapshot};
use super::procfs::ProcFs;
use crate::ids::Pid;

/// Chains longer than this are not followed (a kernel's are far shorter;
/// a fixture's could loop).
const MAX_DEPTH: usize = 4096;

/// Trees this big (a fork bomb below a server) are read whole instead.
const MAX_FRESH: usize = 16_384;

impl ProcFs {
    /// `prev` with `pids` (the members of the trees to re-check, roots
    /// included), every child the kernel lists below them, and the chain
    /// above each of them read afresh; see the module's header. `prev` back
    /// when this kernel has no children lists (or a tree is too big): the
    /// caller reads the whole table.
    #[allow(clippy::result_large_err)] // not an error: the snapshot handed back
    pub fn recheck(&self, prev: Snapshot, pids: impl IntoIterator<Item = Pid>) -> Result<Snapshot, Snapshot> {
        let tick = self.now_tick();
        let mut lines = Interner::default();
        let (mut buf, mut path) = (Vec::with_capacity(4096), PathBuf::new());
        let mut fresh: HashMap<Pid, Option<Process>> = HashMap::new();
        let mut read = |pid: Pid, lines: &mut Interner| {
            let old = prev.get(pid).filter(|q| q.identity_settled() && !kept_short(q));
            let p = match old {
                Some(q) => self.read_again(q, &mut path, &mut buf, tick, lines.keep()),
                None => self.read_process_kept(pid, &mut buf, tick, lines.keep()),
            };
            p.map(|mut p| {
                lines.share(&mut p.cmdline);
                p
            })
        };
        // The trees, down: members and whatever they forked since.
        let mut queue: Vec<Pid> = pids.into_iter().collect();
        let mut tops = Vec::new();
        while let Some(pid) = queue.pop() {
            if fresh.contains_key(&pid) {
                continue;
            }
            if fresh.len() >= MAX_FRESH {
                return Err(prev);
            }
            let p = read(pid, &mut lines);
            if let Some(p) = &p {
                let Some(children) = self.children(pid) else { return Err(prev) };
                queue.extend(children);
                tops.extend(p.ppid);
            }
            fresh.insert(pid, p);
        }
        // The chains, up.
        for mut at in tops {
            for _ in 0..MAX_DEPTH {
                if at.get() <= 0 || fresh.contains_key(&at) {
                    break;
                }
                let p = read(at, &mut lines);
                let up = p.as_ref().and_then(|p| p.ppid);
                fresh.insert(at, p);
                let Some(up) = up else { break };
                at = up;
            }
        }
        let mut procs: Vec<Process> = prev
            .procs
            .into_iter()
            .filter(|p| !fresh.contains_key(&p.pid()))
            .map(|mut p| {
                take_over_fresh_details(&mut p);
                p
            })
            .collect();
        procs.extend(fresh.into_values().flatten());
        Ok(Snapshot::from_processes(procs, self.context()))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn the_trees_are_read_again_down_to_children_forked_since_and_the_rest_taken_over() {
        let procfs = ProcFs::new("/proc");
        if procfs.children(Pid::new(std::process::id().cast_signed()).unwrap()).is_none() {
            eprintln!("skipped: this kernel has no task/*/children lists");
            return;
        }
        // A member that forks when told, one that exits, a bystander.
        let mut forker =
            Command::new("sh").args(["-c", "read x; sleep 1000 & wait"]).stdin(Stdio::piped()).spawn().expect("sh");
        let mut quitter = Command::new("sh").args(["-c", "read x"]).stdin(Stdio::piped()).spawn().expect("sh");
        let mut bystander = Command::new("sleep").arg("1000").spawn().expect("sleep");
        let pid = |c: &std::process::Child| Pid::new(c.id().cast_signed()).unwrap();
        let (f, q, b) = (pid(&forker), pid(&quitter), pid(&bystander));
        wait_until("the shells to settle", || {
            procfs.process(f).is_some_and(|p| p.identity_settled())
                && procfs.process(q).is_some_and(|p| p.identity_settled())
        });
        let judged = procfs.snapshot().expect("snapshot");
        let me = Pid::new(std::process::id().cast_signed()).unwrap();
        let mut judged_marked = judged.clone();
        for p in [b, me] {
            judged_marked.get_mut(p).expect("read").comm = "as-judged".into();
        }
        // A member judged on a moved transport (its pipes' other ends held
        // by nobody then): whatever its children hold now is read again.
        let stale = crate::scan::process::Details {
            high_links: vec![crate::scan::process::HighLink {
                fd: 3,
                target: crate::scan::FdTarget("pipe:[1]".into()),
                access: Some(0),
                kin: false,
            }],
            read_tick: procfs.now_tick(),
            ..Default::default()
        };
        judged_marked.get_mut(f).expect("read").details = Some(Box::new(stale));
        // The bystander is young (started within the second): its details,
        // read by the same cycle, are kept all the same; not its stdin answer.
        let answered = crate::scan::process::Details {
            stdin: Some(crate::scan::process::StdinEnd::Open(crate::scan::process::Holder::Expected)),
            read_tick: procfs.now_tick(),
            ..Default::default()
        };
        judged_marked.get_mut(b).expect("read").details = Some(Box::new(answered));
        // The forker forks; the quitter exits.
        writeln!(forker.stdin.as_mut().unwrap()).unwrap();
        drop(quitter.stdin.take());
        quitter.wait().unwrap();
        wait_until("the forker's child", || procfs.children(f).is_some_and(|c| !c.is_empty()));
        let child = procfs.children(f).unwrap()[0];

        let fresh = procfs.recheck(judged_marked, [f, q]).unwrap_or_else(|_| panic!("children lists were there"));
        let c = fresh.get(child).expect("the child forked since is read");
        assert_eq!(c.ppid, Some(f));
        assert!(fresh.get(f).expect("member").details.is_none(), "a member's details are read again");
        assert!(fresh.get(q).is_none(), "the member that exited is gone");
        assert_eq!(fresh.get(b).expect("bystander").comm, "as-judged", "the rest is taken over");
        let kept = fresh.get(b).and_then(|p| p.details.as_deref()).expect("a young bystander's details are kept");
        assert_eq!(kept.stdin, None, "who can still write to its stdin is asked afresh");
        assert_ne!(fresh.get(me).expect("the chain above").comm, "as-judged", "the chain above is read again");

        // The forker's sleep first, while it is still our child's child.
        if procfs.children(f).is_some_and(|c| c.contains(&child)) {
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_raw(child.get()).expect("pid"),
                rustix::process::Signal::KILL,
            );
        }
        for c in [&mut forker, &mut bystander] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod thread_tests {
    use super::*;

    /// The pid counter hands out thread ids too, and `/proc/TID` answers
    /// for them though it lists none: a read by pid must not take a thread
    /// for a process.
    #[test]
    fn a_thread_read_by_its_id_is_no_process() {
        let procfs = ProcFs::new("/proc");
        crate::scan::test_support::with_parked_thread(|tid| {
            let me = Pid::new(std::process::id().cast_signed()).unwrap();
            assert_ne!(tid, me);
            assert!(std::fs::read(format!("/proc/{tid}/stat")).is_ok(), "/proc/TID answers");
            assert!(procfs.process(tid).is_none(), "a thread read by its id is no process");
            assert!(procfs.stat(tid).is_none());
            assert!(procfs.process(me).is_some() && procfs.stat(me).is_some(), "the group's leader is one");
        });
    }
}
