//! `reaperctl`: the command-line client. Read-only commands work without the daemon.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use clap::{Parser, Subcommand};

use crate::config::{Config, Sources};
use crate::cycle;
use crate::exit;
use crate::ids::Pid;
use crate::policy::GraceBook;
use crate::report;
use crate::scan::ProcFs;

#[derive(Parser, Debug)]
#[command(name = "reaperctl", version, about = "Inspect and control mcp-reaper", long_about = None)]
pub struct Cli {
    /// Config file (default: /etc/mcp-reaper/config.toml for root,
    /// ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Read-only audit of the machine now: every MCP server tree and its verdict.
    Scan(ScanArgs),
    /// Check a config file; print "ok" or every problem found.
    Validate,
}

#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    /// Print the stable JSON form (see README) instead of the human view.
    #[arg(long)]
    pub json: bool,
    /// Judge only descendants of PID, treating PID as an adopter.
    #[arg(long, value_name = "PID", value_parser = parse_pid)]
    pub scope: Option<Pid>,
    /// Read processes from DIR instead of /proc (fixtures, tests).
    #[arg(long, value_name = "DIR", default_value = "/proc")]
    pub proc_root: PathBuf,
}

pub fn parse_pid(s: &str) -> Result<Pid, String> {
    Pid::parse(s).ok_or_else(|| format!("not a process id: {s:?}"))
}

pub fn sources(config: &Option<PathBuf>) -> Sources {
    match config {
        Some(p) => Sources::explicit(p),
        None => Sources::default_location(),
    }
}

/// Loads config or prints every error and returns the exit code.
pub fn load_config(config: &Option<PathBuf>, prog: &str) -> Result<Config, ExitCode> {
    Config::load(&sources(config)).map_err(|errs| {
        for e in &errs.0 {
            eprintln!("{prog}: {e}");
        }
        ExitCode::from(exit::CONFIG)
    })
}

/// Grace state as the daemon last wrote it, read-only. Absent or broken: empty.
pub fn read_grace(cfg: &Config) -> GraceBook {
    let path = crate::paths::state_file(cfg);
    match std::fs::read_to_string(&path) {
        Ok(text) => GraceBook::from_json(&text).unwrap_or_else(|e| {
            eprintln!("reaperctl: warning: ignoring {}: {e}", path.display());
            GraceBook::default()
        }),
        Err(_) => GraceBook::default(),
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Validate => validate(&cli),
        Command::Scan(args) => scan(&cli, args),
    }
}

fn validate(cli: &Cli) -> ExitCode {
    match Config::load(&sources(&cli.config)) {
        Ok(cfg) => {
            println!("ok ({})", cfg.sources.join(", "));
            ExitCode::from(exit::OK)
        }
        Err(errs) => {
            for e in &errs.0 {
                println!("{e}");
            }
            println!("{} problem{} found", errs.0.len(), if errs.0.len() == 1 { "" } else { "s" });
            ExitCode::from(exit::INVALID)
        }
    }
}

fn scan(cli: &Cli, args: &ScanArgs) -> ExitCode {
    let cfg = match load_config(&cli.config, "reaperctl") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let grace = read_grace(&cfg);
    let procfs = ProcFs::new(&args.proc_root);
    let a = match cycle::assess(&procfs, &cfg, args.scope, &grace, SystemTime::now()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("reaperctl: {e}");
            return ExitCode::from(if matches!(e, cycle::AssessError::ScopeNotFound(_)) { exit::USAGE } else { exit::SOFTWARE });
        }
    };
    if args.json {
        let r = report::json::build(&a);
        println!("{}", serde_json::to_string_pretty(&r).expect("report serializes"));
    } else {
        let users = report::human::user_names();
        print!("{}", report::human::render(&a, &users, report::human::terminal_width()));
    }
    ExitCode::from(exit::OK)
}
