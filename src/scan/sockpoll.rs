//! The peer of a process's stdin socket, seen through a duplicate of the
//! process's fd 0: the source for when the kernel's socket diagnostics
//! ([`super::sockdiag`]) cannot answer (the shipped system unit has a private
//! network namespace and no `AF_NETLINK`; diagnostics see only the asking
//! socket's namespace).
//!
//! How: a pidfd of the process, checked against its start time (a recycled
//! pid is never touched); `pidfd_getfd` of fd 0; `fstat` proves it is the
//! socket `/proc/PID/fd/0` named; it must be a connected stream (an
//! unconnected one also polls `POLLHUP`); one `poll` with a zero timeout
//! (no wait-queue entry is left behind); closed at once. Never read from,
//! never written to: pending data stays for the server (tested).
//! Semantics checked on Linux 6.18 (a unix stream socket, dup polled for
//! `POLLIN|POLLRDHUP`): peer alive → nothing; data pending → `POLLIN` only,
//! still readable by the server afterwards; peer did `shutdown(SHUT_WR)` →
//! `POLLIN|POLLRDHUP`; peer closed → `POLLIN|POLLHUP|POLLRDHUP`.
//!
//! Needs ptrace "attach" access to the process (`CAP_SYS_PTRACE`, or the
//! same user where the ptrace policy allows it); without it the answer is
//! "unknown". Cost: 9 system calls (23 µs of CPU in a debug build, against
//! 6–11 µs for a diagnostics query), only for candidates whose stdin is a
//! socket the diagnostics did not resolve. If the server closes its fd 0
//! between the duplicate and our close, the last close is ours: the socket
//! is then released a few microseconds later than by the server itself.

use rustix::event::{PollFd, PollFlags};
use rustix::fs::FileType;
use rustix::io::Errno;
use rustix::net::SocketType;
use rustix::process::PidfdGetfdFlags;

use super::procfs::ProcFs;
use crate::ids::Identity;
use crate::sys;

/// What the poll of the duplicate said about the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// Still connected and sending is possible.
    Connected,
    /// Shut down its sending side (`POLLRDHUP`).
    ShutDown,
    /// Closed (`POLLHUP`).
    Closed,
}

/// The peer of the stdin socket (inode `ino`) of process `id`, or why it
/// could not be told.
pub fn stdin_peer(procfs: &ProcFs, id: Identity, ino: u64) -> Result<Peer, &'static str> {
    // A pidfd names one process for good; the start time proves it is the
    // one that was scanned (the pid was not recycled before the open).
    let pidfd = sys::pidfd_open(id.pid).map_err(|_| "its process could not be opened (pidfd)")?;
    match procfs.stat(id.pid) {
        Some(st) if st.start_time == id.start_time.0 && !matches!(st.state, b'Z' | b'X') => {}
        _ => return Err("its process ended or is another one now"),
    }
    let fd = rustix::process::pidfd_getfd(&pidfd, 0, PidfdGetfdFlags::empty()).map_err(|e| match e {
        Errno::PERM | Errno::ACCESS => {
            "duplicating its fd 0 was not permitted (needs ptrace access: CAP_SYS_PTRACE, \
             or the same user where the ptrace policy allows it)"
        }
        Errno::NOSYS => "pidfd_getfd is not available (Linux < 5.6, or a system call filter)",
        _ => "its fd 0 could not be duplicated",
    })?;
    drop(pidfd);
    let st = rustix::fs::fstat(&fd).map_err(|_| "the duplicate of its fd 0 could not be examined")?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Socket || st.st_ino != ino {
        return Err("its stdin changed while it was looked at");
    }
    if !matches!(rustix::net::sockopt::socket_type(&fd), Ok(SocketType::STREAM | SocketType::SEQPACKET)) {
        return Err("its stdin is a socket that is not a stream");
    }
    // Stays connected after the peer closed; fails for a socket never connected.
    if rustix::net::getpeername(&fd).is_err() {
        return Err("its stdin is a socket that is not connected");
    }
    let mut fds = [PollFd::new(&fd, PollFlags::IN | PollFlags::RDHUP)];
    let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
    rustix::event::poll(&mut fds, Some(&zero)).map_err(|_| "polling the duplicate of its fd 0 failed")?;
    let ev = fds[0].revents();
    drop(fd);
    Ok(if ev.contains(PollFlags::HUP) {
        Peer::Closed
    } else if ev.contains(PollFlags::RDHUP) {
        Peer::ShutDown
    } else {
        Peer::Connected
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Pid, StartTime};
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::net::UnixStream;
    use std::process::{Child, Command, Stdio};

    /// A child whose stdin is `server`; once `go` exists it reads one byte
    /// from stdin and prints it.
    fn server_on(server: UnixStream, go: &std::path::Path) -> Child {
        let script = "while [ ! -e \"$GO\" ]; do sleep 0.02; done; head -c 1";
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]).env("GO", go).stdin(Stdio::from(std::os::fd::OwnedFd::from(server)));
        cmd.stdout(Stdio::piped());
        sys::kill_with_parent(&mut cmd);
        cmd.spawn().unwrap()
    }

    fn identity(child: &Child) -> Identity {
        let pid = Pid::new(child.id().cast_signed()).unwrap();
        let st = ProcFs::default().stat(pid).unwrap();
        Identity { pid, start_time: StartTime(st.start_time) }
    }

    fn ino(s: &UnixStream) -> u64 {
        std::fs::metadata(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(s))).unwrap().ino()
    }

    /// `None` (skip printed) where `pidfd_getfd` is not allowed here.
    fn peer(id: Identity, ino: u64) -> Option<Result<Peer, &'static str>> {
        let r = stdin_peer(&ProcFs::default(), id, ino);
        if let Err(why) = r
            && (why.contains("not permitted") || why.contains("not available"))
        {
            eprintln!("SKIPPED: {why}");
            return None;
        }
        Some(r)
    }

    #[test]
    fn polls_the_peer_state_without_taking_pending_data() {
        let dir = tempfile::tempdir().unwrap();
        let go = dir.path().join("go");
        let (server, mut host) = UnixStream::pair().unwrap();
        let ino = ino(&server);
        let mut child = server_on(server, &go);
        let id = identity(&child);
        let Some(alive) = peer(id, ino) else {
            child.kill().unwrap();
            child.wait().unwrap();
            return;
        };
        assert_eq!(alive, Ok(Peer::Connected));
        host.write_all(b"x").unwrap();
        assert_eq!(peer(id, ino).unwrap(), Ok(Peer::Connected), "pending data is no hang-up");
        // A recycled pid (other start time) is never touched.
        let other = Identity { pid: id.pid, start_time: StartTime(id.start_time.0 + 1) };
        assert!(stdin_peer(&ProcFs::default(), other, ino).is_err());
        // A wrong inode (its stdin is another socket now) decides nothing.
        assert!(stdin_peer(&ProcFs::default(), id, ino + 1).is_err());
        host.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(peer(id, ino).unwrap(), Ok(Peer::ShutDown));
        drop(host);
        assert_eq!(peer(id, ino).unwrap(), Ok(Peer::Closed));
        std::fs::write(&go, b"").unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.stdout, b"x", "the server still reads the byte written before the checks");
    }
}
