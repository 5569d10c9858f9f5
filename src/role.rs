//! Roles: what a process is to the reaper, and the role kept on a process
//! between scans. A leaf: the scan keeps roles, the config's matcher makes them.

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
