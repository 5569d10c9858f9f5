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
