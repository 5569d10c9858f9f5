//! The far end of a process's stdin: can anyone still write to it?
//!
//! "Stdin" is the fd the process reads its protocol from: fd 0, or the
//! pipe above fd 2 the Python SDK 2.x moves it to while serving
//! ([`super::Details::transport_fds`]).
//!
//! - **Pipe**: `/proc/PID/fd/N` is opened read-only and non-blocking (a new
//!   read end of the same pipe; checked with `fstat` to be that pipe), polled
//!   once with a zero timeout and closed. The kernel reports `POLLHUP` on a
//!   pipe's read end exactly when no write end is open anywhere. Nothing is
//!   ever read from it, so no data is taken from the server; an extra reader
//!   changes nothing for the writers or the server (no wake-up: the pipe's
//!   reader count never drops to zero while the server holds its own). It is
//!   opened only when the link reads `pipe:[N]` (never a FIFO path, a
//!   terminal or a device).
//! - **Unix socket**: the kernel's socket diagnostics ([`super::sockdiag`])
//!   give the peer's inode and the socket's shutdown state: a peer that
//!   closed leaves inode 0 and `RCV_SHUTDOWN`; one that shut down writing,
//!   `RCV_SHUTDOWN`. When they cannot answer (no `AF_NETLINK`, or the socket
//!   lives in another network namespace), one poll of a duplicate of the
//!   process's fd 0 ([`super::sockpoll`]) tells whether the peer closed or
//!   shut down, but not who the peer is (no holder is looked for then).
//!   Reasons name the source used.
//!
//! When someone can still write, who? The expected holder (a server's host)
//! is looked for first, then the other candidates given (the host's tree).
//! Finding a holder reads a process's fd table once; the fd found is kept as
//! a hint, so later ticks check that one fd (a `readlink` and its `fdinfo`)
//! instead of the whole table. A search that found no holder among the
//! candidates (it is outside the host's tree) is not repeated for 5 minutes:
//! meanwhile only the expected holder's table is read. Measured: 12.6 µs of
//! CPU per stdin looked at (pipe or socket, holder from the hint); a host
//! with 20 live servers adds 0.27 ms to a 4 ms scan.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::fs::{FileType, Mode, OFlags};

use super::pid_dir::{read_at, readlink_at};
use super::process::{Holder, Snapshot, StdinEnd};
use super::procfs::ProcFs;
use super::sockdiag;
use super::sockpoll::{self, Peer};
use crate::ids::{Identity, Pid};

/// One stdin to look at, by index into the snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// Whose stdin.
    pub proc: usize,
    /// Who should hold its far end (a server's host), if anyone.
    pub expected: Option<usize>,
    /// Where else to look for a holder when the expected one holds none.
    pub search: Vec<usize>,
    /// Whether to read, too, if it listens on a socket (a host a `stale`
    /// rule weighs: see `scan/listen.rs`).
    pub channels: bool,
}

/// Last holder found per link (`pipe:[N]`, `socket:[N]`): its identity and
/// fd; and when a search of the candidates found no holder at all (the far
/// end is held outside the host's tree), so that the next ticks look at the
/// expected holder only, not at every candidate's fd table again.
#[derive(Debug, Default)]
pub struct Hints {
    held: Mutex<HashMap<String, (Identity, i32)>>,
    /// When a search found no holder, and for which expected holder.
    vain: Mutex<HashMap<String, (Instant, Identity)>>,
}

impl Hints {
    /// Forgets what concerns dead holders (their pipes and sockets are
    /// gone) and vain searches past [`VAIN_FOR`]: under churn the maps hold
    /// the live trees' links, not thousands of dead ones (issue 24: RSS
    /// grew by their [`MAX_HINTS`] worth before a clear, at every clear).
    pub fn prune(&self, live: impl Fn(Identity) -> bool) {
        if let Ok(mut h) = self.held.lock() {
            h.retain(|_, (id, _)| live(*id));
            let keep = h.len() * 2;
            h.shrink_to(keep);
        }
        if let Ok(mut v) = self.vain.lock() {
            v.retain(|_, (t, id)| t.elapsed() < VAIN_FOR && live(*id));
            let keep = v.len() * 2;
            v.shrink_to(keep);
        }
    }
}

/// How long a search that found no holder stands before the next full one.
const VAIN_FOR: Duration = Duration::from_secs(300);

/// Hints kept at most; past that the map starts over (hosts come and go).
const MAX_HINTS: usize = 4096;

fn inode_of(target: &str, kind: &str) -> Option<u64> {
    target.strip_prefix(kind)?.strip_prefix(":[")?.strip_suffix(']')?.parse().ok()
}

/// What one [`ProcFs::load_stdin`] call opens once and reuses: `/proc/PID`
/// directories of possible holders (a host is asked about for each of its
/// servers), and the socket-diagnostics socket.
#[derive(Default)]
struct Look {
    dirs: HashMap<Identity, Option<OwnedFd>>,
    /// Opened on first use (`Err`: not available here).
    diag: Option<std::io::Result<OwnedFd>>,
    buf: Vec<u8>,
}

impl ProcFs {
    /// Forgets the link hints of processes not in `snap` ([`Hints::prune`]).
    pub fn prune_link_hints(&self, snap: &Snapshot) {
        self.hints.prune(|id| snap.get(id.pid).is_some_and(|p| p.id == id));
    }

    /// Answers each question into the process's [`Details::stdin`](super::Details)
    /// (processes without details, or whose stdin is no link, are skipped).
    pub fn load_stdin(&self, snap: &mut Snapshot, questions: &[Question]) {
        let mut look = Look::default();
        for q in questions {
            if q.channels {
                let listening = self.listening(snap.procs[q.proc].id);
                if let Some(d) = snap.procs[q.proc].details.as_mut() {
                    d.listening = Some(listening);
                }
            }
            let p = &snap.procs[q.proc];
            if p.details.as_ref().is_some_and(|d| d.stdin.is_some()) {
                continue;
            }
            let Some((fd, target)) =
                p.details.as_ref().and_then(|d| d.transport_input()).map(|(fd, t)| (fd, t.clone()))
            else {
                continue;
            };
            let ids = |i: &usize| snap.procs[*i].id;
            let expected = q.expected.map(|i| ids(&i));
            let search: Vec<Identity> = q.search.iter().map(ids).collect();
            let end = self.stdin_end(&mut look, p.id, fd, &target.0, expected, &search);
            if let Some(d) = snap.procs[q.proc].details.as_mut() {
                d.stdin = Some(end);
            }
        }
    }

    fn stdin_end(
        &self,
        look: &mut Look,
        id: Identity,
        fd: u32,
        target: &str,
        expected: Option<Identity>,
        search: &[Identity],
    ) -> StdinEnd {
        let (far, write) = if let Some(ino) = inode_of(target, "pipe") {
            match self.pipe_has_writer(id.pid, fd, ino) {
                Ok(()) => (target.to_string(), true),
                Err(end) => return end,
            }
        } else if let Some(ino) = inode_of(target, "socket") {
            let diag = look.diag.get_or_insert_with(sockdiag::open);
            match socket_peer(diag.as_ref().ok(), ino) {
                Ok(peer) => (format!("socket:[{peer}]"), false),
                Err(Some(end)) => return end,
                Err(None) => return self.polled(id, ino, expected.is_some()),
            }
        } else {
            return StdinEnd::Unknown("its stdin is neither a pipe nor a socket");
        };
        let Some(host) = expected else { return StdinEnd::Open(Holder::NotAsked) };
        let mut who = vec![host];
        who.extend(search.iter().copied().filter(|&s| s != host));
        match self.holder(look, &who, &far, write) {
            Some(h) if h == host => StdinEnd::Open(Holder::Expected),
            found => StdinEnd::Open(Holder::Other(found.map(|h| h.pid))),
        }
    }

    /// The socket diagnostics could not answer: one poll of a duplicate of
    /// the process's fd 0 (only on the real `/proc`, whose pids are ours).
    fn polled(&self, id: Identity, ino: u64, asked: bool) -> StdinEnd {
        if self.root != std::path::Path::new("/proc") {
            return StdinEnd::Unknown(NO_DIAG);
        }
        match sockpoll::stdin_peer(self, id, ino) {
            Ok(Peer::Closed) => {
                StdinEnd::Gone("the peer of its stdin socket closed it (poll of a duplicate of its fd 0)")
            }
            Ok(Peer::ShutDown) => {
                StdinEnd::Gone("the peer of its stdin socket shut it down (poll of a duplicate of its fd 0)")
            }
            Ok(Peer::Connected) if asked => StdinEnd::Open(Holder::Unknown),
            Ok(Peer::Connected) => StdinEnd::Open(Holder::NotAsked),
            Err(why) => StdinEnd::Unknown(why),
        }
    }

    /// `Ok` when a write end of pipe `ino` (the stdin of `pid`) is open
    /// anywhere. The pid is not checked against a start time: the answer is
    /// about the pipe, and `fstat` confirms it is that pipe.
    fn pipe_has_writer(&self, pid: Pid, fd: u32, ino: u64) -> Result<(), StdinEnd> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let path = self.root.join(format!("{pid}/fd/{fd}"));
        let fd = rustix::fs::open(&path, flags, Mode::empty())
            .map_err(|_| StdinEnd::Unknown("its stdin pipe could not be opened to look at it"))?;
        let st = rustix::fs::fstat(&fd).map_err(|_| StdinEnd::Unknown("its stdin pipe could not be examined"))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Fifo || st.st_ino != ino {
            return Err(StdinEnd::Unknown("its stdin changed while it was looked at"));
        }
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
        rustix::event::poll(&mut fds, Some(&zero)).map_err(|_| StdinEnd::Unknown("polling its stdin pipe failed"))?;
        if fds[0].revents().contains(PollFlags::HUP) {
            return Err(StdinEnd::Gone("no process holds the write end of its stdin pipe"));
        }
        Ok(())
    }

    /// The `/proc/PID` directory of `id`, opened once per call.
    fn dir<'a>(&self, dirs: &'a mut HashMap<Identity, Option<OwnedFd>>, id: Identity) -> Option<&'a OwnedFd> {
        dirs.entry(id).or_insert_with(|| self.open_verified(id, &mut Vec::new())).as_ref()
    }

    /// The first of `who` holding `target` (for writing, if `write`).
    fn holder(&self, look: &mut Look, who: &[Identity], target: &str, write: bool) -> Option<Identity> {
        let hint = self.hints.held.lock().ok().and_then(|h| h.get(target).copied());
        let vain = self
            .hints
            .vain
            .lock()
            .ok()
            .and_then(|v| v.get(target).copied())
            .is_some_and(|(t, _)| t.elapsed() < VAIN_FOR);
        // After a vain search, only the expected holder is looked at again.
        let who = if vain { &who[..who.len().min(1)] } else { who };
        let Look { dirs, buf, .. } = look;
        if let Some((hid, fd)) = hint
            && who.contains(&hid)
            && let Some(d) = self.dir(dirs, hid)
            && fd_holds(d, fd, target, write, buf)
        {
            return Some(hid);
        }
        for &id in who {
            let Some(d) = self.dir(dirs, id) else { continue };
            if let Some(fd) = find_fd(d, target, write, buf) {
                if let Ok(mut h) = self.hints.held.lock() {
                    if h.len() >= MAX_HINTS {
                        h.clear();
                    }
                    h.insert(target.to_string(), (id, fd));
                }
                return Some(id);
            }
        }
        if !vain && let Ok(mut v) = self.hints.vain.lock() {
            if v.len() >= MAX_HINTS {
                v.clear();
            }
            v.insert(target.to_string(), (Instant::now(), who[0]));
        }
        None
    }
}

/// Why a socket is "unknown" where no second source may be used.
const NO_DIAG: &str = "the kernel's socket diagnostics could not be asked about its stdin socket \
     (another network namespace, or AF_NETLINK not allowed)";

/// The peer's inode of a connected unix stream socket whose peer can still
/// send, or what is known instead (`None`: the diagnostics could not answer).
fn socket_peer(diag: Option<&OwnedFd>, ino: u64) -> Result<u32, Option<StdinEnd>> {
    let ino = u32::try_from(ino).map_err(|_| None)?;
    let s = diag.ok_or(None).and_then(|d| sockdiag::query(d, ino).map_err(|_| None))?;
    if !matches!(s.kind, sockdiag::STREAM | sockdiag::SEQPACKET) || s.state != sockdiag::ESTABLISHED {
        return Err(Some(StdinEnd::Unknown("its stdin is a socket that is not a connected stream")));
    }
    match s.peer {
        Some(0) => Err(Some(StdinEnd::Gone("the peer of its stdin socket closed it (socket diagnostics)"))),
        _ if s.shutdown & sockdiag::RCV_SHUTDOWN != 0 => {
            Err(Some(StdinEnd::Gone("the peer of its stdin socket shut it down (socket diagnostics)")))
        }
        Some(p) => Ok(p),
        None => Err(Some(StdinEnd::Unknown("the kernel did not name the peer of its stdin socket"))),
    }
}

/// Whether fd `fd` of the process behind `dir` is `target` (open for writing, if `write`).
fn fd_holds(dir: &OwnedFd, fd: i32, target: &str, write: bool, buf: &mut Vec<u8>) -> bool {
    readlink_at(dir, &format!("fd/{fd}")).is_some_and(|t| t == target) && (!write || writes(dir, fd, buf))
}

/// `O_WRONLY` or `O_RDWR` in the fd's `fdinfo` flags (octal).
fn writes(dir: &OwnedFd, fd: i32, buf: &mut Vec<u8>) -> bool {
    if read_at(dir, &format!("fdinfo/{fd}"), buf).is_err() {
        return false;
    }
    let text = String::from_utf8_lossy(buf);
    text.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|f| f & 3 != 0)
}

/// An fd of the process behind `dir` that is `target`, reading its fd table
/// from the highest fd down: the far end of a server's stdin is one of the
/// newest fds of its host (the host made that pipe to start it), so it is
/// found after a few links, not after the host's whole table. Which of its
/// fds holds `target` when several do only names the hint.
fn find_fd(dir: &OwnedFd, target: &str, write: bool, buf: &mut Vec<u8>) -> Option<i32> {
    let fds =
        rustix::fs::openat(dir.as_fd(), "fd", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .ok()?;
    let entries = rustix::fs::Dir::new(fds).ok()?;
    let mut numbers: Vec<i32> =
        entries.flatten().filter_map(|e| e.file_name().to_str().ok().and_then(|n| n.parse::<i32>().ok())).collect();
    numbers.sort_unstable_by(|a, b| b.cmp(a));
    numbers.into_iter().find(|&fd| fd_holds(dir, fd, target, write, buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StartTime;

    fn id(n: i32) -> Identity {
        Identity { pid: Pid::new(n).unwrap(), start_time: StartTime(n.cast_unsigned().into()) }
    }

    #[test]
    fn hints_of_dead_holders_and_old_vain_searches_are_forgotten() {
        let hints = Hints::default();
        {
            let mut h = hints.held.lock().unwrap();
            h.insert("pipe:[1]".into(), (id(10), 1));
            h.insert("pipe:[2]".into(), (id(20), 1));
            let mut v = hints.vain.lock().unwrap();
            v.insert("pipe:[3]".into(), (Instant::now(), id(10)));
            v.insert("pipe:[4]".into(), (Instant::now(), id(20)));
            let old = Instant::now().checked_sub(VAIN_FOR + Duration::from_secs(1)).unwrap();
            v.insert("pipe:[5]".into(), (old, id(10)));
        }
        hints.prune(|i| i == id(10));
        let held: Vec<String> = hints.held.lock().unwrap().keys().cloned().collect();
        assert_eq!(held, vec!["pipe:[1]".to_string()], "the dead holder's hint goes");
        let vain: Vec<String> = hints.vain.lock().unwrap().keys().cloned().collect();
        assert_eq!(vain, vec!["pipe:[3]".to_string()], "a dead host's, and an old one, go");
    }
}
