//! Issue 21: `stale` and `abandoned` only on conclusive evidence, with real
//! file descriptors. Live work that looks left behind — a windowed host
//! whose launching terminal closed, a one-shot run backgrounded from a
//! closed terminal or fed by a pipeline that ended, a host under a live
//! `reaperctl run` wrapper, a person's pipeline in an IDE's terminal — is
//! kept (and named a suspect where a stricter rule would have taken it);
//! the true cases are still reaped: an interactive terminal UI whose
//! controlling terminal died, and (tests/abandoned.rs) a server whose host
//! closed its stdin.
//!
//! Terminals are real pseudo-terminals (fakeproc's `pty` stdio: the slave is
//! the process's controlling terminal, the parent holds the master and closes
//! it: `/dev/pts/N (deleted)`). Every reaper run is scoped to the sandbox.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{
    Sandbox, Spec, TempDir, alive, nothing_reaped, once_json, ppid_of, reaperctl, s, scan_json, text, tree_holding,
    tree_rooted_at, wait_terminal_closed, wait_until,
};
use serde_json::Value;

const SERVER: &[&str] = &["npx", "-y", "@playwright/mcp@latest"];

fn scan(sb: &Sandbox, cfg: &Path) -> Value {
    scan_json(cfg, &["--scope", &s(sb.scope_pid())])
}

/// `terminal` → `host` on a pty that closes after 100 ms → one server.
fn on_a_closing_terminal(host: &[&str]) -> (Sandbox, i32, i32) {
    let sb = Sandbox::new(vec![
        Spec::new(&["xterm"]).child(Spec::new(host).stdio_pty().close_stdin_after(100).child(Spec::new(SERVER))),
    ]);
    let (h, server) = (sb.pid_of(host[0]), sb.pid_of("npx"));
    wait_terminal_closed(h);
    (sb, h, server)
}

#[test]
fn a_windowed_host_whose_launching_terminal_closed_is_kept() {
    for host in
        [&["/opt/cursor/cursor", "--no-sandbox"][..], &["/usr/lib/claude-desktop/claude-desktop"], &["code", "."]]
    {
        let (sb, h, server) = on_a_closing_terminal(host);
        let cfg = sb.dir().config(0, "");
        let v = scan(&sb, &cfg);
        let t = tree_holding(&v, server);
        assert_eq!(t["verdict"], "live", "{host:?}: {t:#}");
        let suspect = t["suspect"].as_str().unwrap_or_default();
        assert!(suspect.contains("is gone") && suspect.contains("windowed app"), "{host:?}: {t:#}");
        assert_eq!(v["summary"]["suspect_trees"], 1, "{v:#}");
        let human = reaperctl(["scan", "--config", cfg.to_str().unwrap(), "--scope", &s(sb.scope_pid())]);
        let human = text(&human.stdout);
        assert!(human.contains("suspect, kept: host") && human.contains("windowed app"), "{human}");
        nothing_reaped(&sb, &cfg, &[h, server]);
    }
}

#[test]
fn a_one_shot_run_backgrounded_from_a_closed_terminal_is_kept() {
    for host in [
        &["claude", "-p", "migrate the tests"][..],
        &["codex", "exec", "fix the build"],
        &["codex", "-c", "model=\"o3\"", "exec", "-"],
        &["gemini", "-p", "summarise"],
        &["opencode", "run", "review"],
    ] {
        let (sb, h, server) = on_a_closing_terminal(host);
        let cfg = sb.dir().config(0, "");
        let v = scan(&sb, &cfg);
        let t = tree_holding(&v, server);
        assert_eq!(t["verdict"], "live", "{host:?}: {t:#}");
        assert!(t["suspect"].as_str().unwrap_or_default().contains("one-shot run"), "{host:?}: {t:#}");
        nothing_reaped(&sb, &cfg, &[h, server]);
    }
}

#[test]
fn an_interactive_terminal_ui_whose_terminal_died_is_stale_and_reaped() {
    for host in [&["claude", "--resume"][..], &["codex", "-p", "work"], &["gemini", "-m", "flash"]] {
        let (sb, h, server) = on_a_closing_terminal(host);
        let term = ppid_of(h).unwrap();
        let cfg = sb.dir().config(0, "");
        let v = scan(&sb, &cfg);
        let t = tree_rooted_at(&v, h);
        assert_eq!(t["verdict"], "stale", "{host:?}: {t:#}");
        assert!(t["reason"].as_str().unwrap().contains("that terminal was its stdin"), "{t:#}");
        let v = once_json(sb.scope_pid(), &cfg);
        let o = v["outcomes"].as_array().unwrap();
        assert_eq!(o.len(), 1, "{v:#}");
        assert_eq!(o[0]["verdict"], "stale", "{v:#}");
        assert!(wait_until(Duration::from_secs(10), || !alive(h) && !alive(server)), "{host:?} survived");
        sb.assert_alive(&[term]);
    }
}

/// `starter` (exits at once) → `host` on a pipe nobody writes to any more →
/// one server: a host started by a script, cron job or ssh command that
/// has ended, adopted by the sandbox's scope process.
fn adopted_with_a_dead_stdin(host: &[&str]) -> (Sandbox, i32, i32) {
    let sb = Sandbox::new(vec![
        Spec::new(&["script-runner"]).exit_after_spawn().child(Spec::new(host).child(Spec::new(SERVER))),
    ]);
    let (h, server) = (sb.pid_of(host[0]), sb.pid_of("npx"));
    assert!(wait_until(Duration::from_secs(10), || ppid_of(h) == Some(sb.scope_pid())), "host {h} was not adopted");
    (sb, h, server)
}

#[test]
fn piped_one_shot_runs_whose_producer_ended_are_kept() {
    for host in [
        &["opencode", "run", "review"][..],
        &["codex", "e", "-"],
        &["codex", "review", "-"],
        &["codex", "-c", "model=\"o3\"", "exec", "-"],
        &["gemini", "--prompt=review this"],
        &["kilo", "run", "review"],
    ] {
        let (sb, h, server) = adopted_with_a_dead_stdin(host);
        let cfg = sb.dir().config(0, "");
        let t = tree_holding(&scan(&sb, &cfg), server).clone();
        assert_eq!(t["verdict"], "live", "{host:?}: {t:#}");
        nothing_reaped(&sb, &cfg, &[h, server]);
    }
}

#[test]
fn a_host_driven_over_its_stdin_that_nobody_can_reach_any_more_is_still_stale() {
    // Its stdin is its only channel (issue 32: a terminal UI's argv on a
    // pipe is no terminal UI, and is kept: tests/state_not_text.rs).
    for host in [
        &["codex", "app-server"][..],
        &["claude", "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"],
        &["gemini", "--acp"],
    ] {
        let (sb, h, server) = adopted_with_a_dead_stdin(host);
        let cfg = sb.dir().config(0, "");
        let v = scan(&sb, &cfg);
        let t = tree_rooted_at(&v, h);
        assert_eq!(t["verdict"], "stale", "{host:?}: {v:#}");
        assert!(t["reason"].as_str().unwrap().contains("listens on no socket"), "{t:#}");
        let v = once_json(sb.scope_pid(), &cfg);
        assert_eq!(v["outcomes"].as_array().unwrap().len(), 1, "{v:#}");
        assert!(wait_until(Duration::from_secs(10), || !alive(h) && !alive(server)), "{host:?} survived");
    }
}

#[test]
fn a_host_under_a_live_run_wrapper_is_judged_under_a_live_parent() {
    let bin = TempDir::new("wrapped-host");
    for host in [&["opencode", "run", "review"][..], &["claude", "--resume"]] {
        // The wrapper runs the stand-in by a path whose name is the host's.
        let link = bin.path().join(host[0]);
        if !link.exists() {
            std::os::unix::fs::symlink(common::fakeproc_path(), &link).unwrap();
        }
        let spec = Spec::new(host).child(Spec::new(SERVER)).to_json().to_string();
        let cfg = bin.config(0, "");
        let mut argv = vec![env!("CARGO_BIN_EXE_reaperctl"), "--config", cfg.to_str().unwrap(), "run", "--no-cgroup"];
        argv.extend(["--grace", "0.5", "--", link.to_str().unwrap()]);
        argv.extend(&host[1..]);
        // `git diff | reaperctl run … &` from a script still waiting: the
        // pipe's writer (git) has finished.
        let mut sb = Sandbox::new(vec![
            Spec::new(&["sh", "review.sh"]).child(Spec::new(&argv).real().env("FAKEPROC", &spec).close_stdin_after(0)),
        ]);
        // The scope, the script, the wrapper, and the host and its server.
        sb.wait_ready(5);
        let (h, server) = (sb.pid_of(host[0]), sb.pid_of("npx"));
        let wrapper = ppid_of(h).unwrap();
        let cfg = sb.dir().config(0, "");
        let v = scan(&sb, &cfg);
        let t = tree_holding(&v, server);
        assert_eq!(t["verdict"], "live", "{host:?}: {t:#}");
        nothing_reaped(&sb, &cfg, &[h, server, wrapper]);
    }
}

#[test]
fn a_persons_pipeline_in_an_ide_terminal_is_theirs_not_the_ides() {
    // VS Code's pty host → the person's shell on the terminal it hosts →
    // `cat session.jsonl | npx …`, once `cat` has finished.
    for pty_host in
        [&["code", "--type=utility", "--utility-sub-type=node.mojom.NodeService"][..], &["cursor", "--type=utility"]]
    {
        let sb = Sandbox::new(vec![
            Spec::new(pty_host).child(
                Spec::new(&["-bash"])
                    .stdio_pty()
                    .child(Spec::new(&["npx", "@modelcontextprotocol/server-everything"]).close_stdin_after(0)),
            ),
        ]);
        let (shell, server) = (sb.pid_of("-bash"), sb.pid_of("npx"));
        let cfg = sb.dir().config(0, "");
        let mut v = Value::Null;
        // Until the pipe's writer is seen gone (the parent closes it at once).
        let settled = wait_until(Duration::from_secs(10), || {
            v = scan(&sb, &cfg);
            tree_holding(&v, server)["verdict"] != "live"
        });
        assert!(settled, "{v:#}");
        let t = tree_holding(&v, server);
        assert_eq!(t["verdict"], "foreign", "{t:#}");
        assert!(t["reason"].as_str().unwrap().contains("interactive shell"), "{t:#}");
        nothing_reaped(&sb, &cfg, &[shell, server]);
    }
}
