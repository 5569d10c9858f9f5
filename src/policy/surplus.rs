//! Which copies of a server a live host holds may end (issue 35 item 3):
//! the opt-in `[generations] end_idle` policy, and what `reaperctl
//! generations --end` and a dry run show. Pure: the daemon's samples of
//! each copy's counters ([`Watch`]) and the respawn guard's stage per host
//! and command ([`Stage`]) come in from the caller.
//!
//! A copy the host holds is not an orphan: the host may use it again, and
//! a host that restarts what it loses turns a careless ending into a
//! respawn loop. So everything that could mean "in use" keeps a copy, and
//! so does everything not known: ending needs a copy that is neither among
//! the newest, nor the only one, that the daemon watched for the whole idle
//! window without seeing its tree read, write or use CPU, with no request
//! waiting in its stdin, all of whose members run as its host's user.

use std::time::Duration;

use super::Verdict;
use super::generations::{Copy, Group};
use crate::scan::Snapshot;

/// What the daemon saw of one copy over time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch {
    /// Since its counters (CPU, bytes read and written, members) last moved,
    /// or since it was first sampled when they never did.
    pub idle_for: Duration,
    /// Bytes waiting unread in its stdin (the host wrote a request the copy
    /// has not read yet); `None` when that could not be told.
    pub waiting: Option<u64>,
}

/// The respawn guard's word on one host and command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Nothing of it was ended yet: end one copy, then watch the host.
    Probe,
    /// A copy was ended this recently: wait and see whether the host starts
    /// another.
    Watching { secs_left: u64 },
    /// An ending passed without a restart: the rest may follow.
    Open,
    /// The host started a copy right after one was ended: nothing more.
    Tripped(String),
}

#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub keep_newest: usize,
    pub idle: Duration,
}

impl Settings {
    pub fn of(cfg: &crate::config::GenerationSettings) -> Settings {
        Settings { keep_newest: usize::try_from(cfg.keep_newest).unwrap_or(usize::MAX).max(1), idle: cfg.idle_window() }
    }
}

/// One copy's fate, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub root: usize,
    pub host: usize,
    pub command: String,
    pub end: bool,
    pub why: String,
}

/// Decides every live copy of every group, oldest first within a group.
pub fn plan(
    snap: &Snapshot,
    groups: &[Group],
    s: Settings,
    watch: impl Fn(usize) -> Option<Watch>,
    stage: impl Fn(usize, &str) -> Stage,
) -> Vec<Decision> {
    let mut out = Vec::new();
    for g in groups {
        let start = |c: &Copy| (snap.procs[c.root].id.start_time.0, snap.procs[c.root].pid());
        let mut live: Vec<&Copy> = g.copies().filter(|c| c.verdict == Verdict::Live).collect();
        live.sort_by_key(|c| start(c));
        let newest = live.len().saturating_sub(s.keep_newest);
        let stage = stage(g.host, &g.command);
        let mut ending = 0usize;
        for (i, c) in live.iter().enumerate() {
            let keep =
                |why: String| Decision { root: c.root, host: g.host, command: g.command.clone(), end: false, why };
            let d = if live.len() == 1 {
                keep("the only copy of its server under its host".into())
            } else if i >= newest {
                keep(format!("one of the newest {} of {} copies", s.keep_newest, live.len()))
            } else if let Some(why) = not_idle(snap, g.host, c, s, watch(c.root)) {
                keep(why)
            } else {
                match &stage {
                    Stage::Tripped(why) => keep(format!("respawn guard: {why}")),
                    Stage::Watching { secs_left } => keep(format!(
                        "a copy of it was just ended; waiting {secs_left}s more to see whether the host starts another"
                    )),
                    Stage::Probe if ending >= 1 => keep(
                        "the first ending is one copy: the rest wait to see whether the host starts another".into(),
                    ),
                    Stage::Probe | Stage::Open => {
                        ending += 1;
                        let w = watch(c.root).map_or(Duration::ZERO, |w| w.idle_for);
                        Decision {
                            root: c.root,
                            host: g.host,
                            command: g.command.clone(),
                            end: true,
                            why: format!(
                                "surplus copy: its host {} holds {} copies of {}; this one, older than the newest {}, \
                                 did no I/O and used no CPU for {} (idle window {}), no request waits in its stdin",
                                crate::names::name(&snap.procs[g.host]),
                                live.len(),
                                g.command,
                                s.keep_newest,
                                span(w),
                                span(s.idle)
                            ),
                        }
                    }
                }
            };
            out.push(d);
        }
    }
    out
}

/// Why a copy counts as in use (or not known to be idle); `None` when it
/// is idle by every sign there is.
fn not_idle(snap: &Snapshot, host: usize, c: &Copy, s: Settings, w: Option<Watch>) -> Option<String> {
    let host_uid = snap.procs[host].uid();
    if host_uid.is_none() || c.members.iter().any(|&m| snap.procs[m].uid() != host_uid) {
        return Some("a member runs as another user than its host (or one's user is not known)".into());
    }
    if c.held != Some(true) {
        return Some("not known to be held by its host itself (the transport's holder was not told)".into());
    }
    let Some(w) = w else {
        return Some("not sampled by the daemon yet".into());
    };
    if w.idle_for < s.idle {
        return Some(format!("did I/O or used CPU {} ago (idle window {})", span(w.idle_for), span(s.idle)));
    }
    match w.waiting {
        Some(0) => None,
        Some(n) => Some(format!("{n} byte(s) wait unread in its stdin: the host wrote to it")),
        None => Some("whether a request waits in its stdin could not be told".into()),
    }
}

/// `95s`, `12m`, `3h05m`.
pub fn span(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

#[cfg(test)]
#[path = "surplus_tests.rs"]
mod tests;
