//! The status board: what the control socket, `sd_notify` and the metrics
//! textfile read ([`Shared`]), and how each cycle updates it ([`Shared::record`]).

use std::collections::{HashSet, VecDeque};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::Args;
use crate::config::{Config, Mode, Sources};
use crate::ctl::proto::{ReapEvent, ReloadResult, ScanStats, Status, Totals, TreeStatus};
use crate::cycle::Assessment;
use crate::policy::Verdict;
use crate::reap::Outcome;
use crate::report;
use crate::report::status::PressureStatus;
use crate::scan::Process;

/// How many reap events the board remembers.
const RECENT: usize = 50;

/// A tree as last seen, with the uids of its members for per-user status.
#[derive(Clone, Debug)]
pub struct TreeView {
    pub status: TreeStatus,
    pub uids: HashSet<u32>,
}

/// Everything the control socket may read, owned by the loop.
pub struct Shared {
    pub cfg: Config,
    pub sources: Sources,
    pub args: Args,
    pub started: Instant,
    pub last_reload: Option<ReloadResult>,
    pub event_mode: &'static str,
    /// Why process events are not used, when they are not.
    pub event_mode_reason: Option<String>,
    pub scans: ScanStats,
    pub trees: Vec<TreeView>,
    pub totals: Totals,
    pub recent: VecDeque<ReapEvent>,
    pub self_uid: u32,
    /// `reaperctl run` sessions the last scan saw.
    pub run_sessions: Vec<crate::report::status::RunSession>,
    /// Hosts ending their session (kept current by the loop).
    pub session_ends: Vec<crate::report::status::SessionEnding>,
    /// Memory pressure as last read.
    pub pressure: PressureStatus,
    /// The last scan's duplicate servers, with the uid of their host.
    pub duplicates: Vec<(report::status::DuplicateServers, Option<u32>)>,
}

pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

impl Shared {
    pub fn mode(&self) -> Mode {
        super::mode_of(&self.args, &self.cfg)
    }

    /// Status as seen by `uid`: root sees every tree, others their own.
    pub fn status(&self, uid: u32) -> Status {
        let all = uid == 0;
        let trees: Vec<TreeStatus> = self
            .trees
            .iter()
            .filter(|t| all || (!t.uids.is_empty() && t.uids.iter().all(|&u| u == uid)))
            .map(|t| t.status.clone())
            .collect();
        let by_verdict = report::status::by_verdict(&trees);
        Status {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            uptime_secs: self.started.elapsed().as_secs_f64(),
            mode: self.mode(),
            config_sources: self.cfg.sources.clone(),
            last_reload: self.last_reload.clone(),
            event_mode: self.event_mode.to_string(),
            event_mode_reason: self.event_mode_reason.clone(),
            interval_secs: self.cfg.interval_secs,
            grace_secs: self.cfg.grace_secs,
            scans: self.scans.clone(),
            by_verdict,
            trees,
            totals: {
                // Which namespaces' pods had trees reaped is the node's, not a user's.
                let mut t = self.totals.clone();
                if !all {
                    t.reaped_by_namespace.clear();
                }
                t
            },
            recent: self.recent.iter().filter(|e| all || e.uid == Some(uid)).cloned().collect(),
            filtered_for_uid: (!all).then_some(uid),
            run_sessions: self.run_sessions.iter().filter(|r| all || r.uid == Some(uid)).cloned().collect(),
            session_ends: self.session_ends.iter().filter(|e| all || e.uid == Some(uid)).cloned().collect(),
            memory_pressure: Some(self.pressure.clone()),
            duplicates: self
                .duplicates
                .iter()
                .filter(|(_, u)| all || *u == Some(uid))
                .map(|(d, _)| d.clone())
                .collect(),
        }
    }

    /// The one-line status for `sd_notify`.
    pub fn status_line(&self) -> String {
        let count = |v: Verdict| self.trees.iter().filter(|t| t.status.verdict == v).count();
        format!(
            "{} live, {} orphan, {} abandoned, {} young, {} stale tree(s); reaped {} so far",
            count(Verdict::Live),
            count(Verdict::Orphan),
            count(Verdict::Abandoned),
            count(Verdict::Young),
            count(Verdict::Stale),
            self.totals.trees_reaped
        )
    }

    /// Puts one cycle's judgement and outcomes on the board; returns the
    /// outcomes as events (what `reaperctl reap-now` is answered).
    pub fn record(&mut self, a: &Assessment, outcomes: &[Outcome], dry_run: bool) -> Vec<ReapEvent> {
        let snap = &a.snapshot;
        self.scans.count += 1;
        self.scans.last_duration_ms = a.scan_duration.as_secs_f64() * 1000.0;
        self.scans.last_processes = snap.len();
        self.scans.last_at_unix = unix_now();
        self.run_sessions = crate::session::status::sessions(a, &self.args.proc_root);
        self.trees = a
            .judgements
            .iter()
            .map(|j| TreeView {
                status: TreeStatus::new(snap, j),
                uids: j.members.iter().filter_map(|&(m, _)| snap.procs[m].uid().map(|u| u.0)).collect(),
            })
            .collect();
        self.duplicates = a
            .duplicates
            .iter()
            .map(|d| {
                let uid = snap.procs[d.host].uid().map(|u| u.0);
                (report::status::DuplicateServers::new(snap, d), uid)
            })
            .collect();
        let mut events = Vec::new();
        for o in outcomes {
            let uid = snap.get(o.root.pid).filter(|p| p.id == o.root).and_then(Process::uid).map(|u| u.0);
            let ev = ReapEvent::new(o, dry_run, uid, unix_now());
            if !dry_run {
                self.totals.trees_reaped += u64::from(o.reaped());
                self.totals.processes_reaped += o.gone as u64;
                self.totals.reclaimed_bytes += o.reclaimed.total();
                self.totals.escalations += u64::from(o.escalated);
                self.totals.failures += u64::from(!o.success());
                if o.reaped() && o.pod_uid.is_some() {
                    self.totals.count_namespace(o.pod.as_ref().map(|p| p.namespace.as_str()));
                }
                for c in o.containers.iter().filter(|c| c.stopped()) {
                    self.totals.containers_stopped += 1;
                    self.totals.container_bytes += c.memory_bytes.unwrap_or(0);
                }
            }
            self.recent.push_front(ev.clone());
            self.recent.truncate(RECENT);
            events.push(ev);
        }
        if !dry_run {
            // Trees that are gone no longer belong in the status.
            let gone: HashSet<i32> = outcomes.iter().filter(|o| o.success()).map(|o| o.root.pid.get()).collect();
            self.trees.retain(|t| !gone.contains(&t.status.root));
        }
        events
    }
}
