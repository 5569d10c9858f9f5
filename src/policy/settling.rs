//! A live host's newest processes are not inspected in their first second
//! (issue 37). Their tree is live whatever their fds say: it can end only
//! with its host (whose exit is watched, and whose trees are then read
//! whole) or when the host lets it go (abandoned, which a later scan sees
//! as well). Their details would be read again anyway while they settle
//! ([`crate::scan::DETAILS_SETTLED_SECS`], the same span), and a
//! host that starts a server per request (the load bench's churn) had each
//! one's `status`, links, cgroup and stdin question read at every scan of
//! its short life. Waiting can only delay a verdict of abandonment by a
//! scan, never make one: a tree with an unread member is never reaped
//! (`guard.rs`).

use std::collections::HashSet;
use std::fmt::Write as _;

use super::{Judgement, Verdict};
use crate::scan::Snapshot;

/// Members of live hosts' trees whose details need not be loaded now:
/// young (see [`young`]), and in no tree judged otherwise.
pub fn unread(snap: &Snapshot, judgements: &[Judgement]) -> HashSet<usize> {
    let mut out: HashSet<usize> = judgements
        .iter()
        .filter(|j| under_live_host(j))
        .flat_map(|j| j.members.iter().map(|&(m, _)| m))
        .filter(|&m| young(snap, m))
        .collect();
    if !out.is_empty() {
        for j in judgements.iter().filter(|j| !under_live_host(j)) {
            for (m, _) in &j.members {
                out.remove(m);
            }
        }
    }
    out
}

/// Says, in the reason of each live tree judged without some of its
/// members' details, that they are read once settled.
pub fn note(snap: &Snapshot, judgements: &mut [Judgement]) {
    for j in judgements.iter_mut().filter(|j| under_live_host(j)) {
        let n = j.members.iter().filter(|&&(m, _)| young(snap, m)).count();
        if n > 0 {
            let _ = write!(j.reason, "; {n} member(s) started under a second ago, inspected once settled");
        }
    }
}

/// A tree kept because a host above it lives (`judge_under_host`).
fn under_live_host(j: &Judgement) -> bool {
    j.verdict == Verdict::Live && j.host.is_some() && !j.candidate
}

/// Not read yet, and started under [`crate::scan::DETAILS_SETTLED_SECS`]
/// before the scan. A snapshot that does not know the time (a fixture
/// without `uptime`) has no young process.
fn young(snap: &Snapshot, m: usize) -> bool {
    let p = &snap.procs[m];
    let settled = crate::scan::DETAILS_SETTLED_SECS as f64;
    snap.ctx.uptime_secs > 0.0 && !p.kernel_thread && p.details.is_none() && snap.age_secs(p) < settled
}

#[cfg(test)]
mod tests {
    use super::super::tests::{World, playwright_under, tty};
    use super::*;
    use crate::ids::StartTime;

    /// Started half a second before the scan, not read yet.
    fn just_started(w: &mut World, p: i32) {
        let now_tick = (w.ctx.uptime_secs * w.ctx.clk_tck as f64) as u64;
        let q = w.procs.iter_mut().find(|q| q.pid().get() == p).unwrap();
        q.id.start_time = StartTime(now_tick - w.ctx.clk_tck / 2);
        q.details = None;
    }

    fn pids(w: &World, set: &HashSet<usize>) -> Vec<i32> {
        let snap = Snapshot::from_processes(w.procs.clone(), w.ctx.clone());
        let mut v: Vec<i32> = set.iter().map(|&i| snap.procs[i].pid().get()).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn only_a_live_hosts_young_unread_members_wait() {
        let mut w = World::new();
        w.add(50, 1, "-bash");
        tty(w.add(100, 50, "claude --resume"), "/dev/pts/1");
        playwright_under(&mut w, 100);
        // A second server of the same host, settled and read.
        w.add(300, 100, "uvx mcp-server-fetch");
        // An orphan's young members: its verdict needs them.
        w.add(400, 1, "npm exec @playwright/mcp@latest");
        w.add(401, 400, "node /home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp");
        for p in [201, 202, 401] {
            just_started(&mut w, p);
        }
        let (snap, mut js) = w.judge();
        assert_eq!(pids(&w, &unread(&snap, &js)), [201, 202]);
        note(&snap, &mut js);
        let live = js.iter().find(|j| snap.procs[j.root].pid().get() == 200).unwrap();
        assert_eq!(live.verdict, Verdict::Live, "{}", live.reason);
        assert!(
            live.reason.ends_with("; 2 member(s) started under a second ago, inspected once settled"),
            "{}",
            live.reason
        );
        let other = js.iter().find(|j| snap.procs[j.root].pid().get() == 300).unwrap();
        assert!(!other.reason.contains("inspected once settled"), "{}", other.reason);
        let orphan = js.iter().find(|j| snap.procs[j.root].pid().get() == 400).unwrap();
        // Kept for now (a member not read is never signalled), and read.
        assert!(orphan.verdict != Verdict::Live && !orphan.reason.contains("settled"), "{}", orphan.reason);

        // Settled a second later: read like any other.
        w.ctx.uptime_secs += 1.0;
        let (snap, js) = w.judge();
        assert!(unread(&snap, &js).is_empty());
        // A snapshot that does not know the time: nothing waits.
        w.ctx.uptime_secs = 0.0;
        let (snap, js) = w.judge();
        assert!(unread(&snap, &js).is_empty());
    }

    #[test]
    fn a_stale_hosts_young_members_are_read() {
        let mut w = World::new();
        // Adopted, its terminal gone: stale (reap_stale_hosts is on by default).
        tty(w.add(100, 1, "claude --resume"), "/dev/pts/1 (deleted)");
        playwright_under(&mut w, 100);
        just_started(&mut w, 201);
        let (snap, js) = w.judge();
        assert!(
            js.iter().any(|j| j.verdict != Verdict::Live),
            "{:?}",
            js.iter().map(|j| &j.reason).collect::<Vec<_>>()
        );
        assert!(unread(&snap, &js).is_empty());
    }
}
