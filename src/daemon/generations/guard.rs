//! The respawn guard (issue 35 item 3). Since the 2026-07-28 MCP revision a
//! client SHOULD restart a server that exits unexpectedly, so ending a copy
//! a host holds can start a loop. The first ending for a host and command is
//! one copy; if the host starts a copy of that command within
//! `respawn_guard_secs` of an ending, nothing more of it is ended while that
//! host lives, and the log and status say so.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::ids::Identity;
use crate::policy::generations::Group;
use crate::policy::surplus::Stage;
use crate::scan::Snapshot;

#[derive(Clone, Debug)]
struct Record {
    /// When the last copy was ended.
    ended: Instant,
    /// The newest copy's start time (clock ticks) when it was: a copy that
    /// started later is one the host started since.
    newest: u64,
    tripped: Option<String>,
}

/// Per host and command.
#[derive(Debug, Default)]
pub struct Guard {
    records: HashMap<(Identity, String), Record>,
}

impl Guard {
    pub fn stage(&self, host: Identity, command: &str, window: Duration, now: Instant) -> Stage {
        match self.records.get(&(host, command.to_string())) {
            None => Stage::Probe,
            Some(Record { tripped: Some(why), .. }) => Stage::Tripped(why.clone()),
            Some(r) => {
                let since = now.saturating_duration_since(r.ended);
                match window.checked_sub(since) {
                    Some(left) if !left.is_zero() => Stage::Watching { secs_left: left.as_secs().max(1) },
                    _ => Stage::Open,
                }
            }
        }
    }

    /// Copies of `command` were ended under `host` at `now`; `newest` is the
    /// start time of the newest copy there was.
    pub fn ended(&mut self, host: Identity, command: &str, newest: u64, now: Instant) {
        let r = self.records.entry((host, command.to_string())).or_insert(Record { ended: now, newest, tripped: None });
        r.ended = now;
        r.newest = r.newest.max(newest);
    }

    /// Looks for copies started after an ending, within `window` of it:
    /// returns the sentences of guards that trip now (each once).
    pub fn observe(&mut self, snap: &Snapshot, groups: &[Group], window: Duration, now: Instant) -> Vec<String> {
        let tck = snap.ctx.clk_tck.max(1) as f64;
        let mut tripped = Vec::new();
        for g in groups {
            let host = &snap.procs[g.host];
            let Some(r) = self.records.get_mut(&(host.id, g.command.clone())) else { continue };
            if r.tripped.is_some() {
                continue;
            }
            let since_end = now.saturating_duration_since(r.ended).as_secs_f64();
            for c in g.copies() {
                let p = &snap.procs[c.root];
                if p.id.start_time.0 <= r.newest {
                    continue;
                }
                // When it started, in seconds after the ending.
                let age = snap.ctx.uptime_secs - p.id.start_time.0 as f64 / tck;
                let after = since_end - age;
                if after <= window.as_secs_f64() {
                    let why = format!(
                        "its host {} started a copy of {} (pid {}) {:.0}s after one was ended: it restarts what it \
                         loses, so no more of its copies of it are ended",
                        crate::names::name(host),
                        g.command,
                        p.pid(),
                        after.max(0.0)
                    );
                    r.tripped = Some(why.clone());
                    tripped.push(why);
                    break;
                }
                r.newest = r.newest.max(p.id.start_time.0);
            }
        }
        tripped
    }

    /// Forgets hosts that are gone.
    pub fn retain_hosts(&mut self, alive: impl Fn(Identity) -> bool) {
        self.records.retain(|(h, _), _| alive(*h));
    }
}
