//! The long-running daemon's loop: a current-thread tokio loop that scans
//! every `interval_secs`, at once when a watched host or owner exits leaving
//! children (see `exits.rs` for what exits and execs cost), and
//! when a young tree's grace runs out; serves the control socket; reloads
//! config. This file is the loop: one `select!` whose arms each call one
//! handler. Start-up (sockets, state, event source, the initial [`Daemon`])
//! is [`super::start`]'s. When to scan is [`Schedule`]'s, what exited
//! [`ExitWatch`]'s, the status [`Shared`]'s, the cycle itself
//! [`crate::cycle::Cycle`]'s (run off the loop, its results handed on, in
//! `one_cycle.rs`), a config reload `reload.rs`'s, what new pids (pidfd
//! mode) ask `born.rs`'s.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};

use super::births::Births;
use super::board::Shared;
use super::born::{look_at, look_at_exec};
use super::exits::ExitWatch;
use super::notify::Notifier;
use super::pressure::PressureWatch;
use super::schedule::Schedule;
use super::watch::ConfigEvents;
use crate::config::Mode;
use crate::cycle::Memory;
use crate::proto::{ReapResult, ReloadResult};
use crate::report;
use crate::scan::ProcFs;
use crate::{exit, state};

/// Requests from the control socket to the loop.
pub enum LoopRequest {
    Reload(oneshot::Sender<ReloadResult>),
    ReapNow {
        dry_run: bool,
        reply: oneshot::Sender<ReapResult>,
    },
    /// A host ends its session (checked by the control socket).
    SessionEnd {
        host: crate::ids::Identity,
        session_id: Option<String>,
        reason: Option<String>,
        reply: oneshot::Sender<crate::proto::SessionEndResult>,
    },
}

/// What the loop does after a wake-up.
pub(super) enum Step {
    Idle,
    /// Nothing ran that maps the binary's pages back (see `resident.rs`).
    Rest,
    /// Scan, judge, reap; `asked` when `reaperctl reap-now` waits for the result.
    Scan {
        asked: Option<(bool, oneshot::Sender<ReapResult>)>,
    },
    Stop,
}

pub(super) const SCAN: Step = Step::Scan { asked: None };

/// The loop's state, built by [`super::start`].
pub(super) struct Daemon {
    pub(super) shared: Rc<RefCell<Shared>>,
    pub(super) notifier: Notifier,
    pub(super) procfs: ProcFs,
    /// The grace book and the verdicts last explained, from cycle to cycle.
    pub(super) memory: Memory,
    pub(super) schedule: Schedule,
    pub(super) exits: ExitWatch,
    /// New processes in pidfd mode.
    pub(super) births: Births,
    /// The binary's pages left the page tables after a cycle (issue 37).
    pub(super) resident: super::resident::Resident,
    /// Memory pressure: read every cycle, a PSI trigger where allowed.
    pub(super) pressure: PressureWatch,
    /// Desktop notifications of reaps (`[notify] desktop`).
    pub(super) desktop: report::desktop::Desktop,
    pub(super) config: ConfigEvents,
    pub(super) watchdog: Option<tokio::time::Interval>,
    pub(super) state_path: PathBuf,
    /// Hosts ending their session on purpose.
    pub(super) endings: super::endings::Endings,
    /// Live hosts' piles of server copies: samples, respawn guard, notices.
    pub(super) generations: super::generations::Generations,
    /// When stale `reaperctl run` cgroups were last looked for.
    pub(super) swept: Option<Instant>,
    /// Failing writes are reported once, not every cycle.
    pub(super) state_writes: report::log::Repeated,
    pub(super) metrics_writes: report::log::Repeated,
    pub(super) history_writes: report::log::Repeated,
    /// Opened at the first reap, kept so that a reap appends without
    /// reading the ledger.
    pub(super) history: Option<crate::history::Writer>,
}

impl Daemon {
    pub(super) async fn run(&mut self, mut req_rx: mpsc::Receiver<LoopRequest>) -> std::process::ExitCode {
        let (Ok(mut sigterm), Ok(mut sigint), Ok(mut sighup)) =
            (signal(SignalKind::terminate()), signal(SignalKind::interrupt()), signal(SignalKind::hangup()))
        else {
            tracing::error!("cannot install signal handlers");
            return std::process::ExitCode::from(exit::SOFTWARE);
        };
        self.cycle(None).await;
        let line = self.shared.borrow().status_line();
        self.notifier.ready(&line);
        self.schedule.mark_scan();
        loop {
            let period = {
                let cfg = &self.shared.borrow().cfg;
                let secs = Duration::from_secs;
                self.schedule.period(secs(cfg.interval_secs), secs(cfg.quiet_interval_secs))
            };
            let deadline = self.schedule.deadline(period);
            let step = tokio::select! {
                () = tokio::time::sleep_until(deadline.into()) => SCAN,
                () = self.exits.pidfd_exit() => self.exit_seen().await,
                () = self.exits.events_ready() => self.intake().await,
                () = self.births.ready(!self.exits.events()) => self.born(),
                () = self.pressure.triggered() => self.pressure_rose(),
                () = self.desktop.due() => self.tell_desktop(),
                () = self.resident.due() => self.drop_pages(),
                () = tick(self.watchdog.as_mut()) => self.watchdog_ping(),
                () = self.config.ready() => self.config_file().await,
                _ = sighup.recv() => self.reload("SIGHUP"),
                req = req_rx.recv() => self.request(req),
                _ = sigterm.recv() => Step::Stop,
                _ = sigint.recv() => Step::Stop,
            };
            match step {
                // What a wake-up touched between cycles (a new process
                // read and classified, a status request) leaves too.
                Step::Idle => self.resident.after_work(super::resident::AFTER_WAKE),
                Step::Rest => {}
                Step::Scan { asked } => self.scan(asked).await,
                Step::Stop => break,
            }
        }
        self.notifier.stopping();
        let c = self.exits.costs;
        tracing::info!(
            "mcp-reaperd stopping; watched or new processes' exits: {} scanned, {} looked up (no children); \
             host and server execs: {} covered by a watched or marked host, {} scanned soon; \
             {} execs read",
            c.exits_scanned,
            c.exits_looked_up,
            c.execs_covered,
            c.execs_scanned,
            c.execs_read
        );
        let saved = state::save(&self.state_path, &self.memory.book);
        self.state_writes.record(&self.state_path, saved);
        std::process::ExitCode::from(exit::OK)
    }

    /// A watched process's pidfd says it exited: when it left children or
    /// tree members behind, let the kernel finish re-parenting them, then
    /// scan; otherwise it orphaned nothing, and the next scan reads it.
    async fn exit_seen(&mut self) -> Step {
        if self.exits.events() {
            // Event mode: the exit is among the events waiting; read them now.
            return self.intake().await;
        }
        let procfs = &self.procfs;
        let alive = |id: crate::ids::Identity| procfs.process(id.pid).is_some_and(|p| p.id == id);
        if !self.exits.exits_left_orphans(&self.schedule, alive) {
            return Step::Idle;
        }
        tokio::time::sleep_until(self.schedule.exit_scan_at().into()).await;
        SCAN
    }

    /// Process events are waiting (event mode).
    async fn intake(&mut self) -> Step {
        let (procfs, shared) = (&self.procfs, &self.shared);
        let scope = shared.borrow().args.scope;
        let any = |pid| look_at(procfs, &shared.borrow().cfg, pid);
        let exec = |pid| look_at_exec(procfs, &shared.borrow().cfg, pid);
        match self.exits.intake(&mut self.schedule, scope, super::exits::Looks { exec: &exec, any: &any }) {
            Ok(intake) => {
                if intake.lost {
                    tracing::debug!("process events were lost; rescanning");
                    self.schedule.need_full();
                }
                if intake.exit {
                    tracing::debug!("a watched or new process exited leaving children: scanning");
                    tokio::time::sleep_until(self.schedule.exit_scan_at().into()).await;
                }
                if intake.lost || intake.exit { SCAN } else { Step::Idle }
            }
            Err(e) => {
                tracing::warn!("process events failed ({e}); falling back to pidfds");
                self.schedule.need_full();
                let mut s = self.shared.borrow_mut();
                s.event_mode = "pidfd";
                s.event_mode_reason = Some(format!("process events failed: {e}"));
                SCAN
            }
        }
    }

    /// The PSI trigger fired: read the figure now; scan if the policy would
    /// cut short the grace of a young tree.
    fn pressure_rose(&mut self) -> Step {
        let seen = self.pressure.read_now();
        let mut shared = self.shared.borrow_mut();
        shared.pressure = self.pressure.status();
        match crate::policy::pressure_skips_grace(&shared.cfg.pressure, seen.as_ref()) {
            // Young trees only: a tree already due (dry-run, or one that
            // would not die) must not bring a scan every 2 s of pressure.
            Some(why) if self.schedule.young_waiting() => {
                tracing::debug!("PSI trigger: {why}; scanning for trees in their grace");
                SCAN
            }
            _ => Step::Idle,
        }
    }

    /// A drop of the binary's pages put off by its pace is due.
    fn drop_pages(&mut self) -> Step {
        self.resident.drop_pages();
        Step::Rest
    }

    /// Reaps are waiting to be told and a notification is due: sent in the
    /// background, so the loop goes on at once.
    fn tell_desktop(&mut self) -> Step {
        if self.shared.borrow().cfg.notify.desktop {
            self.desktop.send();
        } else {
            self.desktop.clear(); // turned off by a reload meanwhile
        }
        Step::Idle
    }

    fn watchdog_ping(&self) -> Step {
        self.notifier.watchdog_ping();
        Step::Idle
    }

    async fn config_file(&mut self) -> Step {
        if self.config.changed().await {
            self.reload("config file changed");
        }
        Step::Idle
    }

    fn request(&mut self, req: Option<LoopRequest>) -> Step {
        match req {
            Some(LoopRequest::Reload(tx)) => {
                let r = self.reload_config("control socket");
                let _ = tx.send(r);
                Step::Idle
            }
            Some(LoopRequest::ReapNow { dry_run, reply }) => {
                self.schedule.want_full();
                Step::Scan { asked: Some((dry_run, reply)) }
            }
            Some(LoopRequest::SessionEnd { host, session_id, reason, reply }) => {
                let name =
                    self.procfs.process(host.pid).map_or_else(|| host.pid.to_string(), |p| crate::names::name(&p));
                let short = |t: &str| crate::names::printable(&t.chars().take(64).collect::<String>()).into_owned();
                let why = format!(
                    "its host {name} ended its session{}",
                    reason.as_deref().map(|r| format!(" ({})", short(r))).unwrap_or_default()
                );
                let children = self.endings.add(&self.procfs, host, why, &mut self.memory.book);
                self.shared.borrow_mut().session_ends = self.endings.status();
                tracing::info!(
                    reaper_action = "session-end",
                    "host {name} ends its session{}: its trees are reaped without grace once it exits",
                    session_id.as_deref().map(|s| format!(" {}", short(s))).unwrap_or_default()
                );
                let _ = reply.send(crate::proto::SessionEndResult { host_pid: host.pid.get(), children });
                // Learn (and watch) its trees now, not at the next interval.
                self.schedule.soon_after_exec();
                Step::Idle
            }
            None => Step::Idle,
        }
    }

    /// A scan starts: one cycle; `reaperctl reap-now` gets its outcomes.
    async fn scan(&mut self, asked: Option<(bool, oneshot::Sender<ReapResult>)>) {
        self.schedule.mark_scan();
        self.exits.scanning();
        let dry_override = asked.as_ref().map(|&(dry, _)| dry);
        let events = self.cycle(dry_override).await;
        if let Some((dry, reply)) = asked {
            let dry_run = dry || self.shared.borrow().mode() == Mode::DryRun;
            let _ = reply.send(ReapResult { dry_run, events });
        }
    }

    fn reload(&mut self, why: &str) -> Step {
        self.reload_config(why);
        Step::Idle
    }
}

/// The watchdog's next tick; never without a watchdog.
async fn tick(watchdog: Option<&mut tokio::time::Interval>) {
    match watchdog {
        Some(w) => {
            w.tick().await;
        }
        None => std::future::pending().await,
    }
}
