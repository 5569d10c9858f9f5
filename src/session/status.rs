//! The run sessions a scan saw, for `reaperctl status`: each `reaperctl run`
//! wrapper in scope, its host, its members and their memory. Everything is
//! read from the `/proc` the scan read (`--proc-root`), the cgroup mounts
//! from its `self/mountinfo`.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::cgroup::v2_path;
use super::memory::Mounts;
use crate::cycle::Assessment;
use crate::report::status::RunSession;

/// Every wrapper in the judged snapshot (below the scope, when there is one).
pub fn sessions(a: &Assessment, proc_root: &Path) -> Vec<RunSession> {
    let (snap, forest) = (&a.snapshot, &a.forest);
    let mut mounts: Option<Mounts> = None;
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
        // The host's cgroups, when they are the session's own.
        let ours = |path: &str| super::session_of_cgroup(path) == Some(wrapper);
        let text = host
            .and_then(|h| std::fs::read_to_string(proc_root.join(snap.procs[h].pid().to_string()).join("cgroup")).ok());
        let text = text.as_deref().unwrap_or_default();
        let cgroup = v2_path(text).filter(|p| ours(p));
        let mounts = mounts.get_or_insert_with(|| Mounts::read(proc_root));
        // v2's memory.current, else (a hybrid system) the memory cgroup
        // `--memory-max` made on v1.
        let current = mounts.memory(text, ours);
        let (memory_bytes, memory_source) = match current {
            Some(b) => (b, "cgroup"),
            None => (members.iter().map(|&m| snap.procs[m].rss_bytes()).sum(), "rss"),
        };
        out.push(RunSession {
            wrapper_pid: wrapper,
            host_pid: host.map(|h| snap.procs[h].pid().get()),
            host_cmd: host.map(|h| crate::names::short_cmd(&snap.procs[h], 120)),
            cgroup,
            members: members.len(),
            memory_bytes,
            memory_source: memory_source.to_string(),
            uid: std::fs::metadata(proc_root.join(wrapper.to_string())).ok().map(|m| m.uid()),
        });
    }
    out
}
