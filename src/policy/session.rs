//! `reaperctl run` sessions as the exact attribution of a tree. A wrapper is
//! a child subreaper: whatever its host leaves re-parents to it. Which of its
//! children is the host the wrapper itself shows (the pidfd it holds, read
//! into [`crate::scan::Details::run_host`]); everything else below it is the
//! session's leftovers. Where that cannot be read, nothing is concluded.

use std::fmt::Write as _;

use super::Judgement;
use crate::names::name;
use crate::scan::Snapshot;

/// What a wrapper says about the process `child` directly below it.
pub(super) enum Below {
    /// Left in the session: the text names the session.
    Leftover(String),
    /// The host itself (the program the wrapper runs): the text says so.
    Host(String),
}

/// `None` when `w` is no wrapper, or one whose host cannot be read.
pub(super) fn below(snap: &Snapshot, w: usize, child: usize) -> Option<Below> {
    let wp = &snap.procs[w];
    if !crate::session::is_run_wrapper(&wp.cmdline) {
        return None;
    }
    let host = wp.details.as_ref()?.run_host?;
    let session = format!("the `reaperctl run` session of pid {}", wp.pid());
    Some(if host == 0 {
        Below::Leftover(format!("{session} after its host exited"))
    } else if host == snap.procs[child].pid().get() {
        Below::Host(format!("{} is the host `reaperctl run` (pid {}) runs", name(&snap.procs[child]), wp.pid()))
    } else {
        Below::Leftover(format!("{session} (its host, pid {host}, lives on)"))
    })
}

/// Names the session a tree's root was started in, when its wrapper no
/// longer holds it: a note only (the host may live on without the wrapper).
pub(super) fn note_cgroup(snap: &Snapshot, j: &mut Judgement) {
    if let Some(w) = snap.procs[j.root].details.as_ref().and_then(|d| d.run_session) {
        let _ = write!(
            j.reason,
            "; it was started in the `reaperctl run` session cgroup {}{w}",
            crate::session::LEAF_PREFIX
        );
    }
}
