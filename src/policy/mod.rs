//! Stage 3: one verdict per server tree, with a reason a person can read.
//! Pure: reads the snapshot and forest, signals nothing.

pub(crate) mod grace;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::config::{Config, Role};
use crate::ids::{Identity, Pid, Uid};
use crate::names::{name, program_ref};
use crate::scan::{FdKind, Process, Snapshot};
use crate::tree::{Forest, TreeShape};
pub use grace::GraceBook;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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
    /// Adopted, but its servers have no stdio link (fd 0 and 1 on
    /// `/dev/null`, a terminal or a file): started to run on its own. Keep.
    Detached,
}

impl Verdict {
    pub const ALL: [Verdict; 7] = [
        Verdict::Orphan,
        Verdict::Stale,
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
            Verdict::Foreign => "foreign",
            Verdict::Protected => "protected",
            Verdict::Young => "young",
            Verdict::Detached => "detached",
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
            adopted(snap, &mut j, "PID 1 (hidden from this reaper by /proc's hidepid)");
            return j;
        }
        j.reason = format!(
            "parent pid {:?} of the root was not readable during the scan",
            snap.procs[root].ppid.map(Pid::get)
        );
        return j;
    };
    if let Some(how) = adopter(snap, forest, owner) {
        adopted(snap, &mut j, &how);
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

/// A tree whose root's parent adopts orphans: an orphan, unless the evidence
/// says it was started to run on its own: as a service unit's main process,
/// or with no stdio link to anyone.
fn adopted(snap: &Snapshot, j: &mut Judgement, how: &str) {
    let root = &snap.procs[j.root];
    if let Some(unit) = root.details.as_ref().and_then(|d| d.unit.as_ref()).filter(|u| u.is_service())
        && unit.main != Some(false)
    {
        j.verdict = Verdict::Protected;
        j.reason = format!(
            "{} runs as systemd unit {} (the unit's main process, started by its service manager, not by a host)",
            program_ref(root),
            unit.name
        );
        return;
    }
    if let Some(evidence) = detached(snap, &j.servers) {
        j.verdict = Verdict::Detached;
        j.reason = format!("adopted by {how}, but {evidence}: detached on purpose, not a host's stdio server");
        return;
    }
    j.verdict = Verdict::Orphan;
    j.candidate = true;
    j.reap = true;
    let link = j
        .servers
        .iter()
        .find_map(|&s| {
            stdio_link(&snap.procs[s]).map(|k| format!("server {} has its stdio on a {k}", program_ref(&snap.procs[s])))
        })
        .unwrap_or_default();
    j.reason = format!("adopted by {how} after its host exited; {link}");
}

/// The kind of link (pipe, socket) a server's fd 0 or 1 has, if any.
fn stdio_link(p: &Process) -> Option<&'static str> {
    let d = p.details.as_ref()?;
    [d.fd_kind(0), d.fd_kind(1)].into_iter().find(|k| k.is_link()).map(crate::scan::FdKind::as_str)
}

fn fd_kinds(p: &Process) -> [FdKind; 2] {
    p.details.as_ref().map_or([FdKind::Unknown; 2], |d| [d.fd_kind(0), d.fd_kind(1)])
}

/// Why a tree's servers are not anyone's stdio servers: none of them has a
/// pipe or socket on fd 0 or 1, and at least one shows what it has instead.
/// `None` when one has a link, or when nothing could be read (the never-touch
/// rules keep such a tree, with the reason).
fn detached(snap: &Snapshot, servers: &[usize]) -> Option<String> {
    let mut why = Vec::new();
    for &s in servers {
        let p = &snap.procs[s];
        let kinds = fd_kinds(p);
        if kinds.iter().any(|k| k.is_link()) {
            return None;
        }
        if kinds.iter().any(|&k| k != FdKind::Unknown) {
            why.push(format!(
                "server {} has stdin {} and stdout {}",
                program_ref(p),
                kinds[0].as_str(),
                kinds[1].as_str()
            ));
        }
    }
    (!why.is_empty()).then(|| why.join(", "))
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
        j.members.iter().find_map(|&(m, _)| self.member(snap, m)).or_else(|| {
            // Orphans are told from detached servers by their stdio.
            let linked = j.servers.iter().any(|&s| fd_kinds(&snap.procs[s]).iter().any(|k| k.is_link()));
            let blind = j.servers.iter().find(|&&s| fd_kinds(&snap.procs[s]) == [FdKind::Unknown; 2]);
            blind
                .filter(|_| j.verdict == Verdict::Orphan && !linked)
                .map(|&s| format!("cannot read the stdio (fd 0, 1) of server {}", program_ref(&snap.procs[s])))
        })
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
mod corpus;
#[cfg(test)]
mod tests;
