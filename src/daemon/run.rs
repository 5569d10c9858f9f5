//! The long-running daemon: a current-thread tokio loop that scans every
//! `interval_secs`, at once when a watched host or owner exits, and when a
//! young tree's grace runs out; serves the control socket; reloads config.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Notify, mpsc, oneshot};

use super::notify::Notifier;
use super::watch::ConfigWatch;
use super::{Args, CycleSummary, settings};
use crate::config::{Config, Mode, Sources};
use crate::ctl::proto::{ReapEvent, ReapResult, ReloadResult, ScanStats, Status, Totals, TreeStatus};
use crate::cycle::{self, Assessment};
use crate::ids::{Identity, Pid};
use crate::policy::{GraceBook, Verdict};
use crate::reap::Outcome;
use crate::report;
use crate::scan::events::{Connector, ProcEvent};
use crate::scan::{ProcFs, Reuse, Snapshot};
use crate::{exit, state, sys};

const RECENT: usize = 50;
/// In event mode, how often a full read of /proc double-checks the deltas.
const RESYNC: Duration = Duration::from_secs(300);
/// In pidfd mode, ticks read only new pids; how often a full read catches up
/// with what such ticks miss (an exec under the same pid, a re-parenting
/// whose old parent was not watched).
const PIDFD_RESYNC: Duration = Duration::from_secs(120);
/// How often a read takes nothing over at all, in case an exec kept its comm
/// (pidfd mode cannot see those).
const FRESH: Duration = Duration::from_secs(600);

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
    pub scans: ScanStats,
    pub trees: Vec<TreeView>,
    pub totals: Totals,
    pub recent: VecDeque<ReapEvent>,
    pub self_uid: u32,
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
            interval_secs: self.cfg.interval_secs,
            grace_secs: self.cfg.grace_secs,
            scans: self.scans.clone(),
            by_verdict,
            trees,
            totals: self.totals.clone(),
            recent: self.recent.iter().filter(|e| all || e.uid == Some(uid)).cloned().collect(),
            filtered_for_uid: (!all).then_some(uid),
        }
    }
}

/// Requests from the control socket to the loop.
pub enum LoopRequest {
    Reload(oneshot::Sender<ReloadResult>),
    ReapNow { dry_run: bool, reply: oneshot::Sender<ReapResult> },
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

/// What a cycle hands back from its blocking thread.
struct CycleResult {
    assessment: Result<Assessment, String>,
    outcomes: Vec<Outcome>,
    book: GraceBook,
    dry_run: bool,
    /// The state file's write, when the grace book changed.
    saved: Option<std::io::Result<()>>,
}

/// How the next cycle reads processes.
enum Input {
    /// Every pid listed in /proc, taking over from the last snapshot what the
    /// mode allows, except the pids in the set (reported changed).
    Read(Option<Snapshot>, Reuse, HashSet<Pid>),
    /// Event mode: the last snapshot plus the pids the kernel reported as changed.
    Delta(Snapshot, HashSet<Pid>),
}

fn run_cycle(
    procfs: &ProcFs,
    cfg: &Config,
    scope: Option<Pid>,
    mut book: GraceBook,
    input: Input,
    dry_run: bool,
    state_path: &Path,
) -> CycleResult {
    let before = book.clone();
    let now = SystemTime::now();
    let started = Instant::now();
    let snap = match input {
        Input::Read(prev, reuse, changed) => procfs.rescan(prev.as_ref(), reuse, &changed),
        Input::Delta(prev, changed) => Ok(procfs.refresh(prev, &changed)),
    };
    let planned = snap
        .map_err(cycle::AssessError::Scan)
        .and_then(|snap| cycle::assess_snapshot(procfs, cfg, scope, &book, now, snap, started))
        .and_then(|a| cycle::plan_from(procfs, cfg, scope, &mut book, now, a));
    // Saved before acting, not after: a daemon killed mid-termination keeps
    // the grace clocks this cycle started.
    let saved = (book != before).then(|| state::save(state_path, &book));
    match planned {
        Ok((a, orders)) => {
            let outcomes = crate::reap::terminate_with(procfs, orders, &settings(cfg, dry_run), Some(&a.snapshot));
            CycleResult { assessment: Ok(a), outcomes, book, dry_run, saved }
        }
        Err(e) => CycleResult { assessment: Err(e.to_string()), outcomes: Vec::new(), book, dry_run, saved },
    }
}

/// When a scan for an exited host or owner may start: 5 ms from now (the
/// kernel re-parents its children meanwhile), and 50 ms after the last scan
/// at the earliest, which keeps reaction well within the 200 ms target.
fn exit_scan_at(last_scan: Instant) -> Instant {
    (Instant::now() + Duration::from_millis(5)).max(last_scan + Duration::from_millis(50))
}

/// Re-resolves the config path before a reload, so the watches follow a
/// retargeted symlink; a change after this point is noticed again.
fn rearm(watch: &mut Option<(ConfigWatch, AsyncFd<OwnedFd>)>) {
    if let Some((w, _)) = watch {
        w.rearm();
    }
}

pub fn main(args: Args, cfg: Config) -> std::process::ExitCode {
    crate::sys::single_malloc_arena();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return std::process::ExitCode::from(exit::SOFTWARE);
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move { Daemon::start(args, cfg).await })
}

struct Daemon {
    shared: Rc<RefCell<Shared>>,
    notifier: Notifier,
    procfs: ProcFs,
    book: GraceBook,
    /// The last judged snapshot, what the next read builds on, and what the
    /// kernel reported changed since (event mode).
    last: Option<Snapshot>,
    changed: HashSet<Pid>,
    /// Events were lost or never flowed: the next cycle reads everything afresh.
    need_full: bool,
    /// A reap happened, or a user asked: the next read is a full one.
    want_full: bool,
    /// Watched processes whose pidfd said they exited (pidfd mode).
    exited: Rc<RefCell<HashSet<Pid>>>,
    last_full: Instant,
    last_fresh: Instant,
    state_path: PathBuf,
    /// Failing writes are reported once, not every cycle.
    state_writes: report::log::Repeated,
    metrics_writes: report::log::Repeated,
    wake: Rc<Notify>,
    connector: Option<AsyncFd<OwnedFd>>,
    watched: HashSet<Pid>,
    pidfd_tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Last verdict per tree root, to log changes rather than every tick.
    known: HashMap<Identity, Verdict>,
    next_young: Option<Instant>,
    /// A scan wanted shortly (a host or server was just exec'd).
    soon: Option<Instant>,
    /// Hosts and servers exec'd since the last scan: not watched yet, so
    /// their exit must trigger a scan by itself.
    unseen: HashSet<Pid>,
}

impl Daemon {
    async fn start(args: Args, cfg: Config) -> std::process::ExitCode {
        let sources = super::sources(&args.config);
        let socket_path = args.socket.clone().unwrap_or_else(|| crate::paths::socket(cfg.socket.as_deref()));
        let lock = match super::control::lock(&socket_path) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(reaper_action = "error", "{e}");
                return std::process::ExitCode::from(e.exit_code());
            }
        };
        let listener = match super::control::bind(&socket_path) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(reaper_action = "error", "cannot listen on {}: {e}", socket_path.display());
                return std::process::ExitCode::from(exit::CANTCREAT);
            }
        };
        let state_path = args.state_file.clone().expect("set in main");
        let (book, warning) = state::load_for_writer(&state_path);
        if let Some(w) = warning {
            tracing::warn!(reaper_action = "error", "{w}");
        }
        let opened = if args.no_events {
            Err(std::io::Error::other("disabled by --no-events"))
        } else {
            Connector::open().and_then(sys::async_fd)
        };
        let (connector, event_mode) = match opened {
            Ok(c) => (Some(c), "netlink"),
            Err(e) => {
                tracing::info!(
                    "process events unavailable ({e}); watching hosts with pidfds and scanning every {}s",
                    cfg.interval_secs
                );
                (None, "pidfd")
            }
        };
        let procfs = ProcFs::new(&args.proc_root);
        if let Some(note) = procfs.hidden_notice() {
            tracing::info!("{note}");
        }
        let shared = Rc::new(RefCell::new(Shared {
            cfg,
            sources,
            args,
            started: Instant::now(),
            last_reload: None,
            event_mode,
            scans: ScanStats::default(),
            trees: Vec::new(),
            totals: Totals::default(),
            recent: VecDeque::new(),
            self_uid: rustix::process::getuid().as_raw(),
        }));
        let (req_tx, req_rx) = mpsc::channel::<LoopRequest>(8);
        let server = tokio::task::spawn_local(super::control::serve(listener, shared.clone(), req_tx));
        let mut d = Daemon {
            shared,
            notifier: Notifier::from_env(),
            procfs,
            book,
            last: None,
            changed: HashSet::new(),
            need_full: true,
            want_full: false,
            exited: Rc::default(),
            last_full: Instant::now(),
            last_fresh: Instant::now(),
            state_path,
            state_writes: report::log::Repeated::new("state file"),
            metrics_writes: report::log::Repeated::new("metrics textfile"),
            wake: Rc::new(Notify::new()),
            connector,
            watched: HashSet::new(),
            pidfd_tasks: Vec::new(),
            known: HashMap::new(),
            next_young: None,
            soon: None,
            unseen: HashSet::new(),
        };
        {
            let s = d.shared.borrow();
            tracing::info!(
                "mcp-reaperd {} started: mode={} events={} interval={}s grace={}s socket={} config={}",
                env!("CARGO_PKG_VERSION"),
                s.mode(),
                s.event_mode,
                s.cfg.interval_secs,
                s.cfg.grace_secs,
                socket_path.display(),
                s.cfg.sources.join(", ")
            );
        }
        let code = d.run(req_rx).await;
        server.abort();
        let _ = std::fs::remove_file(&socket_path);
        drop(lock);
        code
    }

    #[allow(clippy::too_many_lines)] // one select! over every source of work
    async fn run(&mut self, mut req_rx: mpsc::Receiver<LoopRequest>) -> std::process::ExitCode {
        let (Ok(mut sigterm), Ok(mut sigint), Ok(mut sighup)) =
            (signal(SignalKind::terminate()), signal(SignalKind::interrupt()), signal(SignalKind::hangup()))
        else {
            tracing::error!("cannot install signal handlers");
            return std::process::ExitCode::from(exit::SOFTWARE);
        };
        let main_cfg = self.shared.borrow().sources.main.clone();
        let mut watch = main_cfg.and_then(|m| ConfigWatch::new(&m).ok()).and_then(|w| {
            let fd: OwnedFd = w.fd.try_clone().ok()?;
            Some((w, sys::async_fd(fd).ok()?))
        });
        let mut watchdog = self.notifier.watchdog.map(tokio::time::interval);
        let mut buf = vec![0u8; 64 * 1024];

        self.cycle(None).await;
        {
            let line = self.status_line();
            self.notifier.ready(&line);
        }
        // The periodic scan is due `interval` after the last scan, whatever
        // events arrive in between (they must not push it back).
        let mut last_scan = Instant::now();
        loop {
            let interval = Duration::from_secs(self.shared.borrow().cfg.interval_secs);
            let mut deadline = last_scan + interval;
            if let Some(y) = self.next_young {
                deadline = deadline.min(y);
            }
            if let Some(s) = self.soon {
                deadline = deadline.min(s);
            }
            let mut scan = false;
            let mut reply: Option<oneshot::Sender<ReapResult>> = None;
            let mut dry_override = None;
            tokio::select! {
                () = tokio::time::sleep_until(deadline.into()) => scan = true,
                () = self.wake.notified() => {
                    // Let the kernel finish re-parenting the exited host's
                    // children; and no more than twenty such scans a second, when
                    // hosts exit by the dozen (`claude -p` loops).
                    tokio::time::sleep_until(exit_scan_at(last_scan).into()).await;
                    scan = true;
                }
                r = async {
                    match &self.connector { Some(c) => c.readable().await.map(|mut g| g.retain_ready()).ok(), None => std::future::pending().await }
                } => {
                    let _ = r;
                    if let Some(c) = &self.connector {
                        let mut guard = c.readable().await.ok();
                        match Connector::drain(c.get_ref().as_fd(), &mut buf) {
                            Ok(batch) => {
                                if let Some(g) = guard.as_mut() { g.clear_ready(); }
                                if batch.lost {
                                    tracing::debug!("process events were lost; rescanning");
                                    self.need_full = true;
                                    scan = true;
                                }
                                for e in &batch.events {
                                    match *e {
                                        ProcEvent::Exec { pid } => {
                                            self.changed.insert(pid);
                                            // A new host or server: look soon, so its
                                            // host is watched before it can die.
                                            // At most two such scans a second: a busy
                                            // machine may exec hosts and servers all the time.
                                            if self.is_interesting_exec(pid) {
                                                self.unseen.insert(pid);
                                                if self.soon.is_none() {
                                                    let at = (Instant::now() + Duration::from_millis(50)).max(last_scan + Duration::from_millis(500));
                                                    self.soon = Some(at);
                                                }
                                            }
                                        }
                                        ProcEvent::Fork { child, .. } => { self.changed.insert(child); }
                                        ProcEvent::Exit { pid } => { self.changed.insert(pid); }
                                    }
                                }
                                if batch.events.iter().any(|e| matches!(e, ProcEvent::Exit { pid } if self.watched.contains(pid) || self.unseen.contains(pid))) {
                                    tokio::time::sleep_until(exit_scan_at(last_scan).into()).await;
                                    scan = true;
                                }
                            }
                            Err(e) => {
                                tracing::warn!("process events failed ({e}); falling back to pidfds");
                                self.connector = None;
                                self.need_full = true;
                                self.shared.borrow_mut().event_mode = "pidfd";
                                scan = true;
                            }
                        }
                    }
                }
                () = async { match &mut watchdog { Some(w) => { w.tick().await; } None => std::future::pending().await } } => {
                    self.notifier.watchdog_ping();
                }
                r = async { match &watch { Some((_, fd)) => fd.readable().await.map(|mut g| g.clear_ready()).ok(), None => std::future::pending().await } } => {
                    let _ = r;
                    if let Some((w, _)) = &mut watch && w.drain() {
                        // Editors write in several steps: let them finish.
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        w.drain();
                        rearm(&mut watch);
                        self.reload("config file changed");
                    }
                }
                _ = sighup.recv() => { rearm(&mut watch); self.reload("SIGHUP"); }
                req = req_rx.recv() => match req {
                    Some(LoopRequest::Reload(tx)) => { rearm(&mut watch); let r = self.reload("control socket"); let _ = tx.send(r); }
                    Some(LoopRequest::ReapNow { dry_run, reply: tx }) => { scan = true; self.want_full = true; reply = Some(tx); dry_override = Some(dry_run); }
                    None => {}
                },
                _ = sigterm.recv() => break,
                _ = sigint.recv() => break,
            }
            if scan {
                last_scan = Instant::now();
                self.soon = None;
                self.unseen.clear();
                let outcomes = self.cycle(dry_override).await;
                if let Some(tx) = reply {
                    let dry_run = dry_override.unwrap_or(false) || self.shared.borrow().mode() == Mode::DryRun;
                    let _ = tx.send(ReapResult { dry_run, events: outcomes });
                }
            }
        }
        self.notifier.stopping();
        tracing::info!("mcp-reaperd stopping");
        let saved = state::save(&self.state_path, &self.book);
        self.state_writes.record(&self.state_path, saved);
        std::process::ExitCode::from(exit::OK)
    }

    /// Event mode reads only what the kernel reported changed; pidfd mode
    /// reads only new pids, and the children of watched processes that
    /// exited (they were re-parented). Full reads still come every RESYNC /
    /// `PIDFD_RESYNC`, and fresh ones every FRESH and whenever events were lost.
    fn next_input(&mut self) -> Input {
        let prev = self.last.take();
        let mut changed = std::mem::take(&mut self.changed);
        let exited = std::mem::take(&mut *self.exited.borrow_mut());
        let want_full = std::mem::take(&mut self.want_full);
        let now = Instant::now();
        if self.need_full || prev.is_none() || self.last_fresh.elapsed() >= FRESH {
            self.need_full = false;
            (self.last_full, self.last_fresh) = (now, now);
            return Input::Read(None, Reuse::Nothing, HashSet::new());
        }
        let resync = if self.connector.is_some() { RESYNC } else { PIDFD_RESYNC };
        match prev {
            Some(prev) if !want_full && self.last_full.elapsed() < resync => {
                if self.connector.is_some() {
                    Input::Delta(prev, changed)
                } else {
                    changed.extend(
                        prev.procs
                            .iter()
                            .filter(|p| p.ppid.is_some_and(|pp| exited.contains(&pp)))
                            .map(super::super::scan::Process::pid),
                    );
                    changed.extend(exited);
                    Input::Read(Some(prev), Reuse::Unchanged, changed)
                }
            }
            prev => {
                self.last_full = now;
                Input::Read(prev, Reuse::Cmdlines, changed)
            }
        }
    }

    fn is_interesting_exec(&self, pid: Pid) -> bool {
        let Some(p) = self.procfs.process(pid) else { return false };
        let role = self.shared.borrow().cfg.matcher.classify_subject(crate::tree::subject(&p)).role;
        matches!(role, crate::config::Role::Host | crate::config::Role::Server)
    }

    fn status_line(&self) -> String {
        let s = self.shared.borrow();
        let count = |v: Verdict| s.trees.iter().filter(|t| t.status.verdict == v).count();
        format!(
            "{} live, {} orphan, {} young, {} stale tree(s); reaped {} so far",
            count(Verdict::Live),
            count(Verdict::Orphan),
            count(Verdict::Young),
            count(Verdict::Stale),
            s.totals.trees_reaped
        )
    }

    fn reload(&mut self, why: &str) -> ReloadResult {
        self.notifier.reloading();
        let sources = self.shared.borrow().sources.clone();
        let result = match Config::load(&sources) {
            Ok(new) => {
                let changes = self.shared.borrow().cfg.diff(&new);
                if changes.is_empty() {
                    tracing::debug!("config reloaded ({why}): no changes");
                } else {
                    tracing::info!("config reloaded ({why}): {}", changes.join("; "));
                }
                crate::redact::install(new.redactor.clone());
                self.shared.borrow_mut().cfg = new;
                ReloadResult { at_unix: unix_now(), ok: true, messages: changes }
            }
            Err(errs) => {
                for e in &errs.0 {
                    tracing::error!(
                        reaper_action = "error",
                        "config reload ({why}) failed, keeping the previous config: {e}"
                    );
                }
                ReloadResult {
                    at_unix: unix_now(),
                    ok: false,
                    messages: errs.0.iter().map(std::string::ToString::to_string).collect(),
                }
            }
        };
        self.shared.borrow_mut().last_reload = Some(result.clone());
        let line = self.status_line();
        self.notifier.ready(&line);
        result
    }

    /// One scan-judge-reap cycle on a blocking thread; the socket keeps answering.
    async fn cycle(&mut self, dry_override: Option<bool>) -> Vec<ReapEvent> {
        let (cfg, scope, dry_run) = {
            let s = self.shared.borrow();
            let dry = dry_override.unwrap_or(false) || s.mode() == Mode::DryRun;
            (s.cfg.clone(), s.args.scope, dry)
        };
        let procfs = self.procfs.clone();
        let book = std::mem::take(&mut self.book);
        let input = self.next_input();
        let before = book.clone();
        let started = Instant::now();
        let state_path = self.state_path.clone();
        let res = match tokio::task::spawn_blocking(move || {
            run_cycle(&procfs, &cfg, scope, book, input, dry_run, &state_path)
        })
        .await
        {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(reaper_action = "error", "cycle failed: {e}");
                self.book = before;
                self.need_full = true;
                return Vec::new();
            }
        };
        self.book = res.book;
        if let Some(saved) = res.saved {
            self.state_writes.record(&self.state_path, saved);
        }
        let a = match res.assessment {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(reaper_action = "error", "scan failed: {e}");
                self.need_full = true;
                return Vec::new();
            }
        };
        let events = self.record(&a, &res.outcomes, res.dry_run, started.elapsed());
        self.rewatch(&a);
        if !res.outcomes.is_empty() {
            self.want_full = true; // the reap changed much; read every stat again
        }
        self.last = Some(a.snapshot);
        drop((a.forest, a.judgements, res.outcomes));
        crate::sys::release_free_memory();
        let line = self.status_line();
        self.notifier.status(&line);
        if let Some(path) = self.shared.borrow().cfg.metrics_textfile.clone() {
            let text = report::metrics::render(&self.shared.borrow().status(0));
            let written = report::metrics::write_textfile(&path, &text);
            self.metrics_writes.record(&path, written);
        }
        events
    }

    #[allow(clippy::too_many_lines)] // one pass that updates every part of the status
    fn record(&mut self, a: &Assessment, outcomes: &[Outcome], dry_run: bool, took: Duration) -> Vec<ReapEvent> {
        let snap = &a.snapshot;
        let now = Instant::now();
        let mut next_young: Option<Instant> = None;
        let mut trees = Vec::new();
        let mut seen = HashMap::new();
        for j in &a.judgements {
            let root = &snap.procs[j.root];
            if let Some(left) = j.grace_left {
                let at = now + left;
                next_young = Some(next_young.map_or(at, |n: Instant| n.min(at)));
            }
            seen.insert(root.id, j.verdict);
            if self.known.get(&root.id) != Some(&j.verdict) && !j.reap {
                // A new live tree is the normal state of things (a busy
                // machine starts many): debug. What is kept for another
                // reason, or waits, is worth a line at info.
                macro_rules! keep {
                    ($level:expr) => {
                        tracing::event!(
                            $level,
                            reaper_action = "keep",
                            reaper_verdict = j.verdict.as_str(),
                            reaper_reason = %j.reason,
                            reaper_root_pid = root.pid().get(),
                            reaper_members = j.members.len(),
                            "{} tree root={} ({}): {}",
                            j.verdict,
                            root.pid(),
                            crate::names::short_cmd(root, 60),
                            j.reason
                        )
                    };
                }
                if j.verdict == Verdict::Live {
                    keep!(tracing::Level::DEBUG);
                } else {
                    keep!(tracing::Level::INFO);
                }
            }
            trees.push(TreeView {
                status: TreeStatus::new(snap, j),
                uids: j.members.iter().filter_map(|&(m, _)| snap.procs[m].uid().map(|u| u.0)).collect(),
            });
        }
        self.known = seen;
        // A young tree's deadline wakes the loop a moment after it passes.
        self.next_young = next_young.map(|t| t + Duration::from_millis(20));
        let mut events = Vec::new();
        let mut s = self.shared.borrow_mut();
        s.scans.count += 1;
        s.scans.last_duration_ms = a.scan_duration.as_secs_f64() * 1000.0;
        s.scans.last_processes = snap.len();
        s.scans.last_at_unix = unix_now();
        s.trees = trees;
        for o in outcomes {
            report::log::outcome(o);
            let uid =
                snap.get(o.root.pid).filter(|p| p.id == o.root).and_then(super::super::scan::Process::uid).map(|u| u.0);
            let ev = ReapEvent::new(o, dry_run, uid, unix_now());
            if !dry_run {
                s.totals.trees_reaped += u64::from(o.reaped());
                s.totals.processes_reaped += o.gone as u64;
                s.totals.reclaimed_bytes += o.reclaimed.total();
                s.totals.escalations += u64::from(o.escalated);
                s.totals.failures += u64::from(!o.success());
            }
            s.recent.push_front(ev.clone());
            s.recent.truncate(RECENT);
            events.push(ev);
        }
        if !dry_run {
            // Trees that are gone no longer belong in the status.
            let gone: HashSet<i32> = outcomes.iter().filter(|o| o.success()).map(|o| o.root.pid.get()).collect();
            s.trees.retain(|t| !gone.contains(&t.status.root));
        }
        if !outcomes.is_empty() {
            let summary = CycleSummary::new(a, outcomes);
            tracing::info!(
                reaper_action = "cycle",
                reaper_reclaimed_bytes = summary.reclaimed_bytes,
                reaper_duration_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                "{}",
                summary.line(dry_run, outcomes.len())
            );
        }
        events
    }

    /// Watches the owners and hosts of kept trees: their exit orphans a tree.
    fn rewatch(&mut self, a: &Assessment) {
        let snap = &a.snapshot;
        let mut want = HashSet::new();
        for j in a.judgements.iter().filter(|j| matches!(j.verdict, Verdict::Live | Verdict::Foreign | Verdict::Stale))
        {
            want.extend(j.owner.map(|o| snap.procs[o].pid()));
            want.extend(j.host.map(|h| snap.procs[h].pid()));
        }
        if want == self.watched {
            return;
        }
        self.watched = want;
        if self.connector.is_some() {
            return; // exit events are filtered against `watched`
        }
        for t in self.pidfd_tasks.drain(..) {
            t.abort();
        }
        for &pid in &self.watched {
            let Ok(fd) = sys::pidfd_open(pid) else {
                self.wake.notify_one(); // already gone: rescan
                continue;
            };
            let (wake, exited) = (self.wake.clone(), self.exited.clone());
            self.pidfd_tasks.push(tokio::task::spawn_local(async move {
                if let Ok(afd) = sys::async_fd(fd) {
                    let _ = afd.readable().await;
                    exited.borrow_mut().insert(pid);
                    wake.notify_one();
                }
            }));
        }
    }
}
