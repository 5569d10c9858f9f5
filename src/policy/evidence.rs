//! Evidence about an adopted tree: was it started to run on its own (a
//! service unit's main process, servers with no stdio link to anyone), or is
//! it a host's stdio server whose host is gone?

use std::fmt::Write as _;

use super::{Judgement, Verdict};
use crate::names::program_ref;
use crate::scan::{FdKind, Process, Snapshot};
use crate::tree::Forest;

/// A tree whose root's parent adopts orphans: an orphan, unless the evidence
/// says it was started to run on its own: as a service unit's main process,
/// or with no stdio link to anyone.
pub(super) fn adopted(snap: &Snapshot, forest: &Forest, j: &mut Judgement, how: &str) {
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
    j.reason = if link.is_empty() {
        format!("adopted by {how} after its host exited")
    } else {
        format!("adopted by {how} after its host exited; {link}")
    };
    if let Some(why) = j.servers.iter().find_map(|&s| forest.sdk.get(&s)) {
        let _ = write!(j.reason, "; a server by its program: {}", why.describe());
    }
}

/// A tree left in a `reaperctl run` session after its host exited: an
/// orphan of that session, whatever its stdio (the session is the proof, so
/// a daemonized helper is no exception).
pub(super) fn left_in_session(snap: &Snapshot, j: &mut Judgement, session: &str) {
    j.verdict = Verdict::Orphan;
    j.candidate = true;
    j.reap = true;
    let root = program_ref(&snap.procs[j.root]);
    j.reason = format!("{root} was left in {session}: an orphan of that session");
}

/// The kind of link (pipe, socket) a server's fd 0 or 1 has, or where its
/// transport sits when an SDK moved it above fd 2 (the Python SDK 2.x puts
/// `/dev/null` on fd 0 and stderr on fd 1 while serving).
fn stdio_link(p: &Process) -> Option<String> {
    if let Some(k) = fd_kinds(p).into_iter().find(|k| k.is_link()) {
        return Some(k.as_str().to_string());
    }
    let t = moved_transport(p)?;
    Some(format!("pipe on fds {} and {} (its SDK moved the transport off fds 0 and 1)", t.input, t.output))
}

/// The transport of a server that keeps it above fd 2, if it does.
fn moved_transport(p: &Process) -> Option<crate::scan::Transport> {
    p.details.as_ref()?.transport_fds().filter(|t| t.input > 2)
}

/// Whether a server has a stdio link to anyone: a pipe or socket on fd 0 or
/// 1, or a transport an SDK moved above fd 2.
pub(super) fn has_stdio_link(p: &Process) -> bool {
    fd_kinds(p).iter().any(|k| k.is_link()) || moved_transport(p).is_some()
}

pub(super) fn fd_kinds(p: &Process) -> [FdKind; 2] {
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
        if has_stdio_link(p) {
            return None;
        }
        let kinds = fd_kinds(p);
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
