//! One cycle, the same for `mcp-reaperd --once` and each daemon tick: read →
//! judge → plan → save the grace book → explain what is kept → terminate →
//! log the outcomes and the totals.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use super::{AssessError, Assessment, CycleSummary, Young, assess_snapshot, plan_from};
use crate::config::Config;
use crate::ids::{Identity, Pid};
use crate::policy::{GraceBook, Judgement, Verdict};
use crate::reap::{self, Outcome};
use crate::report;
use crate::scan::{self, ProcFs, Process};
use crate::{history, state};

/// Who runs the cycle; the two differ only in when the state file is written
/// and in how much a quiet cycle says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `--once`, from a timer: the state file is written on every successful
    /// run (never after a failed scan), and the totals line is logged even
    /// when nothing was reaped.
    Once,
    /// One of the daemon's many: the state file is written whenever the
    /// grace book or the lineage ([`crate::hostcfg::lineage`]) changed
    /// (even if the re-check scan then failed), the totals only when
    /// something was reaped.
    Tick,
}

/// What one cycle needs to run.
pub struct Cycle<'a> {
    pub procfs: &'a ProcFs,
    pub cfg: &'a Config,
    pub scope: Option<Pid>,
    pub dry_run: bool,
    pub state_file: &'a Path,
    pub kind: Kind,
    /// Memory pressure measured for this cycle (`None`: not measured).
    pub pressure: Option<scan::Pressure>,
}

/// What one cycle hands to the next: the grace clocks, and the last verdict
/// and reap decision per tree root. A tree is logged when either changes (a
/// first cycle explains every tree): a dry run that finds the same orphan
/// due at every tick says "would reap" once, not at every tick.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    pub book: GraceBook,
    pub known: HashMap<Identity, (Verdict, bool)>,
}

/// What one cycle did.
pub struct Done {
    /// The judgement the orders came from (the fresh one when there were
    /// orders), and the cycle's totals.
    pub judged: Result<(Assessment, CycleSummary), AssessError>,
    pub outcomes: Vec<Outcome>,
    /// The state file's write, when there was one.
    pub saved: Option<std::io::Result<()>>,
    /// What goes in the history (the trees acted on; none in a dry run),
    /// written by the caller ([`history::append`]) once the outcomes are
    /// on the record: the write syncs to disk, and a status must not wait
    /// for it to count a reap.
    pub entries: Vec<history::Entry>,
}

/// The first half of a cycle: what to do, and the state file saved.
pub struct Planned {
    judged: Result<(Assessment, Vec<reap::Order>), AssessError>,
    /// The state file's write, when there was one.
    pub saved: Option<std::io::Result<()>>,
    started: Instant,
}

impl Cycle<'_> {
    /// Runs one cycle on processes read the way `read` says.
    pub fn run(&self, memory: &mut Memory, read: scan::Read) -> Done {
        let planned = self.plan(memory, read);
        self.act(memory, planned)
    }

    /// Reads, judges, plans, and saves the grace book.
    pub fn plan(&self, memory: &mut Memory, read: scan::Read) -> Planned {
        let started = Instant::now();
        let now = SystemTime::now();
        let before = memory.book.clone();
        let lineage = crate::hostcfg::lineage_changes();
        let (procfs, cfg, scope, pressure) = (self.procfs, self.cfg, self.scope, self.pressure);
        let kind = read.kind();
        let young = if self.kind == Kind::Tick { Young::Defer } else { Young::Read };
        let mut lap = [Duration::ZERO; 2];
        let judged = procfs
            .read(read)
            .map_err(AssessError::Scan)
            .and_then(|snap| {
                lap[0] = started.elapsed();
                memory.book.lineage.note_moves(&snap);
                assess_snapshot(procfs, cfg, scope, &memory.book, now, snap, started, pressure, young)
            })
            .and_then(|a| {
                lap[1] = started.elapsed();
                memory.book.lineage.watch(&a.snapshot, &a.forest, a.judgements.iter().map(|j| (j.root, j.host)));
                plan_from(procfs, cfg, scope, &mut memory.book, now, a, pressure, young)
            });
        tracing::debug!(
            "cycle ({kind} read): read {:.1} ms, judged at {:.1} ms, planned at {:.1} ms",
            lap[0].as_secs_f64() * 1e3,
            lap[1].as_secs_f64() * 1e3,
            started.elapsed().as_secs_f64() * 1e3
        );
        if let Ok((a, _)) = &judged {
            procfs.prune_link_hints(&a.snapshot);
        }
        // Saved before acting, not after: a reaper killed mid-termination
        // keeps the grace clocks this cycle started.
        let save = match self.kind {
            Kind::Once => judged.is_ok(),
            Kind::Tick => memory.book != before || crate::hostcfg::lineage_changes() != lineage,
        };
        let saved = save.then(|| state::save(self.state_file, &memory.book));
        Planned { judged, saved, started }
    }

    /// Explains what is kept, terminates what is to be reaped, logs the outcomes and totals.
    pub fn act(&self, memory: &mut Memory, planned: Planned) -> Done {
        let Planned { judged, saved, started } = planned;
        let (a, orders) = match judged {
            Ok(x) => x,
            Err(e) => return Done { judged: Err(e), outcomes: Vec::new(), saved, entries: Vec::new() },
        };
        let before = std::mem::take(&mut memory.known);
        memory.known = explain_kept(&a, &before);
        let planned = orders.len();
        let outcomes = reap::terminate_with(self.procfs, orders, &self.settings(), Some(&a.snapshot));
        // A real reap is an act, logged each time; a dry run's plan for a
        // tree already said to be due, with the same verdict, is a repeat.
        let mut told = 0;
        for o in outcomes.iter().filter(|o| !(o.dry_run && before.get(&o.root) == Some(&(o.verdict, true)))) {
            report::log::outcome(o);
            told += 1;
        }
        let summary = CycleSummary::new(&a, &outcomes);
        if self.kind == Kind::Once || told > 0 {
            tracing::info!(
                reaper_action = "cycle",
                reaper_reclaimed_bytes = summary.reclaimed_bytes,
                reaper_duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "{}",
                summary.line(self.dry_run, planned)
            );
        }
        // What was done goes in the ledger; what was only planned does not.
        let entries = if self.dry_run {
            Vec::new()
        } else {
            let at = SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
            history::entries(&a, &outcomes, at)
        };
        Done { judged: Ok((a, summary)), outcomes, saved, entries }
    }

    fn settings(&self) -> reap::Settings {
        reap::Settings {
            term_timeout: self.cfg.term_timeout(),
            kill_wait: Duration::from_secs(1),
            dry_run: self.dry_run,
        }
    }
}

/// Logs every kept tree whose verdict or decision is not the one `known`
/// has for its root; returns the verdicts and decisions now known. A live
/// tree is the normal state of things (a busy machine starts many): debug.
/// What is kept for another reason, or waits, is worth a line at info.
fn explain_kept(a: &Assessment, known: &HashMap<Identity, (Verdict, bool)>) -> HashMap<Identity, (Verdict, bool)> {
    let mut seen = HashMap::new();
    for j in &a.judgements {
        let root = &a.snapshot.procs[j.root];
        seen.insert(root.id, (j.verdict, j.reap));
        if known.get(&root.id) != Some(&(j.verdict, j.reap)) && !j.reap {
            keep_line(j, root);
        }
    }
    seen
}

fn keep_line(j: &Judgement, root: &Process) {
    macro_rules! keep {
        ($level:expr) => {
            tracing::event!(
                $level,
                reaper_action = "keep",
                reaper_verdict = j.verdict.as_str(),
                reaper_reason = %j.reason,
                reaper_root_pid = root.pid().get(),
                reaper_members = j.members.len(),
                "{} tree root={} ({}): {}",
                j.verdict,
                root.pid(),
                crate::names::short_cmd(root, 60),
                j.reason
            )
        };
    }
    if j.verdict == Verdict::Live {
        keep!(tracing::Level::DEBUG);
    } else {
        keep!(tracing::Level::INFO);
    }
}
