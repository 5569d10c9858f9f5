//! The daemon's status as plain data: what `reaperctl status`, `reap-now`,
//! the metrics and the control socket carry. Built here from judgements and
//! outcomes, so every view of a tree or an outcome has one shape.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, Serializer};

use crate::config::Mode;
use crate::policy::{Judgement, Verdict};
use crate::reap::Outcome;
use crate::scan::Snapshot;

// The parts of the status that say what runs beside the trees (generations,
// announced session ends, `reaperctl run` sessions, memory pressure).
pub use super::status_parts::{CopySample, GenerationStatus, PressureStatus, RunSession, SessionEnding};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReloadResult {
    pub at_unix: u64,
    pub ok: bool,
    /// What changed, or every error found.
    pub messages: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReapResult {
    pub dry_run: bool,
    pub events: Vec<ReapEvent>,
}

/// One tree acted on, as remembered by the daemon.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReapEvent {
    pub at_unix: u64,
    pub dry_run: bool,
    pub verdict: Verdict,
    /// The root's pid (kept for compatibility; the same as `root_pid`).
    pub root: i32,
    /// The root's identity, as in every tree and outcome.
    #[serde(default)]
    pub root_pid: i32,
    #[serde(default)]
    pub root_start_time: u64,
    pub root_cmd: String,
    pub reason: String,
    /// Owner of the tree's root, for per-user filtering.
    pub uid: Option<u32>,
    /// Processes in the tree: verified at the signal plus those that joined.
    pub members: usize,
    /// The same count, under the name it has everywhere.
    #[serde(default)]
    pub member_count: usize,
    pub signals: Vec<String>,
    pub escalated: bool,
    pub unkillable: usize,
    pub errors: Vec<String>,
    pub took_ms: u64,
    pub reclaimed_bytes: u64,
    pub line: String,
    /// The containers of the tree's run clients.
    #[serde(default)]
    pub containers: Vec<crate::reap::ContainerOutcome>,
    /// How many more times the same plan or act on the same tree (same
    /// root identity, verdict and mode) came since the first: a dry run
    /// finds a due tree at every tick, and the list keeps one entry for it.
    #[serde(default)]
    pub repeats: u64,
    /// When the first of them came (unix seconds; `at_unix` is the last).
    #[serde(default)]
    pub first_at_unix: u64,
}

impl ReapEvent {
    /// The event for one outcome; `uid` owns the root.
    pub fn new(o: &Outcome, dry_run: bool, uid: Option<u32>, at_unix: u64) -> ReapEvent {
        ReapEvent {
            at_unix,
            dry_run,
            verdict: o.verdict,
            root: o.root.pid.get(),
            root_pid: o.root.pid.get(),
            root_start_time: o.root.start_time.0,
            root_cmd: o.root_cmd.clone(),
            reason: o.reason.clone(),
            uid,
            members: o.members + o.joined,
            member_count: o.members + o.joined,
            signals: o.signals.iter().map(std::string::ToString::to_string).collect(),
            escalated: o.escalated,
            unkillable: o.unkillable.len(),
            errors: o.errors.clone(),
            took_ms: o.took_ms,
            reclaimed_bytes: o.reclaimed.total(),
            line: o.line(),
            containers: o.containers.clone(),
            repeats: 0,
            first_at_unix: at_unix,
        }
    }

    /// Whether `other` is this same plan or act again.
    pub fn repeats(&self, other: &ReapEvent) -> bool {
        (self.root_pid, self.root_start_time, self.verdict, self.dry_run)
            == (other.root_pid, other.root_start_time, other.verdict, other.dry_run)
    }
}

/// One server command running more than once under one live host
/// (reported, never reaped).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DuplicateServers {
    pub host_pid: i32,
    pub host_cmd: String,
    /// The program and its arguments, masked like a command line.
    pub command: String,
    /// How many copies run (2 or more).
    pub count: usize,
    /// The roots of their trees.
    pub root_pids: Vec<i32>,
    /// Sets started more than a few seconds apart (sessions aside).
    #[serde(default)]
    pub generation_count: usize,
    /// RSS + swap of every copy's members (`reaperctl generations` reads PSS).
    #[serde(default)]
    pub rss_bytes: u64,
}

impl DuplicateServers {
    pub fn new(snap: &Snapshot, d: &crate::policy::Duplicate) -> DuplicateServers {
        let host = &snap.procs[d.host];
        DuplicateServers {
            host_pid: host.pid().get(),
            host_cmd: crate::names::short_cmd(host, 120),
            command: d.command.clone(),
            count: d.roots.len(),
            root_pids: d.roots.iter().map(|&r| snap.procs[r].pid().get()).collect(),
            generation_count: d.generations,
            rss_bytes: d.rss_bytes,
        }
    }

    /// The copies beyond the first, what the metrics gauge counts.
    pub fn extra(list: &[DuplicateServers]) -> usize {
        list.iter().map(|d| d.count.saturating_sub(1)).sum()
    }
}

/// One tree as the daemon last judged it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TreeStatus {
    pub verdict: Verdict,
    pub reap: bool,
    /// The root's pid (kept for compatibility; the same as `root_pid`).
    pub root: i32,
    #[serde(default)]
    pub root_pid: i32,
    #[serde(default)]
    pub root_start_time: u64,
    pub root_cmd: String,
    pub reason: String,
    /// Processes in the tree (the same as `member_count`).
    pub members: usize,
    #[serde(default)]
    pub member_count: usize,
    pub memory_bytes: u64,
    pub grace_left_secs: Option<f64>,
    /// Kept, but on evidence a stricter rule would have taken (see
    /// `scan --json`'s tree `suspect`).
    #[serde(default)]
    pub suspect: Option<String>,
    /// When the daemon first saw the tree as a candidate (unix ms), the
    /// start of its grace: what `reaperctl scan` asks for when it cannot
    /// read the daemon's state file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen_unix_ms: Option<u64>,
}

impl TreeStatus {
    pub fn new(snap: &Snapshot, j: &Judgement) -> TreeStatus {
        let root = &snap.procs[j.root];
        TreeStatus {
            verdict: j.verdict,
            reap: j.reap,
            root: root.pid().get(),
            root_pid: root.pid().get(),
            root_start_time: root.id.start_time.0,
            root_cmd: crate::names::short_cmd(root, 120),
            reason: j.reason.clone(),
            members: j.members.len(),
            member_count: j.members.len(),
            memory_bytes: super::json::tree_memory(snap, j),
            grace_left_secs: j.grace_left.map(|d| d.as_secs_f64()),
            suspect: j.suspect.clone(),
            first_seen_unix_ms: None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub trees_reaped: u64,
    pub processes_reaped: u64,
    pub reclaimed_bytes: u64,
    pub escalations: u64,
    pub failures: u64,
    /// Containers of run clients stopped through their engines.
    #[serde(default)]
    pub containers_stopped: u64,
    /// Their cgroups' memory before the stop.
    #[serde(default)]
    pub container_bytes: u64,
    /// Trees reaped and memory returned per verdict (by its name).
    #[serde(default)]
    pub by_verdict: BTreeMap<String, VerdictTotals>,
    /// Trees reaped in Kubernetes pods, by the pod's namespace (a metrics
    /// label: per namespace, never per pod). At most [`NAMESPACES`] names;
    /// later ones count as [`OTHER_NAMESPACE`], pods no runtime state names
    /// as [`UNKNOWN_NAMESPACE`]. Shown to root only.
    #[serde(default)]
    pub reaped_by_namespace: BTreeMap<String, u64>,
}

/// Namespaces counted by name in [`Totals::reaped_by_namespace`].
pub const NAMESPACES: usize = 32;
/// The label of namespaces beyond [`NAMESPACES`]; no namespace is named so
/// (Kubernetes names have no `_`).
pub const OTHER_NAMESPACE: &str = "_other";
/// The label of pods known by their UID alone.
pub const UNKNOWN_NAMESPACE: &str = "_unknown";

/// What the reaps of one verdict did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VerdictTotals {
    pub trees_reaped: u64,
    pub reclaimed_bytes: u64,
}

/// What a dry run would have done: each tree counted once, when it is
/// first found due (it is found again at every tick).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WouldReap {
    pub trees_total: u64,
    pub processes_total: u64,
    /// Their memory (PSS + swap) when first found due.
    pub bytes_total: u64,
    /// Trees due and kept only by the dry run, at the last cycle.
    pub trees_now: u64,
}

impl Totals {
    /// Counts one tree acted on: the one definition every total shares.
    pub fn add(&mut self, e: &crate::history::Entry) {
        self.trees_reaped += u64::from(e.reaped);
        self.processes_reaped += e.processes as u64;
        self.reclaimed_bytes += e.reclaimed_bytes;
        self.escalations += u64::from(e.escalated);
        self.failures += u64::from(!e.ok);
        for c in e.containers.iter().filter(|c| c.stopped()) {
            self.containers_stopped += 1;
            self.container_bytes += c.memory_bytes.unwrap_or(0);
        }
        let v = self.by_verdict.entry(e.verdict.as_str().to_string()).or_default();
        v.trees_reaped += u64::from(e.reaped);
        v.reclaimed_bytes += e.reclaimed_bytes;
    }

    /// Counts a tree reaped in a pod of `namespace` (`None`: unnamed).
    pub fn count_namespace(&mut self, namespace: Option<&str>) {
        let key = match namespace {
            None => UNKNOWN_NAMESPACE,
            Some(ns) if self.reaped_by_namespace.contains_key(ns) => ns,
            Some(ns) if self.reaped_by_namespace.keys().filter(|k| !k.starts_with('_')).count() < NAMESPACES => ns,
            Some(_) => OTHER_NAMESPACE,
        };
        *self.reaped_by_namespace.entry(key.to_string()).or_default() += 1;
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ScanStats {
    pub count: u64,
    pub last_duration_ms: f64,
    pub last_processes: usize,
    pub last_at_unix: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    pub version: String,
    pub pid: u32,
    pub uptime_secs: f64,
    pub mode: Mode,
    pub config_sources: Vec<String>,
    pub last_reload: Option<ReloadResult>,
    /// "netlink" (proc connector), "pidfd" (watching hosts), or "polling".
    pub event_mode: String,
    /// Why the daemon is not in "netlink" mode, when it is not.
    #[serde(default)]
    pub event_mode_reason: Option<String>,
    pub interval_secs: u64,
    /// The periodic scans' period while `quiet` (never below `interval_secs`).
    #[serde(default)]
    pub quiet_interval_secs: u64,
    /// The last scan found no host or server: the next periodic
    /// scan is `quiet_interval_secs` after it.
    #[serde(default)]
    pub quiet: bool,
    pub grace_secs: u64,
    pub scans: ScanStats,
    /// Every verdict, with the trees shown that have it (zero included).
    #[serde(serialize_with = "by_name")]
    pub by_verdict: BTreeMap<Verdict, usize>,
    /// Trees visible to the asking user (root sees all).
    pub trees: Vec<TreeStatus>,
    pub totals: Totals,
    /// Every reap since the history began, across restarts and upgrades
    /// (`None`: no history could be read).
    #[serde(default)]
    pub lifetime: Option<crate::history::Lifetime>,
    pub recent: Vec<ReapEvent>,
    /// What the dry run would have reaped since the daemon started.
    #[serde(default)]
    pub would_reap: WouldReap,
    /// True when the list was filtered to the asking user's processes.
    pub filtered_for_uid: Option<u32>,
    /// `reaperctl run` sessions seen by the last scan (visible to the asking user).
    #[serde(default)]
    pub run_sessions: Vec<RunSession>,
    /// Memory pressure as last seen (`None` from a daemon without it).
    #[serde(default)]
    pub memory_pressure: Option<PressureStatus>,
    /// Server commands running more than once under one live host.
    #[serde(default)]
    pub duplicates: Vec<DuplicateServers>,
    /// Hosts that announced the end of their session and still run.
    #[serde(default)]
    pub session_ends: Vec<SessionEnding>,
    /// One live host's copies of one server, where it holds two or more, as
    /// the daemon last sampled them (issue 35).
    #[serde(default)]
    pub generations: Vec<GenerationStatus>,
}

/// Counts per verdict, every verdict present.
pub fn by_verdict(trees: &[TreeStatus]) -> BTreeMap<Verdict, usize> {
    let mut by: BTreeMap<Verdict, usize> = Verdict::ALL.iter().map(|&v| (v, 0)).collect();
    for t in trees {
        *by.entry(t.verdict).or_default() += 1;
    }
    by
}

/// Verdicts in the order of their names, as they were when the keys were strings.
pub fn by_name<S: Serializer>(m: &BTreeMap<Verdict, usize>, s: S) -> Result<S::Ok, S::Error> {
    let mut sorted: Vec<(&Verdict, &usize)> = m.iter().collect();
    sorted.sort_by_key(|(v, _)| v.as_str());
    s.collect_map(sorted)
}
