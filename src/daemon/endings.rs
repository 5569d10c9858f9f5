//! Hosts that said they are ending (`reaperctl session-end` from their
//! session-end hook): who may say so, and the grace waivers that make the
//! host's trees go the moment it exits. The roots are taken at the request
//! (the host's children now) and after every cycle while the host lives
//! (the roots of the trees judged to be its), since once it is gone nothing
//! links a tree to it any more.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use crate::cycle::Assessment;
use crate::ids::{Identity, Pid, StartTime};
use crate::policy::GraceBook;
use crate::proto::ErrorKind;
use crate::report::status::SessionEnding;
use crate::scan::ProcFs;

/// How far up from the caller to look for the host.
const MAX_DEPTH: usize = 64;

/// Hosts ending their session.
#[derive(Default)]
pub struct Endings {
    hosts: HashMap<Identity, Ending>,
}

/// One host ending its session.
struct Ending {
    /// The reason every waiver carries.
    why: String,
    cmd: String,
    since_unix: u64,
    uid: Option<u32>,
    /// Its trees as last judged (its children when it announced).
    trees: usize,
}

/// The host a session-end request names, if the caller may speak for it:
/// the host is alive with that identity, the caller is one of its
/// descendants (a hook runs as the host's child), and the caller's user is
/// the host's (or root, or the daemon's own).
pub fn check(
    procfs: &ProcFs,
    peer_uid: u32,
    peer_pid: i32,
    privileged: bool,
    host_pid: i32,
    host_start: u64,
) -> Result<Identity, (ErrorKind, String)> {
    let host = Pid::new(host_pid).ok_or((ErrorKind::BadRequest, "not a process id".to_string()))?;
    let st = procfs.stat(host).filter(|s| s.start_time == host_start && !matches!(s.state, b'Z' | b'X'));
    if st.is_none() {
        return Err((ErrorKind::BadRequest, format!("host {host_pid} is not running (any more)")));
    }
    let owner = std::fs::metadata(procfs.root().join(host_pid.to_string())).map(|m| m.uid()).ok();
    if !privileged && owner != Some(peer_uid) {
        return Err((ErrorKind::PermissionDenied, "permission denied: the host belongs to another user".into()));
    }
    let mut cur = Pid::new(peer_pid);
    for _ in 0..MAX_DEPTH {
        let Some(p) = cur else { break };
        let Some(s) = procfs.stat(p) else { break };
        if p == host {
            return Ok(Identity { pid: host, start_time: StartTime(host_start) });
        }
        cur = Pid::new(s.ppid);
    }
    Err((
        ErrorKind::PermissionDenied,
        format!("permission denied: the caller (pid {peer_pid}) is not a descendant of host {host_pid}"),
    ))
}

impl Endings {
    /// Records that `host` ends; its children now get no grace once it is
    /// gone. Returns how many children it has.
    pub fn add(&mut self, procfs: &ProcFs, host: Identity, why: String, book: &mut GraceBook) -> usize {
        let children = procfs.children(host.pid).unwrap_or_default();
        let mut n = 0;
        for c in children {
            if let Some(st) = procfs.stat(c).filter(|s| s.ppid == host.pid.get()) {
                book.waive(Identity { pid: c, start_time: StartTime(st.start_time) }, why.clone());
                n += 1;
            }
        }
        let uid = std::fs::metadata(procfs.root().join(host.pid.to_string())).map(|m| m.uid()).ok();
        let since_unix = super::board::unix_now();
        let cmd = procfs.process(host.pid).map(|p| crate::names::short_cmd(&p, 120)).unwrap_or_default();
        self.hosts.insert(host, Ending { why, cmd, since_unix, uid, trees: n });
        n
    }

    /// The hosts, for the status.
    pub fn status(&self) -> Vec<SessionEnding> {
        let mut out: Vec<SessionEnding> = self
            .hosts
            .iter()
            .map(|(h, e)| SessionEnding {
                host_pid: h.pid.get(),
                host_start_time: h.start_time.0,
                host_cmd: e.cmd.clone(),
                reason: e.why.clone(),
                since_unix: e.since_unix,
                trees: e.trees,
                uid: e.uid,
            })
            .collect();
        out.sort_by_key(|e| (e.since_unix, e.host_pid));
        out
    }

    /// After a cycle: the trees of hosts still alive get their waiver;
    /// hosts gone are forgotten (their waivers do the rest), and waivers of
    /// roots gone too.
    pub fn after_cycle(&mut self, a: &Assessment, book: &mut GraceBook) {
        let snap = &a.snapshot;
        let alive = |id: Identity| snap.get(id.pid).is_some_and(|p| p.id == id && !p.state.is_zombie());
        self.hosts.retain(|&h, _| alive(h));
        for e in self.hosts.values_mut() {
            e.trees = 0;
        }
        for j in &a.judgements {
            let Some(h) = j.host.filter(|&h| h != j.root) else { continue };
            if let Some(e) = self.hosts.get_mut(&snap.procs[h].id) {
                book.waive(snap.procs[j.root].id, e.why.clone());
                e.trees += 1;
            }
        }
        book.retain_waived(alive);
    }
}
