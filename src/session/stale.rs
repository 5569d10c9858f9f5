//! Cgroups a `reaperctl run` wrapper could not remove because it was killed
//! first (SIGKILL, the OOM killer): `mcp-reaper-run-<pid>` directories in the
//! cgroup v2 hierarchy and in the v1 memory one. Those that hold no process
//! and whose wrapper pid no longer runs as a wrapper are removed (rmdir, and
//! only that: nothing is ever signalled because of a cgroup's name). One that
//! still holds processes is left alone; its processes are judged by the
//! usual rules like any others. systemd's scopes (`….scope`) are systemd's.
//!
//! The pid in the name is the wrapper's in its own PID namespace, which may
//! not be this reaper's (a container sharing the cgroup tree, or a reaper in
//! a namespace of its own): there a live wrapper's pid can look free. A live
//! wrapper's cgroup is empty only for a moment (made, then joined by the
//! host at once; emptied, then removed at once), so a cgroup is also left
//! alone until it is [`MIN_AGE`] old (its inode's time, which the kernel
//! may reset to now, never to earlier: at worst a sweep comes later).

use std::path::{Path, PathBuf};

use super::cgroup::{remove_tree, subdirs};
use super::memory::Mounts;
use crate::ids::Pid;
use crate::scan::ProcFs;

/// How deep below a mount point to look, and how many cgroups at most: a
/// bound on the walk on a machine with very many cgroups.
const MAX_DEPTH: usize = 24;
const MAX_DIRS: usize = 50_000;
/// How old a cgroup must be before it may be removed.
pub const MIN_AGE: std::time::Duration = std::time::Duration::from_secs(10);

/// What a sweep found.
#[derive(Debug, Default)]
pub struct Swept {
    /// Removed (or, in a dry run, to be removed).
    pub removed: Vec<PathBuf>,
    /// Stale but still holding processes: left alone.
    pub populated: Vec<PathBuf>,
    /// Empty, but younger than [`MIN_AGE`]: left for a later sweep.
    pub young: Vec<PathBuf>,
    /// Could not be removed, and why.
    pub failed: Vec<(PathBuf, std::io::Error)>,
}

/// Finds the stale session cgroups in the hierarchies this `/proc` (its
/// `self/mountinfo`) shows, and removes the empty ones unless `dry_run`.
/// With a `scope` (a reaper scoped to one process's subtree), only below
/// that process's own cgroups: the sweep stays inside the scope too.
pub fn sweep(procfs: &ProcFs, dry_run: bool, scope: Option<Pid>) -> Swept {
    let mut out = Swept::default();
    let Ok(mountinfo) = std::fs::read_to_string(procfs.root().join("self/mountinfo")) else { return out };
    let mounts = Mounts::from_mountinfo(&mountinfo);
    let tops: Vec<PathBuf> = match scope {
        None => [mounts.v2, mounts.memory_v1].into_iter().flatten().map(|h| h.mount).collect(),
        Some(pid) => {
            // The scope gone: nothing is inside it.
            let Ok(text) = std::fs::read_to_string(procfs.root().join(pid.to_string()).join("cgroup")) else {
                return out;
            };
            let (v2, v1) = mounts.dirs(&text, |_| true);
            [v2, v1].into_iter().flatten().collect()
        }
    };
    for top in tops {
        for dir in session_dirs(&top) {
            let Some(wrapper) = wrapper_of(&dir) else { continue };
            if procfs.cmdline(wrapper).is_some_and(|c| super::is_run_wrapper(&c)) {
                continue; // a live session (or its pid reused by a new one)
            }
            if holds_processes(&dir) {
                out.populated.push(dir);
            } else if young(&dir) {
                out.young.push(dir);
            } else if dry_run {
                out.removed.push(dir);
            } else {
                match remove_tree(&dir) {
                    Ok(()) => out.removed.push(dir),
                    // A wrapper that just finished removed it itself.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => out.failed.push((dir, e)),
                }
            }
        }
    }
    out
}

/// [`sweep`], each finding logged: a removal at info, a cgroup still in
/// use at debug (it is seen again each sweep), a failure at warn (debug when
/// this reaper may not remove it: another user's).
pub fn sweep_and_log(procfs: &ProcFs, dry_run: bool, scope: Option<Pid>) -> Swept {
    let swept = sweep(procfs, dry_run, scope);
    for d in &swept.removed {
        let what = if dry_run { "would remove" } else { "removed" };
        tracing::info!(reaper_action = "cgroup", "{what} the stale `reaperctl run` session cgroup {}", d.display());
    }
    for d in &swept.populated {
        tracing::debug!("stale `reaperctl run` session cgroup {} still holds processes: left alone", d.display());
    }
    for d in &swept.young {
        tracing::debug!("stale `reaperctl run` session cgroup {} is too young to remove yet", d.display());
    }
    for (d, e) in &swept.failed {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            tracing::debug!("cannot remove the stale session cgroup {}: {e}", d.display());
        } else {
            tracing::warn!(reaper_action = "error", "cannot remove the stale session cgroup {}: {e}", d.display());
        }
    }
    swept
}

/// Whether `dir` is younger than [`MIN_AGE`] (or its age is unknown).
fn young(dir: &Path) -> bool {
    std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_none_or(|age| age < MIN_AGE)
}

/// The wrapper pid a session cgroup's own name gives (`mcp-reaper-run-<pid>`,
/// not a systemd scope).
fn wrapper_of(dir: &Path) -> Option<Pid> {
    let name = dir.file_name()?.to_str()?;
    let digits = name.strip_prefix(super::LEAF_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Pid::new(digits.parse().ok()?)
}

/// Every `mcp-reaper-run-<pid>` directory below `mount` (not below another one).
fn session_dirs(mount: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![(mount.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        seen += 1;
        if seen > MAX_DIRS {
            break;
        }
        for sub in subdirs(&dir) {
            if wrapper_of(&sub).is_some() {
                found.push(sub);
            } else if depth < MAX_DEPTH {
                stack.push((sub, depth + 1));
            }
        }
    }
    found
}

/// Whether a process is in the cgroup or below it (`cgroup.procs`, which
/// both versions have; an unreadable one counts as holding processes).
fn holds_processes(dir: &Path) -> bool {
    match std::fs::read_to_string(dir.join("cgroup.procs")) {
        Ok(t) if t.trim().is_empty() => subdirs(dir).iter().any(|d| holds_processes(d)),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(wrapper_of(Path::new("/x/mcp-reaper-run-42")).map(Pid::get), Some(42));
        assert_eq!(wrapper_of(Path::new("/x/mcp-reaper-run-42.scope")), None);
        assert_eq!(wrapper_of(Path::new("/x/mcp-reaper-run-")), None);
        assert_eq!(wrapper_of(Path::new("/x/mcp-reaper-run-0")), None);
        assert_eq!(wrapper_of(Path::new("/x/other-42")), None);
    }

    /// A scoped sweep looks only below the scope's own cgroup.
    #[test]
    fn a_scoped_sweep_stays_below_the_scopes_cgroup() {
        let dir = tempfile::tempdir().unwrap();
        let (proc, cg) = (dir.path().join("proc"), dir.path().join("cg"));
        std::fs::create_dir_all(proc.join("self")).unwrap();
        std::fs::create_dir_all(proc.join("77")).unwrap();
        let mountinfo = format!("41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw\n", cg.display());
        std::fs::write(proc.join("self/mountinfo"), mountinfo).unwrap();
        std::fs::write(proc.join("77/cgroup"), "0::/inside\n").unwrap();
        let old = std::time::SystemTime::now() - MIN_AGE * 2;
        for d in ["inside/mcp-reaper-run-99991", "outside/mcp-reaper-run-99992"] {
            let d = cg.join(d);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cgroup.procs"), "").unwrap();
            std::fs::File::open(&d).unwrap().set_modified(old).unwrap();
        }
        let procfs = ProcFs::new(&proc);
        let names =
            |s: &Swept| s.removed.iter().map(|d| d.strip_prefix(&cg).unwrap().to_path_buf()).collect::<Vec<_>>();
        let all = sweep(&procfs, true, None);
        assert_eq!(names(&all).len(), 2, "{all:?}");
        let scoped = sweep(&procfs, true, Pid::new(77));
        assert_eq!(names(&scoped), [PathBuf::from("inside/mcp-reaper-run-99991")], "{scoped:?}");
        // A scope that is gone has nothing inside it.
        assert!(sweep(&procfs, true, Pid::new(78)).removed.is_empty());
    }
}
