//! The judgements that wait: a tree to reap gets its grace, counted from
//! when a daemon first saw it, and a member read within its own start tick
//! waits one scan for its identity to settle.

use std::fmt::Write as _;
use std::time::Duration;

use super::{Inputs, Judgement, Verdict, pressure};
use crate::names::name;
use crate::scan::Snapshot;

/// Time after which an unsettled identity has settled (one 10 ms tick, and
/// some slack for the next scan to start after it).
const SETTLE: Duration = Duration::from_millis(20);

/// A member read within its own start tick may yet be replaced by a same-tick
/// newcomer with the same identity: wait for the next scan rather than act.
pub(super) fn hold_unsettled(snap: &Snapshot, j: &mut Judgement) {
    if !j.reap {
        return;
    }
    let Some(&(m, _)) = j.members.iter().find(|&&(m, _)| !snap.procs[m].identity_settled()) else { return };
    let why = format!(
        "member {} started less than a clock tick before the scan, so it is confirmed on the next one",
        name(&snap.procs[m])
    );
    hold(j, SETTLE, &why);
}

/// A tree that would be reaped waits `left` more (Young); `why` is added
/// to its reason.
fn hold(j: &mut Judgement, left: Duration, why: &str) {
    j.verdict = Verdict::Young;
    j.reap = false;
    j.grace_left = Some(left);
    let _ = write!(j.reason, "; {why}");
}

pub(super) fn apply_grace(snap: &Snapshot, j: &mut Judgement, inp: &Inputs<'_>) {
    let id = snap.procs[j.root].id;
    let grace = inp.config.grace();
    let Some(first) = inp.grace.get(id).or_else(|| (!inp.grace.observes()).then_some(inp.now)) else {
        // A scan's first sight says nothing of the tree: it is what its
        // evidence says; a daemon's clock starts when the daemon sees it.
        if j.reap && !grace.is_zero() && inp.grace.waiver(id).is_none() {
            let _ = write!(
                j.reason,
                "; a daemon reaps it after the {}s grace, counted from when it first sees the tree (none has yet)",
                grace.as_secs()
            );
        }
        return;
    };
    let first = first.min(inp.now);
    j.first_seen = Some(first);
    if let Some(why) = inp.grace.waiver(id) {
        if j.reap {
            j.reason = format!("{}; no grace: {why}", j.reason);
        }
        return;
    }
    let seen_for = inp.now.duration_since(first).unwrap_or_default();
    if seen_for < grace && j.reap {
        let left = grace.checked_sub(seen_for).unwrap();
        if let Some(why) = pressure::skips_grace(&inp.config.pressure, inp.pressure.as_ref()) {
            j.reason = format!("{}; {why}: grace skipped ({}s of {}s left)", j.reason, secs_up(left), grace.as_secs());
            return;
        }
        let why = format!(
            "first seen {}s ago, reaped after the {}s grace ({}s left)",
            seen_for.as_secs(),
            grace.as_secs(),
            secs_up(left)
        );
        hold(j, left, &why);
    } else if j.verdict == Verdict::Abandoned {
        let _ = write!(j.reason, "; first seen {}s ago", seen_for.as_secs());
    }
}

/// Whole seconds, rounded up.
fn secs_up(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}
