//! The never-touch rules: the reaper and its ancestors, other PID
//! namespaces, other users and low uids, what cannot be inspected, kernel
//! threads and PID 1.

use super::tests::{NS, World, pid, playwright_under};
use super::*;
use crate::ids::Uid;
use crate::scan::{Details, FdTarget};

#[test]
fn the_reaper_and_its_ancestors_are_never_targets() {
    let mut w = World::new();
    w.add(200, 1, "npm exec some-wrapper");
    w.add(201, 200, "node /x/.bin/some-mcp");
    w.add(202, 201, "mcp-reaperd --once");
    w.ctx.self_pid = Some(pid(202));
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Protected);
    assert!(reason.contains("mcp-reaper itself or one of its ancestors"), "{reason}");
}

#[test]
fn other_pid_namespace_is_out_of_scope() {
    let mut w = World::new();
    playwright_under(&mut w, 1);
    w.procs.last_mut().unwrap().details.as_mut().unwrap().pidns = Some(NS + 1);
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Protected);
    assert!(reason.contains("another PID namespace"), "{reason}");
}

#[test]
fn nspid_depth_decides_when_the_namespace_link_is_unreadable() {
    let mut w = World::new();
    w.add(300, 1, "mcp-remote x");
    let d = w.procs.last_mut().unwrap().details.as_mut().unwrap();
    d.pidns = None;
    d.nspid_depth = Some(2);
    assert_eq!(w.one().0, Verdict::Protected);
    w.procs.last_mut().unwrap().details.as_mut().unwrap().nspid_depth = Some(1);
    assert_eq!(w.one().0, Verdict::Orphan);
}

#[test]
fn uids_below_min_uid_are_never_targets() {
    let mut w = World::new();
    w.add(300, 1, "mcp-remote x").details.as_mut().unwrap().uid = Some(Uid(0));
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Protected);
    assert!(reason.contains("below min_uid 1000"), "{reason}");
}

#[test]
fn a_non_root_reaper_only_targets_its_own_uid() {
    let mut w = World::new();
    w.ctx.self_uid = Some(Uid(1001));
    w.add(300, 1, "mcp-remote x");
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Protected);
    assert!(reason.contains("only reaps its own"), "{reason}");
    w.ctx.self_uid = Some(Uid(1000));
    assert_eq!(w.one().0, Verdict::Orphan);
}

#[test]
fn uninspectable_members_are_not_touched() {
    let mut w = World::new();
    w.add(300, 1, "mcp-remote x").details = None;
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Protected, "{reason}");
    w.procs.last_mut().unwrap().details =
        Some(Box::new(Details { pidns: Some(NS), uid: Some(Uid(1000)), nspid_depth: Some(1), ..Details::default() }));
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Protected, "no stdio evidence, no reaping");
    assert!(reason.contains("cannot read the stdio"), "{reason}");
    let pipe = Some(FdTarget("pipe:[1]".into()));
    w.procs.last_mut().unwrap().details =
        Some(Box::new(Details { pidns: Some(NS), fds: [pipe.clone(), pipe, None], ..Details::default() }));
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Protected);
    assert!(reason.contains("which user"), "{reason}");
}

#[test]
fn kernel_threads_never_form_or_join_trees() {
    let mut w = World::new();
    w.add(2, 0, "");
    let k = w.add(3, 2, "");
    k.kernel_thread = true;
    k.comm = "mcp-server-x".into();
    assert!(w.judge().1.is_empty());
}

#[test]
fn pid1_is_never_a_member() {
    // A server configured to match init's command line still can't make PID 1 a target.
    let w = World::new().cfg("[reaper]\ngrace_secs = 0\n[patterns]\nservers = ['^/sbin/init']\n");
    let (snap, js) = w.judge();
    assert!(
        js.iter().all(|j| !j.reap),
        "{:?}",
        js.iter().map(|j| (&j.reason, snap.procs[j.root].pid())).collect::<Vec<_>>()
    );
}
