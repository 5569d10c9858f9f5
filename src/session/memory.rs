//! The memory a process's cgroup holds, from its `/proc/PID/cgroup` text and
//! the cgroup mounts of a mountinfo (never an assumed `/sys/fs/cgroup`
//! layout): cgroup v2 `memory.current`, else v1 `memory.usage_in_bytes` (a
//! hybrid system binds the memory controller to v1). One reading for the run
//! sessions' status and for a container's init (`engine::cgroup_memory`).
//! Here, next to the run sessions' [`Hierarchy`] and [`memcg_v1`] it is made
//! of, rather than in `scan`, which would then depend on `session`.

use std::path::{Path, PathBuf};

use super::cgroup::{Hierarchy, v2_path};
use super::memcg_v1;

/// The cgroup hierarchies a mountinfo shows: the unified one and the v1
/// memory one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mounts {
    pub v2: Option<Hierarchy>,
    pub memory_v1: Option<Hierarchy>,
}

impl Mounts {
    pub fn from_mountinfo(mountinfo: &str) -> Mounts {
        Mounts { v2: Hierarchy::from_mountinfo(mountinfo), memory_v1: memcg_v1::hierarchy(mountinfo) }
    }

    /// The mounts `proc_root/self/mountinfo` shows (none when unreadable).
    pub fn read(proc_root: &Path) -> Mounts {
        Mounts::from_mountinfo(&std::fs::read_to_string(proc_root.join("self/mountinfo")).unwrap_or_default())
    }

    /// The directories of the cgroups a `/proc/PID/cgroup` text names: the
    /// v2 one and the v1 memory one, each only if `accept` takes its path.
    pub fn dirs(&self, cgroup_text: &str, accept: impl Fn(&str) -> bool) -> (Option<PathBuf>, Option<PathBuf>) {
        let v2 = v2_path(cgroup_text).filter(|p| accept(p)).and_then(|p| self.v2.as_ref()?.dir_of(&p));
        let v1 =
            memcg_v1::memory_path(cgroup_text).filter(|p| accept(p)).and_then(|p| self.memory_v1.as_ref()?.dir_of(&p));
        (v2, v1)
    }

    /// The memory of the cgroups a `/proc/PID/cgroup` text names: the v2
    /// cgroup's `memory.current`, else the v1 memory cgroup's
    /// `memory.usage_in_bytes`. Only cgroup paths `accept` takes count (a
    /// run session counts only its own cgroups).
    pub fn memory(&self, cgroup_text: &str, accept: impl Fn(&str) -> bool) -> Option<u64> {
        let (v2, v1) = self.dirs(cgroup_text, accept);
        let current = v2.and_then(|dir| std::fs::read_to_string(dir.join("memory.current")).ok());
        current.and_then(|t| t.trim().parse::<u64>().ok()).or_else(|| memcg_v1::usage(&v1?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_accepted_cgroups_count_and_v2_comes_first() {
        let dir = tempfile::tempdir().unwrap();
        let (v2, v1) = (dir.path().join("v2"), dir.path().join("v1"));
        std::fs::create_dir_all(v2.join("a")).unwrap();
        std::fs::create_dir_all(v1.join("b")).unwrap();
        std::fs::write(v2.join("a/memory.current"), "100\n").unwrap();
        std::fs::write(v1.join("b/memory.usage_in_bytes"), "200\n").unwrap();
        let hierarchy = |mount: &Path| Some(Hierarchy { mount: mount.to_path_buf(), mount_root: "/".into() });
        let m = Mounts { v2: hierarchy(&v2), memory_v1: hierarchy(&v1) };
        let text = "4:memory:/b\n0::/a\n";
        assert_eq!(m.memory(text, |_| true), Some(100));
        assert_eq!(m.memory(text, |p| p == "/b"), Some(200));
        assert_eq!(m.memory(text, |_| false), None);
        assert_eq!(Mounts { v2: None, ..m.clone() }.memory(text, |_| true), Some(200));
    }
}
