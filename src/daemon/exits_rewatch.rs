//! What is watched after each scan (`ExitWatch::rewatch`): the owner of
//! every kept tree and the chain above it up to the adopter, their hosts,
//! and (pidfd mode) the launchers inside them; each by a pidfd task kept
//! from scan to scan while its identity is the same.

use std::collections::{HashMap, HashSet};

use super::ExitWatch;
use crate::config::Role;
use crate::cycle::Assessment;
use crate::ids::Pid;
use crate::policy::Verdict;
use crate::sys;

impl ExitWatch {
    /// Watches the owner of every kept tree and each ancestor above it up to
    /// the adopter (the host among them): any of their exits may orphan it.
    /// Pidfd mode also watches the members with children (launchers,
    /// wrappers): their exit orphans the rest of the tree.
    pub fn rewatch(&mut self, a: &Assessment) {
        let snap = &a.snapshot;
        let mut reread: HashMap<Pid, Vec<Pid>> = HashMap::new();
        let mut below: HashMap<Pid, Vec<crate::ids::Identity>> = HashMap::new();
        let mut apart = HashSet::new();
        for j in a.judgements.iter().filter(|j| matches!(j.verdict, Verdict::Live | Verdict::Foreign | Verdict::Stale))
        {
            let Some(owner) = j.owner else { continue };
            let mut chain: Vec<usize> = vec![owner];
            // An owner that adopts (a namespace's PID 1 and its own command):
            // nothing above it orphans the tree.
            if !adopts(a, owner) {
                for up in a.forest.ancestors(owner) {
                    if adopts(a, up) || chain.len() >= super::MAX_CHAIN {
                        break;
                    }
                    chain.push(up);
                }
            }
            let members = j.members.iter().map(|&(m, _)| snap.procs[m].pid());
            let again: Vec<Pid> = chain.iter().map(|&c| snap.procs[c].pid()).chain(members).collect();
            let ids: Vec<crate::ids::Identity> = j.members.iter().map(|&(m, _)| snap.procs[m].id).collect();
            if let Some(h) = j.host.filter(|h| !chain.contains(h)) {
                apart.insert(snap.procs[h].pid());
            }
            // Pidfd mode hears no exit it does not watch: a launcher or
            // wrapper in the tree that exits re-parents what it started,
            // which only a sweep would see, and none at all while it
            // lingers as a zombie its host never reaps (a task still):
            // the next full read, minutes later. Its pidfd says it at once.
            // Not a young one's: under churn most launchers live a moment,
            // and each exit rang for a scan (the load bench: 38 exit scans
            // in 30 s instead of 7); the sweep finds those.
            let inner = j.members.iter().map(|&(m, _)| m).filter(|&m| {
                !a.forest.children[m].is_empty() && snap.age_secs(&snap.procs[m]) >= INNER_WATCHED_AFTER_SECS
            });
            let inner = inner.filter(|_| self.connector.is_none());
            for c in chain.iter().copied().chain(j.host).chain(inner) {
                reread.entry(snap.procs[c].pid()).or_default().extend(&again);
                below.entry(snap.procs[c].pid()).or_default().extend(&ids);
            }
        }
        self.reread = reread;
        self.below = below;
        self.apart = apart;
        self.watched = self.reread.keys().copied().collect();
        self.watch_by_pidfd(snap);
    }

    /// One pidfd task for each watched process, kept from scan to scan
    /// while its identity is the same: a process that exited (a zombie
    /// still read) is not watched again. In event mode the connector
    /// tells every exit, but under churn its events are read in batches
    /// (`COALESCE`, `exits_events.rs`): the pidfd of a watched process has them read
    /// the moment it exits.
    pub(super) fn watch_by_pidfd(&mut self, snap: &crate::scan::Snapshot) {
        let ids: HashMap<Pid, crate::ids::Identity> =
            self.watched.iter().filter_map(|&pid| snap.get(pid).map(|p| (pid, p.id))).collect();
        self.pidfd_tasks.retain(|pid, (id, task)| {
            let keep = ids.get(pid) == Some(id);
            if !keep {
                task.abort();
            }
            keep
        });
        for (&pid, &id) in &ids {
            if self.pidfd_tasks.contains_key(&pid) {
                continue;
            }
            let Ok(fd) = sys::pidfd_open(pid) else {
                // Already gone: as if its pidfd had said so.
                if self.connector.is_none() {
                    self.exited.borrow_mut().insert(pid);
                }
                self.wake.notify_one();
                continue;
            };
            let task = self.pidfd_task(pid, fd);
            self.pidfd_tasks.insert(pid, (id, task));
        }
    }
}

/// Pidfd mode: a launcher or wrapper inside a kept tree is watched once
/// it has run this long (see [`ExitWatch::rewatch`]).
const INNER_WATCHED_AFTER_SECS: f64 = 5.0;

/// Whether process `i` adopts orphans (its exit orphans nothing: PID 1, the
/// scope, a subreaper such as `systemd --user`).
fn adopts(a: &Assessment, i: usize) -> bool {
    a.snapshot.procs[i].pid() == Pid::INIT || Some(i) == a.forest.scope || a.forest.role(i) == Role::Adopter
}
