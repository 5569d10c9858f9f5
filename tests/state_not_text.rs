//! Issue 32: a tree ends on what its processes show, never on what their
//! text suggests. With real fds — pseudo-terminals that close, pipes whose
//! writer exits, a real listening socket — each shape of a developer's
//! machine that a grammar table once read as an unused terminal UI is kept,
//! and the left-behind trees whose evidence sits one level above the host
//! (an ACP launcher or adapter adopted with its stdin gone) are reaped.
//! Every reaper run is scoped to the sandbox.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{
    Sandbox, Spec, alive, nothing_reaped, once_json, ppid_of, s, scan_json, tree_holding, wait_terminal_closed,
    wait_until,
};
use serde_json::Value;

const SERVER: &[&str] = &["npx", "-y", "@playwright/mcp@latest"];

fn scan(sb: &Sandbox, cfg: &Path) -> Value {
    scan_json(cfg, &["--scope", &s(sb.scope_pid())])
}

/// `launcher` (a script, cron's job shell: exits once it started the host)
/// → `host` on a pipe whose writer is gone, its stdout and stderr on a
/// file → one server; the host is adopted by the sandbox's scope process.
fn launched_and_left(host: Spec, host0: &str) -> (Sandbox, i32, i32) {
    let sb =
        Sandbox::new(vec![Spec::new(&["sh", "review.sh"]).exit_after_spawn().child(host.child(Spec::new(SERVER)))]);
    let (h, server) = (sb.pid_of(host0), sb.pid_of("npx"));
    assert!(wait_until(Duration::from_secs(10), || ppid_of(h) == Some(sb.scope_pid())), "host {h} was not adopted");
    (sb, h, server)
}

/// Kept, with its reason and suspect in the scan; nothing signalled.
fn kept(sb: &Sandbox, h: i32, server: i32, says: &str) {
    let cfg = sb.dir().config(0, "");
    let v = scan(sb, &cfg);
    let t = tree_holding(&v, server);
    assert_eq!(t["verdict"], "live", "{t:#}");
    let why = format!("{} {}", t["reason"].as_str().unwrap_or_default(), t["suspect"].as_str().unwrap_or_default());
    assert!(why.contains(says), "wanted {says:?}: {t:#}");
    nothing_reaped(sb, &cfg, &[h, server]);
}

#[test]
fn a_host_fed_by_a_pipeline_that_ended_is_no_terminal_ui() {
    // `git diff | gemini > review.md 2>&1`, `cat spec.md | qwen`, and a TUI
    // argv on a pipe (`… | codex -p work`) from a script that has ended.
    for host in [&["gemini"][..], &["qwen"], &["claude"], &["codex", "-p", "work"]] {
        let dir = common::TempDir::new("piped");
        let spec = Spec::new(host).out_file(&dir.path().join("review.md"));
        let (sb, h, server) = launched_and_left(spec, host[0]);
        kept(&sb, h, server, "reads as a terminal UI, but its stdin is a pipe");
    }
}

#[test]
fn daemons_started_from_cron_are_kept() {
    // `@reboot nohup claude remote-control --name nas &`: cron's closed
    // stdin pipe (nohup keeps a stdin that is no terminal), nohup.out.
    let dir = common::TempDir::new("cron");
    let out = dir.path().join("nohup.out");
    let (sb, h, server) =
        launched_and_left(Spec::new(&["claude", "remote-control", "--name", "nas"]).out_file(&out), "claude");
    kept(&sb, h, server, "not in a mode known");
    drop(sb);
    // `@reboot nohup codex app-server --listen ws://127.0.0.1:4500 &`,
    // listening for real.
    let (sb, h, server) = launched_and_left(
        Spec::new(&["codex", "app-server", "--listen", "ws://127.0.0.1:4500"]).out_file(&out).listen(),
        "codex",
    );
    kept(&sb, h, server, "not in a mode known");
    drop(sb);
    // Its flag left out: the listening socket alone keeps it.
    let (sb, h, server) = launched_and_left(Spec::new(&["codex", "app-server"]).out_file(&out).listen(), "codex");
    kept(&sb, h, server, "listens on TCP port");
}

/// `xterm` → `host` on a pty that closes after 100 ms (`& disown`, then the
/// window closed), its stdout and stderr on `log` when given → one server.
fn disowned_on_a_closed_terminal(host: &[&str], log: Option<&Path>, listen: bool) -> (Sandbox, i32, i32) {
    let mut spec = Spec::new(host).stdio_pty().close_stdin_after(100);
    if let Some(l) = log {
        spec = spec.out_file(l);
    }
    if listen {
        spec = spec.listen();
    }
    let sb = Sandbox::new(vec![Spec::new(&["xterm"]).child(spec.child(Spec::new(SERVER)))]);
    let (h, server) = (sb.pid_of(host[0]), sb.pid_of("npx"));
    wait_terminal_closed(h);
    (sb, h, server)
}

#[test]
fn combined_short_flags_are_read_as_the_hosts_cli_reads_them() {
    // `claude -cp "…" > log 2>&1 & disown`: commander reads `-c -p`.
    let dir = common::TempDir::new("cp");
    for host in [&["claude", "-cp", "summarise"][..], &["claude", "-pc"], &["cn", "-p", "hi"]] {
        let (sb, h, server) = disowned_on_a_closed_terminal(host, Some(&dir.path().join("log")), false);
        kept(&sb, h, server, "one-shot run");
    }
}

#[test]
fn remote_driven_modes_backgrounded_from_a_terminal_are_kept() {
    for host in [
        &["claude", "remote-control", "--spawn=same-dir"][..],
        &["claude", "--remote-control", "nas"],
        &["codex", "app-server", "--listen", "ws://127.0.0.1:4500"],
        &["claude", "--some-flag-of-next-week"],
    ] {
        let (sb, h, server) = disowned_on_a_closed_terminal(host, None, host.contains(&"app-server"));
        kept(&sb, h, server, "not in a mode known");
    }
    // A terminal UI by its argv that listens on a socket: another way in.
    let (sb, h, server) = disowned_on_a_closed_terminal(&["claude", "--resume"], None, true);
    kept(&sb, h, server, "listens on TCP port");
}

#[test]
fn a_terminal_ui_whose_terminal_died_is_still_stale_with_a_cluster_of_flags() {
    let (sb, h, server) = disowned_on_a_closed_terminal(&["claude", "-cd"], None, false);
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    assert_eq!(tree_holding(&v, server)["verdict"], "stale", "{v:#}");
    let v = once_json(sb.scope_pid(), &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 1, "{v:#}");
    assert!(wait_until(Duration::from_secs(10), || !alive(h) && !alive(server)), "survived");
}

/// Reaped as stale from `front` down; `pids` all end.
fn reaped_from(sb: &Sandbox, front: i32, pids: &[i32], says: &str) {
    let cfg = sb.dir().config(0, "");
    let v = scan(sb, &cfg);
    let t = tree_holding(&v, pids[pids.len() - 1]);
    assert_eq!(t["verdict"], "stale", "{v:#}");
    assert_eq!(t["root"], front, "{t:#}");
    assert!(t["reason"].as_str().unwrap().contains(says), "{t:#}");
    let v = once_json(sb.scope_pid(), &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 1, "{v:#}");
    assert!(wait_until(Duration::from_secs(10), || pids.iter().all(|&p| !alive(p))), "survived: {pids:?}");
}

#[test]
fn an_acp_agent_whose_editor_crashed_is_reaped_through_its_launcher() {
    // Zed crashed: `gemini --experimental-acp` relaunches itself with its
    // stdio passed on; the relaunched node runs the servers.
    const GEMINI: &str = "/usr/lib/node_modules/@google/gemini-cli/bin/gemini";
    let sb = Sandbox::new(vec![
        Spec::new(&["zed"]).exit_after_spawn().child(
            Spec::new(&["node", GEMINI, "--experimental-acp"]).child(
                Spec::new(&["node", "--max-old-space-size=8192", GEMINI, "--experimental-acp"])
                    .stdio_share()
                    .child(Spec::new(SERVER)),
            ),
        ),
    ]);
    let outer = sb.pid_of("node /usr");
    let inner = sb.pid_of("node --max");
    let server = sb.pid_of("npx");
    assert!(wait_until(Duration::from_secs(10), || ppid_of(outer) == Some(sb.scope_pid())), "not adopted");
    reaped_from(&sb, outer, &[outer, inner, server], "its stdin reaches it only through");
}

#[test]
fn a_claude_code_acp_adapter_whose_editor_crashed_is_reaped_with_its_agent() {
    // Zed → `npx @zed-industries/claude-code-acp` → the adapter's node →
    // the Agent SDK's `claude --input-format stream-json` on a pipe the
    // adapter writes → the servers.
    const ADAPTER: &str = "/home/u/.npm/_npx/1a2b/node_modules/@zed-industries/claude-code-acp/dist/index.js";
    const SDK: &[&str] = &["claude", "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"];
    for npx in [false, true] {
        let adapter = Spec::new(&["node", ADAPTER]).child(Spec::new(SDK).child(Spec::new(SERVER)));
        let top = if npx {
            Spec::new(&["npm", "exec", "@zed-industries/claude-code-acp"]).child(adapter.stdio_share())
        } else {
            adapter
        };
        let sb = Sandbox::new(vec![Spec::new(&["zed"]).exit_after_spawn().child(top)]);
        let (a, host, server) = (sb.pid_of("node /home"), sb.pid_of("claude"), sb.pid_of("npx"));
        let front = if npx { sb.pid_of("npm exec") } else { a };
        assert!(wait_until(Duration::from_secs(10), || ppid_of(front) == Some(sb.scope_pid())), "not adopted");
        reaped_from(&sb, front, &[front, a, host, server], "its stdin reaches it only through");
    }
}

#[test]
fn an_adapter_whose_editor_is_alive_is_not_stale() {
    const ADAPTER: &str = "/home/u/.npm/_npx/1a2b/node_modules/@zed-industries/claude-code-acp/dist/index.js";
    const SDK: &[&str] = &["claude", "--input-format", "stream-json"];
    let sb = Sandbox::new(vec![
        Spec::new(&["zed"]).child(Spec::new(&["node", ADAPTER]).child(Spec::new(SDK).child(Spec::new(SERVER)))),
    ]);
    let (a, host, server) = (sb.pid_of("node /home"), sb.pid_of("claude"), sb.pid_of("npx"));
    let cfg = sb.dir().config(0, "");
    assert_eq!(tree_holding(&scan(&sb, &cfg), server)["verdict"], "live");
    nothing_reaped(&sb, &cfg, &[a, host, server]);
}
