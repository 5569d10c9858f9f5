//! The never-touch rules: PID 1, kernel threads, the reaper and its
//! ancestors, other PID namespaces, other users, and anything that cannot be
//! inspected. Not configurable; applied to every candidate after its verdict.

use std::collections::HashSet;

use super::evidence::{fd_kinds, has_stdio_link};
use super::{Judgement, Verdict};
use crate::config::Config;
use crate::ids::{Pid, Uid};
use crate::names::{name, namespace_of, program_ref};
use crate::scan::{FdKind, Snapshot};
use crate::tree::Forest;

/// The never-touch rules. Not configurable.
pub(super) struct Guard {
    untouchable: HashSet<usize>,
    self_uid: Option<Uid>,
    self_pidns: Option<u64>,
    self_depth: Option<usize>,
    min_uid: u32,
    other_namespaces: bool,
}

/// A PID namespace as the scan knows it: the inode of its `ns/pid` link
/// (readable with ptrace access only) and its depth (always readable).
type NsKey = (Option<u64>, Option<usize>);

/// Whether two processes share a PID namespace; `None` when unknowable.
fn same_ns(a: NsKey, b: NsKey) -> Option<bool> {
    match (a, b) {
        ((Some(x), _), (Some(y), _)) => Some(x == y),
        ((_, Some(x)), (_, Some(y))) => Some(x == y),
        _ => None,
    }
}

fn ns_key(d: &crate::scan::Details) -> NsKey {
    (d.pidns, d.nspid_depth)
}

impl Guard {
    pub(super) fn new(snap: &Snapshot, forest: &Forest, cfg: &Config) -> Guard {
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
            other_namespaces: cfg.reap_other_pid_namespaces,
        }
    }

    /// Why this tree must not be touched, if it must not. Only candidates are
    /// checked: a kept tree needs no second reason.
    pub(super) fn check(&self, snap: &Snapshot, j: &Judgement) -> Option<String> {
        if !j.candidate {
            return None;
        }
        let root_ns = snap.procs[j.root].details.as_deref().map(ns_key);
        j.members.iter().find_map(|&(m, _)| self.member(snap, m, root_ns)).or_else(|| {
            // Orphans are told from detached servers by their stdio.
            let linked = j.servers.iter().any(|&s| has_stdio_link(&snap.procs[s]));
            let blind = j.servers.iter().find(|&&s| fd_kinds(&snap.procs[s]) == [FdKind::Unknown; 2]);
            blind
                .filter(|_| j.verdict == Verdict::Orphan && !linked)
                .map(|&s| format!("cannot read the stdio (fd 0, 1) of server {}", program_ref(&snap.procs[s])))
        })
    }

    fn member(&self, snap: &Snapshot, m: usize, root_ns: Option<NsKey>) -> Option<String> {
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
        if d.is_namespace_init(self.self_depth) {
            return Some(format!(
                "contains {}, PID 1 of a PID namespace ({}), which is never signalled",
                who(),
                namespace_of(d)
            ));
        }
        match same_ns((self.self_pidns, self.self_depth), ns_key(d)) {
            // Ours, or (judged on the namespace's own terms) the tree's root's.
            Some(true) => {}
            Some(false) if !self.other_namespaces => {
                return Some(format!(
                    "member {} lives in another PID namespace ({}); reap_other_pid_namespaces = false",
                    who(),
                    namespace_of(d)
                ));
            }
            Some(false) => {
                if root_ns.and_then(|r| same_ns(r, ns_key(d))) != Some(true) {
                    return Some(format!("member {} lives in a PID namespace other than its tree's root", who()));
                }
            }
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
