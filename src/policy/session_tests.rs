//! Run sessions (`reaperctl run`) as the exact attribution of a tree, and
//! grace waived for the trees of a host that ended its session.

use super::Verdict;
use super::tests::{World, playwright_under, stdio};
use crate::ids::{Identity, Pid, StartTime};

const WRAPPER: &str = "/usr/bin/reaperctl run --grace 3 -- claude";

#[test]
fn a_servers_tree_under_a_live_host_in_a_session_is_live() {
    let mut w = World::new();
    w.add(50, 1, WRAPPER);
    w.add(100, 50, "claude");
    playwright_under(&mut w, 100);
    assert_eq!(w.one().0, Verdict::Live);
}

#[test]
fn a_leftover_under_the_wrapper_is_an_orphan_of_the_session_even_detached() {
    let mut w = World::new();
    w.add(50, 1, WRAPPER);
    playwright_under(&mut w, 50);
    for p in w.procs.iter_mut().filter(|p| p.pid().get() >= 200) {
        stdio(p, "/dev/null", "/dev/null");
    }
    let (v, root, _, reason) = w.one();
    assert_eq!((v, root), (Verdict::Orphan, 200));
    assert!(reason.contains("`reaperctl run` session of pid 50"), "{reason}");
    // The same tree adopted by PID 1 with its stdio on /dev/null is detached.
    w.procs.retain(|p| p.pid() != Pid::new(50).unwrap());
    w.procs.iter_mut().find(|p| p.pid() == Pid::new(200).unwrap()).unwrap().ppid = Pid::new(1);
    assert_eq!(w.one().0, Verdict::Detached);
}

#[test]
fn a_leftover_below_a_shell_below_the_wrapper_is_the_sessions_too() {
    let mut w = World::new();
    w.add(50, 1, WRAPPER);
    w.add(60, 50, "bash");
    playwright_under(&mut w, 60);
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Orphan, "{reason}");
}

#[test]
fn a_leftover_in_a_session_cgroup_whose_wrapper_is_gone_is_the_sessions() {
    let mut w = World::new();
    playwright_under(&mut w, 1);
    for p in &mut w.procs {
        if p.pid().get() >= 200 {
            stdio(p, "/dev/null", "/dev/null");
            p.details.as_mut().unwrap().run_session = Some(77);
        }
    }
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Orphan, "{reason}");
    assert!(reason.contains("mcp-reaper-run-77"), "{reason}");
}

#[test]
fn a_waived_tree_skips_its_grace_and_says_why() {
    let mut w = World::new().cfg("[reaper]\ngrace_secs = 600\n");
    playwright_under(&mut w, 1);
    assert_eq!(w.one().0, Verdict::Young);
    let root = Identity { pid: Pid::new(200).unwrap(), start_time: StartTime(1400) };
    w.book.waive(root, "its host claude (pid 100) ended its session".into());
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Orphan);
    assert!(reason.contains("no grace: its host claude (pid 100) ended its session"), "{reason}");
}
