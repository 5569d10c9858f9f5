//! The run sessions a scan saw, for `reaperctl status`: each `reaperctl run`
//! wrapper in scope, its host, its members and their memory.

use std::os::unix::fs::MetadataExt;

use super::cgroup::{Hierarchy, v2_path};
use crate::cycle::Assessment;
use crate::report::status::RunSession;

/// Every wrapper in the judged snapshot (below the scope, when there is one).
pub fn sessions(a: &Assessment) -> Vec<RunSession> {
    let (snap, forest) = (&a.snapshot, &a.forest);
    let mut hierarchy: Option<Option<Hierarchy>> = None;
    let mut out = Vec::new();
    for (i, p) in snap.procs.iter().enumerate() {
        if p.state.is_zombie() || !super::is_run_wrapper(&p.cmdline) {
            continue;
        }
        if let Some(scope) = forest.scope
            && scope != i
            && !forest.ancestors(i).contains(&scope)
        {
            continue;
        }
        let members: Vec<usize> = forest
            .descendants(i)
            .into_iter()
            .map(|(m, _)| m)
            .filter(|&m| m != i && !snap.procs[m].state.is_zombie())
            .collect();
        let host = forest.children[i].iter().copied().find(|&c| !snap.procs[c].state.is_zombie());
        let wrapper = p.pid().get();
        // The host's cgroup, when it is the session's own leaf.
        let cgroup = host.and_then(|h| {
            let text = std::fs::read_to_string(format!("/proc/{}/cgroup", snap.procs[h].pid())).ok()?;
            v2_path(&text).filter(|path| super::session_of_cgroup(path) == Some(wrapper))
        });
        let current = cgroup.as_deref().and_then(|path| {
            let h = hierarchy.get_or_insert_with(Hierarchy::find).as_ref()?;
            std::fs::read_to_string(h.dir_of(path)?.join("memory.current")).ok()?.trim().parse::<u64>().ok()
        });
        let (memory_bytes, memory_source) = match current {
            Some(b) => (b, "cgroup"),
            None => (members.iter().map(|&m| snap.procs[m].rss_bytes).sum(), "rss"),
        };
        out.push(RunSession {
            wrapper_pid: wrapper,
            host_pid: host.map(|h| snap.procs[h].pid().get()),
            host_cmd: host.map(|h| crate::names::short_cmd(&snap.procs[h], 120)),
            cgroup,
            members: members.len(),
            memory_bytes,
            memory_source: memory_source.to_string(),
            uid: std::fs::metadata(format!("/proc/{wrapper}")).ok().map(|m| m.uid()),
        });
    }
    out
}
