//! The same server command started more than once by one live host: a
//! respawn loop, a reload, a subagent each starting its own copy. Reported
//! (scan, status, metrics), never reaped: a host may want two.

use std::collections::BTreeMap;

use super::{Judgement, Verdict};
use crate::scan::Snapshot;

/// One server command running more than once under one host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Duplicate {
    pub host: usize,
    /// The program and its arguments, masked like a command line.
    pub command: String,
    /// Roots of the trees that run it, by pid.
    pub roots: Vec<usize>,
    /// Sets started apart ([`super::generations::WINDOW_SECS`]), sessions
    /// aside: `reaperctl generations` splits them by session too.
    pub generations: usize,
    /// RSS + swap of every member of every copy: what a scan has at hand
    /// (`reaperctl generations` reads PSS).
    pub rss_bytes: u64,
}

/// Trees of a live host whose roots run the same program with the same
/// arguments. Trees going with a stale host are not counted (they go).
pub fn duplicates(snap: &Snapshot, judgements: &[Judgement]) -> Vec<Duplicate> {
    let mut groups: BTreeMap<(usize, String), Vec<&Judgement>> = BTreeMap::new();
    for j in judgements.iter().filter(|j| j.verdict != Verdict::Stale) {
        let Some(h) = j.host else { continue };
        let p = &snap.procs[j.root];
        groups.entry((h, p.program.line(&p.cmdline))).or_default().push(j);
    }
    let tck = snap.ctx.clk_tck.max(1);
    groups
        .into_iter()
        .filter(|(_, js)| js.len() > 1)
        .map(|((host, line), js)| {
            let mut roots: Vec<usize> = js.iter().map(|j| j.root).collect();
            roots.sort_unstable_by_key(|&r| snap.procs[r].pid());
            let mut starts: Vec<u64> = roots.iter().map(|&r| snap.procs[r].id.start_time.0).collect();
            starts.sort_unstable();
            let rss_bytes = js
                .iter()
                .flat_map(|j| j.members.iter())
                .map(|&(m, _)| snap.procs[m].rss_bytes() + snap.procs[m].swap_bytes())
                .sum();
            Duplicate {
                host,
                command: crate::redact::redact(&line).into_owned(),
                roots,
                generations: super::generations::count(&starts, tck),
                rss_bytes,
            }
        })
        .collect()
}
