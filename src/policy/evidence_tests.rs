//! Verdicts that rest on evidence beyond ancestry: stdio links, service
//! units, pass-through launchers, PID 1 as adopter.

use super::tests::{World, stdio};
use super::*;

#[test]
fn adopted_server_without_a_stdio_link_is_detached_not_orphaned() {
    for (fd0, fd1) in [
        ("/dev/null", "/dev/null"),
        ("/dev/null", "/home/u/nohup.out"),
        ("/dev/pts/3 (deleted)", "/dev/pts/3 (deleted)"),
    ] {
        let mut w = World::new();
        stdio(w.add(300, 1, "/usr/local/bin/github-mcp-server stdio"), fd0, fd1);
        let (v, _, _, reason) = w.one();
        assert_eq!(v, Verdict::Detached, "{fd0} {fd1}: {reason}");
        assert!(reason.contains("detached on purpose") && reason.contains("github-mcp-server"), "{reason}");
    }
    // One server of the tree with a pipe is enough: a host started it.
    let mut w = World::new();
    w.add(300, 1, "npm exec @playwright/mcp@latest");
    stdio(w.add(301, 300, "node /x/node_modules/.bin/playwright-mcp"), "/dev/null", "socket:[77]");
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Orphan, "{reason}");
    assert!(reason.contains("stdio on a"), "{reason}");
}

#[test]
fn main_process_of_a_service_unit_is_protected_but_leftovers_in_it_are_not() {
    use crate::scan::Unit;
    let unit = |main| Some(Unit { name: "mcp-proxy.service".into(), main });
    for main in [Some(true), None] {
        let mut w = World::new();
        let p = w.add(300, 1, "/home/u/.local/bin/mcp-proxy --stdio -- uvx mcp-server-fetch");
        p.details.as_mut().unwrap().unit = unit(main);
        let (v, _, _, reason) = w.one();
        assert_eq!(v, Verdict::Protected, "{reason}");
        assert!(reason.contains("systemd unit mcp-proxy.service"), "{reason}");
    }
    // A server a crashed host left in its service's cgroup is younger than
    // the unit's main process: an orphan like any other.
    let mut w = World::new();
    w.add(300, 1, "mcp-server-fetch").details.as_mut().unwrap().unit = unit(Some(false));
    assert_eq!(w.one().0, Verdict::Orphan);
    // Scopes (terminals, apps) are where orphans live.
    let mut w = World::new();
    w.add(300, 1, "mcp-server-fetch").details.as_mut().unwrap().unit =
        Some(Unit { name: "vte-spawn-1.scope".into(), main: Some(true) });
    assert_eq!(w.one().0, Verdict::Orphan);
}

#[test]
fn a_launcher_with_other_children_owns_the_tree() {
    let mut w = World::new();
    w.add(300, 1, "/bin/bash /home/u/bin/start.sh");
    w.add(301, 300, "node /x/node_modules/.bin/mcp-server-filesystem /tmp");
    let (v, root, _, _) = w.one();
    assert_eq!((v, root), (Verdict::Orphan, 300), "a pass-through wrapper is walked through");
    w.add(302, 300, "tail -f /tmp/log");
    let (v, root, _, reason) = w.one();
    assert_eq!((v, root), (Verdict::Foreign, 301), "{reason}");
    assert!(reason.contains("start.sh"), "{reason}");
}

#[test]
fn pid_1_is_the_adopter_even_when_it_looks_like_a_launcher() {
    let mut w = World::new();
    w.procs[0].cmdline = "/bin/sh -c while sleep 1000; do :; done".into();
    w.procs[0].program = crate::program::Program::of_joined(&w.procs[0].cmdline);
    w.add(300, 1, "node /x/node_modules/.bin/mcp-server-memory");
    let (v, root, _, reason) = w.one();
    assert_eq!((v, root), (Verdict::Orphan, 300), "{reason}");
}
