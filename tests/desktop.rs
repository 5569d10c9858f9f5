//! Desktop notifications (issue 15, item 4) from a real daemon, on a private
//! session bus (`dbus-daemon --session`, Debian `dbus`; skipped with a reason
//! without it): a listener that owns `org.freedesktop.Notifications` gets
//! exactly one `Notify` with the count and the MiB after a reap, and none
//! for a second reap within the minute; a listener that never answers costs
//! one log line and no reap; without a bus, one log line. The daemon sends
//! through `reaperctl desktop-notify` (hidden), tested on its own too: one
//! `Notify` and exit 0; without a bus, exit 69 and one line why.
//!
//! Safety: every daemon is `--scope`d to its sandbox with its own config,
//! socket and state file; the bus and the daemons are the tests' own children,
//! stopped through their `Child` handles.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{Daemon, Launch, Sandbox, Spec, TempDir, alive, find_tool, skip, wait_until};
use serde_json::Value;

const CLAUDE: &[&str] = &["claude", "--resume"];
const NPM_PLAYWRIGHT: &[&str] = &["npm", "exec", "@playwright/mcp@latest"];
const NODE_PLAYWRIGHT: &[&str] = &["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"];
const BYSTANDER: &[&str] = &["sleep", "600"];
const NAME: &str = "org.freedesktop.Notifications";
const MIB: u64 = 1 << 20;

/// A private session bus, stopped on drop.
struct Bus {
    child: Child,
    address: String,
    _dir: TempDir,
}

impl Bus {
    /// `None` (the skip printed) without `dbus-daemon`.
    fn start(test: &str) -> Option<Bus> {
        let Some(tool) = find_tool("dbus-daemon") else {
            skip(test, "dbus-daemon is not installed (Debian: apt-get install dbus)");
            return None;
        };
        let dir = TempDir::new("bus");
        let mut child = Command::new(tool)
            .args(["--session", "--nofork", "--print-address=1"])
            .arg(format!("--address=unix:path={}", dir.path().join("bus").display()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // It says it cannot raise its fd limit when not quite root: noise.
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning dbus-daemon");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("dbus-daemon's address");
        let address = line.trim().to_string();
        assert!(address.starts_with("unix:"), "dbus-daemon printed {line:?}");
        Some(Bus { child, address, _dir: dir })
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `Notify`'s arguments: app, replaces id, icon, summary, body, actions, hints, timeout.
type NotifyArgs = (String, u32, String, String, String, Vec<String>, HashMap<String, zbus::OwnedVariant>, i32);

/// One `Notify` call as the listener received it.
#[derive(Debug)]
struct Notified {
    app: String,
    summary: String,
}

/// A notification daemon on `address` in a thread of its own: owns
/// [`NAME`], hands every `Notify` to the returned channel, and answers it
/// (with an id) only when `answer`. Returns once it owns the name.
fn listener(address: &str, answer: bool) -> mpsc::Receiver<Notified> {
    let (tx, rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let address = address.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let conn = zbus::conn::Builder::address(address.as_str()).build().await.unwrap();
            conn.request_name(NAME).await.unwrap();
            let mut stream = zbus::MessageStream::from(&conn);
            ready_tx.send(()).unwrap();
            let mut id = 0u32;
            while let Some(Ok(msg)) = next(&mut stream).await {
                let h = msg.header();
                if msg.message_type() != zbus::message::Type::MethodCall
                    || h.member().is_none_or(|m| m.as_str() != "Notify")
                {
                    continue;
                }
                let (app, _, _, summary, _, _, _, _): NotifyArgs = msg.body().deserialize().unwrap();
                let _ = tx.send(Notified { app, summary });
                if answer {
                    id += 1;
                    conn.reply(&h, &(id,)).await.unwrap();
                }
            }
        });
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).expect("the listener owns org.freedesktop.Notifications");
    rx
}

async fn next(stream: &mut zbus::MessageStream) -> Option<zbus::Result<zbus::Message>> {
    use zbus::export::futures_core::Stream;
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}

/// Two `claude → npm exec → node playwright-mcp (50 MiB)` trees and a bystander.
fn two_hosts() -> Sandbox {
    let tree = || Spec::new(CLAUDE).child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT).touch_mib(50)));
    Sandbox::new(vec![tree(), tree(), Spec::new(BYSTANDER)])
}

/// The (host, npm, node) triples of [`two_hosts`].
fn trees(sb: &Sandbox) -> Vec<(i32, i32, i32)> {
    let r = sb.ready();
    r.iter()
        .filter(|h| h.cmd.starts_with("claude"))
        .map(|h| {
            let npm = r.iter().find(|p| p.ppid == h.pid).unwrap().pid;
            let node = r.iter().find(|p| p.ppid == npm).unwrap().pid;
            (h.pid, npm, node)
        })
        .collect()
}

/// A daemon with desktop notifications on, its session bus at `address`.
fn daemon(sb: &Sandbox, address: &str) -> Daemon {
    let cfg = sb.dir().config_with(0, "interval_secs = 1", "[notify]\ndesktop = true\n");
    let how = Launch { env: vec![("DBUS_SESSION_BUS_ADDRESS", address.to_string())], ..Launch::default() };
    Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &how)
}

fn reaped(d: &Daemon, n: u64) -> Value {
    d.status_until(Duration::from_secs(60), "the reaps are counted", |st| {
        st["totals"]["trees_reaped"].as_u64() >= Some(n)
    })
}

fn orphan(sb: &Sandbox, (host, npm, node): (i32, i32, i32)) {
    sb.kill_host(host);
    assert!(wait_until(Duration::from_secs(60), || !alive(npm) && !alive(node)), "the orphan below {host} survived");
}

#[test]
fn a_reap_is_one_notification_with_count_and_mib_and_the_next_waits_a_minute() {
    let Some(bus) = Bus::start("a_reap_is_one_notification_with_count_and_mib_and_the_next_waits_a_minute") else {
        return;
    };
    let notes = listener(&bus.address, true);
    let sb = two_hosts();
    let t = trees(&sb);
    let d = daemon(&sb, &bus.address);
    orphan(&sb, t[0]);
    let st = reaped(&d, 1);
    let n =
        notes.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|e| panic!("no Notify ({e}):\n{}", d.log_text()));
    let mib = (st["totals"]["reclaimed_bytes"].as_u64().unwrap() + MIB / 2) / MIB;
    assert!(mib >= 40, "the 50 MiB server's memory is counted: {st:#}");
    assert_eq!(n.summary, format!("Reaped 1 orphaned MCP server, {mib} MiB freed"), "{n:?}");
    assert_eq!(n.app, "mcp-reaper");
    // A second reap within the minute is held back for the next notification.
    orphan(&sb, t[1]);
    reaped(&d, 2);
    assert!(notes.recv_timeout(Duration::from_secs(3)).is_err(), "a second notification within the minute");
    assert_eq!(d.count("desktop notification not sent"), 0, "{}", d.log_text());
    sb.assert_alive(&[sb.pid_of("sleep")]);
}

#[test]
fn a_notification_daemon_that_never_answers_costs_one_line_and_no_reap() {
    let Some(bus) = Bus::start("a_notification_daemon_that_never_answers_costs_one_line_and_no_reap") else {
        return;
    };
    let notes = listener(&bus.address, false);
    let sb = two_hosts();
    let t = trees(&sb);
    let d = daemon(&sb, &bus.address);
    orphan(&sb, t[0]);
    notes.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|e| panic!("no Notify ({e}):\n{}", d.log_text()));
    assert!(
        wait_until(Duration::from_secs(60), || d.count("desktop notification not sent (no answer within 1 s)") == 1),
        "{}",
        d.log_text()
    );
    // The loop went on: the next orphan is reaped, the socket answers.
    orphan(&sb, t[1]);
    reaped(&d, 2);
    assert_eq!(d.count("desktop notification not sent"), 1, "{}", d.log_text());
}

#[test]
fn without_a_session_bus_it_is_one_line_and_reaping_goes_on() {
    let sb = two_hosts();
    let t = trees(&sb);
    let nowhere = sb.dir().path().join("no-bus-here");
    let d = daemon(&sb, &format!("unix:path={}", nowhere.display()));
    orphan(&sb, t[0]);
    reaped(&d, 1);
    assert!(wait_until(Duration::from_secs(60), || d.count("desktop notification not sent") == 1), "{}", d.log_text());
    orphan(&sb, t[1]);
    reaped(&d, 2);
    assert_eq!(d.count("desktop notification not sent"), 1, "{}", d.log_text());
}

/// `reaperctl desktop-notify`, the hidden subcommand the daemon runs.
fn desktop_notify(address: &str, summary: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_reaperctl"))
        .args(["desktop-notify", "--summary", summary, "--body", "b"])
        .env("DBUS_SESSION_BUS_ADDRESS", address)
        .stdin(Stdio::null())
        .output()
        .expect("running reaperctl desktop-notify")
}

#[test]
fn desktop_notify_without_a_session_bus_exits_69_with_one_line_why() {
    let dir = TempDir::new("nobus");
    let nowhere = format!("unix:path={}", dir.path().join("no-bus-here").display());
    let out = desktop_notify(&nowhere, "Reaped 1 orphaned MCP server, 1 MiB freed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(stderr.starts_with("reaperctl desktop-notify: no session bus: "), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn desktop_notify_sends_one_notify_and_exits_0() {
    let Some(bus) = Bus::start("desktop_notify_sends_one_notify_and_exits_0") else {
        return;
    };
    let notes = listener(&bus.address, true);
    let out = desktop_notify(&bus.address, "Reaped 2 orphaned MCP servers, 3 MiB freed");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let n = notes.recv_timeout(Duration::from_secs(10)).expect("the Notify");
    assert_eq!((n.app.as_str(), n.summary.as_str()), ("mcp-reaper", "Reaped 2 orphaned MCP servers, 3 MiB freed"));
    assert!(notes.recv_timeout(Duration::from_secs(1)).is_err(), "one Notify only");
}

/// Issue 35 item 2: one host's copies of one server reach
/// `[generations] notify_copies`: one `Notify` naming the host, the count
/// and the command to see them, and no second one for the same pile.
#[test]
fn copies_piling_up_under_a_live_host_are_told_once() {
    let Some(bus) = Bus::start("copies_piling_up_under_a_live_host_are_told_once") else {
        return;
    };
    let notes = listener(&bus.address, true);
    let fetch = || Spec::new(&["uvx", "mcp-server-fetch"]);
    let sb = Sandbox::new(vec![Spec::new(CLAUDE).stdio_pty().child(fetch()).child(fetch()).child(fetch())]);
    let host = sb.pid_of("claude");
    let cfg = sb.dir().config_with(
        0,
        "interval_secs = 1",
        "[notify]\ndesktop = true\n[generations]\nsample_secs = 1\nnotify_copies = 3\nnotify_memory_mib = 0\n",
    );
    let how = Launch { env: vec![("DBUS_SESSION_BUS_ADDRESS", bus.address.clone())], ..Launch::default() };
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &how);
    let n =
        notes.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|e| panic!("no Notify ({e}):\n{}", d.log_text()));
    assert!(
        n.summary.starts_with(&format!("MCP servers piling up: host claude --resume (pid {host}) holds 3 copies of ")),
        "{n:?}"
    );
    let st = d.status();
    let scans = st["scans"]["count"].as_u64().unwrap();
    d.status_until(Duration::from_secs(60), "more samples", |st| st["scans"]["count"].as_u64().unwrap() > scans + 5);
    assert!(notes.recv_timeout(Duration::from_secs(1)).is_err(), "told once");
    assert_eq!(d.count("MCP servers piling up"), 1, "{}", d.log_text());
    sb.assert_alive(&sb.all_pids());
}
