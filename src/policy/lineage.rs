//! Adoption seen happen (issue 33): the kernel changes a process's parent
//! only when that parent exits and it is re-parented — to PID 1, to the
//! nearest child subreaper (`systemd --user`, WSL2's `/init` relay,
//! `conmon`, a container's init, any program that set
//! `PR_SET_CHILD_SUBREAPER`). So a root whose parent changed was adopted,
//! whoever adopted it, name or no name.
//!
//! The daemon remembers the parent of every process it may have to judge
//! after its parent exits — every tree's root, every child of a host — and,
//! at each scan, notes those whose parent is no longer that one. Held in
//! memory only: what a restarted daemon did not see change, the session
//! rule and the adopters' identities (`super::adopted_by`) still tell.

use std::collections::HashMap;

use crate::config::Role;
use crate::ids::{Identity, Pid};
use crate::names::name;
use crate::scan::Snapshot;
use crate::tree::Forest;

/// How `owner` adopted `root`, when no identity says it adopts orphans:
/// this daemon saw `root`'s parent change to it; or `root` inherited its
/// session (it is no session leader) from a parent in another session
/// than `owner`'s, so `owner` did not start it. Never a host (a host's own
/// children are judged under it) nor a person's interactive shell.
pub(super) fn adopted_by(
    snap: &Snapshot,
    forest: &Forest,
    lineage: &Lineage,
    owner: usize,
    root: usize,
) -> Option<String> {
    if forest.role(owner) == Role::Host || super::person::interactive_shell(snap, owner).is_some() {
        return None;
    }
    let (o, r) = (&snap.procs[owner], &snap.procs[root]);
    if let Some(from) = lineage.adopted(r.id, o.pid()) {
        return Some(format!(
            "{}, which it was re-parented to when its parent (pid {from}) exited (seen by this daemon)",
            name(o)
        ));
    }
    // What a scan could not read of the owner (gone mid-scan, another
    // namespace's init) says nothing.
    if o.uid().is_none() || o.state.is_zombie() {
        return None;
    }
    // Session 0 (`None`) is one no process here leads: the kernel's first,
    // kept by everything a PID 1 that never called setsid starts (a CI
    // runner, a container's init), or one led outside our PID namespace
    // (`docker exec`'s). It is still a session: two differ when one is
    // seen and the other not; when neither is, nothing tells.
    let (rs, os) = (r.sid, o.sid);
    let other = match (rs, os) {
        (Some(a), Some(b)) => a != b,
        (None, None) => false,
        _ => true,
    };
    (rs != Some(r.pid()) && other).then(|| {
        format!(
            "{}, which re-parented it: it kept the session ({}) of the parent that started it, not its adopter's \
             ({})",
            name(o),
            session(rs),
            session(os)
        )
    })
}

fn session(sid: Option<Pid>) -> String {
    sid.map_or_else(|| "sid 0, which no process here leads".to_string(), |s| format!("sid {s}"))
}

/// Processes watched at most: one entry each (a root, a host's child).
const MAX_WATCHED: usize = 65_536;

#[derive(Clone, Debug, Default)]
pub struct Lineage {
    /// The parent each watched process had when last seen.
    parents: HashMap<Identity, Pid>,
    /// Watched processes whose parent changed: (the parent that exited,
    /// the one that adopted them).
    moved: HashMap<Identity, (Pid, Pid)>,
}

impl Lineage {
    /// Notes, before `snap` is judged, every watched process whose parent
    /// changed since it was last seen; forgets what `snap` no longer holds.
    pub fn note_moves(&mut self, snap: &Snapshot) {
        // A look-up per watched process, not a pass over the table: this
        // runs at every scan, up to a hundred a second under churn.
        for (id, &was) in &self.parents {
            if let Some(now) = snap.get(id.pid).filter(|p| p.id == *id).and_then(|p| p.ppid)
                && was != now
            {
                self.moved.entry(*id).or_insert((was, now));
            }
        }
        self.moved.retain(|id, _| snap.get(id.pid).is_some_and(|p| p.id == *id));
    }

    /// Watches, after `snap` was judged, the parents of every tree's root
    /// and of every child of its host (`judged`: each tree's root and host).
    pub fn watch(
        &mut self,
        snap: &Snapshot,
        forest: &Forest,
        judged: impl IntoIterator<Item = (usize, Option<usize>)>,
    ) {
        self.parents.clear();
        let mut watched = Vec::new();
        for (root, host) in judged {
            watched.push(root);
            watched.extend(host.iter().flat_map(|&h| forest.children[h].iter().copied()));
        }
        for i in watched {
            if self.parents.len() >= MAX_WATCHED {
                break;
            }
            if let Some(pp) = snap.procs[i].ppid {
                self.parents.insert(snap.procs[i].id, pp);
            }
        }
        self.parents.shrink_to(self.parents.len() * 2);
    }

    /// The parent `id` had before it was re-parented to `now`, if this
    /// daemon saw that happen.
    pub fn adopted(&self, id: Identity, now: Pid) -> Option<Pid> {
        self.moved.get(&id).filter(|(_, to)| *to == now).map(|(from, _)| *from)
    }

    /// Records a move (tests).
    #[cfg(test)]
    pub fn record(&mut self, id: Identity, from: Pid, to: Pid) {
        self.moved.insert(id, (from, to));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::{Context, Process};

    #[test]
    fn a_watched_process_whose_parent_changed_was_adopted() {
        let snap = |server_parent: i32| {
            Snapshot::from_processes(
                vec![
                    Process::synthetic(1, 0, 1, "/sbin/init"),
                    Process::synthetic(33, 1, 2, "/init"),
                    Process::synthetic(100, 33, 3, "claude"),
                    Process::synthetic(200, server_parent, 4, "npx -y @playwright/mcp"),
                ],
                Context::default(),
            )
        };
        let before = snap(100);
        let cfg = crate::config::Config::embedded();
        let forest = Forest::build(&before, &cfg.matcher, None);
        let mut l = Lineage::default();
        l.note_moves(&before);
        l.watch(&before, &forest, [(3, Some(2))]);
        let server = before.procs[3].id;
        assert_eq!(l.adopted(server, Pid::new(33).unwrap()), None);
        // claude exited: its server is now /init's.
        let after = snap(33);
        l.note_moves(&after);
        assert_eq!(l.adopted(server, Pid::new(33).unwrap()), Pid::new(100));
        assert_eq!(l.adopted(server, Pid::INIT), None, "adopted by /init, not PID 1");
        // Gone: forgotten.
        l.note_moves(&Snapshot::from_processes(vec![], Context::default()));
        assert_eq!(l.adopted(server, Pid::new(33).unwrap()), None);
    }
}
