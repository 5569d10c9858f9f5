//! Event mode's half of [`ExitWatch`]: reading the kernel's process events
//! in batches, and what each fork, exec and exit costs (see `exits.rs`).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use tokio::io::unix::AsyncFd;

use super::{ExitWatch, Intake, Seen};
use crate::config::Role;
use crate::daemon::schedule::Schedule;
use crate::ids::Pid;
use crate::scan::events::{Connector, ProcEvent};

/// How long events may wait to be read with the next ones, under churn
/// (the first event after a quiet batch is read at once). What must not
/// wait has a pidfd that has the events read the moment it exits: every
/// watched process (the owners of kept trees and the chains above them),
/// and each host exec'd since the last scan that outlived its first batch.
/// Other exits wait for their batch: that of a wrapper below a watched
/// host, of a host that lived less than a batch. Issue 37, load bench at
/// 10,000 processes and 300 forks a second, alternated runs, 60 s each:
/// 20 ms and no pidfds cost 1.70 / 1.70 % of a core (56 wake-ups a
/// second), reaction median 36 ms; 100 ms with them 1.23 / 1.30 % (19),
/// 24 / 25 ms; 50 ms with them 1.33 / 1.37 % (33), 23 / 25 ms.
const COALESCE: std::time::Duration = std::time::Duration::from_millis(100);

/// The proc connector's socket. While it is in the reactor, every message
/// that arrives wakes the loop's thread (the kernel wakes an epoll waiter
/// for each datagram, edge-triggered or not): under churn, about 750
/// wake-ups a second where [`COALESCE`] asks for at most 10, each a
/// context switch (issue 24: half the event mode's cost). So it is in the
/// reactor only while the loop waits for a first event; between batches it
/// rests outside, and is read when the next batch is due. Messages wait in
/// the socket meanwhile (an overflow is reported as lost events: a rescan).
pub(super) enum Socket {
    /// In the reactor: nothing came at the last read.
    Waiting(AsyncFd<OwnedFd>),
    /// Out of it: read at `next_drain`.
    Resting(OwnedFd),
}

impl Socket {
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Socket::Waiting(a) => a.get_ref().as_fd(),
            Socket::Resting(fd) => fd.as_fd(),
        }
    }
}

/// How the events' intake reads a pid: `exec`, one just exec'd, when it is
/// a host or a server (its command line first, the rest only then); `any`,
/// one met on a walk up.
#[derive(Clone, Copy)]
pub struct Looks<'a> {
    pub exec: &'a dyn Fn(Pid) -> Option<Seen>,
    pub any: &'a dyn Fn(Pid) -> Option<Seen>,
}

impl ExitWatch {
    /// Resolves when process events are waiting, or the next batch is due;
    /// never in pidfd mode.
    pub async fn events_ready(&self) {
        match &self.connector {
            Some(Socket::Waiting(a)) => {
                let _ = a.readable().await.map(|mut g| g.retain_ready());
            }
            Some(Socket::Resting(_)) => {
                if let Some(t) = self.next_drain {
                    tokio::time::sleep_until(t.into()).await;
                }
            }
            None => std::future::pending().await,
        }
    }

    /// Reads the waiting process events into `schedule` (what changed, a
    /// scan soon after a host or server is exec'd that no watched process
    /// covers: `look` reads what it is). On a failure the connector is
    /// dropped: pidfd mode from now on.
    pub fn intake(&mut self, schedule: &mut Schedule, scope: Option<Pid>, look: Looks) -> std::io::Result<Intake> {
        let Some(socket) = self.connector.take() else { return Ok(Intake { lost: false, exit: false }) };
        let batch = Connector::drain(socket.fd(), &mut self.buf).and_then(|batch| {
            let busy = !batch.events.is_empty() || batch.lost;
            self.next_drain = busy.then(|| std::time::Instant::now() + COALESCE);
            self.connector = Some(match (socket, busy) {
                (Socket::Waiting(a), true) => Socket::Resting(a.into_inner()),
                // A fresh registration: no readiness left over from the last.
                (Socket::Waiting(a), false) => Socket::Waiting(crate::sys::async_fd(a.into_inner())?),
                (Socket::Resting(fd), true) => Socket::Resting(fd),
                (Socket::Resting(fd), false) => Socket::Waiting(crate::sys::async_fd(fd)?),
            });
            Ok(batch)
        });
        let batch = match batch {
            Ok(batch) => batch,
            Err(e) => {
                self.connector = None;
                // Exits were filtered against `watched`, not watched: arm
                // pidfds for all of them at the next `rewatch`, ones that
                // note the exit (these only rang).
                self.watched.clear();
                for (_, (_, task)) in self.pidfd_tasks.drain() {
                    task.abort();
                }
                return Err(e);
            }
        };
        let exit = self.take_events(&batch.events, schedule, scope, look);
        Ok(Intake { lost: batch.lost, exit })
    }

    /// What a batch of events changes: pids to read again, hosts and
    /// servers to scan for soon; whether an exit calls for a scan.
    pub(super) fn take_events(
        &mut self,
        events: &[ProcEvent],
        schedule: &mut Schedule,
        scope: Option<Pid>,
        looks: Looks,
    ) -> bool {
        let Looks { exec: look_exec, any: look } = looks;
        let mut exit = false;
        let mut young_hosts = Vec::new();
        for e in events {
            match *e {
                ProcEvent::Exec { pid } => {
                    schedule.changed(pid);
                    // What it covered, it did as what it was.
                    self.covering.remove(&pid);
                    // Below a watched process that lives (or below one
                    // exec'd below such), whatever it is: covered without
                    // reading it; marked, so that its exit with children
                    // brings a scan.
                    let parent = self.parent_of.get(&pid).copied().or_else(|| schedule.parent_of(pid));
                    if parent.is_some_and(|p| {
                        (self.watched.contains(&p) || self.covering.contains(&p)) && !self.gone.contains(&p)
                    }) {
                        self.unseen.insert(pid);
                        self.covering.insert(pid);
                        self.costs.execs_covered += 1;
                        continue;
                    }
                    self.costs.execs_read += 1;
                    if let Some(seen) = look_exec(pid) {
                        self.unseen.insert(pid);
                        if seen.role == Role::Host {
                            young_hosts.push(pid);
                        }
                        // Covered or not, the quiet ends (see `Schedule::period`).
                        if !self.covered(seen, true, scope, look) || schedule.quiet() {
                            schedule.soon_after_exec();
                        }
                    }
                }
                ProcEvent::Fork { parent, child } => {
                    schedule.changed(child);
                    self.forked.entry(parent).or_default().push(child);
                    self.parent_of.insert(child, parent);
                    // A reused pid: whatever had it before, this one lives.
                    self.gone.remove(&child);
                }
                ProcEvent::Exit { pid } => {
                    schedule.changed(pid);
                    // Born and gone between two scans: nothing to read.
                    schedule.gone_unread(pid);
                    self.gone.insert(pid);
                    self.covering.remove(&pid);
                    if let Some(bell) = self.provisional.remove(&pid) {
                        bell.abort();
                    }
                    for &r in self.reread.get(&pid).into_iter().flatten() {
                        schedule.changed(r);
                    }
                    // An exit that leaves no child orphans nothing: the
                    // pids are marked changed for the next read, no more.
                    if self.watched.contains(&pid) || self.unseen.contains(&pid) {
                        if self.apart.contains(&pid) || self.leaves_children(pid, schedule) {
                            self.costs.exits_scanned += 1;
                            exit = true;
                        } else {
                            self.costs.exits_looked_up += 1;
                        }
                    }
                }
            }
        }
        self.ring_for_young_hosts(young_hosts);
        exit
    }

    /// Hosts exec'd in the batch before this one and alive through it: a
    /// pidfd each, whose exit has the events read at once. They are not
    /// watched yet (their tree is read at the next scan), and their exit
    /// is the one that orphans servers. One read in the same batch as its
    /// exec gets none: most such are short-lived (`claude -p` loops), and
    /// each ring is a wake-up; their exit waits for its batch
    /// ([`COALESCE`]). A ring for a process that is not what was read (its
    /// pid reused within a batch) costs one early read of the events.
    fn ring_for_young_hosts(&mut self, young_hosts: Vec<Pid>) {
        for pid in std::mem::replace(&mut self.young_hosts, young_hosts) {
            if self.gone.contains(&pid)
                || self.provisional.contains_key(&pid)
                || self.provisional.len() >= super::MAX_PROVISIONAL
            {
                continue;
            }
            if let Ok(fd) = crate::sys::pidfd_open(pid) {
                let bell = self.pidfd_task(pid, fd);
                self.provisional.insert(pid, bell);
            }
        }
    }

    /// Event mode: whether `pid` has a child not known to have exited: one
    /// it had at the last scan or forked since. (A child that exited and
    /// whose pid was reused by another fork counts as alive: a scan too many
    /// at worst.)
    pub(super) fn leaves_children(&self, pid: Pid, schedule: &Schedule) -> bool {
        let Some(before) = schedule.children_of(pid) else { return true };
        before
            .iter()
            .map(|id| id.pid)
            .chain(self.forked.get(&pid).into_iter().flatten().copied())
            .any(|c| !self.gone.contains(&c))
    }
}
