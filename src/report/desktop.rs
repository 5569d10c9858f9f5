//! Desktop notifications (`[notify] desktop`, for a user daemon): after a
//! cycle that reaped something, one freedesktop notification over the
//! session D-Bus (`org.freedesktop.Notifications.Notify`): "Reaped 3
//! orphaned MCP servers, 612 MiB freed". At most one a minute: reaps in
//! between are held back and summed into the next.
//!
//! The daemon decides when; `reaperctl desktop-notify` (src/ctl/desktop.rs,
//! zbus) talks to the bus. The daemon spawns it (found next to its own
//! executable, else on PATH; the session bus address is inherited) on a
//! blocking thread, so a send never holds up the loop. The child caps itself
//! at 1 s from connecting to the reply (a notification daemon that never
//! answers, exit 75) and is killed after 1.5 s. No bus, no answer, no
//! reaperctl: one log line, not one per reap; reaping goes on.
//!
//! Why a child: the daemon's resident memory is mostly its own text (the
//! kernel maps code around each fault), and zbus was ~422 KiB of
//! mcp-reaperd's code for a notification at most once a minute, opt-in.
//! Measured side by side on 2026-11-23 (`cargo build --release`, before and
//! after): mcp-reaperd 5,620,496 → 4,843,016 bytes (stripped 4,800,928 →
//! 4,147,056; `nm -C | grep -c zbus` 481 → 0); idle `VmRSS` after 10 s of
//! `mcp-reaperd --dry-run --config - --no-events`, 8 runs each, mean 7,165
//! → 6,834 KiB (−330). reaperctl grows 4,379,752 → 5,220,920 bytes; it runs
//! only to send (~3 ms to start and fail without a bus), once a minute at most.

use std::cell::Cell;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::Duration;

use tokio::time::Instant;

/// What the child's stderr line starts with; stripped from the reason logged.
pub const PREFIX: &str = "reaperctl desktop-notify: ";

/// At most one notification per this.
pub const EVERY: Duration = Duration::from_secs(60);
/// A send's limit: connecting, authenticating, `Notify` and its reply.
pub const CAP: Duration = Duration::from_secs(1);
/// The child is killed after this: its own cap, and time to start.
const KILL_AFTER: Duration = Duration::from_millis(1500);
/// How often the blocking thread looks whether the child has ended.
const POLL: Duration = Duration::from_millis(10);

const BODY: &str = "Their AI host had exited. `reaperctl status` lists what was reaped.";

/// Reaps not told yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub trees: u64,
    pub bytes: u64,
}

impl Tally {
    /// "Reaped 3 orphaned MCP servers, 612 MiB freed".
    pub fn summary(&self) -> String {
        let mib = (self.bytes + (1 << 19)) >> 20;
        let s = if self.trees == 1 { "" } else { "s" };
        format!("Reaped {} orphaned MCP server{s}, {mib} MiB freed", self.trees)
    }
}

/// The daemon's notifier: what is held back, and when the last went out.
#[derive(Debug, Default)]
pub struct Desktop {
    held: Tally,
    last_sent: Option<Instant>,
    /// The last send failed (said once); the next success says so.
    trouble: Rc<Cell<bool>>,
}

impl Desktop {
    pub fn new() -> Desktop {
        Desktop::default()
    }

    /// A cycle reaped `trees` trees that held `bytes`.
    pub fn add(&mut self, trees: u64, bytes: u64) {
        self.held.trees += trees;
        self.held.bytes += bytes;
    }

    /// Forgets what is held (notifications were turned off).
    pub fn clear(&mut self) {
        self.held = Tally::default();
    }

    /// When what is held may be told: `now`, or a minute after the last.
    fn due_at(&self, now: Instant) -> Option<Instant> {
        (self.held.trees > 0).then(|| self.last_sent.map_or(now, |t| t + EVERY))
    }

    /// Resolves when a notification is due; never while nothing is held.
    pub async fn due(&self) {
        match self.due_at(Instant::now()) {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    /// What is held, if it is due now; the clock restarts.
    fn take_due(&mut self, now: Instant) -> Option<Tally> {
        if self.due_at(now)? > now {
            return None;
        }
        self.last_sent = Some(now);
        Some(std::mem::take(&mut self.held))
    }

    /// Sends what is held, if due: the child is run and waited for on a
    /// blocking thread, from a task on the loop's `LocalSet`, so this
    /// returns at once.
    pub fn send(&mut self) {
        let Some(tally) = self.take_due(Instant::now()) else { return };
        let trouble = Rc::clone(&self.trouble);
        tokio::task::spawn_local(async move {
            let summary = tally.summary();
            let said_summary = summary.clone();
            let sent = match tokio::task::spawn_blocking(move || tell(&summary)).await {
                Ok(sent) => sent,
                Err(e) => Err(format!("the sending thread failed: {e}")),
            };
            said(&sent, &said_summary, &trouble);
        });
    }
}

/// One notification of its own (issue 35: copies piling up under a live
/// host), sent like the reaps' from a blocking thread, so the loop goes on
/// at once; a failure is logged at debug (the log line was written).
pub fn tell_once(summary: String, body: String) {
    tokio::task::spawn_local(async move {
        let sent = tokio::task::spawn_blocking(move || tell_with(&summary, &body)).await;
        if let Ok(Err(e)) | Err(e) = sent.map_err(|e| e.to_string()) {
            tracing::debug!("desktop notification not sent: {e}");
        }
    });
}

/// `reaperctl` next to this executable (a package installs both in one
/// directory, a build puts both in `target/…`), else the one on PATH.
fn reaperctl() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("reaperctl")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("reaperctl"))
}

/// Runs `reaperctl desktop-notify` and waits for it, at most [`KILL_AFTER`];
/// a failure's reason is the child's stderr line.
fn tell(summary: &str) -> Result<(), String> {
    tell_with(summary, BODY)
}

fn tell_with(summary: &str, body: &str) -> Result<(), String> {
    let path = reaperctl();
    let mut child = Command::new(&path)
        .arg("desktop-notify")
        .arg(format!("--summary={summary}"))
        .arg(format!("--body={body}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    let deadline = std::time::Instant::now() + KILL_AFTER;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(POLL),
            Ok(None) => {
                // Our own child, not yet waited for: its pid is still ours.
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} did not end within {} ms; killed", path.display(), KILL_AFTER.as_millis()));
            }
            Err(e) => return Err(format!("waiting for {}: {e}", path.display())),
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut err = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut err);
    }
    let reason = err.lines().rev().map(str::trim).find(|l| !l.is_empty());
    Err(match reason {
        Some(line) => line.strip_prefix(PREFIX.trim_end()).unwrap_or(line).trim().to_string(),
        None => format!("{} desktop-notify: {status}", path.display()),
    })
}

/// Logs a send's result: the first failure is a line, later ones debug.
fn said(sent: &Result<(), String>, summary: &str, trouble: &Cell<bool>) {
    match sent {
        Ok(()) => {
            if trouble.replace(false) {
                tracing::info!("desktop notifications work again");
            }
            tracing::debug!("desktop notification sent: {summary}");
        }
        Err(e) if !trouble.replace(true) => tracing::warn!(
            reaper_action = "error",
            "desktop notification not sent ({e}); saying this once, reaping goes on (\"{summary}\")"
        ),
        Err(e) => tracing::debug!("desktop notification not sent either: {e}"),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_servers_and_mib() {
        assert_eq!(Tally { trees: 3, bytes: 612 << 20 }.summary(), "Reaped 3 orphaned MCP servers, 612 MiB freed");
        assert_eq!(Tally { trees: 1, bytes: (1 << 20) - 1 }.summary(), "Reaped 1 orphaned MCP server, 1 MiB freed");
        assert_eq!(Tally { trees: 2, bytes: 0 }.summary(), "Reaped 2 orphaned MCP servers, 0 MiB freed");
    }

    #[test]
    fn at_most_one_a_minute_and_the_held_back_are_summed() {
        let mut d = Desktop::new();
        let t0 = Instant::now();
        assert_eq!(d.take_due(t0), None, "nothing held, nothing sent");
        d.add(1, 100 << 20);
        assert_eq!(d.take_due(t0), Some(Tally { trees: 1, bytes: 100 << 20 }), "the first at once");
        d.add(2, 10 << 20);
        d.add(1, 1 << 20);
        assert_eq!(d.due_at(t0), Some(t0 + EVERY));
        assert_eq!(d.take_due(t0 + EVERY - Duration::from_millis(1)), None, "held within the minute");
        assert_eq!(d.take_due(t0 + EVERY), Some(Tally { trees: 3, bytes: 11 << 20 }), "summed into the next");
        assert_eq!(d.due_at(t0), None);
        d.add(1, 0);
        assert_eq!(d.take_due(t0 + EVERY + EVERY / 2), None);
        assert!(d.take_due(t0 + EVERY * 2).is_some());
    }
}
