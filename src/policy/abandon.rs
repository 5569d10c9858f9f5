//! Leaks under live hosts: a server whose host ended its stdin while the
//! server kept running (abandoned); and the questions both this and the
//! `stale` rules (`stale.rs`) need answered.
//!
//! Evidence only, read by `scan/link.rs` for the processes [`questions`]
//! names: without it (not asked yet, unreadable, neither socket diagnostics
//! nor a duplicate of the stdin socket available) a tree keeps the verdict
//! it had.

use super::{Judgement, Verdict};
use crate::names::name;
use crate::scan::{FdTarget, Holder, Process, Question, Snapshot, StdinEnd};
use crate::tree::Forest;

/// Processes searched for a leaked write end at most (the host's tree).
const MAX_SEARCH: usize = 256;

/// The stdins to look at for these judgements: the root of every tree of a
/// live host (its link to the host), and what the `stale` rules weigh
/// ([`super::stale::questions`]). Only those not answered yet.
pub fn questions(snap: &Snapshot, forest: &Forest, judgements: &[Judgement]) -> Vec<Question> {
    let mut out: Vec<Question> = Vec::new();
    for j in judgements.iter().filter(|j| j.verdict == Verdict::Live) {
        let Some(h) = j.host else { continue };
        if j.owner.is_some_and(|o| unanswered_link(snap, j.root, o)) {
            let tree: std::collections::HashSet<usize> = j.members.iter().map(|&(m, _)| m).collect();
            let below = forest.descendants(h).into_iter().map(|(d, _)| d);
            let search =
                std::iter::once(h).chain(below.filter(|d| *d != h && !tree.contains(d))).take(MAX_SEARCH).collect();
            out.push(Question { proc: j.root, expected: j.owner, search, channels: false });
        }
        super::stale::questions(snap, forest, h, &mut out);
    }
    out
}

/// Where `p` reads its protocol from, when that is a pipe or socket: fd 0,
/// or the fd above 2 an SDK moved it to (see [`crate::scan::Transport`]).
fn stdin_target(p: &Process) -> Option<&FdTarget> {
    p.details.as_ref()?.transport_input().map(|(_, t)| t)
}

/// Whether `i`'s stdin is a link not yet looked at, and not simply `of`'s
/// own stdin passed on (then it is no link `of` made).
fn unanswered_link(snap: &Snapshot, i: usize, of: usize) -> bool {
    let p = &snap.procs[i];
    let Some(t) = stdin_target(p) else { return false };
    p.details.as_ref().is_some_and(|d| d.stdin.is_none()) && (i == of || stdin_target(&snap.procs[of]) != Some(t))
}

/// Turns a live host's tree into an abandoned one when the host made the
/// root's stdin (the root is the host's own child: the pipe or socketpair is
/// the host's) and no writer is left on it; notes a write end held by
/// someone else than the owner. A stdin some other process between them
/// made (a shell's pipeline under an IDE, a script) says nothing about the
/// host: it is only a suspect.
pub(super) fn abandoned(snap: &Snapshot, j: &mut Judgement, reap: bool) {
    let (Some(h), Some(o)) = (j.host, j.owner) else { return };
    let root = &snap.procs[j.root];
    let Some(t) = stdin_target(root) else { return };
    if stdin_target(&snap.procs[o]) == Some(t) || stdin_target(&snap.procs[h]) == Some(t) {
        return; // its stdin is the host's own: no link of the host's making
    }
    match root.details.as_ref().and_then(|d| d.stdin.as_ref()) {
        Some(StdinEnd::Gone(why)) if o == h => {
            j.verdict = Verdict::Abandoned;
            j.candidate = reap;
            j.reap = reap;
            j.reason = format!("stdin closed by {}: {why}, and the server kept running", name(&snap.procs[h]));
            if !reap {
                j.reason.push_str("; kept because reap_abandoned = false");
            }
        }
        Some(StdinEnd::Gone(why)) => {
            j.suspect = Some(format!(
                "its stdin has no writer ({why}), but {} made that link, not host {}: nothing says the host let it go",
                name(&snap.procs[o]),
                name(&snap.procs[h])
            ));
        }
        Some(StdinEnd::Open(Holder::Other(who))) => {
            let holder = who
                .and_then(|p| snap.index_of(p))
                .map_or_else(|| "a process outside its host's tree".to_string(), |i| name(&snap.procs[i]));
            j.reason = format!(
                "{}; its stdin is no longer held by {}, but by {holder} (a leaked write end keeps it)",
                j.reason,
                name(&snap.procs[o])
            );
        }
        _ => {}
    }
}
