//! One cycle of the daemon's loop ([`super::run`]): scan, judge and reap
//! on a blocking thread while the control socket keeps answering, then
//! where its results go: the schedule, the watched exits, the board, the
//! history, the status line and the metrics textfile.

use std::time::{Duration, Instant};

use super::run::Daemon;
use crate::config::Mode;
use crate::cycle::{Cycle, Kind};
use crate::proto::ReapEvent;
use crate::report;

/// How often the loop looks for cgroups of killed `reaperctl run` wrappers
/// (a walk of the cgroup hierarchies: cheap, but not for every cycle).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

impl Daemon {
    /// One scan-judge-reap cycle on a blocking thread; the socket keeps answering.
    pub(super) async fn cycle(&mut self, dry_override: Option<bool>) -> Vec<ReapEvent> {
        let (cfg, scope, dry_run) = {
            let s = self.shared.borrow();
            let dry = dry_override.unwrap_or(false) || s.mode() == Mode::DryRun;
            (s.cfg.clone(), s.args.scope, dry)
        };
        let procfs = self.procfs.clone();
        let census = self.births_before_read();
        let exited = self.exits.take_exited();
        for pid in self.exits.reread_for(&exited) {
            self.schedule.changed(pid);
        }
        let interval = Duration::from_secs(cfg.interval_secs);
        let read = self.schedule.next_read(self.exits.events(), exited, interval);
        if super::schedule::finds_exits(&read) {
            self.births.listed(census);
        }
        let mut memory = std::mem::take(&mut self.memory);
        let mut gens = std::mem::take(&mut self.generations);
        let before = memory.clone();
        let state_file = self.state_path.clone();
        let pressure_file = self.pressure.file();
        let sweep = self.swept.is_none_or(|t| t.elapsed() >= SWEEP_EVERY);
        if sweep {
            self.swept = Some(Instant::now());
        }
        let res = tokio::task::spawn_blocking(move || {
            if sweep {
                crate::session::stale::sweep_and_log(&procfs, dry_run, scope);
            }
            let seen = pressure_file.map(|f| crate::scan::pressure::read(&f));
            let pressure = seen.as_ref().and_then(|r| r.as_ref().ok().copied());
            let cycle = Cycle {
                procfs: &procfs,
                cfg: &cfg,
                scope,
                dry_run,
                state_file: &state_file,
                kind: Kind::Tick,
                pressure,
            };
            let mut done = cycle.run(&mut memory, read);
            let told = gens.after(&procfs, &cfg, &mut done, dry_run);
            (memory, done, seen, gens, told)
        })
        .await;
        let (done, told) = match res {
            Ok((memory, done, seen, gens, told)) => {
                self.memory = memory;
                self.generations = gens;
                self.pressure.record(seen);
                self.shared.borrow_mut().pressure = self.pressure.status();
                if told.ended {
                    // Copies ended outside the judgement: read everything again.
                    self.schedule.need_full();
                }
                (done, told.notices)
            }
            Err(e) => {
                tracing::error!(reaper_action = "error", "cycle failed: {e}");
                self.memory = before;
                self.schedule.need_full();
                return Vec::new();
            }
        };
        if let Some(saved) = done.saved {
            self.state_writes.record(&self.state_path, saved);
        }
        let a = match done.judged {
            Ok((a, summary)) => {
                if !dry_run && summary.trees_reaped > 0 && self.shared.borrow().cfg.notify.desktop {
                    self.desktop.add(summary.trees_reaped as u64, summary.reclaimed_bytes);
                }
                a
            }
            Err(e) => {
                tracing::error!(reaper_action = "error", "scan failed: {e}");
                self.schedule.need_full();
                return Vec::new();
            }
        };
        let events = self.on_board(&a, &done.outcomes, dry_run, told);
        self.write_history(done.entries).await;
        self.exits.rewatch(&a);
        self.endings.after_cycle(&a, &mut self.memory.book);
        self.shared.borrow_mut().session_ends = self.endings.status();
        // After a reap the next read builds on the re-check's fresh
        // snapshot: event mode hears every exit; pidfd mode reads the killed
        // members again as if watched ones had exited, and with them their
        // children (re-parented, which it would not see otherwise).
        if !done.outcomes.is_empty() && !self.exits.events() {
            let snap = &a.snapshot;
            let killed = a.judgements.iter().filter(|j| j.reap).flat_map(|j| j.members.iter());
            self.exits.reaped(killed.map(|&(m, _)| snap.procs[m].pid()));
        }
        self.schedule.found(a.nothing_to_follow());
        self.shared.borrow_mut().quiet = self.schedule.quiet();
        self.schedule.judged(a.snapshot, &a.judgements);
        drop((a.forest, a.judgements, done.outcomes));
        crate::sys::release_free_memory();
        self.resident.after_work(super::resident::AFTER_CYCLE);
        self.publish();
        events
    }

    /// The status line for the service manager, and the metrics textfile.
    fn publish(&mut self) {
        let line = self.shared.borrow().status_line();
        self.notifier.status(&line);
        if let Some(path) = self.shared.borrow().cfg.metrics_textfile.clone() {
            let text = report::metrics::render(&self.shared.borrow().status(0));
            let written = report::metrics::write_textfile(&path, &text);
            self.metrics_writes.record(&path, written);
        }
    }

    /// A cycle's judgement, outcomes and piles of copies on the board; the
    /// piles that passed a threshold told.
    fn on_board(
        &mut self,
        a: &crate::cycle::Assessment,
        outcomes: &[crate::reap::Outcome],
        dry_run: bool,
        told: Vec<super::generations::Notice>,
    ) -> Vec<ReapEvent> {
        self.generations_told(told);
        let mut shared = self.shared.borrow_mut();
        shared.generations.clone_from(&self.generations.status);
        shared.record(a, outcomes, dry_run, &self.memory.book, &self.generations.planned)
    }

    /// Piles of copies that passed a threshold: a log line each, and a
    /// desktop notification where they are on.
    fn generations_told(&mut self, notices: Vec<super::generations::Notice>) {
        let desktop = self.shared.borrow().cfg.notify.desktop;
        for n in notices {
            tracing::warn!(reaper_action = "generations", "{}; {}", n.summary, n.body);
            if desktop {
                report::desktop::tell_once(n.summary, n.body);
            }
        }
    }

    /// Appends a cycle's reaps to the history, off the loop (the write
    /// syncs to disk), and takes the lifetime totals. The writer is opened
    /// at the first reap (the whole ledger read once) and kept; after a
    /// failure it is opened afresh.
    async fn write_history(&mut self, entries: Vec<crate::history::Entry>) {
        if entries.is_empty() {
            return;
        }
        let path = crate::history::beside(&self.state_path);
        let kept = self.history.take();
        let written = tokio::task::spawn_blocking({
            let path = path.clone();
            move || {
                let (mut w, warning) = match kept {
                    Some(w) => (w, None),
                    None => crate::history::Writer::open(&path)?,
                };
                w.append(entries)?;
                Ok((w, warning))
            }
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
        let written = written.map(|(w, warning)| {
            if let Some(w) = warning {
                tracing::warn!(reaper_action = "error", "{w}");
            }
            self.shared.borrow_mut().lifetime = Some(w.lifetime().clone());
            self.history = Some(w);
        });
        self.history_writes.record(&path, written);
    }
}
