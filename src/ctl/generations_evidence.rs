//! Whether a host's copies are idle, for `reaperctl generations --end`
//! (issue 35 item 4). One look at a copy says nothing of it; two looks
//! apart do. The daemon's samples are those looks taken over its idle
//! window, so they come first; without them reaperctl looks twice itself,
//! `--sample-secs` apart, and a copy whose counters moved between the two
//! is busy. Either way the window the plan judges by is the span the
//! evidence covers: a copy is never called idle for longer than was seen.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::ids::Identity;
use crate::policy::generations::Group;
use crate::report::status::GenerationStatus;
use crate::scan::{ProcFs, Snapshot, TreeCounters};

/// How long each copy was seen doing nothing, and over what window.
#[derive(Debug)]
pub(super) struct Evidence {
    /// In words, for the report: where the looks come from.
    pub source: String,
    /// The idle window the plan judges by.
    pub idle: Duration,
    idle_for: HashMap<Identity, Duration>,
}

impl Evidence {
    /// Since `id`'s tree last moved, as far as seen; `None`: not looked at.
    pub fn idle_for(&self, id: Identity) -> Option<Duration> {
        self.idle_for.get(&id).copied()
    }
}

/// The daemon's samples of `host`'s piles, when it has any: its idle
/// window, and each copy it has looked at more than once.
pub(super) fn from_daemon(piles: &[GenerationStatus], host: Identity, every_secs: u64) -> Option<Evidence> {
    let mine: Vec<&GenerationStatus> =
        piles.iter().filter(|p| p.host_pid == host.pid.get() && p.host_start_time == host.start_time.0).collect();
    let idle = mine.iter().map(|p| p.idle_secs).max()?;
    let every_secs = mine.iter().map(|p| p.sample_secs).find(|&n| n > 0).unwrap_or(every_secs);
    let idle_for = mine
        .iter()
        .flat_map(|p| &p.copy_samples)
        // Watched for 0 s: one sample, which tells nothing yet.
        .filter(|c| c.watched_secs > 0)
        .filter_map(|c| {
            let pid = crate::ids::Pid::new(c.pid)?;
            let id = Identity { pid, start_time: crate::ids::StartTime(c.start_time) };
            Some((id, Duration::from_secs(c.idle_secs)))
        })
        .collect();
    Some(Evidence {
        source: format!("the daemon's samples (every {every_secs}s)"),
        idle: Duration::from_secs(idle),
        idle_for,
    })
}

/// Two looks at every copy of `groups` that has company (a lone copy is
/// never ended, so never waited for), `span` apart.
pub(super) fn sample_locally(procfs: &ProcFs, snap: &Snapshot, groups: &[&Group], span: Duration) -> Evidence {
    let copies: Vec<(Identity, Vec<Identity>)> = groups
        .iter()
        .filter(|g| g.count() >= 2)
        .flat_map(|g| g.copies())
        .map(|c| (snap.procs[c.root].id, c.members.iter().map(|&m| snap.procs[m].id).collect()))
        .collect();
    let source = format!("two looks {}s apart by reaperctl", span.as_secs());
    if copies.is_empty() {
        return Evidence { source, idle: span, idle_for: HashMap::new() };
    }
    let t0 = Instant::now();
    let first: Vec<TreeCounters> = copies.iter().map(|(_, m)| counters(procfs, m)).collect();
    std::thread::sleep(span);
    let seen = t0.elapsed();
    // A tree some of whose counters could not be read is not seen idle:
    // what moved there is not known.
    let idle_for = copies
        .iter()
        .zip(first)
        .filter(|(_, before)| before.unreadable == 0)
        .map(|((root, m), before)| (*root, if counters(procfs, m) == before { seen } else { Duration::ZERO }))
        .collect();
    Evidence { source, idle: span, idle_for }
}

fn counters(procfs: &ProcFs, members: &[Identity]) -> TreeCounters {
    let mut c = TreeCounters::default();
    for &id in members {
        c.add(procfs.counters(id).as_ref());
    }
    c
}
