//! `reaperctl`: the command-line client. Read-only commands work without the daemon.

mod config_show;
pub mod desktop;
mod doctor;
mod generations;
mod generations_end;
mod generations_evidence;
mod grace;
mod history;
mod hosts;
mod platform;
pub mod run;
pub mod session_end;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use clap::{Parser, Subcommand};

use crate::config::{Config, Sources};
use crate::cycle;
use crate::exit;
use crate::ids::Pid;
use crate::report;
use crate::scan::ProcFs;
use crate::stdout::{out, outln};

#[derive(Parser, Debug)]
#[command(
    name = "reaperctl",
    version,
    about = "Inspect and control mcp-reaper",
    long_about = "Inspect and control mcp-reaper.\n\n\
        `scan`, `generations` and `validate` work without the daemon and never signal anything (but \
        `generations --end`, which ends one host's old idle copies when asked); `status`, `reload`, \
        `reap-now` and `metrics` talk to a running mcp-reaperd over its control socket; `history` lists what was reaped, from the \
        ledger beside the state file or from the daemon. `run` starts a host \
        in a session of its own and ends what it leaves behind; `session-end`, from a host's session-end \
        hook, has the daemon reap the host's trees the moment it exits.",
    after_long_help = "Exit status: 0 ok, 64 usage, 69 the daemon is not running (or is stopping), \
        70 internal error, 71 `run` cannot set up the session as asked, 72 /proc cannot be read, 75 the daemon is busy (try again), \
        76 the daemon did not understand the request, \
        77 permission denied, 78 configuration error (or `validate` found problems). \
        `scan --exit-code` exits 1 when a tree would be reaped. `generations --end` exits 64 for a pid that is no \
        live host with copies, 77 for another user's host or copy, 75 when a copy would not go. \
        A reader that goes away early (`reaperctl status | head -1`) ends any command quietly with status 0. \
        `run` otherwise exits with the host's status (128 + signal when a signal ended it; \
        127 when the host is not found, 126 when it cannot be run).\n\n\
        See mcp-reaperd(8) and mcp-reaper.toml(5)."
)]
pub struct Cli {
    /// Config file (default: /etc/mcp-reaper/config.toml for root,
    /// ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it).
    /// `-` means the embedded default alone.
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Control socket of the daemon (default: from the config, else
    /// /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise).
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Read-only audit of the machine now: every MCP server tree and its verdict.
    Scan(ScanCmd),
    /// The MCP servers the hosts' own config files name, per user and host, with the files
    /// (read now, like `scan`; see `[hosts]` in mcp-reaper.toml(5)).
    Hosts(ScanArgs),
    /// Each live host's server copies by command and generation (copies
    /// started together), with memory, CPU time, I/O, whether the host
    /// still holds each copy's transport and, when the daemon answers, how
    /// long each was idle (read now, like `scan`; nothing is signalled unless
    /// `--end HOST_PID` asks to end that host's old idle copies).
    Generations(generations::GenerationsArgs),
    /// Check a config file; print "ok" or every problem found.
    Validate,
    /// Print the effective configuration (the embedded default, the main
    /// file and its drop-ins merged), each value with the file and line it
    /// comes from.
    Config(config_show::ConfigArgs),
    /// Check what the reaper needs from this machine (the platform and who
    /// adopts orphans there, privileges, pidfds, process events, hidepid,
    /// cgroups, journald, memory pressure, engine sockets, the daemon) and
    /// what each missing part costs.
    Doctor(doctor::DoctorArgs),
    /// What the running daemon sees and has done.
    Status {
        /// Print the daemon's JSON status.
        #[arg(long)]
        json: bool,
    },
    /// Ask the daemon to reload its configuration.
    Reload,
    /// Ask the daemon to run a cycle now and print what it did.
    ReapNow {
        /// Decide and report, but signal nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the outcomes as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the daemon's counters in Prometheus text format.
    Metrics,
    /// What was reaped, when, and what it returned: the ledger beside the
    /// state file, with the totals since it began.
    History(history::HistoryArgs),
    /// Run a host in a session nothing it starts can leave; end what it
    /// leaves behind when it exits. E.g. `alias claude='reaperctl run -- claude'`.
    Run(run::RunArgs),
    /// From a host's session-end hook (JSON on stdin): tell the daemon the
    /// host is ending on purpose, so its trees are reaped as soon as it
    /// exits, without grace.
    SessionEnd(session_end::SessionEndArgs),
}

#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    /// Print the stable JSON form (see docs/json.md) instead of the human view.
    #[arg(long)]
    pub json: bool,
    /// Judge only descendants of PID, treating PID as an adopter.
    #[arg(long, value_name = "PID", value_parser = parse_pid)]
    pub scope: Option<Pid>,
    /// Read processes from DIR instead of /proc (fixtures, tests: in no
    /// help, man page or completion).
    #[arg(long, value_name = "DIR", default_value = "/proc", hide = true)]
    pub proc_root: PathBuf,
    /// Read the container runtimes' state (Kubernetes pods' names) below
    /// DIR only, instead of PID 1's root, then / (tests).
    #[arg(long, value_name = "DIR", hide = true)]
    pub runtime_root: Option<PathBuf>,
}

pub use crate::ids::parse_pid;
/// The protocol, where the client's files have always found it.
pub use crate::proto;
#[derive(clap::Args, Debug)]
pub struct ScanCmd {
    #[command(flatten)]
    pub args: ScanArgs,
    /// Exit 1 when a tree would be reaped now, 0 when none would (as `git diff --exit-code`).
    #[arg(long)]
    pub exit_code: bool,
}

/// The config `--config` names (`-`: the embedded default alone).
pub fn sources(config: &Option<PathBuf>) -> Sources {
    Sources::from_arg(config.as_deref())
}

/// Loads config (and installs its redaction patterns for everything shown
/// after) or prints every error and returns the exit code.
pub(crate) fn load_config(sources: &Sources, prog: &str) -> Result<Config, ExitCode> {
    let cfg = Config::load(sources).map_err(|errs| {
        for e in &errs.0 {
            crate::say_err!("{prog}: {e}");
        }
        ExitCode::from(exit::CONFIG)
    })?;
    crate::redact::install(cfg.redactor.clone());
    Ok(cfg)
}

pub fn main() -> ExitCode {
    // `reaperctl desktop-notify`, the daemon's messenger, is parsed apart:
    // no user runs it, so it is in no help, man page or completion (clap's
    // completions list even hidden subcommands).
    if std::env::args_os().nth(1).is_some_and(|a| a == desktop::SUBCOMMAND) {
        let argv =
            std::iter::once(format!("reaperctl {}", desktop::SUBCOMMAND).into()).chain(std::env::args_os().skip(2));
        return match exit::parse_args_from::<desktop::DesktopNotifyCli, _, _>(argv) {
            Ok(d) => desktop::run(&d.args),
            Err(code) => code,
        };
    }
    let cli = match exit::parse_args::<Cli>() {
        Ok(c) => c,
        Err(code) => return code,
    };
    match &cli.command {
        Command::Validate => validate(&cli),
        Command::Config(args) => config_show::run(&cli, args),
        Command::Doctor(args) => doctor::run(&cli, args),
        Command::Scan(cmd) => scan(&cli, cmd),
        Command::Hosts(args) => hosts::hosts(&cli, args),
        Command::Generations(args) => generations::run(&cli, args),
        Command::Status { json } => status(&cli, *json),
        Command::Reload => reload(&cli),
        Command::ReapNow { dry_run, json } => reap_now(&cli, *dry_run, *json),
        Command::Metrics => metrics(&cli),
        Command::History(args) => history::run(&cli, args),
        Command::Run(args) => run::run(&cli.config, args),
        Command::SessionEnd(args) => session_end::run(&cli, args),
    }
}

fn validate(cli: &Cli) -> ExitCode {
    match Config::load(&sources(&cli.config)) {
        Ok(cfg) => {
            crate::say!("ok ({})", cfg.sources.join(", "));
            ExitCode::from(exit::OK)
        }
        Err(errs) => {
            for e in &errs.0 {
                crate::say_err!("{e}");
            }
            crate::say_err!("{} problem{} found", errs.0.len(), if errs.0.len() == 1 { "" } else { "s" });
            ExitCode::from(exit::INVALID)
        }
    }
}

/// The config and a judgement of the machine now, or the exit code.
fn assess_now(cli: &Cli, args: &ScanArgs) -> Result<(Config, ProcFs, cycle::Assessment), ExitCode> {
    let cfg = load_config(&sources(&cli.config), "reaperctl")?;
    let (grace, notes) = grace::for_scan(cli, &cfg, &args.proc_root);
    for n in notes {
        crate::say_err!("reaperctl: {n}");
    }
    let procfs = ProcFs::new(&args.proc_root).with_runtime_root(args.runtime_root.as_deref());
    if let Some(note) = procfs.hidden_notice() {
        crate::say_err!("reaperctl: note: {note}");
    }
    // The pressure the daemon would weigh (nothing when it cannot be read).
    let pressure = cfg.pressure.file().and_then(|f| crate::scan::pressure::read(&f).ok());
    match cycle::assess(&procfs, &cfg, args.scope, &grace, SystemTime::now(), pressure) {
        Ok(a) => Ok((cfg, procfs, a)),
        Err(e) => {
            crate::say_err!("reaperctl: {e}");
            Err(ExitCode::from(exit::assess(&e)))
        }
    }
}

fn scan(cli: &Cli, cmd: &ScanCmd) -> ExitCode {
    let args = &cmd.args;
    let (cfg, procfs, a) = match assess_now(cli, args) {
        Ok(x) => x,
        Err(code) => return code,
    };
    // Trees to reap with a `docker|podman run` client: which container would be stopped.
    let containers = cycle::container_plans(&a, &procfs, &cfg);
    let mut r = report::json::build_with(&a, containers);
    // Docker/Podman containers by their engine's name, where the tree's user could ask it.
    let wanted: Vec<(usize, (crate::ids::Identity, String))> = r
        .trees
        .iter()
        .enumerate()
        .filter(|(_, t)| t.container_name.is_none())
        .filter_map(|(i, t)| Some((i, (a.judgements[i].root_id(&a.snapshot), t.cgroup_container.clone()?))))
        .collect();
    let asked: Vec<_> = wanted.iter().map(|(_, w)| w.clone()).collect();
    for ((i, _), name) in wanted.iter().zip(cycle::container_names(&asked, &procfs, &cfg)) {
        let t = &mut r.trees[*i];
        if let (Some(c), Some(n)) = (&t.cgroup_container, &name) {
            t.reason = cycle::reason_with_name(&t.reason, c, n);
        }
        t.container_name = name;
    }
    r.hosts = Some(crate::hostcfg::report());
    if args.json {
        outln!("{}", crate::names::printable_json(&serde_json::to_string_pretty(&r).expect("report serializes")));
    } else {
        let users = report::human::user_names();
        out!(
            "{}",
            crate::names::printable_lines(&report::human::render_report(
                &a,
                &r,
                &users,
                report::human::terminal_width()
            ))
        );
    }
    if cmd.exit_code && r.trees.iter().any(|t| t.reap) {
        return ExitCode::from(exit::WOULD_REAP);
    }
    ExitCode::from(exit::OK)
}

/// The daemon's socket: `--socket`, else the config's, else the user's own,
/// else the system daemon's (a user without a user daemon may still ask it).
pub(crate) fn socket_path(cli: &Cli, cfg: Option<&Config>) -> PathBuf {
    if let Some(p) = &cli.socket {
        return p.clone();
    }
    let configured = cfg.and_then(|c| c.socket.as_deref());
    let own = crate::paths::socket(configured);
    let system = PathBuf::from(crate::paths::SYSTEM_SOCKET);
    if !own.exists() && configured.is_none() && system.exists() { system } else { own }
}

/// A daemon answering in a shared fallback directory someone else owns
/// could be anyone's: ask nothing of it.
pub(crate) fn trusted_socket(path: &std::path::Path) -> Result<(), String> {
    let shared = crate::paths::shared_runtime_dir();
    if path.starts_with(&shared) && shared.exists() {
        crate::paths::check_private_dir(&shared).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Sends one request to the daemon; prints why it failed and returns the exit code.
pub(crate) fn ask(cli: &Cli, cmd: proto::Command, timeout: std::time::Duration) -> Result<proto::Reply, ExitCode> {
    let cfg = if cli.socket.is_some() {
        None
    } else {
        Some(Config::load(&sources(&cli.config)).unwrap_or_else(|_| Config::embedded()))
    };
    let path = socket_path(cli, cfg.as_ref());
    if let Err(e) = trusted_socket(&path) {
        crate::say_err!("reaperctl: {e}");
        return Err(ExitCode::from(exit::UNAVAILABLE));
    }
    let mut stream = match std::os::unix::net::UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) => {
            crate::say_err!("reaperctl: the daemon is not running (cannot connect to {}: {e})", path.display());
            crate::say_err!("hint: `reaperctl scan` audits the machine without the daemon");
            return Err(ExitCode::from(exit::UNAVAILABLE));
        }
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    match proto::call(&mut stream, &proto::Request { v: proto::VERSION, cmd }) {
        Ok(r) if r.ok || r.reload.is_some() => Ok(r),
        Ok(r) => {
            crate::say_err!("reaperctl: {}", r.error.as_deref().unwrap_or("request failed"));
            Err(ExitCode::from(r.kind.unwrap_or(proto::ErrorKind::Unknown).exit_code()))
        }
        Err(e) => {
            crate::say_err!("reaperctl: talking to the daemon at {}: {e}", path.display());
            Err(ExitCode::from(exit::UNAVAILABLE))
        }
    }
}

const SHORT: std::time::Duration = std::time::Duration::from_secs(10);

fn status(cli: &Cli, json: bool) -> ExitCode {
    let reply = match ask(cli, proto::Command::Status, SHORT) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let Some(s) = reply.status else {
        crate::say_err!("reaperctl: the daemon sent no status");
        return ExitCode::from(exit::SOFTWARE);
    };
    if json {
        outln!("{}", crate::names::printable_json(&serde_json::to_string_pretty(&s).expect("status serializes")));
    } else {
        out!("{}", crate::names::printable_lines(&report::status_text::render(&s)));
    }
    ExitCode::from(exit::OK)
}

fn reload(cli: &Cli) -> ExitCode {
    match ask(cli, proto::Command::Reload, SHORT) {
        Ok(r) => {
            let res = r.reload.unwrap_or_default();
            if res.ok {
                crate::say!(
                    "reloaded{}",
                    if res.messages.is_empty() {
                        ": no changes".into()
                    } else {
                        format!(": {}", res.messages.join("; "))
                    }
                );
                ExitCode::from(exit::OK)
            } else {
                for m in &res.messages {
                    crate::say!("{m}");
                }
                crate::say!("reload failed; the daemon keeps its previous config");
                ExitCode::from(exit::CONFIG)
            }
        }
        Err(code) => code,
    }
}

fn reap_now(cli: &Cli, dry_run: bool, json: bool) -> ExitCode {
    // A cycle may wait out a term timeout: allow for the longest one.
    match ask(cli, proto::Command::ReapNow { dry_run }, std::time::Duration::from_secs(330)) {
        Ok(r) => {
            let res = r.reap.unwrap_or_default();
            if json {
                outln!(
                    "{}",
                    crate::names::printable_json(&serde_json::to_string_pretty(&res).expect("result serializes"))
                );
            } else if res.events.is_empty() {
                crate::say!("nothing to reap");
            } else {
                for e in &res.events {
                    crate::say!("{}", e.line);
                }
            }
            ExitCode::from(exit::OK)
        }
        Err(code) => code,
    }
}

fn metrics(cli: &Cli) -> ExitCode {
    match ask(cli, proto::Command::Metrics, SHORT) {
        Ok(r) => {
            out!("{}", crate::names::printable_lines(&r.metrics.unwrap_or_default()));
            ExitCode::from(exit::OK)
        }
        Err(code) => code,
    }
}
