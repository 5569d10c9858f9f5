//! A judged snapshot: what the pipeline hands the reports.

use crate::ids::Pid;
use crate::scan::Snapshot;
use crate::tree::Forest;

use super::Judgement;

/// A judged snapshot.
#[derive(Clone, Debug)]
pub struct Assessment {
    pub snapshot: Snapshot,
    pub forest: Forest,
    pub judgements: Vec<Judgement>,
    /// Server commands running more than once under one live host.
    pub duplicates: Vec<super::Duplicate>,
    pub scope: Option<Pid>,
    pub scan_duration: std::time::Duration,
    /// The patterns the roles came from, for explanations.
    pub matcher: std::sync::Arc<crate::config::Matcher>,
}

impl Assessment {
    /// Whether nothing here is for the daemon to follow: no server tree, and
    /// no host or server in scope (a host could start a tree; a server is
    /// one, maybe below a host no pattern names). Launchers alone are not
    /// counted (`sh -c` is one, and runs everywhere), nor adopters.
    pub fn nothing_to_follow(&self) -> bool {
        use crate::role::Role;
        self.judgements.is_empty()
            && (0..self.snapshot.len())
                .all(|i| !self.forest.in_scope(i) || !matches!(self.forest.role(i), Role::Host | Role::Server))
    }
}
