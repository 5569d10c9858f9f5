//! A tree read before its launcher retitled itself (issue 24): `npm` shows
//! just `npm` a moment after exec and `npm exec <pkg>` only later, so the
//! daemon's first read takes the launcher for an unknown owner of the
//! server. Its host (here a user's script, no known host) must still be
//! watched, and the tree read again when it dies: the orphans are signalled
//! within grace + 1 s in pidfd mode, with an interval far longer than that.
//!
//! Safety: the daemon is `--scope`d to the test's sandbox (a child
//! subreaper holding all the test's processes).

mod common;

use std::time::{Duration, Instant};

use common::{Daemon, Launch, Sandbox, Spec, alive, wait_until};
use rustix::process::Signal;
use serde_json::Value;

const SCRIPT: &[&str] = &["python3", "/home/u/agent.py"];
/// What npx's argv is at exec: long enough for the titles written over it.
const NPX: &[&str] = &["node", "/usr/lib/node_modules/npm/bin/npx-cli.js", "-y", "@playwright/mcp@latest"];
const NODE_PLAYWRIGHT: &[&str] = &["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"];
const BYSTANDER: &[&str] = &["sleep", "600"];

fn cmdline(pid: i32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw).split('\0').filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ")
}

fn tree(st: &Value, root: i32) -> Option<&Value> {
    st["trees"].as_array()?.iter().find(|t| t["root"] == root)
}

#[test]
fn a_launcher_retitled_after_the_first_read_is_reaped_within_grace_of_its_hosts_death() {
    let npx = Spec::new(NPX).title(&["npm"]).retitle(&["npm", "exec", "@playwright/mcp@latest"]);
    let sb = Sandbox::new(vec![
        Spec::new(SCRIPT).child(npx.child(Spec::new(NODE_PLAYWRIGHT).stdio_inherit())),
        Spec::new(BYSTANDER),
    ]);
    let (script, npm, node, bystander) =
        (sb.pid_of("python3"), sb.pid_of("node /usr/lib"), sb.pid_of("node /home"), sb.pid_of("sleep"));
    assert_eq!(cmdline(npm), "npm", "the launcher's first title");
    let grace = 2;
    // Interval 60 s: only the host's watched exit can explain a prompt reap.
    let cfg = sb.dir().config_with(grace, "interval_secs = 60", "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(&["--no-events"]));
    let st = d.status_until(Duration::from_secs(10), "the first read, with npm as the owner", |st| {
        tree(st, node).is_some_and(|t| t["verdict"] == "foreign")
    });
    assert_eq!(st["event_mode"], "pidfd", "{st:#}");

    sb.signal(npm, Signal::USR1);
    assert!(
        wait_until(Duration::from_secs(5), || cmdline(npm) == "npm exec @playwright/mcp@latest"),
        "not retitled: {:?}",
        cmdline(npm)
    );
    let t0 = Instant::now();
    sb.kill_host(script);
    let gone = wait_until(Duration::from_secs(20), || !alive(npm) && !alive(node));
    let took = t0.elapsed();
    assert!(gone, "the orphans of a retitled launcher survived 20 s (grace {grace} s):\n{}", d.log_text());
    eprintln!(
        "pidfd mode, launcher retitled after the first read: orphans gone {} ms after the host",
        took.as_millis()
    );
    assert!(
        took <= Duration::from_secs(grace + 1),
        "took {took:?}, more than grace {grace} s + 1 s:\n{}",
        d.log_text()
    );
    sb.assert_alive(&[bystander, sb.scope_pid()]);
}
