//! The parts of the daemon's status that describe what runs beside the trees
//! it judges: a host's generations of copies, sessions announced ended,
//! `reaperctl run` sessions, memory pressure. Re-exported by
//! [`super::status`], whose paths the rest of the crate uses.

use serde::{Deserialize, Serialize};

/// One host's copies of one server command, with what the daemon's samples
/// say of each (`reaperctl generations` shows the rest).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerationStatus {
    pub host_pid: i32,
    pub host_start_time: u64,
    pub host_cmd: String,
    pub command: String,
    pub copies: usize,
    pub generation_count: usize,
    /// PSS + `SwapPss` of every copy's tree.
    pub memory_bytes: u64,
    /// Copies whose trees did no I/O and used no CPU for `idle_secs` or
    /// more, as far as the daemon watched them.
    pub idle_copies: usize,
    pub idle_secs: u64,
    /// How often the daemon samples (`[generations] sample_secs`; 0 from a
    /// daemon that did not say).
    #[serde(default)]
    pub sample_secs: u64,
    /// "host H holds N copies of X in G generations, M; I idle for more than 30m".
    pub sentence: String,
    /// Copies the `[generations]` policy ends (or, in a dry run, would end)
    /// at this sample; 0 while the policy is off.
    pub ending: usize,
    /// Why nothing more of it is ended: the respawn guard tripped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
    /// Every copy, oldest first.
    pub copy_samples: Vec<CopySample>,
}

/// One copy as the daemon sampled it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CopySample {
    pub pid: i32,
    pub start_time: u64,
    /// Since its tree last read, wrote or used CPU (or since the daemon
    /// first sampled it, when it never did meanwhile).
    pub idle_secs: u64,
    /// Since the daemon first sampled it.
    pub watched_secs: u64,
    pub memory_bytes: u64,
    /// What the `[generations]` policy decided, and why.
    pub end: bool,
    pub why: String,
}

/// A host that announced the end of its session (`reaperctl session-end`
/// from its hook) and still runs: its trees go without grace once it exits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionEnding {
    pub host_pid: i32,
    pub host_start_time: u64,
    pub host_cmd: String,
    /// The reason its trees are reaped with (and without grace).
    pub reason: String,
    /// When it announced it (unix seconds).
    pub since_unix: u64,
    /// Its trees as last judged (before that, its children when it announced).
    pub trees: usize,
    /// Owner of the host.
    pub uid: Option<u32>,
}

/// A `reaperctl run` session as the last scan saw it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSession {
    /// The `reaperctl run` process.
    pub wrapper_pid: i32,
    /// The host it runs (its first child), while it runs.
    pub host_pid: Option<i32>,
    pub host_cmd: Option<String>,
    /// The session's cgroup path (`/proc/PID/cgroup` form), when it has one.
    pub cgroup: Option<String>,
    /// Processes in the session, the host included.
    pub members: usize,
    /// The cgroup's `memory.current` where it is accounted, else the sum of
    /// the members' resident memory.
    pub memory_bytes: u64,
    /// `"cgroup"` or `"rss"`: where `memory_bytes` comes from.
    pub memory_source: String,
    /// Owner of the wrapper.
    pub uid: Option<u32>,
}

/// Memory pressure (PSI) as the daemon last read it, and what it does with it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PressureStatus {
    /// "trigger" (a PSI trigger wakes the daemon; the file is read every
    /// cycle too), "each-cycle" (read every cycle), or "off".
    pub watch: String,
    /// The PSI file (also when off).
    pub path: Option<String>,
    /// `pressure.some_avg10_percent`.
    pub threshold_percent: f64,
    /// The last reading, in percent of wall time stalled.
    pub some_avg10: Option<f64>,
    pub some_avg60: Option<f64>,
    pub some_avg300: Option<f64>,
    pub full_avg10: Option<f64>,
    pub read_at_unix: Option<u64>,
    /// At or above the threshold: orphan and stale trees skip their grace.
    pub above: bool,
    /// How often the trigger woke the daemon.
    pub triggers: u64,
    /// Why it is off, or why there is no trigger.
    pub note: Option<String>,
}
