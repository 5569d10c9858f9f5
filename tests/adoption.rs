//! Issue 33: orphans wherever the kernel puts them. Below the sandbox's
//! scope, a child subreaper of its own — one no list knows (`relayd`), one
//! known by its identity (`conmon`) — stands for WSL2's `/init` relay,
//! toolbox's conmon or any program that set `PR_SET_CHILD_SUBREAPER`. A
//! host under it is killed (SIGKILL): its servers are re-parented to that
//! subreaper, not to PID 1, and are reaped; the subreaper, the host's
//! terminal and the bystanders under the same subreaper are kept.

mod common;

use std::time::Duration;

use common::{
    Daemon, Launch, Sandbox, Spec, alive, in_any_tree, once_json, ppid_of, s, scan_json, sigkill, tree_holding,
    wait_until,
};

const SERVER: &[&str] = &["npx", "-y", "@playwright/mcp@latest"];

/// Beside the host's terminal under the same subreaper: a login shell, a
/// tmux server and an ssh-agent, each in a session of its own, and a
/// language server whose editor exited (it kept the editor's session).
fn bystanders() -> Vec<Spec> {
    vec![
        Spec::new(&["-bash"]).stdio_pty(),
        Spec::new(&["tmux", "new", "-d", "-s", "mcp-work"]).setsid().stdio_null(),
        Spec::new(&["ssh-agent", "-s"]).setsid().stdio_null(),
        // Its editor (`nvim`, which started it) exits at once: adopted, in
        // the editor's session, on pipes nobody holds.
        Spec::new(&["nvim", "main.go"]).exit_after_spawn().child(Spec::new(&["gopls", "serve"])),
    ]
}

/// The sandbox: `subreaper` → `xterm` → claude on a terminal of its own (a
/// session leader, as in a terminal) → `server` on a socketpair; and the
/// bystanders.
fn world(subreaper: &str, server: Spec) -> Sandbox {
    world_of(subreaper, &["claude", "--resume"], server.stdio_socket())
}

/// [`world`] with another host, `server` wired as given.
fn world_of(subreaper: &str, host: &[&str], server: Spec) -> Sandbox {
    let mut top = Spec::new(&[subreaper])
        .subreaper()
        .child(Spec::new(&["xterm"]).child(Spec::new(host).stdio_pty().child(server)));
    for b in bystanders() {
        top = top.child(b);
    }
    Sandbox::new(vec![top])
}

/// SIGKILLs the host and waits until `server` is the subreaper's.
fn crash_host(sb: &Sandbox, subreaper: &str, server: i32) -> i32 {
    let host = sb.ready().iter().find(|r| r.pid == common::ppid_of(server).unwrap_or(0)).map_or(0, |r| r.pid);
    let sr = sb.pid_of(subreaper);
    assert!(sb.is_descendant(host));
    sigkill(host);
    assert!(wait_until(Duration::from_secs(30), || ppid_of(server) == Some(sr)), "{server} was not adopted by {sr}");
    sr
}

/// Everything but the host and its server lives on.
fn bystanders_kept(sb: &Sandbox, subreaper: &str) {
    let mut keep = vec![sb.pid_of(subreaper), sb.pid_of("xterm"), sb.pid_of("-bash"), sb.pid_of("tmux")];
    keep.extend([sb.pid_of("ssh-agent"), sb.pid_of("gopls")]);
    sb.assert_alive(&keep);
}

#[test]
fn a_crashed_hosts_server_adopted_by_an_unknown_subreaper_is_an_orphan_to_a_scan() {
    // Its server kept the host's session: whoever adopted it did not start it.
    let sb = world("relayd", Spec::new(SERVER));
    let server = sb.pid_of("npx");
    let sr = crash_host(&sb, "relayd", server);
    let cfg = sb.dir().config(0, "");
    let v = scan_json(&cfg, &["--scope", &s(sb.scope_pid())]);
    let t = tree_holding(&v, server);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    let reason = t["reason"].as_str().unwrap();
    assert!(reason.contains(&format!("adopted by relayd (pid {sr}), which re-parented it")), "{reason}");
    assert!(in_any_tree(&v, sb.pid_of("gopls")).is_none(), "a language server is no server tree: {v:#}");
    let v = once_json(sb.scope_pid(), &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 1, "{v:#}");
    assert!(wait_until(Duration::from_secs(10), || !alive(server)), "the orphan survived");
    bystanders_kept(&sb, "relayd");
}

#[test]
fn a_crashed_codexs_server_on_pipes_is_an_orphan_to_a_scan() {
    // Codex: its servers on pipes, in its session.
    let sb = world_of("relayd", &["codex"], Spec::new(SERVER));
    let server = sb.pid_of("npx");
    crash_host(&sb, "relayd", server);
    let cfg = sb.dir().config(0, "");
    let v = scan_json(&cfg, &["--scope", &s(sb.scope_pid())]);
    assert_eq!(tree_holding(&v, server)["verdict"], "orphan", "{v:#}");
    let v = once_json(sb.scope_pid(), &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 1, "{v:#}");
    assert!(wait_until(Duration::from_secs(10), || !alive(server)), "the orphan survived");
    bystanders_kept(&sb, "relayd");
}

#[test]
fn a_known_subreaper_adopts_by_its_identity_whatever_the_session() {
    // conmon (toolbox, distrobox); the server in a session of its own, as
    // the MCP SDK's stdio_client starts them.
    let sb = world("conmon", Spec::new(SERVER).setsid());
    let server = sb.pid_of("npx");
    let sr = crash_host(&sb, "conmon", server);
    let cfg = sb.dir().config(0, "");
    let v = scan_json(&cfg, &["--scope", &s(sb.scope_pid())]);
    let t = tree_holding(&v, server);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    let reason = t["reason"].as_str().unwrap();
    assert!(reason.contains(&format!("conmon (pid {sr}), a subreaper by its identity")), "{reason}");
    let v = once_json(sb.scope_pid(), &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 1, "{v:#}");
    assert!(wait_until(Duration::from_secs(10), || !alive(server)), "the orphan survived");
    bystanders_kept(&sb, "conmon");
}

#[test]
fn the_daemon_sees_the_parent_change_where_nothing_else_tells() {
    // An unknown subreaper and a server in a session of its own: only the
    // change of its parent, seen by the daemon, says it was adopted.
    let sb = world("relayd", Spec::new(SERVER).setsid());
    let server = sb.pid_of("npx");
    let cfg = sb.dir().config(1, "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    d.status_until(Duration::from_secs(60), "the live tree seen", |st| st.to_string().contains("playwright"));
    // Before the crash a scan sees a live host; after it, without the
    // daemon's memory, nothing says who adopted it.
    crash_host(&sb, "relayd", server);
    let v = scan_json(&cfg, &["--scope", &s(sb.scope_pid())]);
    assert_eq!(tree_holding(&v, server)["verdict"], "foreign", "a scan alone cannot tell: {v:#}");
    assert!(wait_until(Duration::from_secs(60), || !alive(server)), "the daemon did not reap it:\n{}", d.log_text());
    assert!(d.log_text().contains("seen by this daemon"), "{}", d.log_text());
    bystanders_kept(&sb, "relayd");
}
