//! The daemon's start-up: the control socket (its lock, then the listener),
//! the state file, the event source (the proc connector when proven, else
//! pidfds), the shared status and the loop's initial state; then the loop
//! ([`super::run`]) and, after it, the socket's removal.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::Args;
use super::births::Births;
use super::board::Shared;
use super::exits::ExitWatch;
use super::notify::Notifier;
use super::pressure::PressureWatch;
use super::run::{Daemon, LoopRequest};
use super::schedule::Schedule;
use super::watch::ConfigEvents;
use crate::config::Config;
use crate::cycle::Memory;
use crate::proto::{ScanStats, Totals};
use crate::report;
use crate::scan::ProcFs;
use crate::scan::events::Connector;
use crate::{exit, state, sys};

/// How long an idle blocking thread (the cycles') waits for more work.
const BLOCKING_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(3600);

/// The daemon on a current-thread runtime (a `LocalSet`: the loop's state
/// is shared with the control socket through `Rc`).
pub fn main(args: Args, cfg: Config) -> std::process::ExitCode {
    crate::sys::single_malloc_arena();
    // Before the runtime's threads: the passed fds and LISTEN_* are taken
    // while this is the process's only thread.
    let passed = super::http::take_passed();
    // The cycle's blocking thread outlives the gap between two periodic
    // scans: one that exits after tokio's default 10 s is born again at
    // the next, a new pid each time, and a pidfd-mode scan sweeps its
    // snapshot whenever any task was born or reaped since its last listing
    // (`births::Census`). Kept, it holds the stack pages a cycle touched.
    let rt =
        match tokio::runtime::Builder::new_current_thread().enable_all().thread_keep_alive(BLOCKING_KEEP_ALIVE).build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!("cannot start the runtime: {e}");
                return std::process::ExitCode::from(exit::SOFTWARE);
            }
        };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move { start(args, cfg, passed).await })
}

/// Start-up, the loop, and shut-down; a socket that cannot be locked or
/// bound ends the daemon before the loop, and so does a metrics listener
/// that was asked for and cannot be had.
async fn start(args: Args, cfg: Config, passed: super::http::Taken) -> std::process::ExitCode {
    let sources = crate::config::Sources::from_arg(args.config.as_deref());
    let socket_path = args.socket.clone().unwrap_or_else(|| crate::paths::socket(cfg.socket.as_deref()));
    let (lock, metrics) = match lock_then_listen(&socket_path, cfg.metrics_listen, passed).await {
        Ok(x) => x,
        Err(code) => return code,
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
    let lifetime = lifetime(&state_path);
    let (connector, event_mode, event_mode_reason) = open_events(&args, cfg.interval_secs);
    let procfs = ProcFs::new(&args.proc_root).with_runtime_root(args.runtime_root.as_deref());
    if let Some(note) = procfs.hidden_notice() {
        tracing::info!("{note}");
    }
    let config = ConfigEvents::new(sources.main.as_deref());
    let pressure = PressureWatch::started(&cfg.pressure);
    let shared = Rc::new(RefCell::new(Shared {
        cfg,
        sources,
        args,
        started: Instant::now(),
        last_reload: None,
        event_mode,
        event_mode_reason,
        quiet: false,
        scans: ScanStats::default(),
        trees: Vec::new(),
        totals: Totals::default(),
        lifetime,
        recent: VecDeque::new(),
        would_reap: crate::report::status::WouldReap::default(),
        planned: std::collections::HashSet::new(),
        duplicates: Vec::new(),
        generations: Vec::new(),
        self_uid: rustix::process::getuid().as_raw(),
        run_sessions: Vec::new(),
        session_ends: Vec::new(),
        pressure: pressure.status(),
    }));
    let (req_tx, req_rx) = mpsc::channel::<LoopRequest>(8);
    let server = tokio::task::spawn_local(super::control::serve(listener, shared.clone(), req_tx));
    let metrics_http = metrics.map(|m| serve_metrics(m, &shared));
    let notifier = Notifier::from_env();
    let births = Births::new(&procfs);
    let mut d = Daemon {
        watchdog: notifier.watchdog.map(tokio::time::interval),
        shared,
        notifier,
        procfs,
        memory: Memory { book, known: std::collections::HashMap::new() },
        schedule: Schedule::new(),
        exits: ExitWatch::new(connector),
        births,
        resident: super::resident::Resident::default(),
        endings: super::endings::Endings::default(),
        generations: super::generations::Generations::default(),
        swept: None,
        pressure,
        desktop: report::desktop::Desktop::new(),
        config,
        state_path,
        state_writes: report::log::Repeated::new("state file"),
        metrics_writes: report::log::Repeated::new("metrics textfile"),
        history_writes: report::log::Repeated::new("history file"),
        history: None,
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
    if let Some(h) = metrics_http {
        h.abort();
    }
    let _ = std::fs::remove_file(&socket_path);
    drop(lock);
    code
}

/// The control socket's lock, then the metrics listener (`[metrics]
/// listen`, or the socket the service manager passed) when one is asked
/// for: after the lock, so a second instance is told by the lock, not by
/// the port; before anything slow. Else the exit code, logged.
async fn lock_then_listen(
    socket: &std::path::Path,
    configured: Option<std::net::SocketAddr>,
    passed: super::http::Taken,
) -> Result<(super::control::Lock, Option<(tokio::net::TcpListener, String)>), std::process::ExitCode> {
    let lock = super::control::lock(socket).map_err(|e| {
        tracing::error!(reaper_action = "error", "{e}");
        std::process::ExitCode::from(e.exit_code())
    })?;
    let got = match passed {
        Ok(p) => super::http::listener(configured, p).await,
        Err(e) => Err(e),
    };
    let metrics = got.map_err(|e| {
        tracing::error!(reaper_action = "error", "{e}");
        std::process::ExitCode::from(exit::metrics_listener(&e))
    })?;
    Ok((lock, metrics))
}

/// The HTTP server's task on `listener` (`how` it was had, for the log).
fn serve_metrics(
    (listener, how): (tokio::net::TcpListener, String),
    shared: &Rc<RefCell<Shared>>,
) -> tokio::task::JoinHandle<()> {
    let bound = listener.local_addr().map_or_else(|_| "?".into(), |a| a.to_string());
    tracing::info!("metrics served on http://{bound}/metrics (and /healthz), {how}");
    tokio::task::spawn_local(super::http::serve(listener, shared.clone()))
}

/// The lifetime totals go on from the history's; one that cannot be read
/// is said once, and begun anew at the next reap.
fn lifetime(state_path: &std::path::Path) -> Option<crate::history::Lifetime> {
    let path = crate::history::beside(state_path);
    match crate::history::load(&path) {
        Ok(l) => Some(l.as_ref().map(crate::history::Ledger::lifetime).unwrap_or_default()),
        Err(e) => {
            tracing::warn!(reaper_action = "error", "cannot read the history {}: {e}", path.display());
            None
        }
    }
}

/// The proc connector when it is proven to deliver, else pidfd mode and why.
fn open_events(
    args: &Args,
    interval_secs: u64,
) -> (Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>, &'static str, Option<String>) {
    let opened = if args.no_events {
        Err(std::io::Error::other("disabled by --no-events"))
    } else {
        // A subscription that delivers nothing would make the daemon deaf:
        // prove that events flow before relying on them.
        Connector::open()
            .and_then(|fd| Connector::prove(std::os::fd::AsFd::as_fd(&fd), Duration::from_millis(100)).map(|()| fd))
            .and_then(sys::async_fd)
    };
    match opened {
        Ok(c) => (Some(c), "netlink", None),
        Err(e) => {
            tracing::info!(
                "process events unavailable ({e}); watching hosts with pidfds and scanning every {interval_secs}s"
            );
            (None, "pidfd", Some(e.to_string()))
        }
    }
}
