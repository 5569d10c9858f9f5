//! `mcp-reaperd`: one cycle (`--once`, for a timer) or the long-running daemon.

pub mod control;
pub mod notify;
pub mod run;
pub mod watch;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::Parser;
use serde::Serialize;

use crate::config::{Config, Mode};
use crate::ctl::parse_pid;
pub use crate::ctl::sources;
use crate::cycle;
use crate::exit;
use crate::ids::Pid;
use crate::policy::Verdict;
use crate::reap::{self, Outcome};
use crate::report::{self, log::LogTarget};
use crate::scan::ProcFs;
use crate::state;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "mcp-reaperd",
    version,
    about = "Reap orphaned MCP server process trees",
    long_about = "Reap orphaned MCP server process trees.\n\n\
        Scans /proc every interval and whenever a host or owner of a server tree exits, gives every MCP \
        server tree a verdict (live, orphan, stale, foreign, protected, young) and terminates orphan and \
        stale trees: SIGTERM (+SIGCONT), a timeout, SIGKILL, always through pidfds re-checked against \
        the process start time. With --once it runs one cycle and exits (for a systemd timer); in \
        dry-run it decides and logs \"would reap\" but signals nothing.",
    after_long_help = "Exit status: 0 ok (also when a tree could not be killed: that is reported), 64 usage, \
        70 internal error, 72 /proc cannot be read, 73 cannot write the state file or create the socket's directory, \
        75 another instance holds the socket lock, \
        77 permission denied, 78 configuration error.\n\n\
        Files: /etc/mcp-reaper/config.toml and config.d/*.toml, /run/mcp-reaper/control.sock, \
        /var/lib/mcp-reaper/state.json (for a user: ~/.config/mcp-reaper/, $XDG_RUNTIME_DIR/mcp-reaper/, \
        $XDG_STATE_HOME/mcp-reaper/). See mcp-reaper.toml(5) and reaperctl(1)."
)]
#[allow(clippy::struct_excessive_bools)] // command-line switches
pub struct Args {
    /// Run one cycle (scan, judge, terminate, report) and exit: what a systemd timer runs.
    #[arg(long)]
    pub once: bool,
    /// Walk the whole decision path but send no signal (overrides `mode`).
    #[arg(long)]
    pub dry_run: bool,
    /// Config file (default: /etc/mcp-reaper/config.toml for root,
    /// ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it).
    /// `-` means the embedded default alone.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Only consider descendants of PID, treating PID as an adopter.
    #[arg(long, value_name = "PID", value_parser = parse_pid)]
    pub scope: Option<Pid>,
    /// Control socket path (overrides `daemon.socket`).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Grace state file (overrides `daemon.state_file`).
    #[arg(long, value_name = "PATH")]
    pub state_file: Option<PathBuf>,
    /// Read processes from DIR instead of /proc (tests).
    #[arg(long, value_name = "DIR", default_value = "/proc", hide = true)]
    pub proc_root: PathBuf,
    /// Don't subscribe to kernel process events: watch hosts with pidfds and
    /// scan every interval (what a non-root daemon does anyway).
    #[arg(long)]
    pub no_events: bool,
    /// With --once: print the outcomes as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Log level: error, warn, info, debug, trace.
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    pub log_level: String,
    /// Where logs go.
    #[arg(long, value_enum, default_value = "auto")]
    pub log_target: LogTarget,
}

/// Totals of one cycle.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CycleSummary {
    pub trees_reaped: usize,
    pub processes_reaped: usize,
    pub escalations: usize,
    pub failures: usize,
    pub reclaimed_bytes: u64,
    pub kept: std::collections::BTreeMap<&'static str, usize>,
}

impl CycleSummary {
    pub fn new(judged: &cycle::Assessment, outcomes: &[Outcome]) -> CycleSummary {
        let mut kept = std::collections::BTreeMap::<&'static str, usize>::default();
        for j in judged.judgements.iter().filter(|j| !j.reap) {
            *kept.entry(j.verdict.as_str()).or_default() += 1;
        }
        CycleSummary {
            trees_reaped: outcomes.iter().filter(|o| o.reaped()).count(),
            processes_reaped: outcomes.iter().map(|o| o.gone).sum(),
            escalations: outcomes.iter().filter(|o| o.escalated).count(),
            failures: outcomes.iter().filter(|o| !o.success()).count(),
            reclaimed_bytes: outcomes.iter().map(|o| o.reclaimed.total()).sum(),
            kept,
        }
    }

    pub fn line(&self, dry_run: bool, planned: usize) -> String {
        let kept: Vec<String> =
            Verdict::ALL.iter().filter_map(|v| self.kept.get(v.as_str()).map(|n| format!("{n} {v}"))).collect();
        let kept = if kept.is_empty() { "none".to_string() } else { kept.join(", ") };
        if dry_run {
            format!(
                "cycle (dry-run): would reap {planned} tree(s), estimate {}; kept {kept}",
                report::bytes(self.reclaimed_bytes)
            )
        } else {
            format!(
                "cycle: reaped {} tree(s), {} process(es), {} escalation(s), {} failure(s), reclaimed {}; kept {kept}",
                self.trees_reaped,
                self.processes_reaped,
                self.escalations,
                self.failures,
                report::bytes(self.reclaimed_bytes)
            )
        }
    }
}

#[derive(Serialize)]
struct OnceJson<'a> {
    mode: Mode,
    outcomes: &'a [Outcome],
    kept: &'a [KeptTree],
    summary: &'a CycleSummary,
}

#[derive(Serialize)]
struct KeptTree {
    verdict: Verdict,
    root: i32,
    reason: String,
}

pub fn main() -> ExitCode {
    let mut args = Args::parse();
    let cfg = match Config::load(&sources(&args.config)) {
        Ok(c) => c,
        Err(errs) => {
            for e in &errs.0 {
                eprintln!("mcp-reaperd: {e}");
            }
            return ExitCode::from(exit::CONFIG);
        }
    };
    crate::redact::install(cfg.redactor.clone());
    if args.state_file.is_none() {
        args.state_file = Some(crate::paths::state_file(cfg.state_file.as_deref()));
    }
    report::log::init(&args.log_level, args.log_target, "mcp-reaperd");
    if args.once { once(&args, &cfg) } else { daemon_main(args, cfg) }
}

pub fn mode_of(args: &Args, cfg: &Config) -> Mode {
    if args.dry_run { Mode::DryRun } else { cfg.mode }
}

pub fn settings(cfg: &Config, dry_run: bool) -> reap::Settings {
    reap::Settings { term_timeout: cfg.term_timeout(), kill_wait: Duration::from_secs(1), dry_run }
}

fn once(args: &Args, cfg: &Config) -> ExitCode {
    let mode = mode_of(args, cfg);
    let state_path = args.state_file.clone().expect("set in main");
    let (mut book, warning) = state::load_for_writer(&state_path);
    if let Some(w) = warning {
        tracing::warn!(reaper_action = "error", "{w}");
    }
    let procfs = ProcFs::new(&args.proc_root);
    if let Some(note) = procfs.hidden_notice() {
        tracing::info!("{note}");
    }
    let (assessment, orders) = match cycle::plan(&procfs, cfg, args.scope, &mut book, SystemTime::now()) {
        Ok(x) => x,
        Err(e) => {
            tracing::error!(reaper_action = "error", "{e}");
            return ExitCode::from(exit::assess(&e));
        }
    };
    // Saved before acting: a crash mid-termination keeps the grace clock.
    let saved = state::save(&state_path, &book);
    if let Err(e) = &saved {
        tracing::warn!(reaper_action = "error", "cannot write state file {}: {e}", state_path.display());
    }
    // Every kept tree is explained; live ones only at debug level, since a
    // timer runs this every few minutes.
    let mut kept = Vec::new();
    for j in assessment.judgements.iter().filter(|j| !j.reap) {
        let root = &assessment.snapshot.procs[j.root];
        let line =
            format!("{} tree root={} ({}): {}", j.verdict, root.pid(), crate::names::short_cmd(root, 60), j.reason);
        if j.verdict == Verdict::Live {
            tracing::debug!(reaper_action = "keep", reaper_verdict = j.verdict.as_str(), reaper_root_pid = root.pid().get(), reaper_reason = %j.reason, "{line}");
        } else {
            tracing::info!(reaper_action = "keep", reaper_verdict = j.verdict.as_str(), reaper_root_pid = root.pid().get(), reaper_reason = %j.reason, "{line}");
        }
        kept.push(KeptTree { verdict: j.verdict, root: root.pid().get(), reason: j.reason.clone() });
    }
    let planned = orders.len();
    let outcomes =
        reap::terminate_with(&procfs, orders, &settings(cfg, mode == Mode::DryRun), Some(&assessment.snapshot));
    for o in &outcomes {
        report::log::outcome(o);
    }
    let summary = CycleSummary::new(&assessment, &outcomes);
    tracing::info!(
        reaper_action = "cycle",
        reaper_reclaimed_bytes = summary.reclaimed_bytes,
        "{}",
        summary.line(mode == Mode::DryRun, planned)
    );
    if args.json {
        let j = OnceJson { mode, outcomes: &outcomes, kept: &kept, summary: &summary };
        println!("{}", serde_json::to_string_pretty(&j).expect("outcomes serialize"));
    }
    match saved {
        Err(e) if matches!(e.kind(), std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem) => {
            ExitCode::from(exit::NOPERM)
        }
        Err(_) => ExitCode::from(exit::CANTCREAT),
        Ok(()) => ExitCode::from(exit::OK),
    }
}

fn daemon_main(args: Args, cfg: Config) -> ExitCode {
    run::main(args, cfg)
}
