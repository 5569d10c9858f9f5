//! What a process has done so far, for `reaperctl generations` and the
//! daemon's samples of copies (issue 35): its proportional memory, CPU time
//! and I/O counters, the bytes waiting in its stdin pipe, and one variable
//! of its environment. All read through one `/proc/PID` directory fd whose start
//! time was checked (a reused pid reads as nothing), each read bounded: these
//! are a user's processes.

use rustix::fs::{FileType, Mode, OFlags};

use super::parse::{self, Rollup};
use super::pid_dir::{read_at, read_at_most};
use super::procfs::ProcFs;
use crate::ids::Identity;

/// `stat` and `io` are a few hundred bytes.
const SMALL_MAX: usize = 4096;

/// One process's counters; each `None` where its file could not be read.
#[derive(Clone, Copy, Debug, Default)]
pub struct Activity {
    /// PSS + `SwapPss` (`smaps_rollup`).
    pub rollup: Option<Rollup>,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: Option<u64>,
    /// `rchar` and `wchar` of `/proc/PID/io` (both, or neither).
    pub io: Option<(u64, u64)>,
}

impl ProcFs {
    /// The counters of `id`, or `None` when it is gone or its pid reused.
    pub fn activity(&self, id: Identity) -> Option<Activity> {
        let mut buf = Vec::with_capacity(SMALL_MAX);
        let (dir, mut a) = self.counters_at(id, &mut buf)?;
        a.rollup = read_at(&dir, "smaps_rollup", &mut buf).ok().and_then(|()| parse::parse_smaps_rollup(&buf));
        Some(a)
    }

    /// CPU time and I/O counters of `id` alone (no `smaps_rollup`, whose
    /// cost grows with the mappings).
    pub fn counters(&self, id: Identity) -> Option<Activity> {
        self.counters_at(id, &mut Vec::with_capacity(SMALL_MAX)).map(|(_, a)| a)
    }

    /// `stat` and `io` of `id` through its checked directory, which is
    /// returned for more reads.
    fn counters_at(&self, id: Identity, buf: &mut Vec<u8>) -> Option<(std::os::fd::OwnedFd, Activity)> {
        let dir = self.open_verified(id, buf)?;
        let cpu_ticks = cpu_ticks(buf);
        let io = match read_at_most(&dir, "io", buf, SMALL_MAX).map(|()| io_counters(buf)) {
            Ok((Some(r), Some(w))) => Some((r, w)),
            _ => None,
        };
        Some((dir, Activity { rollup: None, cpu_ticks, io }))
    }

    /// Bytes written to the stdin of `id` (a pipe or a stream socket) and
    /// not read yet: a request its host sent that it has not taken. `None`
    /// when stdin is neither, or could not be asked.
    ///
    /// A pipe is opened through `/proc/PID/fd/0` (read side, non-blocking)
    /// only once the link says it is a pipe, and asked only if the file
    /// opened is that pipe: never a terminal or a device, which an open
    /// could disturb. A socket cannot be opened so: a duplicate of fd 0 is
    /// taken through a pidfd checked against the start time (as
    /// [`super::sockpoll`] does), asked (`SIOCINQ`) and closed; never read.
    pub fn stdin_waiting(&self, id: Identity) -> Option<u64> {
        let mut buf = Vec::new();
        let dir = self.open_verified(id, &mut buf)?;
        let link = rustix::fs::readlinkat(&dir, "fd/0", Vec::new()).ok()?;
        let inode = |prefix: &[u8]| -> Option<u64> {
            let n = link.to_bytes().strip_prefix(prefix)?.strip_suffix(b"]")?;
            std::str::from_utf8(n).ok()?.parse().ok()
        };
        if let Some(ino) = inode(b"pipe:[") {
            let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
            let pipe = rustix::fs::openat(&dir, "fd/0", flags, Mode::empty()).ok()?;
            return queued(&pipe, FileType::Fifo, ino);
        }
        let ino = inode(b"socket:[")?;
        let pidfd = crate::sys::pidfd_open(id.pid).ok()?;
        // The pidfd names one process for good; the start time proves it
        // is the one judged (the pid was not recycled before the open).
        if self.stat(id.pid).is_none_or(|st| st.start_time != id.start_time.0) {
            return None;
        }
        let fd = rustix::process::pidfd_getfd(&pidfd, 0, rustix::process::PidfdGetfdFlags::empty()).ok()?;
        queued(&fd, FileType::Socket, ino)
    }

    /// At most the first `max` bytes of the environment of `id`.
    pub fn environ(&self, id: Identity, max: usize) -> Option<Vec<u8>> {
        let mut buf = Vec::new();
        let dir = self.open_verified(id, &mut buf)?;
        read_at_most(&dir, "environ", &mut buf, max).ok()?;
        buf.truncate(max);
        Some(buf)
    }
}

/// What a tree's members added up to at one look: two looks that differ
/// in anything mean the tree did something in between (the daemon's
/// samples, `reaperctl generations --end`'s two looks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeCounters {
    pub cpu_ticks: u64,
    pub rchar: u64,
    pub wchar: u64,
    /// Members gone or with a counter unreadable: a change in this is a
    /// change too (a member came or went).
    pub unreadable: usize,
}

impl TreeCounters {
    /// Adds one member's look (`None`: it could not be read).
    pub fn add(&mut self, a: Option<&Activity>) {
        let Some(a) = a else {
            self.unreadable += 1;
            return;
        };
        self.cpu_ticks += a.cpu_ticks.unwrap_or(0);
        let (r, w) = a.io.unwrap_or_default();
        self.rchar += r;
        self.wchar += w;
        self.unreadable += usize::from(a.io.is_none() || a.cpu_ticks.is_none());
    }
}

/// Bytes unread in `fd` (`FIONREAD`, `SIOCINQ` for a socket), if it is
/// the `kind` of file with inode `ino` that the link named.
fn queued(fd: &std::os::fd::OwnedFd, kind: FileType, ino: u64) -> Option<u64> {
    let st = rustix::fs::fstat(fd).ok()?;
    (FileType::from_raw_mode(st.st_mode) == kind && st.st_ino == ino).then(|| rustix::io::ioctl_fionread(fd).ok())?
}

/// utime + stime (fields 14 and 15 of `stat`), counted after the last `)`:
/// comm may hold anything, `)` and spaces included.
fn cpu_ticks(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut f = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// `rchar` and `wchar` of `/proc/PID/io`.
fn io_counters(io: &[u8]) -> (Option<u64>, Option<u64>) {
    let text = String::from_utf8_lossy(io);
    let field =
        |name: &str| text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse::<u64>().ok());
    (field("rchar"), field("wchar"))
}

#[cfg(test)]
mod tests {
    use super::{cpu_ticks, io_counters};

    #[test]
    fn cpu_time_is_counted_past_a_hostile_comm() {
        let stat = b"42 (a) S 1 2 3 (b) S 1 42 42 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 1 0 900 1000 10\n";
        assert_eq!(cpu_ticks(stat), Some(12));
        assert_eq!(cpu_ticks(b"42 (x"), None);
    }

    #[test]
    fn bytes_a_child_has_not_read_from_its_stdin_pipe_are_counted() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let mut child = Command::new("sleep").arg("60").stdin(Stdio::piped()).spawn().unwrap();
        let procfs = super::ProcFs::new("/proc");
        let pid = crate::ids::Pid::new(i32::try_from(child.id()).unwrap()).unwrap();
        let id = procfs.process(pid).unwrap().id;
        assert_eq!(procfs.stdin_waiting(id), Some(0));
        child.stdin.as_mut().unwrap().write_all(b"{\"id\":1}\n").unwrap();
        assert_eq!(procfs.stdin_waiting(id), Some(9));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(procfs.stdin_waiting(id), None, "gone");
        let mut tty_less = Command::new("sleep").arg("60").stdin(Stdio::null()).spawn().unwrap();
        let pid = crate::ids::Pid::new(i32::try_from(tty_less.id()).unwrap()).unwrap();
        assert_eq!(procfs.stdin_waiting(procfs.process(pid).unwrap().id), None, "no pipe");
        let _ = tty_less.kill();
        let _ = tty_less.wait();
    }

    #[test]
    fn bytes_a_child_has_not_read_from_its_stdin_socket_are_counted() {
        use std::io::Write;
        use std::os::fd::OwnedFd;
        use std::process::{Command, Stdio};
        let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut child = Command::new("sleep").arg("60").stdin(Stdio::from(OwnedFd::from(theirs))).spawn().unwrap();
        let procfs = super::ProcFs::new("/proc");
        let pid = crate::ids::Pid::new(i32::try_from(child.id()).unwrap()).unwrap();
        let id = procfs.process(pid).unwrap().id;
        assert_eq!(procfs.stdin_waiting(id), Some(0));
        ours.write_all(b"{\"id\":2}\n").unwrap();
        assert_eq!(procfs.stdin_waiting(id), Some(9));
        assert_eq!(procfs.stdin_waiting(id), Some(9), "asking takes nothing from the server");
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn io_counters_by_name() {
        let io = b"rchar: 1234\nwchar: 56\nsyscr: 3\nsyscw: 2\nread_bytes: 0\n";
        assert_eq!(io_counters(io), (Some(1234), Some(56)));
        assert_eq!(io_counters(b"xrchar: 1\n"), (None, None));
    }
}
