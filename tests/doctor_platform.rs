//! `reaperctl doctor` says which platform it runs on, who adopts orphans
//! there and, without systemd, how the daemon is started (issue 33): the
//! real binary on this machine, checked against what `/proc/1` shows. Each
//! platform from fixture roots: `src/ctl/platform_tests.rs`; in a real
//! container: `tests/devcontainer.rs`.
//!
//! Safety: reads only; no daemon, nothing signalled.

mod common;

use common::{s, text};
use serde_json::Value;

fn doctor_json() -> Vec<Value> {
    let out = common::reaperctl(["doctor", "--json", "--config", "-", "--socket", "/nonexistent/control.sock"]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor JSON ({e}): {}\n{}", text(&out.stdout), text(&out.stderr)));
    v.as_array().unwrap().clone()
}

fn check<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no check {name}: {checks:#?}"))
}

/// PID 1's comm, where this user may read it.
fn pid1_comm() -> Option<String> {
    std::fs::read_to_string("/proc/1/comm").ok().map(|c| c.trim().to_string())
}

#[test]
fn doctor_names_the_platform_and_pid_1_and_who_adopts_orphans() {
    let checks = doctor_json();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(&names[..3], ["config", "platform", "adoption"], "{names:?}");
    let platform = check(&checks, "platform");
    assert_eq!(platform["health"], "ok", "{platform:#}");
    let p = &platform["platform"];
    let kinds = ["wsl2", "wsl1", "toolbox", "distrobox", "container", "host"];
    assert!(kinds.contains(&p["kind"].as_str().unwrap()), "{platform:#}");
    let systemd = pid1_comm().as_deref() == Some("systemd") || std::path::Path::new("/run/systemd/system").is_dir();
    assert_eq!(p["systemd"], systemd, "{platform:#}");
    let found = platform["found"].as_str().unwrap();
    if let Some(comm) = pid1_comm() {
        assert_eq!(p["pid1"]["comm"], comm.as_str(), "{platform:#}");
        assert!(found.contains(&format!("PID 1 {comm}")), "{found}");
    }
    eprintln!("platform here: {found}");

    let adoption = check(&checks, "adoption");
    let said = adoption["found"].as_str().unwrap();
    assert!(said.starts_with("orphans"), "{adoption:#}");
    assert!(said.contains("any process whose parent it saw change"), "{adoption:#}");
    eprintln!("adoption here: {said}");

    // No daemon: the way to start it fits the machine.
    let cost = check(&checks, "daemon")["cost"].as_str().unwrap().to_string();
    assert!(cost.starts_with("nothing is reaped until mcp-reaperd runs"), "{cost}");
    // A user's own daemon is the user unit (issue 36): `systemctl --user`.
    let start = if common::is_root() {
        "systemctl enable --now mcp-reaper"
    } else {
        "systemctl --user enable --now mcp-reaper"
    };
    assert_eq!(cost.contains(start), systemd, "{cost}");
    assert_eq!(cost.contains("no systemd here"), !systemd, "{cost}");
}

#[test]
fn doctor_prints_the_platform_line_in_words() {
    let out = common::reaperctl([s("doctor"), s("--config"), s("-"), s("--socket"), s("/nonexistent/control.sock")]);
    let words = text(&out.stdout);
    let line = words.lines().find(|l| l.starts_with("ok       platform         ")).unwrap_or_else(|| panic!("{words}"));
    if let Some(comm) = pid1_comm() {
        assert!(line.contains(&format!("PID 1 {comm}")), "{line}");
    }
    assert!(words.lines().any(|l| l.contains(" adoption ") && l.contains("orphans")), "{words}");
}

/// Issue 36: where systemd runs, a user is told to start the user unit
/// (`systemctl --user`, systemd/user/mcp-reaper.service), root the system
/// one. systemd is made to look present in a mount namespace of the test's
/// own (a tmpfs on /run holding `/run/systemd/system`), so this runs on any
/// machine; as root (the namespace and the switch to uid 65534).
#[test]
fn doctor_tells_a_user_to_start_the_user_unit_and_root_the_system_one() {
    const TEST: &str = "doctor_tells_a_user_to_start_the_user_unit_and_root_the_system_one";
    let (Some(unshare), Some(_)) = (common::find_tool("unshare"), common::find_tool("setpriv")) else {
        common::skip(TEST, "needs unshare and setpriv (util-linux)");
        return;
    };
    if !common::is_root() {
        common::skip(TEST, "needs root (a mount namespace, and a switch to another uid)");
        return;
    }
    let ctl = common::reachable::reachable(std::path::Path::new(env!("CARGO_BIN_EXE_reaperctl")));
    let cost_as = |user: bool| -> String {
        let who = if user { "setpriv --reuid 65534 --regid 65534 --clear-groups " } else { "" };
        let out = std::process::Command::new(&unshare)
            .args(["--mount", "--", "sh", "-c"])
            .arg(format!(
                "mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system && exec {who}\"$0\" doctor --json \
                 --config - --socket /nonexistent/control.sock"
            ))
            .arg(&ctl)
            .env("HOME", "/nonexistent")
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("running unshare");
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("doctor JSON ({e}): {}\n{}", text(&out.stdout), text(&out.stderr)));
        let checks = v.as_array().unwrap().clone();
        assert_eq!(check(&checks, "platform")["platform"]["systemd"], true, "{checks:#?}");
        check(&checks, "daemon")["cost"].as_str().unwrap().to_string()
    };
    let user = cost_as(true);
    assert!(user.contains("`systemctl --user enable --now mcp-reaper`"), "{user}");
    let root = cost_as(false);
    assert!(root.contains("`systemctl enable --now mcp-reaper`"), "{root}");
}
