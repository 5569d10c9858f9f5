//! The second tier: [`Details`] of the processes a decision is about, and the
//! systemd unit from their cgroup (whether they are its main process). The
//! fds above 2, read only for a layout like a moved transport's, are
//! `high_fds.rs`'s.

use std::path::PathBuf;

use super::parse;
use super::pid_dir::{ReadFail, read_at, readlink_at};
use super::process::{Details, FdTarget, Snapshot, Unit};
use super::procfs::{ProcFs, parse_ns_inode};
use crate::ids::{Identity, Pid, Uid};

impl ProcFs {
    /// Reads [`Details`] for one process, checking through the same directory fd
    /// that it is still the process we scanned. `None` if it is gone or reused.
    pub fn details(&self, id: Identity) -> Option<Details> {
        self.details_known(id, &|_| None)
    }

    /// [`ProcFs::details`], with the start times a read of the table gave
    /// (`known`): see [`ProcFs::cgroup_oldest`].
    fn details_known(&self, id: Identity, known: &dyn Fn(Pid) -> Option<u64>) -> Option<Details> {
        let mut buf = Vec::with_capacity(2048);
        let dir = self.open_verified(id, &mut buf)?;
        let mut d = Details::default();
        match read_at(&dir, "status", &mut buf) {
            Ok(()) => {
                let s = parse::parse_status(&buf);
                d.uid = s.real_uid.map(Uid);
                d.swap_bytes = s.vm_swap_bytes;
                d.nspid_depth = s.nspid_depth;
                d.nspid_inner = s.nspid_inner;
            }
            Err(ReadFail::Gone) => return None,
            Err(ReadFail::Denied) => {}
        }
        d.exe = readlink_at(&dir, "exe");
        d.pidns = readlink_at(&dir, "ns/pid").and_then(|s| parse_ns_inode(&s));
        for (i, slot) in d.fds.iter_mut().enumerate() {
            *slot = readlink_at(&dir, ["fd/0", "fd/1", "fd/2"][i]).map(FdTarget);
        }
        // Only a process whose fds 0–2 are laid out as an SDK that moved
        // its transport can have one above fd 2 (a daemon on `/dev/null`
        // throughout, a desktop app logging apart): the others' fd tables
        // are not read.
        if d.stdio_as_moved() {
            d.high_links = super::high_fds::high_links(&dir, &mut buf);
            if d.transport_fds().is_some_and(|t| t.input > 2) {
                self.mark_kin(&dir, &mut d);
            }
        }
        if read_at(&dir, "cgroup", &mut buf).is_ok() {
            let text = String::from_utf8_lossy(&buf);
            d.container = parse::container_ref(&text).map(|(engine, cid)| {
                let pod_uid = parse::pod_of(&text);
                let pod = pod_uid.as_deref().and_then(|uid| self.runtimes.pod(cid, uid));
                super::process::CgroupContainer { name: format!("{engine} {}", &cid[..12]), pod_uid, pod }
            });
            d.run_session = crate::session::cgroup::v2_path(&text).and_then(|p| crate::session::session_of_cgroup(&p));
            if let Some((v2, path, name)) = parse::cgroup_unit(&text) {
                let main = self.cgroup_oldest(v2, &path, id, known);
                d.unit = Some(Unit { name, main });
            }
        }
        Some(d)
    }

    /// Whether `id` is the oldest process of the cgroup at `path` (as
    /// `/proc/PID/cgroup` names it), i.e. the unit's main process: a service
    /// manager starts the main process first; processes a crashed host left
    /// in a service's cgroup are younger than the service's own process.
    ///
    /// A pid whose start time in the table read (`known`) is not before
    /// `id`'s is passed over unread: the process now at that pid is that one
    /// or, the pid reused, a younger one. Only the others are read: a
    /// session scope holding thousands of processes cost a `stat` read of
    /// each for every member whose details were loaded.
    fn cgroup_oldest(&self, v2: bool, path: &str, id: Identity, known: &dyn Fn(Pid) -> Option<u64>) -> Option<bool> {
        let dir = self.cgroup_dir(v2, path)?;
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
        let mut buf = Vec::with_capacity(512);
        let younger = |p: Pid| known(p).is_some_and(|st| st >= id.start_time.0);
        for pid in procs.split_whitespace().filter_map(Pid::parse).filter(|&p| p != id.pid && !younger(p)) {
            let Some(dirfd) = self.open_pid_dir(pid) else { continue };
            if read_at(&dirfd, "stat", &mut buf).is_err() {
                continue;
            }
            if parse::parse_stat(&buf).is_ok_and(|st| st.start_time < id.start_time.0) {
                return Some(false);
            }
        }
        Some(true)
    }

    /// The directory of a cgroup path, from this `/proc`'s view of its own
    /// mounts (the unified hierarchy, else systemd's v1 `name=systemd` one).
    fn cgroup_dir(&self, v2: bool, path: &str) -> Option<PathBuf> {
        let mounts = self.cgroup_mounts.get_or_init(|| {
            let text = std::fs::read_to_string(self.root.join("self/mountinfo")).unwrap_or_default();
            parse::cgroup_mounts(&text)
        });
        mounts.iter().filter(|m| m.0 == v2).find_map(|(_, root, point)| {
            let rest = if root == "/" { Some(path) } else { path.strip_prefix(root.as_str()) }?;
            let dir = PathBuf::from(format!("{point}/{}", rest.trim_start_matches('/')));
            dir.is_dir().then_some(dir)
        })
    }

    /// Fills in [`Details`] for the given pids (those not loaded yet).
    pub fn load_details(&self, snap: &mut Snapshot, pids: impl IntoIterator<Item = Pid>) {
        let known = |q: Pid| snap.get(q).map(|p| p.id.start_time.0);
        let tick = self.now_tick();
        let mut loaded = Vec::new();
        for pid in pids {
            let Some(p) = snap.get(pid) else { continue };
            if p.details.is_some() || p.kernel_thread {
                continue;
            }
            // A process that vanished or was replaced keeps an empty Details:
            // every fact unknown, which the policy treats as "don't touch".
            let mut d =
                self.details_known(p.id, &known).map_or_else(Details::default, |d| Details { read_tick: tick, ..d });
            if crate::session::is_run_wrapper(&p.cmdline) {
                d.run_host = crate::session::host_of_wrapper(self.root(), pid);
            }
            loaded.push((pid, d));
        }
        for (pid, d) in loaded {
            if let Some(p) = snap.get_mut(pid) {
                p.details = Some(Box::new(d));
            }
        }
    }
}
