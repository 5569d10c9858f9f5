//! Pidfd mode's reads between full ones (issue 37): they take unchanged
//! processes over unread, and must still see what a verdict turns on.
//! A server whose launcher died unwatched was re-parented: the next
//! periodic scan's sweep (is there still a task at each pid?) finds its
//! parent gone and reads it again, long before a full read of every
//! process would (120 s apart, an hour's turn while quiet).
//!
//! Safety: every daemon is `--scope`d to its test's sandbox (a child
//! subreaper holding all the test's processes), with its own config, socket
//! and state file; signals go only to sandbox processes.

mod common;

use std::time::Duration;

use common::{Daemon, Launch, Sandbox, Spec, alive, wait_until};
use rustix::process::Signal;
use serde_json::Value;

const CLAUDE: &[&str] = &["claude", "--resume"];
const NPM_PLAYWRIGHT: &[&str] = &["npm", "exec", "@playwright/mcp@latest"];
const NODE_PLAYWRIGHT: &[&str] = &["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"];
const BYSTANDER: &[&str] = &["sleep", "600"];

/// How long `pid` has run, from its start time in `/proc/PID/stat`.
fn age_secs(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let start: f64 = after.split_whitespace().nth(19).and_then(|t| t.parse().ok()).unwrap_or(f64::MAX);
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next().and_then(|t| t.parse().ok()))
        .unwrap_or(0.0);
    let tck = rustix::param::clock_ticks_per_second() as f64;
    uptime - start / tck
}

fn verdict_of(st: &Value, root: i32) -> Option<String> {
    st["trees"].as_array()?.iter().find(|t| t["root"] == root).and_then(|t| t["verdict"].as_str().map(String::from))
}

/// Kills the launcher (unwatched: its host is the tree's owner, and reaps
/// it at once, as real hosts do; a zombie's pid stays listed) and waits
/// for its server, re-parented to the sandbox's subreaper, to be reaped.
/// A minute is half the full read's spacing: without the sweep's re-read
/// the server's parent stays the dead launcher's pid ("was not readable":
/// foreign, kept) until then.
fn launcher_dies_unwatched(extra: &[&str]) {
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).reap().child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT))),
        Spec::new(BYSTANDER),
    ]);
    let (host, npm, node, bystander) =
        (sb.pid_of("claude"), sb.pid_of("npm exec"), sb.pid_of("node "), sb.pid_of("sleep"));
    let cfg = sb.dir().config_with(0, "interval_secs = 1", "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(extra));
    d.status_until(Duration::from_secs(60), "the live tree", |st| verdict_of(st, npm).as_deref() == Some("live"));

    sb.signal(npm, Signal::KILL);
    assert!(
        wait_until(Duration::from_secs(60), || !alive(node)),
        "the re-parented server was kept; last status:\n{:#}\n{}",
        d.status(),
        d.log_text()
    );
    sb.assert_alive(&[host, bystander, sb.scope_pid()]);
}

#[test]
fn a_server_whose_launcher_died_unwatched_is_reaped_at_the_next_periodic_scan() {
    launcher_dies_unwatched(&["--no-events"]);
    launcher_dies_unwatched(&[]);
}

/// A launcher that exits while its host never reaps it stays a zombie: its
/// pid keeps a task, so no sweep finds it gone, and without a watch only
/// the full read (every 120 s) would see its server re-parented. Pidfd
/// mode watches the launchers of kept trees: the zombie's pidfd says it
/// exited, and the tree is read again at once (a launcher that had run 5 s
/// at a scan: a younger one's exit is left to the sweep). The deadline is
/// well under the full read.
#[test]
fn a_server_whose_launcher_lingers_as_a_zombie_is_reaped_in_pidfd_mode() {
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT))),
        Spec::new(BYSTANDER),
    ]);
    let (host, npm, node, bystander) =
        (sb.pid_of("claude"), sb.pid_of("npm exec"), sb.pid_of("node "), sb.pid_of("sleep"));
    let cfg = sb.dir().config_with(0, "interval_secs = 3", "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(&["--no-events"]));
    // Judged live by a scan after the launcher had run 5 s: watched since.
    let scans = |st: &Value| st["scans"]["count"].as_u64().unwrap_or(0);
    let st = d.status_until(Duration::from_secs(60), "the launcher 6 s old", |st| {
        verdict_of(st, npm).as_deref() == Some("live") && age_secs(npm) >= 6.0
    });
    let seen = scans(&st);
    d.status_until(Duration::from_secs(60), "a scan since", |st| {
        scans(st) > seen && verdict_of(st, npm).as_deref() == Some("live")
    });

    sb.signal(npm, Signal::KILL);
    assert!(
        wait_until(Duration::from_secs(40), || !alive(node)),
        "the server below a zombie launcher was kept; last status:\n{:#}\n{}",
        d.status(),
        d.log_text()
    );
    sb.assert_alive(&[host, bystander, sb.scope_pid()]);
}
