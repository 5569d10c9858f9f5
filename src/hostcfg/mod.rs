//! What each host configured: the MCP servers users declared in their hosts'
//! own config files, as server patterns for that user's processes (issue 12).
//!
//! The official quickstart servers (`uv --directory D run weather.py`,
//! `python weather.py`, `node build/index.js`) name nothing MCP-like, so no
//! role pattern can know them; the hosts' configs do. A reading stage like
//! `scan`: files ([`files`]) in their formats ([`formats`], [`jsonc`],
//! [`yaml`]) become patterns ([`matching`]) that turn processes into servers
//! after the role patterns ran ([`apply`]); bystanders still win, and a host
//! stays a host. Whose files: a non-root reaper reads its own user's; a root
//! one each uid ≥ `min_uid` with a live (or, within [`RECENT`], live) host.
//! Which: the user files of [`files::USER`] where each host reads them —
//! below the directories its own environment names (`HOME`,
//! `XDG_CONFIG_HOME`, `CODEX_HOME`, …; [`places`]), the home alone as the
//! fallback —, a file its command line names (`cn --config F`), and the
//! project files of [`files::PROJECT`] in each live host's working directory.
//!
//! What was matched below a live host is remembered ([`lineage`]), with the
//! session id its marker ([`markers`]) gives. What is read and remembered
//! lives from cycle to cycle in one process-wide [`Registry`] ([`registry`]).

pub mod files;
pub mod formats;
mod jsonc;
pub mod lineage;
pub mod markers;
pub mod matching;
pub mod places;
mod registry;
pub mod sdk;
mod yaml;

#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::Serialize;

use crate::config::Config;
/// Kept beside the roles it explains, so `tree` needs nothing of this stage.
pub use crate::role::Origin;
use crate::scan::{ProcFs, Snapshot};
use crate::tree::Forest;
use lineage::Lineage;
use matching::Pattern;
pub use registry::Registry;

/// How long a user's configs are still read after their last host was seen.
pub const RECENT: Duration = Duration::from_secs(3600);

/// One configured server of one user, as `reaperctl hosts` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct Configured {
    pub uid: u32,
    /// The host family whose file it is (`claude-code`, `codex`, …).
    pub host: &'static str,
    pub file: String,
    pub key: String,
    /// Command and arguments (shown masked, see [`crate::redact`]).
    pub command: Vec<String>,
    /// The program identity processes are matched by.
    pub program: String,
    /// Matched only below a live host: a script whose directory is unknown.
    pub weak: bool,
    #[serde(skip)]
    pattern: Pattern,
}

/// A config file looked at, as `reaperctl hosts` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct FileReport {
    pub uid: u32,
    pub host: &'static str,
    pub path: String,
    /// Servers it declares; `None` when it was skipped.
    pub servers: Option<usize>,
    pub error: Option<String>,
}

/// A live host whose project files were read.
#[derive(Clone, Debug, Serialize)]
pub struct LiveHost {
    pub pid: i32,
    pub program: String,
    pub uid: u32,
    /// Its working directory: the project whose files are read.
    pub cwd: Option<String>,
}

/// What `reaperctl hosts` shows: the last cycle's hosts, files and servers.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub hosts: Vec<LiveHost>,
    pub files: Vec<FileReport>,
    pub servers: Vec<Configured>,
}

/// Turns the processes the users' configs name into servers (see the module
/// docs), then the candidates whose own program declares a server SDK
/// ([`sdk`]). Called after roles are (re)computed.
pub fn apply(procfs: &ProcFs, cfg: &Config, snap: &Snapshot, forest: &mut Forest) {
    let mut r = registry::lock();
    if cfg.read_host_configs {
        r.apply(procfs, cfg, snap, forest);
    }
    if cfg.read_server_programs {
        r.apply_sdk(procfs, cfg, snap, forest);
    }
}

/// The live hosts, files and configured servers of the last cycle.
pub fn report() -> Report {
    let r = registry::lock();
    Report { hosts: r.live.clone(), files: r.report.clone(), servers: r.configured.clone() }
}

/// The lineage, for the state file.
pub fn lineage_json() -> serde_json::Value {
    registry::lock().lineage.to_json()
}

/// A number that changes whenever the lineage does.
pub fn lineage_changes() -> u64 {
    registry::lock().lineage_changes
}

/// Restores the lineage from a state file.
pub fn restore_lineage(v: &serde_json::Value) {
    registry::lock().lineage = Lineage::from_json(v);
}
