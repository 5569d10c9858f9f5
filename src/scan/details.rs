//! The second tier: [`Details`] of the processes a decision is about, and the
//! systemd unit from their cgroup (whether they are its main process).

use std::path::PathBuf;

use super::parse;
use super::process::{Details, FdKind, FdTarget, HighLink, Snapshot, Unit};
use super::procfs::{ProcFs, ReadFail, parse_ns_inode, read_at, readlink_at};
use crate::ids::{Identity, Pid, Uid};

/// At most this many fds above 2 are looked at: an SDK makes its
/// duplicates first thing, so they are among the lowest.
const HIGH_FDS: usize = 64;

/// The pipes and sockets on fds 3 and up, with each one's access mode.
fn high_links(dir: &rustix::fd::OwnedFd, buf: &mut Vec<u8>) -> Vec<HighLink> {
    use rustix::fs::{Mode, OFlags};
    let mut out = Vec::new();
    let Ok(fds) = rustix::fs::openat(dir, "fd", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
    else {
        return out;
    };
    let Ok(entries) = rustix::fs::Dir::read_from(&fds) else { return out };
    let mut numbers: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().ok().and_then(|n| n.parse::<u32>().ok()))
        .filter(|&fd| fd > 2)
        .collect();
    numbers.sort_unstable();
    for fd in numbers.into_iter().take(HIGH_FDS) {
        let Some(target) = readlink_at(dir, &format!("fd/{fd}")).map(FdTarget) else { continue };
        if !target.kind().is_link() {
            continue;
        }
        let access = read_at(dir, &format!("fdinfo/{fd}"), buf).ok().and_then(|()| {
            let text = String::from_utf8_lossy(buf);
            let flags = text.lines().find_map(|l| l.strip_prefix("flags:"))?;
            u32::from_str_radix(flags.trim(), 8).ok().map(|f| f & 3)
        });
        out.push(HighLink { fd, target, access, kin: false });
    }
    out
}

/// Descendants of a process looked at for the other ends of its pipes, at most.
const MAX_KIN: usize = 64;

/// Fds of a descendant looked at, at most.
const KIN_FDS: usize = 256;

/// The pipes on the fds of the process behind `dir`, with each one's access
/// mode (0 read, 1 write, 2 both); `None` when its fd table cannot be read.
fn pipe_ends(dir: &rustix::fd::OwnedFd, buf: &mut Vec<u8>) -> Option<Vec<(String, u32)>> {
    use rustix::fs::{Mode, OFlags};
    let fds =
        rustix::fs::openat(dir, "fd", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let entries = rustix::fs::Dir::read_from(&fds).ok()?;
    let mut out = Vec::new();
    for e in entries.flatten().take(KIN_FDS + 2) {
        let Some(fd) = e.file_name().to_str().ok().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Some(target) = readlink_at(dir, &format!("fd/{fd}")).filter(|t| t.starts_with("pipe:[")) else { continue };
        let access = read_at(dir, &format!("fdinfo/{fd}"), buf).ok().and_then(|()| {
            let text = String::from_utf8_lossy(buf);
            let flags = text.lines().find_map(|l| l.strip_prefix("flags:"))?;
            u32::from_str_radix(flags.trim(), 8).ok().map(|f| f & 3)
        });
        out.push((target, access.unwrap_or(2)));
    }
    Some(out)
}

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
        if d.fd_kind(0) == FdKind::Null {
            d.high_links = high_links(&dir, &mut buf);
            if d.transport_fds().is_some_and(|t| t.input > 2) {
                self.mark_kin(id.pid, &mut d);
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

    /// Marks the pipes above fd 2 of `pid` whose other end one of its
    /// descendants (as the kernel lists its children: `task/*/children`,
    /// so that every reader of details agrees) holds ([`HighLink::kin`]):
    /// the read end of a pipe it
    /// writes, the write end of one it reads. A child that inherited the
    /// same ends as its parent (a forked server's) does not count. Past
    /// [`MAX_KIN`] descendants, or where a descendant's fds cannot be read,
    /// every pipe is marked: what cannot be ruled out keeps.
    fn mark_kin(&self, pid: Pid, d: &mut Details) {
        let Some(mut queue) = self.children(pid) else {
            d.high_links.iter_mut().for_each(|h| h.kin = true);
            return;
        };
        let mut seen = 0;
        let mut buf = Vec::with_capacity(512);
        while let Some(k) = queue.pop() {
            seen += 1;
            let held =
                (seen <= MAX_KIN).then(|| self.open_pid_dir(k)).flatten().and_then(|dir| pipe_ends(&dir, &mut buf));
            let Some(held) = held else {
                d.high_links.iter_mut().for_each(|h| h.kin = true);
                return;
            };
            for h in d.high_links.iter_mut().filter(|h| h.target.kind() == FdKind::Pipe) {
                // Its other end: written by them when it reads, read when it writes.
                let other = |a: u32| match h.access {
                    Some(0) => a != 0,
                    Some(1) => a != 1,
                    _ => true,
                };
                h.kin |= held.iter().any(|(t, a)| *t == h.target.0 && other(*a));
            }
            queue.extend(self.children(k).into_iter().flatten());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::process::{Details, FdTarget, HighLink, Transport};

    fn t(s: &str) -> FdTarget {
        FdTarget(s.to_string())
    }

    fn high(fd: u32, target: &str, access: u32) -> HighLink {
        HighLink { fd, target: FdTarget(target.to_string()), access: Some(access), kin: false }
    }

    #[test]
    fn the_transport_is_on_fds_0_and_1_or_where_the_sdk_keeps_it() {
        let classic =
            Details { fds: [Some(t("pipe:[1]")), Some(t("socket:[2]")), Some(t("/dev/pts/0"))], ..Details::default() };
        assert_eq!(classic.transport_fds(), Some(Transport { input: 0, output: 1 }));
        // MCP Python SDK 2.x: stdin on /dev/null, stdout onto stderr, the
        // host's pipes duplicated to 3 (read) and 4 (write).
        let v2 = Details {
            fds: [Some(t("/dev/null")), Some(t("pipe:[9]")), Some(t("pipe:[9]"))],
            high_links: vec![high(3, "pipe:[7]", 0), high(4, "pipe:[8]", 1), high(6, "socket:[5]", 2)],
            ..Details::default()
        };
        assert_eq!(v2.transport_fds(), Some(Transport { input: 3, output: 4 }));
        // A batch job started </dev/null, its stdout apart from its stderr.
        let batch = Details { fds: [Some(t("/dev/null")), Some(t("/tmp/out.log")), Some(t("pipe:[9]"))], ..v2.clone() };
        assert_eq!(batch.transport_fds(), None);
        // An asyncio program: only its self-pipe socketpair above 2.
        let quiet = Details { high_links: vec![high(3, "socket:[5]", 2), high(4, "socket:[6]", 2)], ..v2.clone() };
        assert_eq!(quiet.transport_fds(), None);
        // A daemon (tmux, an event loop) on /dev/null with a self-pipe: both
        // ends of one pipe are its own, and /dev/null is on all three fds.
        let null = Some(t("/dev/null"));
        let selfpipe = vec![high(3, "pipe:[7]", 0), high(4, "pipe:[7]", 1)];
        let daemon =
            Details { fds: [null.clone(), null.clone(), null.clone()], high_links: selfpipe.clone(), ..v2.clone() };
        assert_eq!(daemon.transport_fds(), None);
        let logged = Details { high_links: selfpipe, ..v2.clone() };
        assert_eq!(logged.transport_fds(), None, "a self-pipe, even with stdout onto a logged stderr");
        let dev_null_stderr = Details { fds: [null.clone(), null.clone(), null], ..v2 };
        assert_eq!(dev_null_stderr.transport_fds(), None);
        assert_eq!(Details::default().transport_fds(), None);
    }

    #[test]
    fn pipes_to_its_own_children_are_no_transport() {
        // `nohup python pipeline.py &`: the same layout, but its pipes lead
        // to its worker pool and subprocesses (issue 32).
        let null = Some(t("/dev/null"));
        let log = Some(t("/home/u/pipeline.log"));
        let mut kin = vec![high(3, "pipe:[7]", 0), high(4, "pipe:[8]", 1)];
        for h in &mut kin {
            h.kin = true;
        }
        let pipeline = Details { fds: [null, log.clone(), log], high_links: kin.clone(), ..Details::default() };
        assert_eq!(pipeline.transport_fds(), None);
        // One pair to its children, one from a host that died: that one.
        let mut both = kin;
        both.extend([high(5, "pipe:[9]", 0), high(6, "pipe:[10]", 1)]);
        let mixed = Details { high_links: both, ..pipeline };
        assert_eq!(mixed.transport_fds(), Some(Transport { input: 5, output: 6 }));
    }

    #[test]
    fn a_real_childs_end_of_a_pipe_is_seen_as_kin() {
        use crate::scan::ProcFs;
        // This test process writes to a child's stdin and reads its stdout.
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let procfs = ProcFs::new("/proc");
        let me = crate::ids::Pid::new(std::process::id().cast_signed()).unwrap();
        let kid = crate::ids::Pid::new(child.id().cast_signed()).unwrap();
        let fd_of = |f: &dyn std::os::fd::AsRawFd| f.as_raw_fd().cast_unsigned();
        let (w, r) = (fd_of(child.stdin.as_ref().unwrap()), fd_of(child.stdout.as_ref().unwrap()));
        let link = |fd: u32| t(&std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap().to_string_lossy());
        let mut d = Details { high_links: vec![high(r, &link(r).0, 0), high(w, &link(w).0, 1)], ..Details::default() };
        let _ = kid;
        procfs.mark_kin(me, &mut d);
        let _ = child.kill();
        let _ = child.wait();
        assert!(d.high_links.iter().all(|h| h.kin), "{:?}", d.high_links);
    }
}
