//! `reaperctl doctor`: whether this machine gives the reaper what it needs,
//! and for each part that is missing, what that costs. It reads and probes;
//! it signals nothing (the pidfd it opens is its own process's; the
//! capability checks ask `kill(pid, 0)`, which sends no signal).

mod adoption;
mod caps;
mod check;
mod daemon;
mod kernel;
mod other_uid;
mod services;

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use super::platform;
use super::{Cli, sources};
use crate::config::Config;
use crate::exit;
pub use check::{Check, Health};
use check::{missing, ok};

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Print the checks as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: &Cli, args: &DoctorArgs) -> ExitCode {
    let (config, cfg) = config(cli);
    let cfg = cfg.unwrap_or_else(Config::embedded);
    let here = platform::detect(Path::new("/"), &|name| std::env::var(name).ok());
    let mut checks = vec![
        config,
        Check { platform: Some(here.clone()), ..ok("platform", here.summary()) },
        adoption::adoption(&here, &cfg),
    ];
    checks.extend(caps::checks(&cfg));
    checks.extend([
        kernel::procfs(),
        kernel::pidfds(),
        kernel::events(&cfg),
        kernel::cgroups(),
        services::journald(),
        kernel::pressure(&cfg),
        services::engines(&cfg),
        daemon::daemon(cli, &cfg, &here),
    ]);
    if args.json {
        crate::stdout::outln!(
            "{}",
            crate::names::printable_json(&serde_json::to_string_pretty(&checks).expect("checks serialize"))
        );
    } else {
        crate::stdout::out!("{}", crate::names::printable_lines(&render(&checks)));
    }
    if checks.iter().any(|c| c.health == Health::Missing) {
        ExitCode::from(exit::UNAVAILABLE)
    } else {
        ExitCode::from(exit::OK)
    }
}

/// The longest check name (`CAP_DAC_READ_SEARCH`) sets the column.
const NAME_WIDTH: usize = 19;

pub fn render(checks: &[Check]) -> String {
    let mut o = String::new();
    for c in checks {
        let tag = match c.health {
            Health::Ok => "ok",
            Health::Warn => "WARN",
            Health::Missing => "MISSING",
        };
        let _ = writeln!(o, "{tag:<8} {:<NAME_WIDTH$} {}", c.name, c.found);
        if let Some(cost) = &c.cost {
            let _ = writeln!(o, "{:<w$} without it: {cost}", "", w = 8 + 1 + NAME_WIDTH);
        }
    }
    o
}

fn config(cli: &Cli) -> (Check, Option<Config>) {
    match Config::load(&sources(&cli.config)) {
        Ok(c) => (ok("config", c.sources.join(", ")), Some(c)),
        Err(errs) => {
            let first = errs.0.first().map(ToString::to_string).unwrap_or_default();
            (
                missing(
                    "config",
                    format!("{} problem(s), the first: {first}", errs.0.len()),
                    "mcp-reaperd refuses to start with it (`reaperctl validate` lists every problem); \
                     these checks use the embedded default",
                ),
                None,
            )
        }
    }
}

#[cfg(test)]
mod fixtures {
    use crate::ctl::platform::{Kind, Pid1, Platform};

    pub fn platform(kind: Kind, systemd: bool, pid1: &str) -> Platform {
        Platform {
            kind,
            systemd,
            distro: None,
            engine: None,
            name: None,
            pid1: Pid1 { comm: Some(pid1.into()), exe: None, cmdline: None },
            evidence: Vec::new(),
        }
    }
}
