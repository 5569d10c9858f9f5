//! Configuration: the embedded default, a user file, and drop-ins, each a layer
//! that sets only the keys it names. Every value is checked in the file that
//! wrote it, so an error always names file, line, column and key path.
//!
//! Rooms: `keys` (every key, declared once), `kinds` (value kinds and their
//! checks), `layer` (one file parsed and applied), `sources` (which files, in
//! which order), `diagnose` (TOML errors in a user's words), `error`, and
//! `patterns` (the compiled role patterns). This file holds the result.

mod diagnose;
mod error;
mod keys;
mod kinds;
mod layer;
mod origin;
mod patterns;
mod sources;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;

pub use error::{ConfigError, ConfigErrors};
pub use origin::{Setting, settings};
pub use patterns::{CachedRole, Matcher, Role, RoleMatch, Subject, Target};
pub use sources::{DEFAULT_TOML, MAX_FILE_BYTES, Sources};

use crate::redact::Redactor;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Enforce,
    /// The default only of an unfilled [`Config::default`]: the safe one.
    #[default]
    DryRun,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Enforce => "enforce",
            Mode::DryRun => "dry-run",
        })
    }
}

/// The effective configuration. Its keyed fields are declared in `keys.rs`;
/// [`Config::default`] is the empty value a load fills in key by key, not a
/// usable config (that is [`Config::embedded`]).
#[derive(Clone, Debug, Default)]
// The file's switches (reap_stale_hosts, reap_abandoned, …) are booleans
// there too: one field per key keeps the key table one line per key.
#[allow(clippy::struct_excessive_bools)]
pub struct Config {
    pub mode: Mode,
    pub interval_secs: u64,
    /// The periodic scan's period while the last scan found nothing to
    /// watch (no host or server); never shorter than `interval_secs`.
    pub quiet_interval_secs: u64,
    pub grace_secs: u64,
    pub term_timeout_secs: f64,
    pub reap_stale_hosts: bool,
    /// Judge each PID namespace below the reaper's (containers) on its own
    /// terms, its PID 1 being its adopter, rather than never touching it.
    pub reap_other_pid_namespaces: bool,
    /// Reap a live host's server whose stdin nobody can write to any more.
    pub reap_abandoned: bool,
    pub min_uid: u32,
    /// `[hosts] read_configs`: servers the hosts' own MCP configs name are servers.
    pub read_host_configs: bool,
    /// `[hosts] read_programs`: a process whose own program imports (or
    /// whose project declares) an MCP SDK's server half is a server.
    pub read_server_programs: bool,
    pub patterns: PatternLists,
    pub socket: Option<PathBuf>,
    pub state_file: Option<PathBuf>,
    pub metrics_textfile: Option<PathBuf>,
    /// `[metrics] listen`: serve `/metrics` and `/healthz` over HTTP here
    /// (off when `None`).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// `[containers]`: stopping the containers of `docker|podman run` clients.
    pub containers: ContainerSettings,
    /// Compiled from `patterns`.
    pub matcher: Arc<Matcher>,
    /// `[redact]` as configured.
    pub redact: RedactLists,
    /// Compiled from `redact`: masks secrets in every command line shown.
    pub redactor: Arc<Redactor>,
    /// `[pressure]`: memory pressure that cuts the grace short.
    pub pressure: PressureSettings,
    /// `[notify]`: what a person is told of reaps.
    pub notify: NotifySettings,
    /// `[generations]`: copies of a server piling up under a live host.
    pub generations: GenerationSettings,
    /// Files that contributed, in the order applied (the embedded default first).
    pub sources: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PatternLists {
    pub hosts: Vec<String>,
    pub servers: Vec<String>,
    pub launchers: Vec<String>,
    pub adopters: Vec<String>,
    pub protect: Vec<String>,
    pub bystanders: Vec<String>,
}

/// `[containers]` as configured.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ContainerSettings {
    /// Stop (and, for `--rm`, remove) the container of a reaped run client.
    pub stop: bool,
    /// Engine API sockets asked before the usual places.
    pub engine_sockets: Vec<PathBuf>,
}

/// `[redact]`: what is masked in command lines that are shown.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RedactLists {
    pub enabled: bool,
    pub patterns: Vec<String>,
    pub extra_patterns: Vec<String>,
}

/// `[pressure]`: above the threshold, orphan and stale trees skip the rest
/// of their grace.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct PressureSettings {
    pub enabled: bool,
    /// `some avg10` at or above this (percent) is pressure.
    pub some_avg10_percent: f64,
    /// The PSI file; `None` is `/proc/pressure/memory`.
    pub path: Option<PathBuf>,
}

impl PressureSettings {
    /// The file to read, when enabled.
    pub fn file(&self) -> Option<PathBuf> {
        self.enabled.then(|| self.path.clone().unwrap_or_else(|| PathBuf::from(crate::scan::pressure::DEFAULT_PATH)))
    }
}

/// `[notify]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NotifySettings {
    /// A desktop notification over the session D-Bus after reaps.
    pub desktop: bool,
}

/// `[generations]` (issue 35): what is said of, and done with, the copies
/// of one server a live host started again and again.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GenerationSettings {
    /// End a host's old idle copies (off unless asked: the host still
    /// holds them).
    pub end_idle: bool,
    /// The newest this many copies per host and command are always kept.
    pub keep_newest: u64,
    /// A copy with no I/O and no CPU for this many seconds is idle.
    pub idle_secs: u64,
    /// A host that starts a copy of a command within this long of an
    /// ending stops the endings for that host and command.
    pub respawn_guard_secs: u64,
    /// How often the daemon reads the copies' counters.
    pub sample_secs: u64,
    /// Tell the user when one host holds this many copies of one server
    /// (0: never).
    pub notify_copies: u64,
    /// … or when they take this much memory, in MiB (0: never).
    pub notify_memory_mib: u64,
}

impl GenerationSettings {
    pub fn idle_window(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.idle_secs)
    }
}

/// A required key without a value, even in the embedded default.
fn missing(key: &str) -> ConfigErrors {
    ConfigErrors(vec![ConfigError::file(sources::DEFAULT_NAME, format!("{key} has no value"))])
}

impl Config {
    /// The embedded default alone.
    pub fn embedded() -> Config {
        Config::load(&Sources::embedded_only()).expect("the embedded default config is valid (tested)")
    }

    /// The merged layers as a config, its patterns compiled.
    fn finish(draft: keys::Draft, sources: Vec<String>) -> Result<Config, ConfigErrors> {
        let mut c = Config::default();
        keys::finish(draft, &mut c)?;
        c.matcher = Arc::new(Matcher::new(&c.patterns).map_err(|m| missing(&m))?);
        let redact = &c.redact;
        c.redactor = Arc::new(if redact.enabled {
            let all: Vec<String> = redact.patterns.iter().chain(&redact.extra_patterns).cloned().collect();
            Redactor::new(&all).map_err(|message| {
                let file = sources.last().cloned().unwrap_or_default();
                ConfigErrors(vec![ConfigError { file, position: None, key: Some("redact.patterns".into()), message }])
            })?
        } else {
            Redactor::disabled()
        });
        c.sources = sources;
        Ok(c)
    }

    pub fn is_dry_run(&self) -> bool {
        self.mode == Mode::DryRun
    }

    /// The grace period and term timeout as durations.
    pub fn grace(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.grace_secs)
    }

    pub fn term_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.term_timeout_secs)
    }

    /// Human-readable list of settings that differ, for reload logs.
    pub fn diff(&self, new: &Config) -> Vec<String> {
        keys::diff(self, new)
    }
}
