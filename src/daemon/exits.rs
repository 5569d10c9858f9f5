//! Watching for the exits that orphan a tree: the owners and hosts of kept
//! trees (through the kernel's process events, or one pidfd task each), and
//! hosts and servers exec'd since the last scan, not watched yet.

use std::cell::RefCell;
use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;

use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use super::schedule::Schedule;
use crate::cycle::Assessment;
use crate::ids::Pid;
use crate::policy::Verdict;
use crate::scan::events::{Connector, ProcEvent};
use crate::sys;

/// What a batch of process events asks of the loop.
pub struct Intake {
    /// The kernel dropped events: the next read must take nothing over.
    pub lost: bool,
    /// A watched or not-yet-seen process exited: scan shortly.
    pub exit: bool,
}

pub struct ExitWatch {
    /// The proc connector, in event mode; `None` in pidfd mode.
    connector: Option<AsyncFd<OwnedFd>>,
    buf: Vec<u8>,
    /// The processes whose exit orphans a tree.
    watched: HashSet<Pid>,
    /// Pidfd mode: one task per watched process, waiting for its exit.
    pidfd_tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Watched processes whose pidfd said they exited (pidfd mode).
    exited: Rc<RefCell<HashSet<Pid>>>,
    wake: Rc<Notify>,
    /// Hosts and servers exec'd since the last scan: not watched yet, so
    /// their exit must trigger a scan by itself.
    unseen: HashSet<Pid>,
}

impl ExitWatch {
    pub fn new(connector: Option<AsyncFd<OwnedFd>>) -> ExitWatch {
        ExitWatch {
            connector,
            buf: vec![0u8; 64 * 1024],
            watched: HashSet::new(),
            pidfd_tasks: Vec::new(),
            exited: Rc::default(),
            wake: Rc::new(Notify::new()),
            unseen: HashSet::new(),
        }
    }

    /// Whether the kernel's process events flow (event mode).
    pub fn events(&self) -> bool {
        self.connector.is_some()
    }

    /// A scan starts: what was exec'd before it will be seen by it.
    pub fn scanning(&mut self) {
        self.unseen.clear();
    }

    /// The watched processes whose pidfd said they exited since last asked.
    pub fn take_exited(&mut self) -> HashSet<Pid> {
        std::mem::take(&mut *self.exited.borrow_mut())
    }

    /// Resolves when a pidfd task saw its process exit (or could not watch it).
    pub async fn pidfd_exit(&self) {
        self.wake.notified().await;
    }

    /// Resolves when process events are waiting; never in pidfd mode.
    pub async fn events_ready(&self) {
        match &self.connector {
            Some(c) => {
                let _ = c.readable().await.map(|mut g| g.retain_ready());
            }
            None => std::future::pending().await,
        }
    }

    /// Reads the waiting process events into `schedule` (what changed, a
    /// scan soon after a host or server is exec'd: `interesting` says which
    /// are). On a failure the connector is dropped: pidfd mode from now on.
    pub async fn intake(
        &mut self,
        schedule: &mut Schedule,
        interesting: impl Fn(Pid) -> bool,
    ) -> std::io::Result<Intake> {
        let Some(c) = &self.connector else { return Ok(Intake { lost: false, exit: false }) };
        let mut guard = c.readable().await.ok();
        let batch = match Connector::drain(c.get_ref().as_fd(), &mut self.buf) {
            Ok(batch) => batch,
            Err(e) => {
                self.connector = None;
                // Exits were filtered against `watched`, not watched: arm
                // pidfds for all of them at the next `rewatch`.
                self.watched.clear();
                return Err(e);
            }
        };
        if let Some(g) = guard.as_mut() {
            g.clear_ready();
        }
        for e in &batch.events {
            match *e {
                ProcEvent::Exec { pid } => {
                    schedule.changed(pid);
                    if interesting(pid) {
                        self.unseen.insert(pid);
                        schedule.soon_after_exec();
                    }
                }
                ProcEvent::Fork { child, .. } => schedule.changed(child),
                ProcEvent::Exit { pid } => schedule.changed(pid),
            }
        }
        let exit = batch
            .events
            .iter()
            .any(|e| matches!(e, ProcEvent::Exit { pid } if self.watched.contains(pid) || self.unseen.contains(pid)));
        Ok(Intake { lost: batch.lost, exit })
    }

    /// Watches the owners and hosts of kept trees: their exit orphans a tree.
    pub fn rewatch(&mut self, a: &Assessment) {
        let snap = &a.snapshot;
        let mut want = HashSet::new();
        for j in a.judgements.iter().filter(|j| matches!(j.verdict, Verdict::Live | Verdict::Foreign | Verdict::Stale))
        {
            want.extend(j.owner.map(|o| snap.procs[o].pid()));
            want.extend(j.host.map(|h| snap.procs[h].pid()));
        }
        if want == self.watched {
            return;
        }
        self.watched = want;
        if self.connector.is_some() {
            return; // exit events are filtered against `watched`
        }
        for t in self.pidfd_tasks.drain(..) {
            t.abort();
        }
        for &pid in &self.watched {
            let Ok(fd) = sys::pidfd_open(pid) else {
                self.wake.notify_one(); // already gone: rescan
                continue;
            };
            let (wake, exited) = (self.wake.clone(), self.exited.clone());
            self.pidfd_tasks.push(tokio::task::spawn_local(async move {
                if let Ok(afd) = sys::async_fd(fd) {
                    let _ = afd.readable().await;
                    exited.borrow_mut().insert(pid);
                    wake.notify_one();
                }
            }));
        }
    }
}
