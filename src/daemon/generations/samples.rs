//! The daemon's samples of each copy's counters (issue 35): a copy is idle
//! for as long as its tree's CPU time, bytes read and written and member
//! count have not moved, counted from the first sample when they never did.
//! One look cannot tell idle from busy; two looks `sample_secs` apart can.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::ids::Identity;
use crate::scan::{ProcFs, Snapshot, TreeCounters};

/// What one copy's tree added up to at one look, and how many members
/// it had.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counters {
    tree: TreeCounters,
    members: usize,
}

#[derive(Clone, Debug)]
struct Sample {
    counters: Counters,
    first: Instant,
    changed: Instant,
    memory_bytes: u64,
    seen: bool,
}

/// Samples by copy root.
#[derive(Debug, Default)]
pub struct Samples {
    by_root: HashMap<Identity, Sample>,
}

/// What the samples say of one copy now.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    pub idle_for: Duration,
    pub watched_for: Duration,
    pub memory_bytes: u64,
}

impl Samples {
    /// Reads the counters (and memory) of the copy rooted at `root` with
    /// `members`, at `now`.
    pub fn sample(&mut self, procfs: &ProcFs, snap: &Snapshot, root: usize, members: &[usize], now: Instant) {
        let mut c = Counters { members: members.len(), ..Counters::default() };
        let mut memory = 0;
        for &m in members {
            let p = &snap.procs[m];
            let a = procfs.activity(p.id);
            c.tree.add(a.as_ref());
            let rollup = a.and_then(|a| a.rollup);
            memory += rollup.map_or(p.rss_bytes() + p.swap_bytes(), |r| r.pss_bytes + r.swap_pss_bytes);
        }
        let id = snap.procs[root].id;
        let s = self.by_root.entry(id).or_insert(Sample {
            counters: c,
            first: now,
            changed: now,
            memory_bytes: memory,
            seen: true,
        });
        if s.counters != c {
            s.counters = c;
            s.changed = now;
        }
        s.memory_bytes = memory;
        s.seen = true;
    }

    pub fn get(&self, id: Identity, now: Instant) -> Option<Seen> {
        let s = self.by_root.get(&id)?;
        Some(Seen {
            idle_for: now.saturating_duration_since(s.changed),
            watched_for: now.saturating_duration_since(s.first),
            memory_bytes: s.memory_bytes,
        })
    }

    /// Forgets the copies not sampled since the last call.
    pub fn prune(&mut self) {
        self.by_root.retain(|_, s| std::mem::replace(&mut s.seen, false));
    }
}
