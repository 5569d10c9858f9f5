//! Stage 3: one verdict per server tree, with a reason a person can read.
//! Pure: reads the snapshot and forest, signals nothing.

pub mod grace;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::config::{Config, Role};
use crate::ids::{Identity, Pid, Uid};
use crate::scan::{Process, Snapshot};
use crate::tree::{Forest, TreeShape};
pub use grace::GraceBook;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Its host is alive with a live terminal (or none): keep.
    Live,
    /// Its root was adopted by PID 1 or a subreaper: the host is gone. Reap.
    Orphan,
    /// Its host is alive but the host's terminal is dead. Reap host and tree.
    Stale,
    /// Owned by a live process that is not a known host: keep, report.
    Foreign,
    /// A member matches `protect` or a never-touch rule: keep, report.
    Protected,
    /// Would be reaped, but was first seen less than `grace_secs` ago.
    Young,
}

impl Verdict {
    pub const ALL: [Verdict; 6] =
        [Verdict::Orphan, Verdict::Stale, Verdict::Young, Verdict::Live, Verdict::Foreign, Verdict::Protected];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Live => "live",
            Verdict::Orphan => "orphan",
            Verdict::Stale => "stale",
            Verdict::Foreign => "foreign",
            Verdict::Protected => "protected",
            Verdict::Young => "young",
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
    /// Whether the reaper acts on it now (orphan, or stale with
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
    /// Orphan or stale, whatever the grace: tracked in the [`GraceBook`].
    pub candidate: bool,
    pub first_seen: Option<SystemTime>,
    /// Time left before a young tree may be reaped.
    pub grace_left: Option<Duration>,
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
}

/// A short name for a process in a reason: `claude (pid 4100)`.
pub fn name(p: &Process) -> String {
    format!("{} (pid {})", short_cmd(p, 48), p.pid())
}

/// The command line cut to `max` characters, with an ellipsis.
pub fn short_cmd(p: &Process, max: usize) -> String {
    let cmd = crate::report::printable(&p.display_cmd()).into_owned();
    if cmd.chars().count() <= max {
        cmd
    } else {
        let mut s: String = cmd.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
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
        if j.verdict == Verdict::Stale
            && j.candidate
            && let Some(h) = j.host
        {
            if let Some(&k) = stale_by_host.get(&h) {
                out[k].servers.extend(j.servers);
                continue;
            }
            j.root = h;
            j.owner = forest.parent[h];
            j.members = forest.descendants(h);
            stale_by_host.insert(h, out.len());
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
            apply_grace(snap, j, inp);
            hold_unsettled(snap, j);
        }
    }
    out
}

/// Time after which an unsettled identity has settled (one 10 ms tick, and
/// some slack for the next scan to start after it).
const SETTLE: Duration = Duration::from_millis(20);

/// A member read within its own start tick may yet be replaced by a same-tick
/// newcomer with the same identity: wait for the next scan rather than act.
fn hold_unsettled(snap: &Snapshot, j: &mut Judgement) {
    if !j.reap {
        return;
    }
    let Some(&(m, _)) = j.members.iter().find(|&&(m, _)| !snap.procs[m].identity_settled()) else { return };
    j.verdict = Verdict::Young;
    j.reap = false;
    j.grace_left = Some(SETTLE);
    j.reason = format!(
        "{}; member {} started less than a clock tick before the scan, so it is confirmed on the next one",
        j.reason,
        name(&snap.procs[m])
    );
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
            j.verdict = Verdict::Orphan;
            j.candidate = true;
            j.reap = true;
            j.reason = "adopted by PID 1 (hidden from this reaper by /proc's hidepid) after its host exited".into();
            return j;
        }
        j.reason = format!(
            "parent pid {:?} of the root was not readable during the scan",
            snap.procs[root].ppid.map(Pid::get)
        );
        return j;
    };
    if let Some(how) = adopter(snap, forest, owner) {
        j.verdict = Verdict::Orphan;
        j.candidate = true;
        j.reap = true;
        j.reason = format!("adopted by {how} after its host exited");
        return j;
    }
    // Look for a host above the owner, through shells and other links.
    for a in std::iter::once(owner).chain(forest.ancestors(owner)) {
        if adopter(snap, forest, a).is_some() {
            break;
        }
        if forest.role(a) != Role::Host {
            continue;
        }
        j.host = Some(a);
        let host = &snap.procs[a];
        match terminal(host) {
            Term::Dead(path) => {
                j.verdict = Verdict::Stale;
                j.candidate = cfg.reap_stale_hosts;
                j.reap = cfg.reap_stale_hosts;
                j.reason = format!("host {} is alive but its terminal {path} is gone", name(host));
                if !cfg.reap_stale_hosts {
                    j.reason.push_str("; kept because reap_stale_hosts = false");
                }
            }
            Term::Live(path) => {
                j.verdict = Verdict::Live;
                j.reason = format!("host {} is alive with terminal {path}", name(host));
            }
            Term::None => {
                j.verdict = Verdict::Live;
                j.reason = format!("host {} is alive (no terminal: headless or IDE)", name(host));
            }
        }
        return j;
    }
    j.reason = format!("owned by live process {}, which is not a known host", name(&snap.procs[owner]));
    j
}

fn apply_grace(snap: &Snapshot, j: &mut Judgement, inp: &Inputs<'_>) {
    let id = snap.procs[j.root].id;
    let first = inp.grace.get(id).unwrap_or(inp.now).min(inp.now);
    j.first_seen = Some(first);
    let seen_for = inp.now.duration_since(first).unwrap_or_default();
    let grace = inp.config.grace();
    if seen_for < grace && j.reap {
        let left = grace.checked_sub(seen_for).unwrap();
        j.verdict = Verdict::Young;
        j.reap = false;
        j.grace_left = Some(left);
        j.reason = format!(
            "{}; first seen {}s ago, reaped after the {}s grace ({}s left)",
            j.reason,
            seen_for.as_secs(),
            grace.as_secs(),
            left.as_secs() + u64::from(left.subsec_nanos() > 0) // rounded up
        );
    }
}

/// How a process adopts orphans, if it does.
fn adopter(snap: &Snapshot, forest: &Forest, i: usize) -> Option<String> {
    let p = &snap.procs[i];
    if Some(i) == forest.scope {
        return Some(format!("the scope process {}", name(p)));
    }
    if p.pid() == Pid::INIT {
        return Some("PID 1".to_string());
    }
    if forest.role(i) == Role::Adopter {
        return Some(name(p));
    }
    None
}

enum Term {
    Live(String),
    Dead(String),
    None,
}

fn terminal(p: &Process) -> Term {
    let fds = p.details.as_ref().map(|d| &d.fds);
    let mut live = None;
    for fd in fds.into_iter().flatten().flatten() {
        if fd.is_dead_terminal() {
            return Term::Dead(fd.0.clone());
        }
        if live.is_none() && fd.is_terminal() {
            live = Some(fd.0.clone());
        }
    }
    live.map_or(Term::None, Term::Live)
}

/// The never-touch rules. Not configurable.
struct Guard {
    untouchable: HashSet<usize>,
    self_uid: Option<Uid>,
    self_pidns: Option<u64>,
    self_depth: Option<usize>,
    min_uid: u32,
}

impl Guard {
    fn new(snap: &Snapshot, forest: &Forest, cfg: &Config) -> Guard {
        let mut untouchable = HashSet::new();
        if let Some(me) = snap.ctx.self_pid.and_then(|p| snap.index_of(p)) {
            untouchable.insert(me);
            let mut cur = forest.parent[me];
            while let Some(a) = cur {
                if !untouchable.insert(a) {
                    break;
                }
                cur = forest.parent[a];
            }
        }
        Guard {
            untouchable,
            self_uid: snap.ctx.self_uid,
            self_pidns: snap.ctx.self_pidns,
            self_depth: snap.ctx.self_nspid_depth,
            min_uid: cfg.min_uid,
        }
    }

    /// Why this tree must not be touched, if it must not. Only candidates are
    /// checked: a kept tree needs no second reason.
    fn check(&self, snap: &Snapshot, j: &Judgement) -> Option<String> {
        if !j.candidate {
            return None;
        }
        j.members.iter().find_map(|&(m, _)| self.member(snap, m))
    }

    fn member(&self, snap: &Snapshot, m: usize) -> Option<String> {
        let p = &snap.procs[m];
        let who = || name(p);
        if p.pid() == Pid::INIT {
            return Some("contains PID 1, which is never signalled".into());
        }
        if p.kernel_thread {
            return Some(format!("contains kernel thread {}", who()));
        }
        if self.untouchable.contains(&m) {
            return Some(format!("contains mcp-reaper itself or one of its ancestors: {}", who()));
        }
        if p.state.is_zombie() {
            return None; // already dead: nothing will be sent to it
        }
        let Some(d) = &p.details else {
            return Some(format!("member {} could not be inspected", who()));
        };
        let same_ns = match (self.self_pidns, d.pidns, self.self_depth, d.nspid_depth) {
            (Some(a), Some(b), _, _) => Some(a == b),
            (_, _, Some(a), Some(b)) => Some(a == b),
            _ => None,
        };
        match same_ns {
            Some(true) => {}
            Some(false) => return Some(format!("member {} lives in another PID namespace", who())),
            None => return Some(format!("cannot tell which PID namespace member {} is in", who())),
        }
        let Some(uid) = d.uid else {
            return Some(format!("cannot read which user owns member {}", who()));
        };
        match self.self_uid {
            Some(me) if me != Uid::ROOT && uid != me => Some(format!(
                "member {} belongs to uid {uid}; a reaper running as uid {me} only reaps its own processes",
                who()
            )),
            _ if uid.0 < self.min_uid => {
                Some(format!("member {} belongs to uid {uid}, below min_uid {}", who(), self.min_uid))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
