//! Leaks under live hosts: abandoned servers, stale hosts without a
//! terminal, duplicates, and which stdins the policy asks about.

use std::time::Duration;

use super::tests::{World, pid, playwright_under, stdio, tty};
use super::*;
use crate::ids::StartTime;
use crate::scan::{Holder, StdinEnd};
use crate::tree::Forest;

fn set_stdin(w: &mut World, p: i32, end: StdinEnd) {
    let proc_ = w.procs.iter_mut().find(|q| q.pid().get() == p).unwrap();
    proc_.details.as_mut().unwrap().stdin = Some(end);
}

const GONE: StdinEnd = StdinEnd::Gone("no process holds the write end of its stdin pipe");

/// claude (pid 100, in terminal `/dev/pts/1` unless `term` is None) under
/// `parent`, with playwright (root 200) and a second server (root 300).
fn host_with_two(parent: i32, term: Option<&str>) -> World {
    host_with_two_as(parent, term, "claude --resume")
}

/// [`host_with_two`], the host's command line `cmd`.
fn host_with_two_as(parent: i32, term: Option<&str>, cmd: &str) -> World {
    let mut w = World::new();
    let host = w.add(100, parent, cmd);
    if let Some(t) = term {
        tty(host, t);
    }
    playwright_under(&mut w, 100);
    w.add(300, 100, "uvx mcp-server-fetch");
    w
}

fn by_root(snap: &Snapshot, js: &[Judgement], root: i32) -> Judgement {
    js.iter().find(|j| snap.procs[j.root].pid().get() == root).cloned().unwrap()
}

#[test]
fn server_whose_stdin_has_no_writer_under_a_live_host_is_abandoned_alone() {
    for term in [Some("/dev/pts/1"), None] {
        let mut w = host_with_two(50, term);
        w.add(50, 1, "-bash");
        set_stdin(&mut w, 200, GONE);
        set_stdin(&mut w, 300, StdinEnd::Open(Holder::Expected));
        let (snap, js) = w.judge();
        let j = by_root(&snap, &js, 200);
        assert_eq!(j.verdict, Verdict::Abandoned, "{}", j.reason);
        assert!(j.reap && j.candidate);
        assert!(j.reason.starts_with("stdin closed by claude --resume (pid 100): no process holds"), "{}", j.reason);
        let members: Vec<i32> = j.members.iter().map(|&(m, _)| snap.procs[m].pid().get()).collect();
        assert_eq!(members, [200, 201, 202, 203], "the server's tree only, never the host");
        assert_eq!(by_root(&snap, &js, 300).verdict, Verdict::Live);
    }
    let mut w = host_with_two(1, Some("/dev/pts/1")).cfg("[reaper]\ngrace_secs = 0\nreap_abandoned = false\n");
    set_stdin(&mut w, 200, GONE);
    let (snap, js) = w.judge();
    let j = by_root(&snap, &js, 200);
    assert_eq!((j.verdict, j.reap, j.candidate), (Verdict::Abandoned, false, false));
    assert!(j.reason.ends_with("kept because reap_abandoned = false"), "{}", j.reason);
}

#[test]
fn abandoned_waits_for_the_grace_and_says_since_when() {
    let mut w = host_with_two(1, Some("/dev/pts/1")).cfg("[reaper]\ngrace_secs = 60\n");
    set_stdin(&mut w, 200, GONE);
    let (snap, js) = w.judge();
    let j = by_root(&snap, &js, 200);
    assert_eq!(j.verdict, Verdict::Young, "{}", j.reason);
    assert!(j.reason.contains("stdin closed by") && j.reason.contains("60s left"), "{}", j.reason);
    let root = Identity { pid: pid(200), start_time: StartTime(1400) };
    w.book.insert(root, w.now - Duration::from_secs(180));
    let (snap, js) = w.judge();
    let j = by_root(&snap, &js, 200);
    assert_eq!(j.verdict, Verdict::Abandoned);
    assert!(j.reason.ends_with("first seen 180s ago"), "{}", j.reason);
}

#[test]
fn no_evidence_or_a_live_writer_keeps_the_tree_live() {
    for end in [
        None,
        Some(StdinEnd::Unknown("socket diagnostics unavailable")),
        Some(StdinEnd::Open(Holder::Expected)),
        Some(StdinEnd::Open(Holder::NotAsked)),
        Some(StdinEnd::Open(Holder::Unknown)),
    ] {
        let mut w = host_with_two(1, Some("/dev/pts/1"));
        if let Some(e) = end.clone() {
            set_stdin(&mut w, 200, e);
        }
        let (snap, js) = w.judge();
        let j = by_root(&snap, &js, 200);
        assert_eq!(j.verdict, Verdict::Live, "{end:?}: {}", j.reason);
        assert!(!j.candidate);
        assert!(!j.reason.contains("leaked"), "{end:?}: {}", j.reason);
    }
}

#[test]
fn write_end_held_by_another_process_is_reported_not_reaped() {
    let mut w = host_with_two(1, Some("/dev/pts/1"));
    w.add(400, 100, "stdin-keeper");
    set_stdin(&mut w, 200, StdinEnd::Open(Holder::Other(Some(pid(400)))));
    set_stdin(&mut w, 300, StdinEnd::Open(Holder::Other(None)));
    let (snap, js) = w.judge();
    let j = by_root(&snap, &js, 200);
    assert_eq!(j.verdict, Verdict::Live);
    assert!(
        j.reason.contains("no longer held by claude --resume (pid 100), but by stdin-keeper (pid 400)"),
        "{}",
        j.reason
    );
    assert!(by_root(&snap, &js, 300).reason.contains("a process outside its host's tree"));
}

#[test]
fn a_server_on_its_hosts_own_stdin_is_no_link_of_the_hosts() {
    let mut w = host_with_two(1, None);
    // The host passes its own stdin (a pipeline that ended) to the server.
    stdio(w.procs.iter_mut().find(|p| p.pid().get() == 100).unwrap(), "pipe:[9200]", "pipe:[1]");
    set_stdin(&mut w, 200, GONE);
    let (snap, js) = w.judge();
    assert_eq!(by_root(&snap, &js, 200).verdict, Verdict::Live);
    let forest = Forest::build(&snap, &w.cfg.matcher, None);
    assert!(questions(&snap, &forest, &js).iter().all(|q| q.proc != snap.index_of(pid(200)).unwrap()));
}

#[test]
fn adopted_host_without_terminal_nobody_can_write_to_is_stale_with_its_servers() {
    const SDK: &str = "claude --output-format stream-json --verbose --input-format stream-json";
    for adopter in [1, 900] {
        let mut w = host_with_two_as(adopter, None, SDK);
        if adopter == 900 {
            w.add(900, 1, "/usr/lib/systemd/systemd --user");
        }
        set_stdin(&mut w, 100, StdinEnd::Gone("the peer of its stdin socket closed it"));
        let (snap, js) = w.judge();
        assert_eq!(js.len(), 1, "one tree: the host's");
        let j = &js[0];
        assert_eq!(j.verdict, Verdict::Stale, "{}", j.reason);
        assert!(j.reap, "{}", j.reason);
        assert_eq!(snap.procs[j.root].pid().get(), 100);
        assert!(
            j.reason.contains("has no terminal, was adopted by") && j.reason.contains("socket closed"),
            "{}",
            j.reason
        );
    }
    let mut w = host_with_two_as(1, None, SDK).cfg("[reaper]\ngrace_secs = 0\nreap_stale_hosts = false\n");
    set_stdin(&mut w, 100, GONE);
    let (_, js) = w.judge();
    assert!(js.iter().all(|j| j.verdict == Verdict::Stale && !j.reap && !j.candidate));
    // A terminal UI by its argv, on a pipe: no terminal UI (issue 32).
    let mut w = host_with_two(1, None);
    set_stdin(&mut w, 100, GONE);
    let (_, js) = w.judge();
    assert!(js.iter().all(|j| j.verdict == Verdict::Live), "{js:?}");
    let suspect = js[0].suspect.as_deref().unwrap_or_default();
    assert!(suspect.contains("reads as a terminal UI, but its stdin is a pipe"), "{suspect}");
    // Listening on a socket, or not known to: another way in.
    for (l, says) in [
        (crate::scan::Listening::Yes("TCP port 4500".into()), "listens on TCP port 4500"),
        (crate::scan::Listening::Unknown("x"), "whether claude"),
        (crate::scan::Listening::Connected("a TCP connection to port 443".into()), "holds a TCP connection"),
    ] {
        let mut w = host_with_two_as(1, None, SDK);
        set_stdin(&mut w, 100, GONE);
        w.procs.iter_mut().find(|q| q.pid().get() == 100).unwrap().details.as_mut().unwrap().listening = Some(l);
        let (_, js) = w.judge();
        assert!(js.iter().all(|j| j.verdict == Verdict::Live), "{js:?}");
        assert!(js[0].suspect.as_deref().unwrap_or_default().contains(says), "{js:?}");
    }
}

#[test]
fn hosts_in_use_or_on_purpose_in_the_background_are_not_stale() {
    // (command, stdin, terminal, stdin end, a `claude daemon` running)
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, Option<StdinEnd>, bool);
    let cases: &[Case<'_>] = &[
        ("claude --resume", "/dev/null", None, None, false), // a desktop app's child
        ("claude --resume", "pipe:[5]", Some("/dev/pts/1"), Some(GONE), false), // a live terminal
        ("claude --resume", "pipe:[5]", None, Some(StdinEnd::Open(Holder::NotAsked)), false), // a live pipeline
        ("claude --resume", "pipe:[5]", None, Some(StdinEnd::Unknown("?")), false),
        ("claude daemon --port 0", "pipe:[5]", None, Some(GONE), false),
        ("claude -p --output-format json", "pipe:[5]", None, Some(GONE), false), // read its prompt to EOF
        ("claude --print", "pipe:[5]", None, Some(GONE), false),
        ("codex exec fix the tests", "pipe:[5]", None, Some(GONE), false),
        ("/home/u/.local/share/claude/versions/2.1.197 --bg-pty-host /tmp/s 80 24", "pipe:[5]", None, Some(GONE), true),
    ];
    for (cmd, fd0, term, end, daemon) in cases {
        let mut w = World::new();
        let host = w.add(100, 1, cmd);
        stdio(host, fd0, "pipe:[6]");
        if let Some(t) = term {
            tty(host, t);
        }
        if let Some(e) = end.clone() {
            host.details.as_mut().unwrap().stdin = Some(e);
        }
        if *daemon {
            w.add(90, 1, "/home/u/.local/share/claude/versions/2.1.197 daemon");
        }
        playwright_under(&mut w, 100);
        let (v, _, _, reason) = w.one();
        assert_eq!(v, Verdict::Live, "{cmd} {fd0} {term:?} {end:?}: {reason}");
    }
    // The background pty host whose daemon is gone: its interface is the
    // pty it serves over a socket, not its stdin, so a stdin without writer
    // is no proof nobody uses it: kept, and named a suspect.
    let mut w = World::new();
    let host = w.add(100, 1, "/home/u/.local/share/claude/versions/2.1.197 --bg-pty-host /tmp/s 80 24");
    host.details.as_mut().unwrap().stdin = Some(GONE);
    playwright_under(&mut w, 100);
    let (_, js) = w.judge();
    assert_eq!(js[0].verdict, Verdict::Live, "{}", js[0].reason);
    let suspect = js[0].suspect.as_deref().unwrap_or_default();
    assert!(
        suspect.contains("has no terminal, was adopted by") && suspect.contains("not in a mode known"),
        "{suspect}"
    );
}

#[test]
fn questions_ask_for_live_trees_roots_and_adopted_hosts_without_terminal() {
    let mut w = host_with_two(1, None);
    w.add(500, 1, "uvx mcp-server-time"); // an orphan: no question
    let (snap, js) = w.judge();
    let forest = Forest::build(&snap, &w.cfg.matcher, None);
    let qs = questions(&snap, &forest, &js);
    let ix = |p: i32| snap.index_of(pid(p)).unwrap();
    let mut asked: Vec<usize> = qs.iter().map(|q| q.proc).collect();
    asked.sort_unstable();
    assert_eq!(asked, [ix(100), ix(200), ix(300)], "the host (adopted, no terminal) and its trees' roots: {qs:?}");
    let q = qs.iter().find(|q| q.proc == ix(200)).unwrap();
    assert_eq!(q.expected, Some(ix(100)), "the owner is expected to hold it");
    assert_eq!(q.search[0], ix(100));
    assert!(!q.search.contains(&ix(201)), "never the tree's own members");
    assert!(q.search.contains(&ix(300)), "the host's other children");
    // Answered: asked no more.
    set_stdin(&mut w, 100, StdinEnd::Open(Holder::NotAsked));
    set_stdin(&mut w, 200, StdinEnd::Open(Holder::Expected));
    set_stdin(&mut w, 300, StdinEnd::Open(Holder::Expected));
    let (snap, js) = w.judge();
    let forest = Forest::build(&snap, &w.cfg.matcher, None);
    assert!(questions(&snap, &forest, &js).is_empty());
    // A host in a terminal, or on /dev/null, is not asked about.
    let w = host_with_two(1, Some("/dev/pts/1"));
    let (snap, js) = w.judge();
    let forest = Forest::build(&snap, &w.cfg.matcher, None);
    assert!(questions(&snap, &forest, &js).iter().all(|q| q.proc != snap.index_of(pid(100)).unwrap()));
}

#[test]
fn the_same_server_twice_under_one_host_is_a_duplicate() {
    let mut w = World::new();
    tty(w.add(100, 1, "claude --resume"), "/dev/pts/1");
    w.add(200, 100, "uvx mcp-server-fetch");
    w.add(201, 100, "uvx mcp-server-fetch");
    w.add(202, 100, "uvx mcp-server-fetch --proxy x"); // other arguments
    w.add(203, 100, "uvx mcp-server-time");
    tty(w.add(101, 1, "claude"), "/dev/pts/2");
    w.add(300, 101, "uvx mcp-server-fetch"); // another host
    let (snap, js) = w.judge();
    let d = duplicates(&snap, &js);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(snap.procs[d[0].host].pid().get(), 100);
    assert_eq!(d[0].command, "mcp-server-fetch");
    let roots: Vec<i32> = d[0].roots.iter().map(|&r| snap.procs[r].pid().get()).collect();
    assert_eq!(roots, [200, 201]);
}
