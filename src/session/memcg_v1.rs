//! A run session's cgroup v1 memory cgroup, for `--memory-max` on a hybrid
//! system: one where cgroup v2 is mounted (the session's leaf lives there)
//! but the memory controller is bound to the v1 hierarchy, so the leaf can
//! have no `memory.max`. The memory cgroup is made below the caller's own v1
//! memory cgroup (both found from `/proc/self`, never assumed), named like
//! the leaf; the host joins it before exec, next to the v2 leaf.
//!
//! Only `memory.limit_in_bytes` is set, never `memory.memsw.limit_in_bytes`:
//! `--memory-max` means v2's `memory.max`, which leaves swap alone (v2 has
//! `memory.swap.max` for that), and systemd's `MemoryMax=` maps to the same
//! one file on v1.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::cgroup::Hierarchy;
use crate::ids::Pid;

/// The v1 hierarchy the memory controller is mounted as, from a mountinfo
/// text: its mount point, and the cgroup path of the directory mounted there.
pub fn hierarchy(mountinfo: &str) -> Option<Hierarchy> {
    crate::scan::parse::mounts(mountinfo)
        .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "memory"))
        .map(|m| Hierarchy { mount: PathBuf::from(m.point), mount_root: m.root })
}

/// The memory controller's path in a `/proc/PID/cgroup` text
/// (`4:memory:/path`, or with other controllers: `4:cpu,memory:/path`).
pub fn memory_path(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        controllers.split(',').any(|c| c == "memory").then(|| path.to_string())
    })
}

/// The v1 memory cgroup directory `pid` is in, when this system has one.
pub fn dir_of_pid(pid: Pid) -> Option<PathBuf> {
    let h = hierarchy(&std::fs::read_to_string("/proc/self/mountinfo").ok()?)?;
    h.dir_of(&memory_path(&std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?)?)
}

/// A v1 memory cgroup made for a session (and removed at its end).
#[derive(Debug)]
pub struct MemoryV1 {
    pub dir: PathBuf,
}

impl MemoryV1 {
    /// Makes `name` below this process's own v1 memory cgroup and limits it
    /// to `bytes`. Errors say what is missing.
    pub fn create(name: &str, bytes: u64) -> Result<MemoryV1, String> {
        let mountinfo =
            std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        let h = hierarchy(&mountinfo).ok_or("no cgroup v1 memory hierarchy is mounted either")?;
        let own = std::fs::read_to_string("/proc/self/cgroup").ok().and_then(|t| memory_path(&t));
        let parent = own
            .and_then(|p| h.dir_of(&p))
            .ok_or_else(|| format!("cannot tell which cgroup of {} this process is in", h.mount.display()))?;
        let dir = parent.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            // A wrapper killed before it could clean up, its pid since reused.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && procs(&dir).is_empty() => {}
            Err(e) => return Err(format!("cannot create the memory cgroup {}: {e}", dir.display())),
        }
        let m = MemoryV1 { dir };
        if let Err(e) = m.set_limit(bytes) {
            let _ = std::fs::remove_dir(&m.dir);
            return Err(e);
        }
        Ok(m)
    }

    /// Writes `memory.limit_in_bytes` and reads it back (the kernel rounds
    /// down to a page; a value it did not take is an error).
    fn set_limit(&self, bytes: u64) -> Result<(), String> {
        let file = self.dir.join("memory.limit_in_bytes");
        std::fs::write(&file, bytes.to_string()).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        let back: Option<u64> = std::fs::read_to_string(&file).ok().and_then(|t| t.trim().parse().ok());
        match back {
            Some(b) if b <= bytes && b > 0 => Ok(()),
            other => Err(format!("{} reads {other:?} after writing {bytes}", file.display())),
        }
    }

    /// `cgroup.procs`, open for the child to write itself into.
    pub fn procs_for_child(&self) -> io::Result<OwnedFd> {
        let f = std::fs::OpenOptions::new().write(true).open(self.dir.join("cgroup.procs"))?;
        Ok(OwnedFd::from(f))
    }

    /// `memory.usage_in_bytes`.
    pub fn usage(&self) -> Option<u64> {
        usage(&self.dir)
    }

    /// Removes the cgroup (it must hold no process).
    pub fn remove(&self) -> io::Result<()> {
        std::fs::remove_dir(&self.dir)
    }
}

/// `memory.usage_in_bytes` of a v1 memory cgroup directory.
pub fn usage(dir: &Path) -> Option<u64> {
    std::fs::read_to_string(dir.join("memory.usage_in_bytes")).ok()?.trim().parse().ok()
}

/// The processes in a v1 cgroup directory (not below it).
pub fn procs(dir: &Path) -> Vec<Pid> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.split_whitespace().filter_map(Pid::parse).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_memory_hierarchy_and_paths() {
        let mi = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                  34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n\
                  35 31 0:32 /outer /sys/fs/cgroup/memory\\040x rw,relatime - cgroup cgroup rw,memory\n\
                  41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let h = hierarchy(mi).unwrap();
        assert_eq!(h.mount, Path::new("/sys/fs/cgroup/memory x"));
        assert_eq!(h.dir_of("/outer/a").unwrap(), Path::new("/sys/fs/cgroup/memory x/a"));
        assert_eq!(hierarchy("41 31 0:38 / /u rw - cgroup2 cgroup2 rw\n"), None);
        let cg = "9:name=systemd:/\n4:memory:/process_api/x\n3:cpu,cpuacct:/\n0::/\n";
        assert_eq!(memory_path(cg).as_deref(), Some("/process_api/x"));
        assert_eq!(memory_path("5:cpu,memory:/a/b\n").as_deref(), Some("/a/b"));
        assert_eq!(memory_path("0::/\n"), None);
    }
}
