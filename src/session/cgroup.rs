//! The cgroup v2 leaf of a run session: where the hierarchy is mounted (from
//! `/proc/self/mountinfo`, never assumed), which cgroup the caller is in,
//! making the leaf, its `memory.max`, its members, `cgroup.kill`, removal.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::ids::Pid;

/// The unified hierarchy's mount point and the cgroup path (as
/// `/proc/PID/cgroup` writes it) of the directory mounted there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    pub mount: PathBuf,
    pub mount_root: String,
}

impl Hierarchy {
    /// The cgroup2 mount of this mount namespace, if there is one.
    pub fn find() -> Option<Hierarchy> {
        let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        Hierarchy::from_mountinfo(&text)
    }

    pub fn from_mountinfo(mountinfo: &str) -> Option<Hierarchy> {
        crate::scan::parse::cgroup_mounts(mountinfo)
            .into_iter()
            .find(|(v2, _, _)| *v2)
            .map(|(_, root, point)| Hierarchy { mount: PathBuf::from(point), mount_root: root })
    }

    /// The directory of a cgroup path (`/proc/PID/cgroup`'s `0::` line).
    pub fn dir_of(&self, path: &str) -> Option<PathBuf> {
        let rest = if self.mount_root == "/" { path } else { path.strip_prefix(self.mount_root.as_str())? };
        // `/outer` is not below a mount of `/out`.
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        Some(self.mount.join(rest.trim_start_matches('/')))
    }

    /// The directory of the cgroup `pid` is in.
    pub fn dir_of_pid(&self, pid: Pid) -> Option<PathBuf> {
        self.dir_of(&v2_path(&std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?)?)
    }

    /// The directory of this process's own cgroup.
    pub fn own_dir(&self) -> Option<PathBuf> {
        self.dir_of(&v2_path(&std::fs::read_to_string("/proc/self/cgroup").ok()?)?)
    }
}

/// The unified hierarchy's path in a `/proc/PID/cgroup` text (`0::/path`).
pub fn v2_path(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix("0::")).map(str::to_string)
}

/// A session's cgroup: made here (and removed at the end), or made by
/// systemd as a transient scope (which systemd removes).
#[derive(Debug)]
pub struct Leaf {
    pub dir: PathBuf,
    pub by_systemd: bool,
}

impl Leaf {
    /// Makes `parent/name`. A leftover directory of the same name (a wrapper
    /// killed before it could clean up, its pid since reused) is reused if empty.
    pub fn create(parent: &Path, name: &str) -> io::Result<Leaf> {
        let dir = parent.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && !populated(&dir) => {}
            Err(e) => return Err(e),
        }
        // A directory of a filesystem that is not cgroup2 has no cgroup.procs.
        if !dir.join("cgroup.procs").exists() {
            let _ = std::fs::remove_dir(&dir);
            return Err(io::Error::other(format!("{} is not a cgroup v2 directory", parent.display())));
        }
        Ok(Leaf { dir, by_systemd: false })
    }

    /// `cgroup.procs`, open for the child to write itself into.
    pub fn procs_for_child(&self) -> io::Result<OwnedFd> {
        let f = std::fs::OpenOptions::new().write(true).open(self.dir.join("cgroup.procs"))?;
        Ok(OwnedFd::from(f))
    }

    /// Sets `memory.max`, enabling the memory controller for the parent's
    /// children first when it is available but not enabled. Errors say what
    /// is missing.
    pub fn set_memory_max(&self, bytes: u64) -> Result<(), String> {
        let parent = self.dir.parent().unwrap_or(Path::new("/"));
        let has = |dir: &Path| has_controller(dir, "memory");
        if !has(&self.dir) {
            if !has(parent) {
                let available = std::fs::read_to_string(parent.join("cgroup.controllers")).unwrap_or_default();
                return Err(format!(
                    "the memory controller is not available to {} (its controllers: {}); on a hybrid \
                     system it is bound to the cgroup v1 hierarchy, so `--memory-max` cannot be applied",
                    parent.display(),
                    if available.trim().is_empty() { "none" } else { available.trim() }
                ));
            }
            std::fs::write(parent.join("cgroup.subtree_control"), "+memory").map_err(|e| {
                format!(
                    "cannot enable the memory controller in {}/cgroup.subtree_control ({e}); a cgroup \
                     with processes of its own cannot hand controllers down: give `--cgroup-parent` \
                     an empty delegated cgroup",
                    parent.display()
                )
            })?;
        }
        std::fs::write(self.dir.join("memory.max"), bytes.to_string())
            .map_err(|e| format!("cannot write {}/memory.max: {e}", self.dir.display()))
    }

    /// Every process in the leaf and in cgroups below it.
    pub fn members(&self) -> Vec<Pid> {
        let mut out = Vec::new();
        let mut dirs = vec![self.dir.clone()];
        while let Some(d) = dirs.pop() {
            if let Ok(t) = std::fs::read_to_string(d.join("cgroup.procs")) {
                out.extend(t.split_whitespace().filter_map(Pid::parse));
            }
            dirs.extend(subdirs(&d));
        }
        out
    }

    pub fn populated(&self) -> bool {
        populated(&self.dir)
    }

    /// `memory.current`, when the memory controller accounts this cgroup.
    pub fn memory_current(&self) -> Option<u64> {
        std::fs::read_to_string(self.dir.join("memory.current")).ok()?.trim().parse().ok()
    }

    /// SIGKILLs everything in the cgroup at once (`cgroup.kill`, Linux ≥
    /// 5.14). `Ok(false)`: this kernel has no `cgroup.kill`.
    pub fn kill(&self) -> io::Result<bool> {
        let file = self.dir.join("cgroup.kill");
        if !file.exists() {
            return Ok(false);
        }
        std::fs::write(file, "1").map(|()| true)
    }

    /// Removes the leaf and any cgroups made below it (all must be empty).
    /// A systemd scope is systemd's to remove.
    pub fn remove(&self) -> io::Result<()> {
        if self.by_systemd {
            return Ok(());
        }
        remove_tree(&self.dir)
    }
}

/// Removes an empty cgroup and the empty cgroups below it, deepest first.
pub(crate) fn remove_tree(d: &Path) -> io::Result<()> {
    for s in subdirs(d) {
        remove_tree(&s)?;
    }
    std::fs::remove_dir(d)
}

pub(crate) fn subdirs(d: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(d)
        .map(|rd| rd.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Whether `name` is among the controllers a v2 cgroup may use
/// (`cgroup.controllers`).
pub fn has_controller(dir: &Path, name: &str) -> bool {
    std::fs::read_to_string(dir.join("cgroup.controllers")).is_ok_and(|t| t.split_whitespace().any(|c| c == name))
}

/// `populated 1` in `cgroup.events`: a process is in it or below it.
fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events")).is_ok_and(|t| t.lines().any(|l| l == "populated 1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_unified_mount_and_paths() {
        let mi = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                  35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
                  41 31 0:38 /outer /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let h = Hierarchy::from_mountinfo(mi).unwrap();
        assert_eq!(h.mount, Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(h.dir_of("/outer/a/b").unwrap(), Path::new("/sys/fs/cgroup/unified/a/b"));
        assert_eq!(h.dir_of("/elsewhere"), None);
        assert_eq!(h.dir_of("/outerX/a"), None);
        assert_eq!(h.dir_of("/outer").unwrap(), Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(v2_path("4:memory:/x\n0::/user.slice/s.scope\n").as_deref(), Some("/user.slice/s.scope"));
        assert_eq!(Hierarchy::from_mountinfo("31 23 0:28 / /x rw - tmpfs tmpfs rw\n"), None);
    }
}
