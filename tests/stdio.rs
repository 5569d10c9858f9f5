//! The stdio fakeproc gives a fake process (`Spec::stdio_*`): what fd 0 and
//! fd 1 are connected to, as read in `/proc/PID/fd`, before and after its
//! parent dies.

mod common;

use std::time::Duration;

use common::{Sandbox, Spec, alive};

const CLAUDE: &[&str] = &["claude", "--resume"];
const PIPE_SERVER: &[&str] = &["node", "/srv/pipe-mcp/index.js"];
const SOCKET_SERVER: &[&str] = &["node", "/srv/socket-mcp/index.js"];
const NULL_SERVER: &[&str] = &["node", "/srv/null-mcp/index.js"];
const INHERIT_SERVER: &[&str] = &["node", "/srv/inherit-mcp/index.js"];

fn fd(pid: i32, n: u32) -> String {
    let link = format!("/proc/{pid}/fd/{n}");
    std::fs::read_link(&link).unwrap_or_else(|e| panic!("readlink {link}: {e}")).to_string_lossy().into_owned()
}

/// Every fd target of `pid` (its fd directory, read now).
fn all_fds(pid: i32) -> Vec<String> {
    let dir = format!("/proc/{pid}/fd");
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {dir}: {e}"))
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|t| t.to_string_lossy().into_owned())
        .collect()
}

fn is_kind(target: &str, kind: &str) -> bool {
    target.strip_prefix(kind).and_then(|r| r.strip_prefix(":[")).is_some_and(|r| r.ends_with(']'))
}

#[test]
fn servers_get_pipes_a_socketpair_or_dev_null() {
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE)
            .child(Spec::new(PIPE_SERVER))
            .child(Spec::new(SOCKET_SERVER).stdio_socket())
            .child(Spec::new(NULL_SERVER).stdio_null())
            .child(Spec::new(INHERIT_SERVER).stdio_inherit()),
    ]);
    let host = sb.pid_of("claude");
    let pipe = sb.pid_of(&PIPE_SERVER.join(" "));
    let socket = sb.pid_of(&SOCKET_SERVER.join(" "));
    let null = sb.pid_of(&NULL_SERVER.join(" "));
    let inherit = sb.pid_of(&INHERIT_SERVER.join(" "));
    let host_fds = all_fds(host);

    // Two pipes, not one: the host holds the other end of each.
    let (p0, p1) = (fd(pipe, 0), fd(pipe, 1));
    assert!(is_kind(&p0, "pipe") && is_kind(&p1, "pipe"), "pipe server: fd 0 {p0:?}, fd 1 {p1:?}");
    assert_ne!(p0, p1, "the pipe server's stdin and stdout should be two pipes");
    for p in [&p0, &p1] {
        assert!(host_fds.contains(p), "the host should hold the other end of {p}: {host_fds:?}");
    }

    // One socket for both; the host holds a socket too (the other end).
    let (s0, s1) = (fd(socket, 0), fd(socket, 1));
    assert!(is_kind(&s0, "socket"), "socket server: fd 0 {s0:?}");
    assert_eq!(s0, s1, "the socket server's fd 0 and fd 1 should be the same socket");
    assert!(
        host_fds.iter().any(|t| is_kind(t, "socket") && *t != s0),
        "the host should hold the other end of the socketpair: {host_fds:?}"
    );

    assert_eq!((fd(null, 0), fd(null, 1)), ("/dev/null".to_string(), "/dev/null".to_string()));

    assert_eq!(fd(inherit, 0), "/dev/null");
    assert_eq!(fd(inherit, 1), fd(host, 1), "an inherit server shares its parent's stdout");

    // The host's own stdio is the pipe pair the scope process made for it,
    // and the host's ends (what it holds beyond its stdio and what it
    // inherited, e.g. a jobserver pipe) leaked into none of its children but
    // the one each belongs to.
    assert!(is_kind(&fd(host, 0), "pipe") && is_kind(&fd(host, 1), "pipe"));
    let inherited = all_fds(sb.scope_pid());
    let host_stdio = [fd(host, 0), fd(host, 1), fd(host, 2)];
    let host_ends: Vec<&String> =
        host_fds.iter().filter(|t| !inherited.contains(t) && !host_stdio.contains(t)).collect();
    assert!(host_ends.len() >= 3, "two pipe ends and a socket: {host_ends:?}");
    for child in [pipe, socket, null, inherit] {
        let own = [fd(child, 0), fd(child, 1)];
        let theirs = all_fds(child);
        for t in theirs.iter().filter(|t| !own.contains(t)) {
            assert!(!host_ends.contains(&t), "{child} holds {t}, one of its parent's ends: {theirs:?}");
        }
    }

    // With the host gone, so are the far ends: the servers keep running.
    sb.kill_host(host);
    std::thread::sleep(Duration::from_millis(200));
    for p in [pipe, socket, null, inherit] {
        assert!(alive(p), "{p} died with its parent's ends of its stdio");
    }
    assert!(is_kind(&fd(pipe, 0), "pipe") && is_kind(&fd(socket, 0), "socket"));
}
