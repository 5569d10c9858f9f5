//! The `reaperctl run` wrapper at work: passing signals on to the host
//! until it exits, waiting out the grace, waiting for the leftovers it
//! adopted. The wrapper blocks the signals it handles and reads them from a
//! signalfd, in one poll with the host's pidfd: no handlers, no races.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::Child;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::process::Signal;

use super::leftovers::Session;
use crate::ids::Pid;
use crate::scan::ProcFs;
use crate::sys;

/// Signals the wrapper passes on to the host. SIGCHLD is read too (never
/// passed on): leftovers adopted by the wrapper are waited for when they die.
pub const FORWARD: [Signal; 7] =
    [Signal::INT, Signal::TERM, Signal::HUP, Signal::QUIT, Signal::USR1, Signal::USR2, Signal::WINCH];
/// `si_code` of a signal the kernel sent (a terminal's Ctrl-C, hangup,
/// resize): it went to the whole foreground process group, host included.
const SI_KERNEL: i32 = 0x80;

/// Passes signals on until the host exits; returns its exit status (its
/// code, or 128 + the signal that ended it).
pub fn supervise(
    child: &mut Child,
    host: Pid,
    pidfd: Option<&OwnedFd>,
    sigfd: &OwnedFd,
    procfs: &ProcFs,
    wrapper: u32,
) -> u8 {
    // From /proc, not getpgrp(2): a group whose leader lives in an outer
    // PID namespace (a wrapper started by nsenter or `docker exec`) has no
    // pid here, and reads as 0 for the wrapper and the host alike.
    let pgid = |pid: u32| Pid::new(pid.cast_signed()).and_then(|p| procfs.stat(p)).map(|st| st.pgrp);
    let my_pgid = pgid(wrapper);
    loop {
        let mut fds = vec![PollFd::new(sigfd, PollFlags::IN)];
        if let Some(p) = pidfd {
            fds.push(PollFd::new(p, PollFlags::IN));
        }
        // Without a pidfd (a kernel before 5.3), look every 100 ms.
        let timeout = pidfd.is_none().then_some(rustix::fs::Timespec { tv_sec: 0, tv_nsec: 100_000_000 });
        let _ = rustix::event::poll(&mut fds, timeout.as_ref());
        let signalled = !fds[0].revents().is_empty();
        drop(fds);
        if signalled {
            while let Some((signo, code)) = read_signal(sigfd) {
                if signo == Signal::CHILD.as_raw() {
                    reap_adopted(procfs, wrapper, Some(host));
                    continue;
                }
                let Some(sig) = FORWARD.iter().copied().find(|s| s.as_raw() == signo) else { continue };
                // A terminal's signal reached the host already, unless it
                // left the wrapper's process group.
                if code == SI_KERNEL && my_pgid.is_some() && pgid(host.get().cast_unsigned()) == my_pgid {
                    continue;
                }
                if let Some(p) = pidfd {
                    let _ = sys::pidfd_signal(p.as_fd(), sig);
                }
            }
        }
        if let Ok(Some(st)) = child.try_wait() {
            return match (st.code(), st.signal()) {
                (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(1),
                (None, Some(s)) => u8::try_from(128 + s).unwrap_or(255),
                _ => 1,
            };
        }
    }
}

/// One pending signal from the signalfd: (number, `si_code`).
fn read_signal(sigfd: &OwnedFd) -> Option<(i32, i32)> {
    // struct signalfd_siginfo: 128 bytes, ssi_signo (u32) at 0, ssi_code (i32) at 8.
    let mut buf = [0u8; 128];
    let mut fds = [PollFd::new(sigfd, PollFlags::IN)];
    let zero = rustix::fs::Timespec { tv_sec: 0, tv_nsec: 0 };
    if rustix::event::poll(&mut fds, Some(&zero)).ok()? == 0 {
        return None;
    }
    let n = rustix::io::read(sigfd, &mut buf).ok()?;
    if n < 12 {
        return None;
    }
    let signo = i32::from_ne_bytes(buf[0..4].try_into().ok()?);
    let code = i32::from_ne_bytes(buf[8..12].try_into().ok()?);
    Some((signo, code))
}

/// Waits out the grace, returning early when nothing is left; a forwarded
/// signal (say a second Ctrl-C) cuts it short. Returns whether one did.
pub fn wait_grace(
    session: &Session,
    procfs: &ProcFs,
    sigfd: &OwnedFd,
    grace: Duration,
    reap_zombies: &dyn Fn(),
) -> bool {
    let until = Instant::now() + grace;
    loop {
        reap_zombies();
        if session.members(procfs).is_empty() {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let step = left.min(Duration::from_millis(100));
        let ts = rustix::fs::Timespec { tv_sec: 0, tv_nsec: i64::from(step.subsec_nanos()) };
        let mut fds = [PollFd::new(sigfd, PollFlags::IN)];
        if rustix::event::poll(&mut fds, Some(&ts)).unwrap_or(0) > 0 {
            while let Some((signo, _)) = read_signal(sigfd) {
                if FORWARD.iter().any(|s| s.as_raw() == signo && *s != Signal::WINCH) {
                    return true;
                }
            }
        }
    }
}

/// Waits for the wrapper's dead children (leftovers it adopted), never
/// blocking, and never for `except` (the host: its status is `supervise`'s).
pub fn reap_adopted(procfs: &ProcFs, wrapper: u32, except: Option<Pid>) {
    let me = Pid::new(wrapper.cast_signed()).expect("own pid");
    for c in procfs.children(me).unwrap_or_default() {
        if Some(c) != except
            && procfs.stat(c).is_some_and(|st| st.state == b'Z')
            && let Some(p) = rustix::process::Pid::from_raw(c.get())
        {
            let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG);
        }
    }
}
