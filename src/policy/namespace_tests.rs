//! Other PID namespaces (containers): never touched by default; with
//! `reap_other_pid_namespaces`, judged on their own terms, their PID 1 being
//! their adopter, for the children it did not start itself.

use super::tests::{NS, World, pid};
use super::*;
use crate::scan::ProcState;

const ON: &str = "[reaper]\ngrace_secs = 0\nreap_other_pid_namespaces = true\n";
const CONTAINER: &str = "docker 0123456789ab";

/// Puts process `p` in the container's namespace as pid `inner` there.
fn inside(w: &mut World, p: i32, inner: u32) {
    let proc = w.procs.iter_mut().find(|q| q.pid() == pid(p)).unwrap();
    let d = proc.details.as_mut().unwrap();
    d.pidns = Some(NS + 7);
    d.nspid_depth = Some(2);
    d.nspid_inner = Some(inner);
    d.container = Some(CONTAINER.into());
}

/// A devcontainer: containerd-shim → `sleep infinity` (PID 1 inside), and
/// a server tree PID 1 adopted from a `docker exec` session (sid 605).
fn devcontainer(init: &str) -> World {
    let mut w = World::new();
    w.add(500, 1, "/usr/bin/containerd-shim-runc-v2 -namespace moby -id 0123456789ab");
    w.add(600, 500, init);
    inside(&mut w, 600, 1);
    for (p, ppid, cmd) in [
        (610, 600, "npm exec @playwright/mcp@latest"),
        (611, 610, "node /home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"),
    ] {
        w.add(p, ppid, cmd).sid = Some(pid(605));
        inside(&mut w, p, p.cast_unsigned() - 600);
    }
    w
}

#[test]
fn a_container_is_never_touched_by_default_and_the_reason_says_how_to_change_that() {
    let w = devcontainer("sleep infinity");
    let (v, root, members, reason) = w.one();
    assert_eq!((v, root, members), (Verdict::Protected, 610, vec![610, 611]), "{reason}");
    assert!(
        reason.contains(
            "adopted by sleep infinity (pid 600), PID 1 of its PID namespace (container docker 0123456789ab)"
        ),
        "{reason}"
    );
    assert!(
        reason.contains("another PID namespace (container docker 0123456789ab); reap_other_pid_namespaces = false"),
        "{reason}"
    );
}

#[test]
fn with_the_setting_an_orphan_of_a_container_is_reaped_and_its_pid_1_is_not() {
    for init in [
        "sleep infinity",
        "/sbin/docker-init -- sleep infinity",
        "/bin/sh -c while sleep 1000; do :; done",
        "tini -- sleep infinity",
    ] {
        let w = devcontainer(init).cfg(ON);
        let (v, root, members, reason) = w.one();
        assert_eq!((v, root, &members), (Verdict::Orphan, 610, &vec![610, 611]), "{init}: {reason}");
        assert!(reason.contains("PID 1 of its PID namespace (container docker 0123456789ab)"), "{reason}");
    }
}

#[test]
fn what_pid_1_started_in_its_own_session_is_the_containers_command() {
    let mut w = devcontainer("/sbin/docker-init -- github-mcp-server stdio").cfg(ON);
    for p in &mut w.procs {
        if p.pid() == pid(610) || p.pid() == pid(611) {
            p.sid = Some(pid(600));
        }
    }
    w.procs.iter_mut().find(|p| p.pid() == pid(600)).unwrap().sid = Some(pid(600));
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Foreign, "{reason}");
    assert!(reason.contains("in its own session: the namespace's own command"), "{reason}");
}

#[test]
fn a_pid_1_that_is_itself_a_server_is_kept() {
    let mut w = World::new().cfg(ON);
    w.add(500, 1, "/usr/bin/containerd-shim-runc-v2 -namespace moby -id 0123456789ab");
    w.add(600, 500, "/usr/local/bin/github-mcp-server stdio");
    inside(&mut w, 600, 1);
    w.add(601, 600, "/usr/local/bin/github-mcp-server helper").sid = Some(pid(605));
    inside(&mut w, 601, 2);
    let (v, root, _, reason) = w.one();
    assert_eq!(root, 600, "{reason}");
    assert_ne!(v, Verdict::Orphan, "{reason}");
    // Its docker client lives outside: the tree is owned by the shim.
    assert!(!w.judge().1[0].reap, "{reason}");
}

#[test]
fn a_pid_1_that_has_exited_leaves_its_namespace_to_the_kernel() {
    let mut w = devcontainer("sleep infinity").cfg(ON);
    w.procs.iter_mut().find(|p| p.pid() == pid(600)).unwrap().state = ProcState(b'Z');
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Foreign, "{reason}");
    assert!(reason.contains("has exited: the kernel ends the rest of its namespace"), "{reason}");
}

#[test]
fn a_namespace_that_vanished_mid_scan_is_not_judged_an_orphan() {
    // PID 1 of the container could not be read (gone between the reads).
    let mut w = devcontainer("sleep infinity").cfg(ON);
    w.procs.iter_mut().find(|p| p.pid() == pid(600)).unwrap().details = None;
    let (v, _, _, reason) = w.one();
    assert!(matches!(v, Verdict::Foreign | Verdict::Protected), "{v}: {reason}");
}

#[test]
fn a_tree_must_lie_in_one_namespace() {
    let mut w = devcontainer("sleep infinity").cfg(ON);
    w.procs.iter_mut().find(|p| p.pid() == pid(611)).unwrap().details.as_mut().unwrap().pidns = Some(NS + 8);
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Protected, "{reason}");
    assert!(reason.contains("a PID namespace other than its tree's root"), "{reason}");
}

#[test]
fn a_live_host_inside_a_container_keeps_its_servers() {
    let mut w = devcontainer("sleep infinity").cfg(ON);
    // `docker exec` → bash → claude: parented by the shim, outside the ns.
    w.add(620, 500, "bash").sid = Some(pid(620));
    inside(&mut w, 620, 30);
    w.add(621, 620, "claude").sid = Some(pid(620));
    inside(&mut w, 621, 31);
    for p in &mut w.procs {
        if p.pid() == pid(610) {
            p.ppid = Some(pid(621));
        }
    }
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Live, "{reason}");
}
