//! An operator's view over days: a dry run that says each thing once, the
//! grace a user's `scan` takes from the running daemon, the ledger of what
//! was reaped (`reaperctl history`) and the totals that outlive restarts.
//!
//! Safety: every daemon and `--once` is `--scope`d to its test's sandbox (a
//! child subreaper holding all the test's processes) with its own config,
//! socket and state; a [`common::Daemon`] is stopped when its test ends.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Daemon, Launch, Sandbox, Spec, TempDir, s, scan_json, text, tree_rooted_at, wait_until};
use serde_json::Value;

const CLAUDE: &[&str] = &["claude", "--resume"];
const NPM_PLAYWRIGHT: &[&str] = &["npm", "exec", "@playwright/mcp@latest"];
const NODE_PLAYWRIGHT: &[&str] = &["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"];
const BYSTANDER: &[&str] = &["sleep", "600"];

/// `claude → npm exec @playwright/mcp → node playwright-mcp`, and a bystander.
fn playwright_sandbox() -> Sandbox {
    Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT))),
        Spec::new(BYSTANDER),
    ])
}

fn recent_for(st: &Value, root: i32) -> Option<&Value> {
    st["recent"].as_array()?.iter().find(|e| e["root_pid"] == root)
}

fn unix_ms_now() -> u64 {
    u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

// ------------------------------------------------------------------ a quiet dry run

#[test]
fn a_dry_run_says_would_reap_once_per_tree_and_status_counts_the_repeats() {
    let sb = playwright_sandbox();
    let (host, npm) = (sb.pid_of("claude"), sb.pid_of("npm exec"));
    sb.kill_host(host);
    let cfg = sb.dir().config_with(0, "interval_secs = 1", "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(&["--dry-run"]));
    // Every tick finds the orphan due again: four ticks at least.
    let st = d.status_until(Duration::from_secs(30), "the orphan is planned four times", |st| {
        recent_for(st, npm).is_some_and(|e| e["repeats"].as_u64().unwrap_or(0) >= 3)
    });
    let ev = recent_for(&st, npm).unwrap();
    assert_eq!(ev["dry_run"], true, "{ev:#}");
    assert!(ev["first_at_unix"].as_u64().unwrap() < ev["at_unix"].as_u64().unwrap(), "{ev:#}");
    let mine: Vec<&Value> = st["recent"].as_array().unwrap().iter().filter(|e| e["root_pid"] == npm).collect();
    assert_eq!(mine.len(), 1, "one entry per tree in the recent list: {st:#}");

    let log = d.log_text();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(&format!("would reap orphan tree root={npm} "))).collect();
    assert_eq!(lines.len(), 1, "said once, not at every tick:\n{log}");
    assert!(lines[0].contains("; reason: "), "the reason is on the line: {}", lines[0]);
    assert_eq!(log.matches("cycle (dry-run)").count(), 1, "one cycle line for it:\n{log}");

    let out = d.ctl(&["status"]);
    let shown = text(&out.stdout);
    let line =
        shown.lines().find(|l| l.contains(&format!("would reap orphan tree root={npm} "))).unwrap_or_else(|| {
            panic!("no recent line for {npm}:\n{shown}");
        });
    assert!(line.contains(" times over "), "{line}");
    sb.assert_alive(&[npm, sb.pid_of("node "), sb.pid_of("sleep")]);
}

// ------------------------------------------------------------------ scan asks the daemon

#[test]
fn a_scan_takes_the_grace_the_daemon_tracks_or_says_why_it_cannot() {
    let sb = playwright_sandbox();
    let (host, npm) = (sb.pid_of("claude"), sb.pid_of("npm exec"));
    let cfg = sb.dir().config(60, "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    sb.kill_host(host);
    let st = d.status_until(Duration::from_secs(20), "the orphan's grace starts", |st| {
        st["trees"].as_array().unwrap().iter().any(|t| t["root_pid"] == npm && t["first_seen_unix_ms"].is_u64())
    });
    let first_seen =
        st["trees"].as_array().unwrap().iter().find(|t| t["root_pid"] == npm).unwrap()["first_seen_unix_ms"]
            .as_u64()
            .unwrap();
    assert!(wait_until(Duration::from_secs(10), || unix_ms_now() >= first_seen + 3000));

    // A scan whose own state file says nothing (as a user's, who cannot read
    // root's): the daemon's clock, not a grace starting now.
    let own = TempDir::new("operator-scan");
    let user_cfg = own.config(60, "");
    let scope = s(sb.scope_pid());
    let v = scan_json(&user_cfg, &["--scope", &scope, "--socket", &s(d.socket.display())]);
    let t = tree_rooted_at(&v, npm);
    let left = t["grace_left_secs"].as_f64().unwrap_or_else(|| panic!("no grace left: {t:#}"));
    assert!(left <= 57.5, "the daemon's first sight, 3 s and more ago, counts: {t:#}");
    let alone = scan_json(&user_cfg, &["--scope", &scope, "--socket", "/nonexistent/control.sock"]);
    let alone = tree_rooted_at(&alone, npm)["grace_left_secs"].as_f64().unwrap();
    assert!(alone > 59.0, "without a daemon the scan's own clock starts now: {alone}");

    // A daemon that does not answer, and a state file that cannot be read: said.
    let mute_socket = own.path().join("mute.sock");
    let _mute = std::os::unix::net::UnixListener::bind(&mute_socket).unwrap();
    let broken = own.path().join("state-dir");
    std::fs::create_dir(&broken).unwrap();
    let broken_cfg = own.write(
        "broken.toml",
        format!(
            "[reaper]\ngrace_secs = 60\nmin_uid = 0\n\n[daemon]\nstate_file = {:?}\n",
            broken.display().to_string()
        ),
    );
    let out = common::reaperctl([
        "scan",
        "--json",
        "--config",
        &s(broken_cfg.display()),
        "--scope",
        &scope,
        "--socket",
        &s(mute_socket.display()),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("grace times start now") && err.contains("did not answer"), "{err}");
    assert!(err.contains(&broken.display().to_string()) && err.contains(&mute_socket.display().to_string()), "{err}");
}
