//! `mcp-reaperd`: one cycle (`--once`, for a timer) or the long-running daemon.

pub mod births;
mod board;
mod born;
pub mod control;
mod endings;
mod exits;
pub mod generations;
pub(crate) mod http;
mod lookout;
pub mod notify;
mod one_cycle;
mod pressure;
mod reload;
mod resident;
pub mod run;
mod schedule;
mod start;
mod ticker;
pub mod watch;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use serde::Serialize;

use crate::config::{Config, Mode, Sources};
pub use crate::cycle::CycleSummary;
use crate::cycle::{Cycle, Kind, Memory};
use crate::exit;
use crate::ids::{Pid, parse_pid};
use crate::policy::Verdict;
use crate::reap::Outcome;
use crate::report::{
    self,
    log::{Color, LogTarget},
};
use crate::scan::{ProcFs, Read};
use crate::state;
use crate::stdout::outln;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "mcp-reaperd",
    version,
    about = "Reap orphaned MCP server process trees",
    long_about = "Reap orphaned MCP server process trees.\n\n\
        Scans /proc every interval and whenever a host or owner of a server tree exits, gives every MCP \
        server tree a verdict (live, orphan, stale, abandoned, foreign, protected, young, detached) and \
        terminates orphan, stale and abandoned trees: SIGTERM (+SIGCONT), a timeout, SIGKILL, always through pidfds re-checked against \
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
    /// Read the container runtimes' state (Kubernetes pods' names) below
    /// DIR only, instead of PID 1's root, then / (tests).
    #[arg(long, value_name = "DIR", hide = true)]
    pub runtime_root: Option<PathBuf>,
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
    /// Colours in log lines on stderr: auto (a terminal, and `NO_COLOR`
    /// unset or empty), always, never.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub color: Color,
}

#[derive(Serialize)]
struct OnceJson<'a> {
    mode: Mode,
    outcomes: &'a [Outcome],
    kept: &'a [KeptTree],
    summary: &'a CycleSummary,
    /// The memory pressure this run read.
    memory_pressure: report::status::PressureStatus,
    /// Cgroups of `reaperctl run` wrappers killed before they could remove
    /// them, empty, removed by this run (in a dry run: to be removed).
    stale_cgroups_removed: Vec<String>,
}

#[derive(Serialize)]
struct KeptTree {
    verdict: Verdict,
    root: i32,
    /// The same as `root`: the one name every outcome shape has.
    root_pid: i32,
    root_start_time: u64,
    reason: String,
    member_count: usize,
}

pub fn main() -> ExitCode {
    let mut args = match exit::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    if !args.once {
        // Before anything is read (`--config /dev/stdin` reads once), said
        // (the log's set-up would be said twice) or taken: the exec starts
        // over from here.
        crate::sys::exec_without_thread_cache();
    }
    let cfg = match Config::load(&Sources::from_arg(args.config.as_deref())) {
        Ok(c) => c,
        Err(errs) => {
            for e in &errs.0 {
                crate::say_err!("mcp-reaperd: {e}");
            }
            return ExitCode::from(exit::CONFIG);
        }
    };
    crate::redact::install(cfg.redactor.clone());
    if args.state_file.is_none() {
        args.state_file = Some(crate::paths::state_file(cfg.state_file.as_deref()));
    }
    report::log::init(&args.log_level, args.log_target, args.color, "mcp-reaperd");
    if args.once { once(&args, &cfg) } else { daemon_main(args, cfg) }
}

pub fn mode_of(args: &Args, cfg: &Config) -> Mode {
    if args.dry_run { Mode::DryRun } else { cfg.mode }
}

fn once(args: &Args, cfg: &Config) -> ExitCode {
    let mode = mode_of(args, cfg);
    let state_path = args.state_file.clone().expect("set in main");
    let (book, warning) = state::load_for_writer(&state_path);
    if let Some(w) = warning {
        tracing::warn!(reaper_action = "error", "{w}");
    }
    let procfs = ProcFs::new(&args.proc_root).with_runtime_root(args.runtime_root.as_deref());
    if let Some(note) = procfs.hidden_notice() {
        tracing::info!("{note}");
    }
    // Read once per run; a missing file is one log line, and no pressure.
    let mut pressure = pressure::PressureWatch::new(&cfg.pressure);
    let cycle = Cycle {
        procfs: &procfs,
        cfg,
        scope: args.scope,
        dry_run: mode == Mode::DryRun,
        state_file: &state_path,
        kind: Kind::Once,
        pressure: pressure.read_now(),
    };
    // Before the cycle: a stale cgroup that still holds processes is left
    // to the next run, once the cycle has judged (and maybe ended) them.
    let swept = crate::session::stale::sweep_and_log(&procfs, mode == Mode::DryRun, args.scope);
    let mut memory = Memory { book, known: HashMap::new() };
    let planned = cycle.plan(&mut memory, Read::Fresh);
    if let Some(Err(e)) = &planned.saved {
        tracing::warn!(reaper_action = "error", "cannot write state file {}: {e}", state_path.display());
    }
    let done = cycle.act(&mut memory, planned);
    if !done.entries.is_empty() {
        let path = crate::history::beside(&state_path);
        match crate::history::append(&path, done.entries.clone()) {
            Err(e) => tracing::warn!(reaper_action = "error", "cannot write the history {}: {e}", path.display()),
            Ok((_, Some(w))) => tracing::warn!(reaper_action = "error", "{w}"),
            Ok(_) => {}
        }
    }
    let (assessment, summary) = match done.judged {
        Ok(x) => x,
        Err(e) => {
            tracing::error!(reaper_action = "error", "{e}");
            return ExitCode::from(exit::assess(&e));
        }
    };
    if args.json {
        // Every kept tree, live ones included (the log explains them too,
        // live ones at debug level, since a timer runs this every few minutes).
        let kept: Vec<KeptTree> = assessment
            .judgements
            .iter()
            .filter(|j| !j.reap)
            .map(|j| KeptTree {
                verdict: j.verdict,
                root: assessment.snapshot.procs[j.root].pid().get(),
                root_pid: assessment.snapshot.procs[j.root].pid().get(),
                root_start_time: assessment.snapshot.procs[j.root].id.start_time.0,
                reason: j.reason.clone(),
                member_count: j.members.len(),
            })
            .collect();
        let j = OnceJson {
            mode,
            outcomes: &done.outcomes,
            kept: &kept,
            summary: &summary,
            memory_pressure: pressure.status(),
            stale_cgroups_removed: swept.removed.iter().map(|d| d.display().to_string()).collect(),
        };
        outln!("{}", crate::names::printable_json(&serde_json::to_string_pretty(&j).expect("outcomes serialize")));
    }
    match done.saved {
        Some(Err(e))
            if matches!(e.kind(), std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem) =>
        {
            ExitCode::from(exit::NOPERM)
        }
        Some(Err(_)) => ExitCode::from(exit::CANTCREAT),
        Some(Ok(())) | None => ExitCode::from(exit::OK),
    }
}

fn daemon_main(args: Args, cfg: Config) -> ExitCode {
    start::main(args, cfg)
}
