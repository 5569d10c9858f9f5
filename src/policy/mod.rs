//! Stage 3: one verdict per server tree, with a reason a person can read.
//! Pure: reads the snapshot and forest, signals nothing.

mod abandon;
mod argv;
mod assessment;
mod cli_options;
mod duplicates;
mod evidence;
mod facts;
pub mod generations;
pub(crate) mod grace;
mod guard;
pub mod lineage;
mod modes;
mod person;
mod pressure;
mod session;
pub mod settling;
mod stale;
pub mod surplus;
mod terminal;
mod waiting;

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::config::{Config, Role};
use crate::ids::{Identity, Pid};
use crate::names::{name, namespace_of};
use crate::scan::{Pressure, Snapshot};
use crate::tree::{Forest, TreeShape};
pub use abandon::questions;
pub use assessment::Assessment;
pub use duplicates::{Duplicate, duplicates};
use evidence::adopted;
pub use grace::GraceBook;
use guard::Guard;
pub use pressure::skips_grace as pressure_skips_grace;
use session::Below;
pub(crate) use terminal::pts_number;
use terminal::{Term, terminal};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Its host is alive with a live terminal (or none): keep.
    Live,
    /// Its root was adopted by PID 1 or a subreaper: the host is gone. Reap.
    Orphan,
    /// Its host is alive but the host's terminal is dead, or the host has
    /// no terminal and nobody can write to its stdin any more (an adopted
    /// host nobody uses). Reap host and tree.
    Stale,
    /// Its host is alive but ended the tree's stdin (no writer is left on
    /// the pipe, or the socket's peer closed): the host is done with it, the
    /// server did not exit. Reap the tree, never the host.
    Abandoned,
    /// Owned by a live process that is not a known host: keep, report.
    Foreign,
    /// A member matches `protect` or a never-touch rule: keep, report.
    Protected,
    /// Would be reaped, but was first seen less than `grace_secs` ago.
    Young,
    /// Adopted, but its servers have no stdio link (fd 0 and 1 on
    /// `/dev/null`, a terminal or a file): started to run on its own. Keep.
    Detached,
    /// A live host's idle old copy of a server it started again and again:
    /// ended by the opt-in `[generations] end_idle` policy or `reaperctl
    /// generations --end` (issue 35). Never a tree's verdict: the judgement
    /// on such a tree stays `live`; only the order and what it did say this.
    Surplus,
}

impl Verdict {
    pub const ALL: [Verdict; 8] = [
        Verdict::Orphan,
        Verdict::Stale,
        Verdict::Abandoned,
        Verdict::Young,
        Verdict::Live,
        Verdict::Foreign,
        Verdict::Protected,
        Verdict::Detached,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Live => "live",
            Verdict::Orphan => "orphan",
            Verdict::Stale => "stale",
            Verdict::Abandoned => "abandoned",
            Verdict::Foreign => "foreign",
            Verdict::Protected => "protected",
            Verdict::Young => "young",
            Verdict::Detached => "detached",
            Verdict::Surplus => "surplus",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict on one tree. Indices point into the judged snapshot.
#[derive(Clone, Debug)]
pub struct Judgement {
    pub verdict: Verdict,
    /// Whether the reaper acts on it now (orphan, abandoned, or stale with
    /// `reap_stale_hosts`, and past its grace).
    pub reap: bool,
    pub reason: String,
    pub root: usize,
    /// Parent of the root.
    pub owner: Option<usize>,
    pub host: Option<usize>,
    pub servers: Vec<usize>,
    /// Root first, depth-first, with depth below the root.
    pub members: Vec<(usize, usize)>,
    /// Orphan, abandoned or stale, whatever the grace: tracked in the [`GraceBook`].
    pub candidate: bool,
    pub first_seen: Option<SystemTime>,
    /// Time left before a young tree may be reaped.
    pub grace_left: Option<Duration>,
    /// What a stricter rule would have taken this tree on, had the evidence
    /// been conclusive: the tree is kept, and this says why it looks left
    /// behind all the same.
    pub suspect: Option<String>,
}

impl Judgement {
    pub fn root_id(&self, snap: &Snapshot) -> Identity {
        snap.procs[self.root].id
    }

    pub fn member_ids<'a>(&'a self, snap: &'a Snapshot) -> impl Iterator<Item = Identity> + 'a {
        self.members.iter().map(|&(i, _)| snap.procs[i].id)
    }
}

/// What the policy needs besides the snapshot.
pub struct Inputs<'a> {
    pub config: &'a Config,
    pub grace: &'a GraceBook,
    pub now: SystemTime,
    /// Memory pressure as last measured (`None`: not measured).
    pub pressure: Option<Pressure>,
}

/// Judges every server tree in scope.
pub fn judge(snap: &Snapshot, forest: &Forest, shapes: &[TreeShape], inp: &Inputs<'_>) -> Vec<Judgement> {
    let guard = Guard::new(snap, forest, inp.config);
    let mut out: Vec<Judgement> = Vec::new();
    // Stale trees grow to their host's whole subtree; several server trees
    // under one stale host become one.
    let mut stale_by_host: HashMap<usize, usize> = HashMap::new();
    for shape in shapes {
        let mut j = judge_shape(snap, forest, shape, inp);
        if j.verdict == Verdict::Stale && j.candidate {
            // `stale` set the root: the host, or the front of its chain.
            let top = j.root;
            if let Some(&k) = stale_by_host.get(&top) {
                out[k].servers.extend(j.servers);
                continue;
            }
            j.owner = forest.parent[top];
            j.members = forest.descendants(top);
            stale_by_host.insert(top, out.len());
        }
        out.push(j);
    }
    for j in &mut out {
        if let Some(reason) = guard.check(snap, j) {
            j.verdict = Verdict::Protected;
            j.reap = false;
            j.candidate = false;
            j.grace_left = None;
            j.reason = format!("{}; kept: {reason}", j.reason);
        } else if j.candidate {
            waiting::apply_grace(snap, j, inp);
            waiting::hold_unsettled(snap, j);
        }
    }
    out
}

fn judge_shape(snap: &Snapshot, forest: &Forest, shape: &TreeShape, inp: &Inputs<'_>) -> Judgement {
    let cfg = inp.config;
    let root = shape.root;
    let owner = forest.parent[root];
    let mut j = Judgement {
        verdict: Verdict::Foreign,
        reap: false,
        reason: String::new(),
        root,
        owner,
        host: None,
        servers: shape.servers.clone(),
        members: shape.members.clone(),
        candidate: false,
        first_seen: None,
        grace_left: None,
        suspect: None,
    };
    // A protect pattern on any member wins over everything else.
    for &(m, _) in &shape.members {
        if let Some(pi) = forest.roles[m].protect {
            j.verdict = Verdict::Protected;
            j.reason =
                format!("member {} matches protect pattern '{}'", name(&snap.procs[m]), cfg.matcher.protect_text(pi));
            return j;
        }
    }
    let Some(owner) = owner else {
        if snap.procs[root].ppid == Some(Pid::INIT) && forest.scope.is_none() {
            // PID 1 hidden from us (`/proc` mounted with hidepid): being
            // adopted by it is still being adopted.
            adopted(snap, forest, &mut j, "PID 1 (hidden from this reaper by /proc's hidepid)");
            return j;
        }
        j.reason = match snap.procs[root].ppid {
            Some(pp) => format!("parent pid {pp} of the root was not readable during the scan"),
            None => "the root's parent was not readable during the scan".to_string(),
        };
        return j;
    };
    if let Some(how) =
        adopter(snap, forest, owner).or_else(|| lineage::adopted_by(snap, forest, &inp.grace.lineage, owner, root))
    {
        if let Some(why) = namespace_own(snap, owner, root, &how) {
            j.reason = why;
            return j;
        }
        match session::below(snap, owner, root) {
            Some(Below::Leftover(s)) => evidence::left_in_session(snap, &mut j, &s),
            Some(Below::Host(why)) => {
                j.verdict = Verdict::Live;
                j.reason = why;
            }
            None => {
                adopted(snap, forest, &mut j, &how);
                session::note_cgroup(snap, &mut j);
            }
        }
        return j;
    }
    // Look for a host above the owner, through shells and other links.
    let mut below = root;
    for a in std::iter::once(owner).chain(forest.ancestors(owner)) {
        let child = std::mem::replace(&mut below, a);
        if adopter(snap, forest, a).is_some() {
            // Below a run wrapper, not through its host: left in its session.
            if let Some(Below::Leftover(s)) = session::below(snap, a, child) {
                evidence::left_in_session(snap, &mut j, &s);
                return j;
            }
            break;
        }
        // A job of a person's interactive shell is theirs, whatever runs the
        // terminal it sits on (an IDE's pty host matches the host patterns).
        if let Some(why) = person::interactive_shell(snap, a) {
            j.reason = why;
            return j;
        }
        if forest.role(a) != Role::Host {
            continue;
        }
        j.host = Some(a);
        judge_under_host(snap, forest, &mut j, a, cfg);
        return j;
    }
    j.reason = format!("owned by live process {}, which is not a known host", name(&snap.procs[owner]));
    j
}

/// A tree with the live host `h` above it: live, unless the host is stale
/// (`stale.rs`: its terminal UI's terminal died, or nothing can reach the
/// stdin it is driven over) or it let the tree go (abandoned).
fn judge_under_host(snap: &Snapshot, forest: &Forest, j: &mut Judgement, h: usize, cfg: &Config) {
    let host = &snap.procs[h];
    let term = terminal(host);
    let mut rulings = vec![stale::by_terminal(snap, h)];
    if matches!(term, Term::None) {
        rulings.push(stale::unreachable(snap, forest, h));
    }
    for r in rulings {
        match r {
            stale::Ruling::Stale(why, root) => {
                stale(j, cfg, why, root);
                return;
            }
            stale::Ruling::Suspect(why) => j.suspect = Some(why),
            stale::Ruling::Pending | stale::Ruling::Not => {}
        }
    }
    j.verdict = Verdict::Live;
    j.reason = match &term {
        Term::Live(path) => format!("host {} is alive with terminal {path}", name(host)),
        Term::Dead(path) => {
            format!("host {} is alive (its terminal {path} is gone, which alone does not show it unused)", name(host))
        }
        Term::None => format!("host {} is alive (no terminal: headless or IDE)", name(host)),
    };
    abandon::abandoned(snap, j, cfg.reap_abandoned);
}

/// The tree of a live host that is to go with its host (`reap_stale_hosts`),
/// from `root` (the host, or the front of the chain its stdin came through).
fn stale(j: &mut Judgement, cfg: &Config, reason: String, root: usize) {
    if cfg.reap_stale_hosts {
        j.root = root;
    }
    j.verdict = Verdict::Stale;
    j.candidate = cfg.reap_stale_hosts;
    j.reap = cfg.reap_stale_hosts;
    j.reason = reason;
    if !cfg.reap_stale_hosts {
        j.reason.push_str("; kept because reap_stale_hosts = false");
    }
}

/// Why a child of a nested namespace's PID 1 is no orphan, if it is not:
/// PID 1 has exited (the kernel is ending the namespace), or PID 1 started
/// it in its own session (the container's command, or what `tini --` and
/// `sh -c` run). An orphan comes from another session: a `docker exec`
/// shell's, where the host ran.
fn namespace_own(snap: &Snapshot, owner: usize, root: usize, how: &str) -> Option<String> {
    let o = &snap.procs[owner];
    if !o.details.as_deref().is_some_and(|d| d.is_namespace_init(snap.ctx.self_nspid_depth)) {
        return None;
    }
    if o.state.is_zombie() {
        return Some(format!("its adopter {how} has exited: the kernel ends the rest of its namespace"));
    }
    (o.sid.is_some() && snap.procs[root].sid == o.sid)
        .then(|| format!("started by {how} in its own session: the namespace's own command, not an orphan"))
}

/// How a process adopts orphans as an init or service manager does: never
/// a `reaperctl run` wrapper, whose host is the session's live owner.
fn manager_adopter(snap: &Snapshot, forest: &Forest, i: usize) -> Option<String> {
    if crate::session::is_run_wrapper(&snap.procs[i].cmdline) {
        return None;
    }
    adopter(snap, forest, i)
}

/// How a process adopts orphans, if it does.
fn adopter(snap: &Snapshot, forest: &Forest, i: usize) -> Option<String> {
    let p = &snap.procs[i];
    if crate::session::is_run_wrapper(&p.cmdline) {
        return Some(format!("the `reaperctl run` wrapper {}", name(p)));
    }
    if Some(i) == forest.scope {
        return Some(format!("the scope process {}", name(p)));
    }
    if p.pid() == Pid::INIT {
        return Some("PID 1".to_string());
    }
    if let Some(d) = p.details.as_deref().filter(|d| d.is_namespace_init(snap.ctx.self_nspid_depth)) {
        return Some(format!("{}, PID 1 of its PID namespace ({})", name(p), namespace_of(d)));
    }
    if forest.role(i) == Role::Adopter {
        return Some(format!("{}, a subreaper by its identity", name(p)));
    }
    None
}

#[cfg(test)]
mod abandon_tests;
#[cfg(test)]
mod corpus;
#[cfg(test)]
mod corpus_live;
#[cfg(test)]
mod corpus_mutants;
#[cfg(test)]
mod evidence_tests;
#[cfg(test)]
mod guard_tests;
#[cfg(test)]
mod namespace_tests;
#[cfg(test)]
mod session_tests;
#[cfg(test)]
mod tests;
