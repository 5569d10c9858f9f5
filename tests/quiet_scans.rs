//! The daemon's quiet period (issue 37): while its last scan found no host
//! or server, periodic scans are `quiet_interval_secs` apart, not
//! `interval_secs`; a host that starts ends the quiet at once (heard in
//! event mode, counted in pidfd mode) and the interval applies again.
//!
//! Safety: every daemon is `--scope`d to its test's sandbox (a child
//! subreaper holding all the test's processes), with its own config, socket
//! and state file; signals go only to sandbox processes.

mod common;

use std::time::{Duration, Instant};

use common::{Daemon, Launch, Sandbox, Spec, alive, wait_until};
use rustix::process::Signal;
use serde_json::Value;

const CLAUDE: &[&str] = &["claude", "--resume"];
const NPM_PLAYWRIGHT: &[&str] = &["npm", "exec", "@playwright/mcp@latest"];
const NODE_PLAYWRIGHT: &[&str] = &["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"];
const BYSTANDER: &[&str] = &["sleep", "600"];

/// One test at a time: a host one starts ends the other's quiet (each
/// daemon hears or counts every exec on the machine, scoped or not).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn scans(st: &Value) -> u64 {
    st["scans"]["count"].as_u64().unwrap_or(0)
}

fn sees(st: &Value, root: i32, verdict: &str) -> bool {
    st["trees"].as_array().is_some_and(|t| t.iter().any(|t| t["root"] == root && t["verdict"] == verdict))
}

/// A daemon on `sb` at interval 1 s and quiet interval an hour, and its
/// status once its first scan found nothing to follow.
fn quiet_daemon(sb: &Sandbox, extra: &[&str]) -> (Daemon, Value) {
    let cfg = sb.dir().config_with(0, "interval_secs = 1\nquiet_interval_secs = 3600", "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(extra));
    let st =
        d.status_until(Duration::from_secs(60), "the first scan, quiet", |st| scans(st) >= 1 && st["quiet"] == true);
    (d, st)
}

/// A shell (which starts a host and its server on SIGUSR1) and a bystander;
/// interval 1 s, quiet interval an hour.
fn quiet_then_a_host(extra: &[&str]) {
    let host = Spec::new(CLAUDE).child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT)));
    let mut sb = Sandbox::new(vec![Spec::new(&["-bash"]).on_usr1(host), Spec::new(BYSTANDER)]);
    let (shell, bystander) = (sb.pid_of("-bash"), sb.pid_of("sleep"));
    let (d, st) = quiet_daemon(&sb, extra);
    assert_eq!(st["quiet_interval_secs"], 3600, "{st:#}");

    // Quiet: no periodic scan at the 1 s interval. Waiting is the only way
    // to see something not happen; a busy machine can only scan less.
    let before = scans(&st);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(4) {
        let st = d.status();
        assert_eq!(scans(&st), before, "scanned while quiet (interval 1 s, quiet interval 3600 s):\n{}", d.log_text());
        std::thread::sleep(Duration::from_millis(250));
    }

    // A host starts: heard or counted, scanned soon, and the quiet ends.
    let total = sb.ready().len() + 3;
    sb.signal(shell, Signal::USR1);
    sb.wait_ready(total);
    let (host, npm, node) = (sb.pid_of("claude"), sb.pid_of("npm exec"), sb.pid_of("node "));
    let st = d.status_until(Duration::from_secs(60), "the new host's tree, not quiet", |st| {
        sees(st, npm, "live") && st["quiet"] == false
    });
    // Periodic scans at the interval again: three more, waited for.
    let seen = scans(&st);
    d.status_until(Duration::from_secs(60), "scans at the 1 s interval", |st| scans(st) >= seen + 3);

    // Its host dies: the orphan is reaped, and with nothing left the quiet returns.
    sb.signal(host, Signal::KILL);
    assert!(wait_until(Duration::from_secs(60), || !alive(npm) && !alive(node)), "orphan kept:\n{}", d.log_text());
    d.status_until(Duration::from_secs(60), "quiet again", |st| st["quiet"] == true);
    sb.assert_alive(&[bystander, shell, sb.scope_pid()]);
}

#[test]
fn quiet_until_a_host_starts_with_process_events_or_without() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // As root the first run has the kernel's process events; the second
    // counts new pids (pidfd mode) either way.
    quiet_then_a_host(&[]);
    quiet_then_a_host(&["--no-events"]);
}

/// A shell that execs into a host (same pid, no fork) while the daemon is
/// quiet, and the host's server: pidfd mode sees no exec, yet the scan
/// that reads the server reads its parent again (`scan/family.rs`) and
/// finds the host there, not the shell it read before; when the host dies
/// its orphan is reaped. With an hour's quiet interval no full read of
/// every process comes in between.
fn a_shell_execs_into_a_host(extra: &[&str]) {
    let host = Spec::new(CLAUDE).child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT)));
    let mut sb = Sandbox::new(vec![Spec::new(&["-bash"]).exec_on_usr1(host), Spec::new(BYSTANDER)]);
    let (shell, bystander) = (sb.pid_of("-bash"), sb.pid_of("sleep"));
    let (d, _) = quiet_daemon(&sb, extra);

    let total = sb.ready().len() + 3;
    sb.signal(shell, Signal::USR1);
    sb.wait_ready(total);
    let (npm, node) = (sb.pid_of("npm exec"), sb.pid_of("node "));
    assert_eq!(sb.pid_of("claude"), shell, "the same pid");
    // Read as the shell it was, the server's owner would be "a live
    // process which is not a known host" (verdict foreign).
    let st = d.status_until(Duration::from_secs(60), "the server's tree under its host", |st| sees(st, npm, "live"));
    let tree = st["trees"].as_array().and_then(|t| t.iter().find(|t| t["root"] == npm)).expect("the tree").clone();
    let reason = tree["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&format!("host claude --resume (pid {shell})")), "{tree:#}");

    sb.signal(shell, Signal::KILL);
    assert!(wait_until(Duration::from_secs(60), || !alive(npm) && !alive(node)), "orphan kept:\n{}", d.log_text());
    sb.assert_alive(&[bystander, sb.scope_pid()]);
}

#[test]
fn a_host_execd_in_place_while_quiet_is_found_with_its_server() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    a_shell_execs_into_a_host(&["--no-events"]);
    a_shell_execs_into_a_host(&[]);
}
