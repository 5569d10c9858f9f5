//! `reaperctl config`: the effective configuration, merged from the same
//! layers the daemon would read with the same `--config`, as TOML that
//! `reaperctl validate` accepts, each value followed by where it comes from.

use std::fmt::Write as _;
use std::process::ExitCode;

use super::{Cli, load_config, sources};
use crate::config::{Config, Setting, settings};
use crate::exit;

#[derive(clap::Args, Debug)]
pub struct ConfigArgs {
    /// Print every key as JSON: section, key, value, from (file), line.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: &Cli, args: &ConfigArgs) -> ExitCode {
    let cfg = match load_config(&sources(&cli.config), "reaperctl") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let all = settings(&cfg);
    if args.json {
        let v = serde_json::json!({ "sources": cfg.sources, "settings": all });
        crate::stdout::outln!(
            "{}",
            crate::names::printable_json(&serde_json::to_string_pretty(&v).expect("settings serialize"))
        );
    } else {
        crate::stdout::out!("{}", crate::names::printable_lines(&render(&cfg, &all)));
    }
    ExitCode::from(exit::OK)
}

/// TOML with a comment per value naming its layer and line.
pub fn render(cfg: &Config, all: &[Setting]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# The effective mcp-reaper configuration, merged from, in order:");
    for s in &cfg.sources {
        let _ = writeln!(o, "#   {s}");
    }
    let _ = writeln!(o, "# Each value is followed by the layer (and line) it comes from.");
    let mut section = "";
    for s in all {
        if s.section != section {
            section = s.section;
            let _ = writeln!(o, "\n[{section}]");
        }
        match (&s.value, &s.from) {
            (Some(v), Some(from)) => {
                let at = s.line.map(|l| format!(":{l}")).unwrap_or_default();
                let _ = writeln!(o, "{} = {v}  # {from}{at}", s.key);
            }
            _ => {
                let _ = writeln!(o, "# {} is not set: {}", s.key, unset(cfg, s));
            }
        }
    }
    o
}

/// What an optional key left unset means.
fn unset(cfg: &Config, s: &Setting) -> String {
    match (s.section, s.key) {
        ("daemon", "socket") => format!("{} (for this user)", crate::paths::socket(None).display()),
        ("daemon", "state_file") => format!("{} (for this user)", crate::paths::state_file(None).display()),
        ("daemon", "metrics_textfile") => "no metrics textfile is written".to_string(),
        ("pressure", "path") => cfg.pressure.file().map_or_else(
            || "pressure is off (enabled = false)".to_string(),
            |p| format!("{} (the system's)", p.display()),
        ),
        ("metrics", "listen") => {
            "off (no HTTP metrics listener, unless systemd passes one: mcp-reaper-metrics.socket)".to_string()
        }
        _ => "its built-in default".to_string(),
    }
}
