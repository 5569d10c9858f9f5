//! Waiting for targets to exit: a poll on every live pidfd at once (readable
//! means exited), up to a deadline, with no fixed-interval polling.

use std::time::Instant;

use rustix::event::{PollFd, PollFlags};

use super::Run;
use crate::scan::ProcFs;

/// Waits on every live pidfd until `deadline` or until all are gone.
pub(super) fn wait(runs: &mut [Run], deadline: Instant, procfs: &ProcFs) {
    loop {
        finish_done(runs, procfs);
        // Past the deadline, still poll once without blocking: members that
        // exited while we were busy must be counted as gone, not killed.
        let left = deadline.saturating_duration_since(Instant::now());
        let mut idx = Vec::new();
        let mut fds = Vec::new();
        for (ri, r) in runs.iter().enumerate() {
            for (ti, t) in r.targets.iter().enumerate() {
                if !t.gone {
                    idx.push((ri, ti));
                    fds.push(PollFd::new(&t.pidfd, PollFlags::IN));
                }
            }
        }
        if fds.is_empty() {
            return;
        }
        let ts = rustix::fs::Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let ready = match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => 0,
            Err(_) => return,
        };
        let exited: Vec<(usize, usize)> =
            fds.iter().zip(&idx).filter(|(f, _)| !f.revents().is_empty()).map(|(_, &i)| i).collect();
        drop(fds);
        for (ri, ti) in exited {
            runs[ri].targets[ti].gone = true;
        }
        if Instant::now() >= deadline {
            finish_done(runs, procfs);
            return;
        }
        let _ = ready;
    }
}

fn finish_done(runs: &mut [Run], procfs: &ProcFs) {
    for r in runs {
        if r.finished.is_none() && r.live().next().is_none() {
            r.finished = Some((Instant::now(), procfs.meminfo()));
        }
    }
}
