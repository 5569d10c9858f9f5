//! The fds above 2 of a process whose fds 0–2 look like a moved transport
//! (the MCP Python SDK 2.x's layout): the pipes up there, and which of them
//! lead to its own descendants rather than to a host ([`HighLink::kin`]).
//! Part of the second tier ([`super::details`]), in a room of its own: the
//! only part that reads other processes' fd tables.

use super::pid_dir::{read_at, readlink_at};
use super::process::{Details, FdKind, FdTarget, HighLink};
use super::procfs::ProcFs;
use crate::ids::Pid;

/// At most this many fds above 2 are looked at: an SDK makes its
/// duplicates first thing, so they are among the lowest.
const HIGH_FDS: usize = 64;

/// The pipes on fds 3 and up, with each one's access mode: what a moved
/// transport is made of (sockets up there never are one, and their
/// `fdinfo` is not read).
pub(super) fn high_links(dir: &rustix::fd::OwnedFd, buf: &mut Vec<u8>) -> Vec<HighLink> {
    use rustix::fs::{Mode, OFlags};
    let mut out = Vec::new();
    let Ok(fds) = rustix::fs::openat(dir, "fd", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
    else {
        return out;
    };
    let Ok(entries) = rustix::fs::Dir::new(fds) else { return out };
    let mut numbers: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().ok().and_then(|n| n.parse::<u32>().ok()))
        .filter(|&fd| fd > 2)
        .collect();
    numbers.sort_unstable();
    for fd in numbers.into_iter().take(HIGH_FDS) {
        let Some(target) = readlink_at(dir, &format!("fd/{fd}")).map(FdTarget) else { continue };
        if target.kind() != FdKind::Pipe {
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

/// The ends of the pipes in `wanted` on the fds of the process behind
/// `dir`, with each one's access mode (0 read, 1 write, 2 both or unknown).
/// Only those are asked their mode: an end of another pipe marks nothing.
/// `None` when its fd table cannot be read, or holds more than [`KIN_FDS`]
/// fds: an end it holds past them would be missed, and a missed end reads
/// as a host's.
fn pipe_ends(dir: &rustix::fd::OwnedFd, wanted: &[&str], buf: &mut Vec<u8>) -> Option<Vec<(String, u32)>> {
    use rustix::fs::{Mode, OFlags};
    let fds =
        rustix::fs::openat(dir, "fd", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    // Dir::new, not read_from: it reads through this fd instead of opening
    // the directory a second time.
    let entries = rustix::fs::Dir::new(fds).ok()?;
    let mut numbers = Vec::new();
    for e in entries {
        let fd = e.ok()?.file_name().to_str().ok().and_then(|n| n.parse::<u32>().ok());
        numbers.extend(fd);
        if numbers.len() > KIN_FDS {
            return None;
        }
    }
    let mut out = Vec::new();
    for fd in numbers {
        let Some(target) = readlink_at(dir, &format!("fd/{fd}")).filter(|t| wanted.contains(&t.as_str())) else {
            continue;
        };
        let access = read_at(dir, &format!("fdinfo/{fd}"), buf).ok().and_then(|()| {
            let text = String::from_utf8_lossy(buf);
            let flags = text.lines().find_map(|l| l.strip_prefix("flags:"))?;
            u32::from_str_radix(flags.trim(), 8).ok().map(|f| f & 3)
        });
        out.push((target, access.unwrap_or(2)));
    }
    Some(out)
}

/// The children of the process behind `dir` (`task/*/children`, every
/// thread's), read through that directory so that a pid reused since the
/// process was verified cannot stand in for it. `None` when this kernel has
/// no such lists; empty when the process is gone.
fn children_at(dir: &rustix::fd::OwnedFd, buf: &mut Vec<u8>) -> Option<Vec<Pid>> {
    use rustix::fs::{Mode, OFlags};
    let Ok(tasks) =
        rustix::fs::openat(dir, "task", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
    else {
        return Some(Vec::new());
    };
    let Ok(entries) = rustix::fs::Dir::new(tasks) else { return Some(Vec::new()) };
    let tids: Vec<u32> =
        entries.flatten().filter_map(|e| e.file_name().to_str().ok().and_then(|n| n.parse().ok())).collect();
    let mut out = Vec::new();
    let mut any_file = false;
    for tid in tids {
        if read_at(dir, &format!("task/{tid}/children"), buf).is_ok() {
            any_file = true;
            out.extend(String::from_utf8_lossy(buf).split_whitespace().filter_map(Pid::parse));
        }
    }
    any_file.then_some(out)
}

impl ProcFs {
    /// Marks the pipes above fd 2 of the process behind `dir` whose other
    /// end one of its descendants holds ([`HighLink::kin`]): the write end of
    /// a pipe it reads, the read end of one it writes. Descendants as the
    /// kernel lists them (`task/*/children`), read now, so that every reader
    /// of details agrees (the SDK candidate check reads details of its own)
    /// and the re-check before a reap, which reads details afresh, sees the
    /// tree as it is then. A child that inherited the same ends as its parent
    /// (a forked server's) does not count. Past [`MAX_KIN`] descendants, or
    /// where a descendant's fds or the children lists cannot be read, every
    /// pipe is marked: what cannot be ruled out keeps.
    ///
    /// The descendants are found first, by their children lists alone, and
    /// only then are their fd tables read, nearest first, until every pipe is
    /// kin: the same marks as reading both as each is met, but a process with
    /// more than [`MAX_KIN`] descendants (a bench's or a session's manager,
    /// a fork pool) costs the children lists that find more than 64 (one,
    /// for a manager with that many children), not 64 fd tables, and a host's
    /// pipes are found on its children before its grandchildren are read.
    pub(super) fn mark_kin(&self, dir: &rustix::fd::OwnedFd, d: &mut Details) {
        let all = |d: &mut Details| d.high_links.iter_mut().for_each(|h| h.kin = true);
        let mut buf = Vec::with_capacity(512);
        let Some(mut queue) = children_at(dir, &mut buf) else { return all(d) };
        // Breadth first; each kept open so that its fds are read from the
        // process whose children were listed, not from a reused pid. More
        // than MAX_KIN found is as many as will be (the queue only grows):
        // every pipe is marked at once, not after 64 children lists.
        let mut kids = Vec::new();
        while kids.len() < queue.len() {
            if queue.len() > MAX_KIN {
                return all(d);
            }
            let Some(kid) = self.open_pid_dir(queue[kids.len()]) else { return all(d) };
            let Some(grandchildren) = children_at(&kid, &mut buf) else { return all(d) };
            queue.extend(grandchildren);
            kids.push(kid);
        }
        for kid in &kids {
            let open: Vec<&str> = d
                .high_links
                .iter()
                .filter(|h| h.target.kind() == FdKind::Pipe && !h.kin)
                .map(|h| h.target.0.as_str())
                .collect();
            if open.is_empty() {
                return;
            }
            let Some(held) = pipe_ends(kid, &open, &mut buf) else { return all(d) };
            for h in d.high_links.iter_mut().filter(|h| h.target.kind() == FdKind::Pipe) {
                // Its other end: written by them when it reads, read when it writes.
                let other = |a: u32| match h.access {
                    Some(0) => a != 0,
                    Some(1) => a != 1,
                    _ => true,
                };
                h.kin |= held.iter().any(|(t, a)| *t == h.target.0 && other(*a));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::process::{Details, FdTarget, HighLink, Transport};
    use super::{KIN_FDS, MAX_KIN};

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

    /// Pipes `a` and `b` and `sh -c SCRIPT` reading `a` on its stdin and
    /// writing `b` on its stdout, with the other end of `a` on its fd 2 when
    /// `hand_over` (else nobody holds it). Once `settled` (by pids, the
    /// shell's and its descendants'), the shell's ends as [`HighLink`]s (3:
    /// `a` read, 4: `b` written), marked by [`ProcFs::mark_kin`].
    fn marked(script: &str, hand_over: bool, settled: &dyn Fn(&[u32]) -> bool) -> (Vec<HighLink>, std::process::Child) {
        use crate::scan::ProcFs;
        use std::os::fd::AsRawFd;
        use std::time::{Duration, Instant};
        let (ra, wa) = std::io::pipe().unwrap();
        let (rb, wb) = std::io::pipe().unwrap();
        let link = |fd: &dyn AsRawFd| std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        let (a, b) = (link(&ra), link(&wb));
        let stderr = if hand_over { wa.into() } else { std::process::Stdio::null() };
        let sh = std::process::Command::new("sh").args(["-c", script]).stdin(ra).stdout(wb).stderr(stderr).spawn();
        let sh = sh.unwrap();
        drop(rb);
        let procfs = ProcFs::new("/proc");
        let pid = crate::ids::Pid::new(sh.id().cast_signed()).unwrap();
        let dir = procfs.open_pid_dir(pid).unwrap();
        let tree = || {
            let mut all = vec![pid];
            let mut i = 0;
            while i < all.len() {
                all.extend(procfs.children(all[i]).unwrap_or_default());
                i += 1;
            }
            all.iter().map(|p| p.get().cast_unsigned()).collect::<Vec<u32>>()
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !settled(&tree()) {
            assert!(Instant::now() < deadline, "{script}: never settled: {:?}", tree());
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut d = Details {
            high_links: vec![high(3, &a.to_string_lossy(), 0), high(4, &b.to_string_lossy(), 1)],
            ..Details::default()
        };
        procfs.mark_kin(&dir, &mut d);
        (d.high_links, sh)
    }

    /// Whether every process but the first (the shell) runs `sleep`.
    fn sleeping(n: usize) -> impl Fn(&[u32]) -> bool {
        move |tree: &[u32]| {
            let sleeps = tree
                .iter()
                .skip(1)
                .filter(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\0")));
            sleeps.count() == n
        }
    }

    /// The shell and its descendants, ended (by pid: each is our own).
    fn end(mut sh: std::process::Child) {
        let procfs = crate::scan::ProcFs::new("/proc");
        let mut below = vec![crate::ids::Pid::new(sh.id().cast_signed()).unwrap()];
        let mut i = 0;
        while i < below.len() {
            below.extend(procfs.children(below[i]).unwrap_or_default());
            i += 1;
        }
        for p in below.into_iter().skip(1) {
            if let Some(p) = rustix::process::Pid::from_raw(p.get()) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            }
        }
        let _ = sh.kill();
        let _ = sh.wait();
    }

    fn kin(links: &[HighLink]) -> Vec<bool> {
        links.iter().map(|h| h.kin).collect()
    }

    #[test]
    fn only_a_descendant_holding_the_other_end_makes_a_pipe_kin() {
        // The child's stdout is the same write end as the shell's (a fork's
        // inherited ends); the other end of what the shell reads is held by
        // nobody (a host that died): no kin, the transport stands.
        let (links, sh) = marked("sleep 1000 & wait", false, &sleeping(1));
        end(sh);
        assert_eq!(kin(&links), [false, false], "{links:?}");
        // Its child holds the write end of the pipe it reads (on fd 2).
        let (links, sh) = marked("sleep 1000 & wait", true, &sleeping(1));
        end(sh);
        assert_eq!(kin(&links), [true, false], "{links:?}");
        // Only a grandchild does: its child closed its copy.
        let script = "sh -c 'sleep 1000 & exec 2>&-; wait' & wait";
        let grandchild_only = |tree: &[u32]| {
            tree.len() == 3
                && std::fs::read(format!("/proc/{}/cmdline", tree[2])).is_ok_and(|c| c.starts_with(b"sleep\0"))
                && std::fs::read_link(format!("/proc/{}/fd/2", tree[1])).is_err()
        };
        let (links, sh) = marked(script, true, &grandchild_only);
        end(sh);
        assert_eq!(kin(&links), [true, false], "{links:?}");
    }

    #[test]
    fn what_cannot_be_read_whole_is_kin() {
        // More descendants than are looked at: every pipe kin.
        let script = format!("for i in $(seq {}); do sleep 1000 & done; wait", MAX_KIN + 1);
        let (links, sh) = marked(&script, false, &sleeping(MAX_KIN + 1));
        end(sh);
        assert_eq!(kin(&links), [true, true], "{links:?}");
        // A child holding the other end only past the fds looked at: not
        // read in part, where that end would be missed and read as a host's.
        if !std::path::Path::new("/bin/bash").exists() {
            eprintln!("skipped the fd bound: no /bin/bash to open {KIN_FDS} fds");
            return;
        }
        let fds = format!("for i in $(seq 3 {KIN_FDS}); do eval \"exec $i</dev/null\"; done");
        let script = format!("/bin/bash -c '{fds}; exec {}>&2 2>/dev/null; exec sleep 1000' & wait", KIN_FDS + 10);
        let far = format!("/proc/self/fd/{}", KIN_FDS + 10);
        let far_end = move |tree: &[u32]| {
            tree.len() == 2
                && std::fs::read(format!("/proc/{}/cmdline", tree[1])).is_ok_and(|c| c.starts_with(b"sleep\0"))
                && std::fs::read_link(far.replace("self", &tree[1].to_string())).is_ok()
        };
        let (links, sh) = marked(&script, true, &far_end);
        end(sh);
        assert_eq!(kin(&links), [true, true], "{links:?}");
    }
}
