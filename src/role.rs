//! Roles: what a process is to the reaper, and the role kept on a process
//! between scans. A leaf: the scan keeps roles, the config's matcher makes them.
//! Also why a process is a server beyond a pattern — its host's config
//! ([`Origin`]) or its own program ([`SdkEvidence`]), both found by
//! `hostcfg` — kept here so that `tree` holds them without importing the
//! stage that finds them.

use serde::Serialize;

/// What a process is to the reaper (see [`crate::config::Matcher::classify_subject`] for the order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Host,
    Server,
    Launcher,
    Adopter,
    Other,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Host => "host",
            Role::Server => "server",
            Role::Launcher => "launcher",
            Role::Adopter => "adopter",
            Role::Other => "other",
        }
    }

    /// Links of a server tree: walked through when looking for the root.
    pub fn is_tree_link(self) -> bool {
        matches!(self, Role::Server | Role::Launcher)
    }
}

/// The role of one process and the pattern that gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleMatch {
    pub role: Role,
    /// Index into the list of that role.
    pub pattern: Option<usize>,
    /// Index into `protect` when the process matches one (independent of role,
    /// so protected trees are still found and explained).
    pub protect: Option<usize>,
}

/// A [`RoleMatch`] from a command line alone, as kept on a process between
/// scans (16 bytes), with the generation of the [`crate::config::Matcher`] that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedRole {
    pub(crate) generation: u32,
    role: Role,
    pattern: u32,
    protect: u32,
}

impl CachedRole {
    const NONE: u32 = u32::MAX;

    pub(crate) fn new(generation: u32, m: RoleMatch) -> CachedRole {
        let pack = |i: Option<usize>| i.and_then(|i| u32::try_from(i).ok()).unwrap_or(Self::NONE);
        CachedRole { generation, role: m.role, pattern: pack(m.pattern), protect: pack(m.protect) }
    }

    pub(crate) fn get(self) -> RoleMatch {
        let unpack = |i: u32| (i != Self::NONE).then_some(i as usize);
        RoleMatch { role: self.role, pattern: unpack(self.pattern), protect: unpack(self.protect) }
    }
}

/// Why a process is a server by configuration, for explanations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The file, as shown (`~/.claude.json`, `/home/u/p/.mcp.json`).
    pub file: String,
    /// Where in it (`mcpServers.weather`).
    pub key: String,
    /// The host below which it was seen, with its pid and session id.
    pub seen_below: Option<(String, i32, Option<String>)>,
}

impl Origin {
    /// `configured in ~/.claude.json (mcpServers.weather)`, and the host it
    /// was seen below.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut s = format!("configured in {} ({})", self.file, self.key);
        if let Some((host, pid, session)) = &self.seen_below {
            let _ = write!(s, "; seen as a child of host {host} [{pid}]");
            if let Some(id) = session {
                let _ = write!(s, ", session {id}");
            }
        }
        s
    }
}

/// What made a process a server, for explanations and `reaperctl scan`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SdkEvidence {
    /// `imports` (its entry imports the SDK's server half), `declares`
    /// (its project depends on the SDK and this is the project's entry),
    /// `venv` (its venv has the SDK and a module its entry imports imports
    /// the server half), `built` (a Go binary built with the SDK's module,
    /// linking its server) or `holds` (a jar holding the SDK's server).
    pub kind: &'static str,
    /// The module, import, dependency, package or class found
    /// (`mcp.server.fastmcp`, `github.com/mark3labs/mcp-go/server`).
    pub found: String,
    /// The file it was found in.
    pub file: String,
    /// What led there: `venv` the SDK and the module followed
    /// (`mcp.server weather.server`), `built` the module and its version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

impl SdkEvidence {
    /// `its script imports mcp.server.fastmcp (/home/u/weather/weather.py)`.
    pub fn describe(&self) -> String {
        let (f, file) = (&self.found, &self.file);
        let via = self.via.as_deref().unwrap_or_default();
        match self.kind {
            "imports" => format!("its script imports {f} ({file})"),
            "venv" => {
                let (sdk, module) = via.split_once(' ').unwrap_or((via, ""));
                format!("its venv has {sdk} and its module {module} imports {f} ({file})")
            }
            "built" => format!("its binary is built with {via} and links {f} ({file})"),
            "holds" => format!("its jar holds {f} ({file})"),
            _ => format!("its project declares {f} ({file}) and this is its entry"),
        }
    }
}
