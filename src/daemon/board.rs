//! The status board: what the control socket, `sd_notify` and the metrics
//! textfile read ([`Shared`]), and how each cycle updates it ([`Shared::record`]).

use std::collections::{HashSet, VecDeque};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::Args;
use crate::config::{Config, Mode, Sources};
use crate::cycle::Assessment;
use crate::policy::{GraceBook, Verdict};
use crate::proto::{ReapEvent, ReloadResult, ScanStats, Status, Totals, TreeStatus};
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
    /// The last scan found nothing to follow: periodic scans are `quiet_interval_secs` apart.
    pub quiet: bool,
    pub scans: ScanStats,
    pub trees: Vec<TreeView>,
    pub totals: Totals,
    /// The history's totals (every reap since the ledger began).
    pub lifetime: Option<crate::history::Lifetime>,
    pub recent: VecDeque<ReapEvent>,
    /// What the dry run would have reaped, and the trees it has counted.
    pub would_reap: report::status::WouldReap,
    pub planned: HashSet<(crate::ids::Identity, Verdict)>,
    pub self_uid: u32,
    /// `reaperctl run` sessions the last scan saw.
    pub run_sessions: Vec<crate::report::status::RunSession>,
    /// Hosts ending their session (kept current by the loop).
    pub session_ends: Vec<crate::report::status::SessionEnding>,
    /// Memory pressure as last read.
    pub pressure: PressureStatus,
    /// The last scan's duplicate servers, with the uid of their host.
    pub duplicates: Vec<(report::status::DuplicateServers, Option<u32>)>,
    /// Live hosts' piles of copies as last sampled, with the host's uid.
    pub generations: Vec<(report::status::GenerationStatus, Option<u32>)>,
}

fn unix_ms(t: SystemTime) -> u64 {
    u64::try_from(t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis()).unwrap_or(u64::MAX)
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
            quiet_interval_secs: self.cfg.quiet_interval_secs.max(self.cfg.interval_secs),
            quiet: self.quiet,
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
            lifetime: self.lifetime.clone(),
            recent: self.recent.iter().filter(|e| all || e.uid == Some(uid)).cloned().collect(),
            would_reap: self.would_reap.clone(),
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
            generations: self
                .generations
                .iter()
                .filter(|(_, u)| all || *u == Some(uid))
                .map(|(g, _)| g.clone())
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
    /// `book` holds when each candidate was first seen.
    /// `surplus` are the copies the `[generations]` plan ends (or would end).
    pub fn record(
        &mut self,
        a: &Assessment,
        outcomes: &[Outcome],
        dry_run: bool,
        book: &GraceBook,
        surplus: &HashSet<(crate::ids::Identity, Verdict)>,
    ) -> Vec<ReapEvent> {
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
                status: TreeStatus {
                    first_seen_unix_ms: book.get(j.root_id(snap)).map(unix_ms),
                    ..TreeStatus::new(snap, j)
                },
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
                self.totals.add(&crate::history::Entry::new(o, Vec::new(), uid, ev.at_unix));
                if o.reaped() && o.pod_uid.is_some() {
                    self.totals.count_namespace(o.pod.as_ref().map(|p| p.namespace.as_str()));
                }
            } else if self.planned.insert((o.root, o.verdict)) {
                self.would_reap.trees_total += 1;
                self.would_reap.processes_total += (o.members + o.joined) as u64;
                self.would_reap.bytes_total += o.reclaimed.total();
            }
            self.remember(ev.clone());
            events.push(ev);
        }
        // Trees no longer judged are forgotten: one back under the same
        // identity and verdict is a new plan (it was kept in between).
        let mut due: HashSet<(crate::ids::Identity, Verdict)> =
            a.judgements.iter().filter(|j| j.reap).map(|j| (j.root_id(snap), j.verdict)).collect();
        due.extend(surplus.iter().copied());
        self.planned.retain(|k| due.contains(k));
        self.would_reap.trees_now = if dry_run { outcomes.len() as u64 } else { 0 };
        if !dry_run {
            // Trees that are gone no longer belong in the status.
            let gone: HashSet<i32> = outcomes.iter().filter(|o| o.success()).map(|o| o.root.pid.get()).collect();
            self.trees.retain(|t| !gone.contains(&t.status.root));
        }
        events
    }

    /// Puts an event first in the recent list; the same plan or act on the
    /// same tree again replaces its entry, counted in `repeats`.
    fn remember(&mut self, mut ev: ReapEvent) {
        if let Some(i) = self.recent.iter().position(|e| e.repeats(&ev))
            && let Some(old) = self.recent.remove(i)
        {
            ev.repeats = old.repeats + 1;
            ev.first_at_unix = old.first_at_unix.min(ev.at_unix);
        }
        self.recent.push_front(ev);
        self.recent.truncate(RECENT);
    }
}
