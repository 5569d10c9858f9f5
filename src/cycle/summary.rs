//! The totals of one cycle and their log line.

use serde::Serialize;

use super::Assessment;
use crate::policy::Verdict;
use crate::reap::Outcome;
use crate::report;

/// Totals of one cycle.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CycleSummary {
    pub trees_reaped: usize,
    pub processes_reaped: usize,
    pub escalations: usize,
    pub failures: usize,
    pub reclaimed_bytes: u64,
    /// Containers of run clients stopped (dry run: that would be).
    pub containers_stopped: usize,
    pub kept: std::collections::BTreeMap<&'static str, usize>,
}

impl CycleSummary {
    pub fn new(judged: &Assessment, outcomes: &[Outcome]) -> CycleSummary {
        let mut kept = std::collections::BTreeMap::<&'static str, usize>::default();
        for j in judged.judgements.iter().filter(|j| !j.reap) {
            *kept.entry(j.verdict.as_str()).or_default() += 1;
        }
        CycleSummary {
            trees_reaped: outcomes.iter().filter(|o| o.reaped()).count(),
            processes_reaped: outcomes.iter().map(|o| o.gone).sum(),
            escalations: outcomes.iter().filter(|o| o.escalated).count(),
            failures: outcomes.iter().filter(|o| !o.success()).count(),
            reclaimed_bytes: outcomes.iter().map(|o| o.reclaimed.total()).sum(),
            containers_stopped: outcomes
                .iter()
                .flat_map(|o| &o.containers)
                .filter(|c| c.stopped() || c.ended == crate::reap::Ended::WouldStop)
                .count(),
            kept,
        }
    }

    pub fn line(&self, dry_run: bool, planned: usize) -> String {
        let kept: Vec<String> =
            Verdict::ALL.iter().filter_map(|v| self.kept.get(v.as_str()).map(|n| format!("{n} {v}"))).collect();
        let kept = if kept.is_empty() { "none".to_string() } else { kept.join(", ") };
        let containers = match self.containers_stopped {
            0 => String::new(),
            n if dry_run => format!(", would stop {n} container(s)"),
            n => format!(", stopped {n} container(s)"),
        };
        if dry_run {
            format!(
                "cycle (dry-run): would reap {planned} tree(s){containers}, estimate {}; kept {kept}",
                report::bytes(self.reclaimed_bytes)
            )
        } else {
            format!(
                "cycle: reaped {} tree(s), {} process(es), {} escalation(s), {} failure(s){containers}, reclaimed {}; kept {kept}",
                self.trees_reaped,
                self.processes_reaped,
                self.escalations,
                self.failures,
                report::bytes(self.reclaimed_bytes)
            )
        }
    }
}
