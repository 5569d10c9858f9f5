//! What happened to each tree: the [`Outcome`] a termination returns, and how
//! it is counted from the run's targets. Its words and JSON are in
//! `report::outcome`.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::{Run, Settings};
use crate::ids::Identity;
use crate::policy::Verdict;
use crate::scan::{MemInfo, ProcFs};

/// Memory a process held before the signal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Memory {
    pub pss_bytes: u64,
    pub swap_bytes: u64,
    /// Counted from RSS + `VmSwap` because `smaps_rollup` was unreadable.
    pub estimated_from_rss: bool,
}

impl Memory {
    pub fn total(&self) -> u64 {
        self.pss_bytes + self.swap_bytes
    }
}

/// What happened to one tree. (Serialized by `report::outcome`.)
#[derive(Clone, Debug)]
pub struct Outcome {
    pub verdict: Verdict,
    pub reason: String,
    pub root: Identity,
    pub root_cmd: String,
    pub dry_run: bool,
    /// Members that were alive (non-zombie) and verified when the signals began.
    pub members: usize,
    /// Children forked during the termination that joined the tree.
    pub joined: usize,
    /// Pids dropped because their start time changed (PID reuse) or gone before the signal.
    pub dropped: usize,
    /// Signals sent (or, in dry-run, that would be sent first): "TERM", "KILL".
    pub signals: Vec<&'static str>,
    pub escalated: bool,
    pub group_signals: usize,
    pub member_signals: usize,
    pub gone: usize,
    /// Members still there after SIGKILL, with their state letter.
    pub unkillable: Vec<(Identity, char)>,
    /// Signal failures (permission, …) by member.
    pub errors: Vec<String>,
    pub took_ms: u64,
    /// From the end of the SIGTERM wave to the start of the SIGKILL wave, on
    /// the reaper's own monotonic clock (never less than `term_timeout`);
    /// `None` when no SIGKILL was needed. Truncated to whole ms.
    pub term_to_kill_ms: Option<u64>,
    pub term_timeout_secs: f64,
    /// Memory of members that are gone (in dry-run: of all members).
    pub reclaimed: Memory,
    pub mem_available_delta: Option<i64>,
    pub swap_free_delta: Option<i64>,
    /// The containers of the tree's `docker|podman run` clients.
    pub containers: Vec<super::ContainerOutcome>,
    /// The Kubernetes pod UID and the container the tree's cgroups name.
    pub pod_uid: Option<String>,
    pub cgroup_container: Option<String>,
    /// The pod's namespace and name, and the container's name (see [`super::Order`]).
    pub pod: Option<crate::scan::PodName>,
    pub container_name: Option<String>,
}

impl Outcome {
    /// The one definition of "a tree reaped", for every total: something
    /// was ended and nothing was left behind unkillable.
    pub fn reaped(&self) -> bool {
        self.gone > 0 && self.unkillable.is_empty()
    }

    pub fn success(&self) -> bool {
        self.unkillable.is_empty() && self.errors.is_empty()
    }
}

pub(super) fn outcome(r: Run, t0: Instant, before: Option<MemInfo>, s: &Settings, procfs: &ProcFs) -> Outcome {
    let unkillable: Vec<(Identity, char)> = if s.dry_run {
        Vec::new()
    } else {
        r.live()
            .map(|t| {
                let state = procfs.stat(t.id.pid).filter(|st| st.start_time == t.id.start_time.0);
                (t.id, state.map_or('?', |st| st.state as char))
            })
            .collect()
    };
    let reclaimed = r.targets.iter().filter(|t| t.gone || s.dry_run).fold(Memory::default(), |mut m, t| {
        m.pss_bytes += t.mem.pss_bytes;
        m.swap_bytes += t.mem.swap_bytes;
        m.estimated_from_rss |= t.mem.estimated_from_rss;
        m
    });
    let (took, after) = match r.finished {
        Some((at, after)) if !s.dry_run => (at - t0, after),
        _ if s.dry_run => (Duration::ZERO, None),
        _ => (t0.elapsed(), None),
    };
    let delta = |f: fn(&MemInfo) -> u64| match (before, after) {
        (Some(b), Some(a)) => Some(i128::from(f(&a)) - i128::from(f(&b))).and_then(|d| i64::try_from(d).ok()),
        _ => None,
    };
    Outcome {
        verdict: r.order.verdict,
        reason: r.order.reason.clone(),
        root: r.order.root,
        root_cmd: r.order.root_cmd.clone(),
        dry_run: s.dry_run,
        members: r.targets.iter().filter(|t| !t.joined).count(),
        joined: r.targets.iter().filter(|t| t.joined).count(),
        dropped: r.dropped,
        escalated: r.signals.contains(&"KILL"),
        signals: r.signals,
        group_signals: r.group_signals,
        member_signals: r.member_signals,
        gone: r.targets.iter().filter(|t| t.gone).count(),
        unkillable,
        errors: r.errors,
        took_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        term_to_kill_ms: r.killed_at.map(|k| u64::try_from((k - t0).as_millis()).unwrap_or(u64::MAX)),
        term_timeout_secs: s.term_timeout.as_secs_f64(),
        reclaimed,
        mem_available_delta: delta(|m| m.mem_available_bytes),
        swap_free_delta: delta(|m| m.swap_free_bytes),
        containers: r.containers,
        pod_uid: r.order.pod_uid.clone(),
        cgroup_container: r.order.cgroup_container.clone(),
        pod: r.order.pod.clone(),
        container_name: r.order.container_name.clone(),
    }
}
