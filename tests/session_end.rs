//! `reaperctl session-end`, run the way a host runs its `SessionEnd` hook (a
//! child of the host, the hook's JSON on stdin): the daemon reaps the host's
//! trees as soon as it exits, without grace; without a daemon, exit 69.
//!
//! Safety: every process is in a [`Sandbox`] and the daemon is scoped to it.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Daemon, Launch, Sandbox, Spec, TempDir, alive, s, text, wait_until};
use rustix::process::Signal;
use serde_json::Value;

const REAPERCTL: &str = env!("CARGO_BIN_EXE_reaperctl");
/// What Claude Code writes to a `SessionEnd` hook's stdin.
const HOOK_INPUT: &str = r#"{"session_id":"8f2c","transcript_path":"/tmp/t.jsonl","cwd":"/tmp","hook_event_name":"SessionEnd","reason":"prompt_input_exit"}"#;

/// The report a stand-in host wrote for its hook, once it did.
fn hook_report(path: &Path) -> Value {
    assert!(
        wait_until(Duration::from_secs(60), || std::fs::read(path).is_ok_and(|b| !b.is_empty())),
        "the hook did not finish within 20 s"
    );
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn host_with_hook(argv: &[&str], tag: &str, socket: &Path, report: &Path, config: &Path) -> Spec {
    let hook = [REAPERCTL, "--config", &s(config.display()), "--socket", &s(socket.display()), "session-end"];
    Spec::new(argv)
        .child(
            Spec::new(&["npm", "exec", &format!("@playwright/mcp@{tag}")])
                .child(Spec::new(&["node", &format!("/x/{tag}/playwright-mcp")])),
        )
        .hook(&hook, HOOK_INPUT, report)
}

#[test]
fn trees_of_a_host_that_ended_its_session_go_as_soon_as_it_exits() {
    let dir = TempDir::new("session-end");
    // A grace no test waits out: only the waiver can make a tree go.
    let cfg = dir.config_with(300, "term_timeout_secs = 1", "");
    let socket = dir.path().join("control.sock");
    let report = dir.path().join("hook.json");
    let ending = host_with_hook(&["claude", "--resume"], "ending", &socket, &report, &cfg);
    let other = Spec::new(&["claude", "--continue"]).child(
        Spec::new(&["npm", "exec", "@playwright/mcp@other"]).child(Spec::new(&["node", "/x/other/playwright-mcp"])),
    );
    let sb = Sandbox::new(vec![ending, other]);
    let d = Daemon::start(
        sb.scope_pid(),
        &cfg,
        &socket,
        &dir.path().join("state.json"),
        &dir.path().join("d.log"),
        &Launch::default(),
    );
    let (host, npm, node) =
        (sb.pid_of("claude --resume"), sb.pid_of("npm exec @playwright/mcp@ending"), sb.pid_of("node /x/ending"));
    let (host2, npm2, node2) =
        (sb.pid_of("claude --continue"), sb.pid_of("npm exec @playwright/mcp@other"), sb.pid_of("node /x/other"));
    d.status_until(Duration::from_secs(60), "both trees live", |st| {
        [npm, npm2].iter().all(|&r| {
            st["trees"].as_array().is_some_and(|t| t.iter().any(|t| t["root"] == r && t["verdict"] == "live"))
        })
    });

    // Someone who is not below the host may not end its session.
    let out = d.ctl(&["session-end", "--host", &s(host)]);
    assert_eq!(out.status.code(), Some(77), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("not a descendant of host"), "{}", text(&out.stderr));

    // The host runs its hook.
    sb.signal(host, Signal::USR1);
    let r = hook_report(&report);
    assert_eq!(r["code"], 0, "{r:#}\n{}", d.log_text());
    assert!(r["stderr"].as_str().unwrap().contains("reaped as soon as it exits"), "{r:#}");
    assert_eq!(r["stdout"], "", "a hook's stdout is the host's to parse: {r:#}");

    // The status shows the host as ending, with its tree; not the other.
    let st = d.status_until(Duration::from_secs(60), "the ending host listed with its tree", |st| {
        st["session_ends"].as_array().is_some_and(|e| e.iter().any(|e| e["host_pid"] == host && e["trees"] == 1))
    });
    let ends = st["session_ends"].as_array().unwrap();
    assert_eq!(ends.len(), 1, "{ends:#?}");
    assert_eq!(ends[0]["host_cmd"], "claude --resume", "{ends:#?}");
    let why = format!("claude --resume (pid {host}) ended its session (prompt_input_exit)");
    assert!(ends[0]["reason"].as_str().unwrap().contains(&why), "{ends:#?}");
    assert_eq!(ends[0]["uid"], rustix::process::getuid().as_raw(), "{ends:#?}");
    let human = text(&d.ctl(&["status"]).stdout);
    assert!(human.contains("hosts ending their session"), "{human}");
    assert!(human.contains(&format!("pid {host:>7}  1 tree(s)")), "{human}");

    sb.kill_host(host);
    sb.kill_host(host2);
    assert!(
        wait_until(Duration::from_secs(60), || !alive(npm) && !alive(node)),
        "the ended host's tree was not reaped:\n{}",
        d.log_text()
    );
    // Gone from the status with the host.
    d.status_until(Duration::from_secs(60), "the ended host no longer listed", |st| {
        st["session_ends"].as_array().is_some_and(Vec::is_empty)
    });
    // The other host's orphans wait out their grace as usual.
    let st = d.status_until(Duration::from_secs(60), "the other host's tree judged young", |st| {
        st["trees"].as_array().is_some_and(|t| t.iter().any(|t| t["root"] == npm2 && t["verdict"] == "young"))
    });
    sb.assert_alive(&[npm2, node2]);
    let ev = st["recent"].as_array().unwrap().iter().find(|e| e["root"] == npm).cloned().unwrap_or_default();
    assert!(ev["reason"].as_str().unwrap_or("").contains("no grace: its host claude --resume"), "{st:#}");
    assert!(d.log_text().contains("ends its session 8f2c"), "{}", d.log_text());
}

#[test]
fn without_a_daemon_session_end_exits_69() {
    let dir = TempDir::new("session-end-nod");
    let cfg = dir.config(0, "");
    let report = dir.path().join("hook.json");
    let socket = dir.path().join("nobody-listens.sock");
    let sb = Sandbox::new(vec![host_with_hook(&["claude"], "x", &socket, &report, &cfg)]);
    sb.signal(sb.pid_of("claude"), Signal::USR1);
    let r = hook_report(&report);
    assert_eq!(r["code"], 69, "{r:#}");
    assert!(r["stderr"].as_str().unwrap().contains("the daemon is not running"), "{r:#}");
}

#[test]
fn a_clear_is_no_ending() {
    let dir = TempDir::new("session-end-clear");
    let cfg = dir.config(0, "");
    let report = dir.path().join("hook.json");
    let socket = dir.path().join("nobody-listens.sock");
    let clear = HOOK_INPUT.replace("prompt_input_exit", "clear");
    let hook = [REAPERCTL, "--config", &s(cfg.display()), "--socket", &s(socket.display()), "session-end"];
    let sb = Sandbox::new(vec![Spec::new(&["claude"]).hook(&hook, &clear, &report)]);
    sb.signal(sb.pid_of("claude"), Signal::USR1);
    let r = hook_report(&report);
    // Not even asked: no daemon is needed to do nothing.
    assert_eq!(r["code"], 0, "{r:#}");
    assert!(r["stderr"].as_str().unwrap().contains("nothing to do"), "{r:#}");
}

#[test]
fn session_end_from_a_process_that_is_not_a_hosts_child_fails() {
    let dir = TempDir::new("session-end-nohost");
    // Only a name no ancestor of this test has is a host.
    let cfg = dir.config(0, "[patterns]\nhosts = [\"mcp-reaper-test-no-such-host\"]\n");
    let out = common::reaperctl(["--config", &s(cfg.display()), "--socket", "/nonexistent.sock", "session-end"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("no host among the ancestors"), "{}", text(&out.stderr));
}
