//! Run sessions (`reaperctl run`) as the exact attribution of a tree, and
//! grace waived for the trees of a host that ended its session.

use super::Verdict;
use super::tests::{World, playwright_under, stdio};
use crate::ids::{Identity, Pid, StartTime};

const WRAPPER: &str = "/usr/bin/reaperctl run --grace 3 -- claude";

/// A wrapper (pid 50) that shows `host` as its host (0: gone, `None`: unreadable).
fn wrapper(w: &mut World, host: Option<i32>) {
    w.add(50, 1, WRAPPER).details.as_mut().unwrap().run_host = host;
}

fn detach_all(w: &mut World) {
    for p in w.procs.iter_mut().filter(|p| p.pid().get() >= 200) {
        stdio(p, "/dev/null", "/dev/null");
    }
}

#[test]
fn a_servers_tree_under_a_live_host_in_a_session_is_live() {
    let mut w = World::new();
    wrapper(&mut w, Some(100));
    w.add(100, 50, "claude");
    playwright_under(&mut w, 100);
    assert_eq!(w.one().0, Verdict::Live);
}

#[test]
fn a_leftover_under_the_wrapper_is_an_orphan_of_the_session_even_detached() {
    let mut w = World::new();
    wrapper(&mut w, Some(0));
    playwright_under(&mut w, 50);
    detach_all(&mut w);
    let (v, root, _, reason) = w.one();
    assert_eq!((v, root), (Verdict::Orphan, 200));
    assert!(reason.contains("`reaperctl run` session of pid 50 after its host exited"), "{reason}");
    // The same tree adopted by PID 1 is detached.
    w.procs.retain(|p| p.pid() != Pid::new(50).unwrap());
    w.procs.iter_mut().find(|p| p.pid() == Pid::new(200).unwrap()).unwrap().ppid = Pid::new(1);
    assert_eq!(w.one().0, Verdict::Detached);
}

#[test]
fn a_server_the_wrapper_runs_itself_is_its_host_and_kept() {
    let mut w = World::new();
    wrapper(&mut w, Some(200));
    playwright_under(&mut w, 50);
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Live, "{reason}");
    assert!(reason.contains("is the host `reaperctl run` (pid 50) runs"), "{reason}");
}

#[test]
fn a_tree_below_the_program_the_wrapper_runs_is_not_a_leftover() {
    // `reaperctl run -- bash`: bash is no known host, but it is alive.
    let mut w = World::new();
    wrapper(&mut w, Some(60));
    w.add(60, 50, "bash");
    playwright_under(&mut w, 60);
    assert_eq!(w.one().0, Verdict::Foreign);
    // Once bash is gone (its tree re-parented to the wrapper): a leftover.
    let mut w = World::new();
    wrapper(&mut w, Some(0));
    w.add(60, 50, "bash");
    playwright_under(&mut w, 60);
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Orphan, "{reason}");
}

#[test]
fn a_tree_left_while_the_host_lives_on_is_a_leftover_too() {
    let mut w = World::new();
    wrapper(&mut w, Some(100));
    w.add(100, 50, "claude");
    playwright_under(&mut w, 50);
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Orphan, "{reason}");
    assert!(reason.contains("its host, pid 100, lives on"), "{reason}");
}

#[test]
fn a_wrapper_whose_host_cannot_be_read_proves_nothing() {
    let mut w = World::new();
    wrapper(&mut w, None);
    playwright_under(&mut w, 50);
    detach_all(&mut w);
    assert_eq!(w.one().0, Verdict::Detached);
}

#[test]
fn a_session_cgroup_alone_is_a_note_not_a_proof() {
    let mut w = World::new();
    playwright_under(&mut w, 1);
    for p in &mut w.procs {
        if p.pid().get() >= 200 {
            p.details.as_mut().unwrap().run_session = Some(77);
        }
    }
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Orphan, "{reason}");
    assert!(reason.contains("started in the `reaperctl run` session cgroup mcp-reaper-run-77"), "{reason}");
    detach_all(&mut w);
    assert_eq!(w.one().0, Verdict::Detached);
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
