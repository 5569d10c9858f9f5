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
}

/// Trees of a live host whose roots run the same program with the same
/// arguments. Trees going with a stale host are not counted (they go).
pub fn duplicates(snap: &Snapshot, judgements: &[Judgement]) -> Vec<Duplicate> {
    let mut groups: BTreeMap<(usize, String), Vec<usize>> = BTreeMap::new();
    for j in judgements.iter().filter(|j| j.verdict != Verdict::Stale) {
        let Some(h) = j.host else { continue };
        let p = &snap.procs[j.root];
        groups.entry((h, p.program.line(&p.cmdline))).or_default().push(j.root);
    }
    groups
        .into_iter()
        .filter(|(_, roots)| roots.len() > 1)
        .map(|((host, line), mut roots)| {
            roots.sort_by_key(|&r| snap.procs[r].pid());
            Duplicate { host, command: crate::redact::redact(&line).into_owned(), roots }
        })
        .collect()
}
