//! Sending signals to a run's targets: a whole process group with one signal
//! where every member of the group is a target, member by member through
//! pidfds otherwise. Never `kill(-pgid)` a mixed group.

use std::collections::{HashMap, HashSet};
use std::os::fd::AsFd;

use rustix::process::Signal;

use super::{Run, Target};
use crate::ids::{Identity, Pid};
use crate::scan::Snapshot;
use crate::sys;

/// Process groups that may be signalled as a whole: the leader is a live
/// target and every non-zombie process of the group (fresh scan) is a target.
pub(super) fn plan_groups(r: &Run, snap: &Snapshot) -> HashSet<Pid> {
    let live: HashSet<Identity> = r.live().map(|t| t.id).collect();
    let mut groups: HashMap<Pid, bool> = HashMap::new();
    for t in r.live() {
        if let Some(pg) = snap.get(t.id.pid).filter(|p| p.id == t.id).and_then(|p| p.pgid) {
            groups.insert(pg, true);
        }
    }
    for p in &snap.procs {
        if let Some(pg) = p.pgid
            && let Some(pure) = groups.get_mut(&pg)
            && !p.state.is_zombie()
            && !live.contains(&p.id)
        {
            *pure = false;
        }
    }
    groups.into_iter().filter(|&(pg, pure)| pure && live.iter().any(|id| id.pid == pg)).map(|(pg, _)| pg).collect()
}

pub(super) fn signal_run(r: &mut Run, snap: &Snapshot, sigs: &[Signal], name: &'static str) {
    let groups = plan_groups(r, snap);
    let mut covered: HashSet<Identity> = HashSet::new();
    for &pg in &groups {
        let Some(leader) = r.live().find(|t| t.id.pid == pg) else { continue };
        let mut ok = true;
        for &sig in sigs {
            match sys::pidfd_signal_group(leader.pidfd.as_fd(), sig) {
                Ok(()) => {}
                // The group is already gone (e.g. it died of the SIGTERM
                // before the SIGCONT): the signal did its job.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => break,
                Err(_) => {
                    ok = false; // kernel < 6.9 (EINVAL): per-member signals below
                    break;
                }
            }
        }
        if ok {
            r.group_signals += 1;
            for t in r.live() {
                if snap.get(t.id.pid).is_some_and(|p| p.id == t.id && p.pgid == Some(pg)) {
                    covered.insert(t.id);
                }
            }
        }
    }
    signal_members(r, sigs, name, |t| !covered.contains(&t.id));
    if !r.signals.contains(&name) {
        r.signals.push(name);
    }
}

pub(super) fn signal_members(r: &mut Run, sigs: &[Signal], name: &'static str, which: impl Fn(&Target) -> bool) {
    let mut errors = Vec::new();
    let mut sent = 0;
    for t in r.targets.iter().filter(|t| !t.gone && which(t)) {
        for (i, &sig) in sigs.iter().enumerate() {
            match sys::pidfd_signal(t.pidfd.as_fd(), sig) {
                Ok(()) => sent += usize::from(i == 0),
                // Exited between the wait and now: that is success.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => break,
                Err(e) => {
                    errors.push(format!("SIG{name} to {}: {e}", t.id.pid));
                    break;
                }
            }
        }
    }
    r.member_signals += sent;
    r.errors.extend(errors);
    if !r.signals.contains(&name) {
        r.signals.push(name);
    }
}
