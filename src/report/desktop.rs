//! Desktop notifications (`[notify] desktop`, for a user daemon): after a
//! cycle that reaped something, one freedesktop notification over the
//! session D-Bus (`org.freedesktop.Notifications.Notify`): "Reaped 3
//! orphaned MCP servers, 612 MiB freed". At most one a minute: reaps in
//! between are held back and summed into the next.
//!
//! A send never holds up the loop: it is spawned, and capped at 1 s from
//! connecting to the reply (a notification daemon that never answers). No
//! bus, or no answer, is one log line, not one per reap; reaping goes on.
//!
//! Dependency: `zbus` (default features off, `tokio` only: the message layer
//! on our runtime, no proxies or object server). Pure Rust, so the packages
//! need no libdbus. Measured with `cargo build --release` before and after
//! issue 15's items 3 and 4 (pressure and this): mcp-reaperd 4,894,624 →
//! 5,970,656 bytes (+1,076,032), stripped 3,900,416 → 4,747,280 (+846,864);
//! zbus's own symbols are ~474 KiB of it, the pressure code ~12 KiB, the rest
//! generic code and unwind tables. reaperctl does not link it (3,952,136 →
//! 3,932,712).

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use tokio::time::Instant;

/// At most one notification per this.
pub const EVERY: Duration = Duration::from_secs(60);
/// A send's limit: connecting, authenticating, `Notify` and its reply.
pub const CAP: Duration = Duration::from_secs(1);

const SERVICE: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";

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

    /// Sends what is held, if due: spawned on the loop's `LocalSet`, so this
    /// returns at once.
    pub fn send(&mut self) {
        let Some(tally) = self.take_due(Instant::now()) else { return };
        let trouble = Rc::clone(&self.trouble);
        tokio::task::spawn_local(async move {
            let summary = tally.summary();
            let sent = match tokio::time::timeout(CAP, notify(&summary)).await {
                Ok(Ok(id)) => Ok(id),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {} s", CAP.as_secs())),
            };
            said(&sent, &summary, &trouble);
        });
    }
}

/// Logs a send's result: the first failure is a line, later ones debug.
fn said(sent: &Result<u32, String>, summary: &str, trouble: &Cell<bool>) {
    match sent {
        Ok(id) => {
            if trouble.replace(false) {
                tracing::info!("desktop notifications work again");
            }
            tracing::debug!("desktop notification {id} sent: {summary}");
        }
        Err(e) if !trouble.replace(true) => tracing::warn!(
            reaper_action = "error",
            "desktop notification not sent ({e}); saying this once, reaping goes on (\"{summary}\")"
        ),
        Err(e) => tracing::debug!("desktop notification not sent either: {e}"),
    }
}

/// One `Notify` on the session bus; the notification's id.
async fn notify(summary: &str) -> zbus::Result<u32> {
    let bus = zbus::Connection::session().await?;
    let hints: HashMap<&str, zbus::Variant<'_>> = HashMap::new();
    let body = "Their AI host had exited. `reaperctl status` lists what was reaped.";
    let args = ("mcp-reaper", 0u32, "", summary, body, Vec::<&str>::new(), hints, -1i32);
    let reply = bus.call_method(Some(SERVICE), PATH, Some(SERVICE), "Notify", &args).await?;
    reply.body().deserialize::<u32>()
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
