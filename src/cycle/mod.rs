//! The pipeline glue: scan → tree → policy, the part shared by `reaperctl scan`,
//! `mcp-reaperd --once` and the daemon; [`Cycle`] adds the acting half that
//! `--once` and every daemon tick share (save, explain, terminate, report).

mod containers;
mod run;
mod summary;

pub use containers::{
    container_names, describe as describe_container, plans_for_scan as container_plans, reason_with_name,
};
pub use run::{Cycle, Done, Kind, Memory, Planned};
pub use summary::CycleSummary;

use std::collections::BTreeSet;
use std::fmt;
use std::time::{Instant, SystemTime};

use crate::config::{Config, Subject};
use crate::ids::Pid;
use crate::policy::{self, GraceBook};
use crate::scan::{Pressure, ProcFs, Reuse, ScanError, Snapshot};
use crate::tree::Forest;

pub use crate::policy::Assessment;

#[derive(Debug)]
pub enum AssessError {
    Scan(ScanError),
    ScopeNotFound(Pid),
}

impl fmt::Display for AssessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AssessError::Scan(e) => e.fmt(f),
            AssessError::ScopeNotFound(p) => write!(f, "scope process {p} does not exist"),
        }
    }
}

impl std::error::Error for AssessError {}

/// Whether the members of a live host's tree in their first second are
/// inspected now ([`policy::settling`]): a one-shot scan reads them; a
/// daemon, which scans again, leaves them until they have settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Young {
    Read,
    Defer,
}

/// Scans, builds the trees, loads details where decisions need them, judges
/// (under the memory `pressure` measured, if any).
pub fn assess(
    procfs: &ProcFs,
    cfg: &Config,
    scope: Option<Pid>,
    grace: &GraceBook,
    now: SystemTime,
    pressure: Option<Pressure>,
) -> Result<Assessment, AssessError> {
    let started = Instant::now();
    let snap = procfs.snapshot().map_err(AssessError::Scan)?;
    assess_snapshot(procfs, cfg, scope, grace, now, snap, started, pressure, Young::Read)
}

/// Judges a snapshot already read (fully, or refreshed from process events).
#[allow(clippy::too_many_arguments)] // the policy's inputs, each its own thing
pub fn assess_snapshot(
    procfs: &ProcFs,
    cfg: &Config,
    scope: Option<Pid>,
    grace: &GraceBook,
    now: SystemTime,
    mut snap: Snapshot,
    started: Instant,
    pressure: Option<Pressure>,
    young: Young,
) -> Result<Assessment, AssessError> {
    if let Some(s) = scope
        && snap.get(s).is_none()
    {
        return Err(AssessError::ScopeNotFound(s));
    }
    // Matching is most of a tick's work: only processes new since the last
    // scan (or since a reload) are matched; the others keep their role.
    for p in snap.procs.iter_mut().filter(|p| !p.kernel_thread && !p.cmdline.is_empty()) {
        cfg.matcher.classify_cached(Subject { cmdline: &p.cmdline, program: p.program, exe: None }, &mut p.role);
    }
    let mut forest = Forest::build(&snap, &cfg.matcher, scope);
    crate::hostcfg::apply(procfs, cfg, &snap, &mut forest);
    let all: Vec<usize> = (0..snap.len()).collect();
    settle_cut(procfs, cfg, &snap, &mut forest, &all);
    let inputs = policy::Inputs { config: cfg, grace, now, pressure };
    // Round 1 loads tree members and their ancestors; round 2 the subtrees of
    // stale hosts, which join their trees; then the stdins the policy asks
    // about (and the subtrees of hosts found stale by theirs). Roles are
    // refined with exe paths as they become known, so the trees are
    // recomputed each round.
    let mut rounds = 0;
    loop {
        let shapes = forest.server_trees(&snap);
        let judgements = policy::judge(&snap, &forest, &shapes, &inputs);
        let mut want = BTreeSet::new();
        for shape in &shapes {
            want.extend(shape.members.iter().map(|&(m, _)| m));
            want.extend(forest.ancestors(shape.root));
            // The owner even when it is the scope: a `reaperctl run` wrapper
            // shows its host in its details.
            want.extend(forest.parent[shape.root]);
        }
        for j in &judgements {
            want.extend(j.members.iter().map(|&(m, _)| m));
        }
        let settling = match young {
            Young::Defer => policy::settling::unread(&snap, &judgements),
            Young::Read => std::collections::HashSet::new(),
        };
        want.retain(|&i| snap.procs[i].details.is_none() && !snap.procs[i].kernel_thread && !settling.contains(&i));
        // Once every detail is in, the stdins of live hosts' trees (and of
        // adopted hosts without a terminal): whether anyone still writes.
        let questions = if want.is_empty() { policy::questions(&snap, &forest, &judgements) } else { Vec::new() };
        if (want.is_empty() && questions.is_empty()) || rounds == 5 {
            // A member still without details is protected by the policy.
            let mut judgements = judgements;
            if young == Young::Defer {
                policy::settling::note(&snap, &mut judgements);
            }
            return Ok(Assessment {
                duplicates: policy::duplicates(&snap, &judgements),
                snapshot: snap,
                forest,
                judgements,
                scope,
                scan_duration: started.elapsed(),
                matcher: std::sync::Arc::clone(&cfg.matcher),
            });
        }
        rounds += 1;
        if !questions.is_empty() {
            procfs.load_stdin(&mut snap, &questions);
            continue;
        }
        let idx: Vec<usize> = want.into_iter().collect();
        let pids: Vec<Pid> = idx.iter().map(|&i| snap.procs[i].pid()).collect();
        procfs.load_details(&mut snap, pids);
        forest.refine_roles(&snap, &cfg.matcher, &idx);
        crate::hostcfg::apply(procfs, cfg, &snap, &mut forest);
        settle_cut(procfs, cfg, &snap, &mut forest, &idx);
    }
}

/// A process whose command line was cut (`scan::CMDLINE_KEEP`) counts as
/// matching `protect` (what was cut could match). For the members of server
/// trees among `which`, the whole line is read again (one at a time, not
/// kept) and matched: what protects them is then known. A line that cannot
/// be read whole keeps the stand-in, and its tree.
fn settle_cut(procfs: &ProcFs, cfg: &Config, snap: &Snapshot, forest: &mut Forest, which: &[usize]) {
    let cut: Vec<usize> = which
        .iter()
        .copied()
        .filter(|&i| snap.procs[i].program.is_cut())
        .filter(|&i| forest.roles[i].protect.is_some_and(|k| cfg.matcher.is_cut_protect(k)))
        .collect();
    if cut.is_empty() {
        return;
    }
    let members: std::collections::HashSet<usize> =
        forest.server_trees(snap).iter().flat_map(|t| t.members.iter().map(|&(m, _)| m)).collect();
    for i in cut.into_iter().filter(|i| members.contains(i)) {
        let p = &snap.procs[i];
        if let Some((text, spans)) = procfs.whole_cmdline(p.id) {
            let program = crate::program::Program::from_argv(&text, &spans);
            forest.roles[i].protect = cfg.matcher.protect_in(Subject { cmdline: &text, program, exe: p.exe() });
        }
    }
}

/// Judges, updates the grace book, and turns the trees to reap into orders.
/// Trees are ordered only if a second, fresh judgement right before acting
/// agrees (same root identity, still to be reaped); the fresh membership is used.
pub fn plan(
    procfs: &ProcFs,
    cfg: &Config,
    scope: Option<Pid>,
    book: &mut GraceBook,
    now: SystemTime,
    pressure: Option<Pressure>,
) -> Result<(Assessment, Vec<crate::reap::Order>), AssessError> {
    let a = assess(procfs, cfg, scope, book, now, pressure)?;
    plan_from(procfs, cfg, scope, book, now, a, pressure, Young::Read)
}

/// The second half of [`plan`]: grace book and re-check, from a judgement made.
#[allow(clippy::too_many_arguments)] // the policy's inputs, each its own thing
pub fn plan_from(
    procfs: &ProcFs,
    cfg: &Config,
    scope: Option<Pid>,
    book: &mut GraceBook,
    now: SystemTime,
    a: Assessment,
    pressure: Option<Pressure>,
    young: Young,
) -> Result<(Assessment, Vec<crate::reap::Order>), AssessError> {
    let candidates: Vec<_> = a.judgements.iter().filter(|j| j.candidate).map(|j| j.root_id(&a.snapshot)).collect();
    book.retain_candidates(candidates, now);
    let wanted: std::collections::HashSet<_> =
        a.judgements.iter().filter(|j| j.reap).map(|j| j.root_id(&a.snapshot)).collect();
    if wanted.is_empty() {
        return Ok((a, Vec::new()));
    }
    // The trees to reap, and the chains above them, read afresh (their
    // members found again from the kernel's children lists); command lines
    // of settled, unchanged processes are the ones just judged. Without
    // children lists, a fresh `stat` of every process.
    let started = Instant::now();
    let pids: Vec<Pid> = a
        .judgements
        .iter()
        .filter(|j| j.reap)
        .flat_map(|j| std::iter::once(j.root).chain(j.members.iter().map(|&(m, _)| m)))
        .map(|i| a.snapshot.procs[i].pid())
        .collect();
    let snap = match procfs.recheck(a.snapshot, pids) {
        Ok(snap) => snap,
        Err(judged) => procfs
            .rescan(Some(&judged), Reuse::Cmdlines, &std::collections::HashSet::default(), &[])
            .map_err(AssessError::Scan)?,
    };
    let fresh = assess_snapshot(procfs, cfg, scope, book, SystemTime::now(), snap, started, pressure, young)?;
    let mut orders: Vec<crate::reap::Order> = fresh
        .judgements
        .iter()
        .filter(|j| j.reap && wanted.contains(&j.root_id(&fresh.snapshot)))
        .map(|j| {
            let snap = &fresh.snapshot;
            let members: Vec<_> =
                j.members.iter().map(|&(m, _)| &snap.procs[m]).filter(|p| !p.state.is_zombie()).collect();
            crate::reap::Order::new(j.verdict, j.reason.clone(), &snap.procs[j.root], &members)
        })
        .collect();
    // Which container each run client holds: decided here, ended by reap.
    containers::attach(&mut orders, &fresh.snapshot, procfs, cfg);
    containers::name(&mut orders, procfs, cfg);
    Ok((fresh, orders))
}
