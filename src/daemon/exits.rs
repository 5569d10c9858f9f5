//! Watching for the exits that orphan a tree: the owner of every kept tree
//! and every ancestor above it up to the adopter, known host or not (through
//! the kernel's process events, or one pidfd task each), and hosts and
//! servers exec'd since the last scan, not watched yet.
//!
//! Why every ancestor: a tree may have been read before a process in it
//! retitled itself (`npm` sets `npm exec <pkg>` a moment after exec;
//! `process.title`, `setproctitle`), so its owner as read may be a launcher
//! that outlives the real host above it. When a watched process exits, the
//! trees it was watched for are read again whole (members and the chain up
//! to it, command lines included), so they are judged as they are now.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;

use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use super::schedule::Schedule;
use crate::config::Role;
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
    /// Per watched process, what to read again when it exits: the members
    /// of the trees it was watched for and the chain between them and it.
    reread: HashMap<Pid, Vec<Pid>>,
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
            reread: HashMap::new(),
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

    /// What the exit of `exited` asks to be read again (command lines
    /// included): see the module comment.
    pub fn reread_for<'a>(&'a self, exited: &'a HashSet<Pid>) -> impl Iterator<Item = Pid> + 'a {
        exited.iter().filter_map(|p| self.reread.get(p)).flatten().copied()
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
                ProcEvent::Exit { pid } => {
                    schedule.changed(pid);
                    for &r in self.reread.get(&pid).into_iter().flatten() {
                        schedule.changed(r);
                    }
                }
            }
        }
        let exit = batch
            .events
            .iter()
            .any(|e| matches!(e, ProcEvent::Exit { pid } if self.watched.contains(pid) || self.unseen.contains(pid)));
        Ok(Intake { lost: batch.lost, exit })
    }

    /// Watches the owner of every kept tree and each ancestor above it up to
    /// the adopter (the host among them): any of their exits may orphan it.
    pub fn rewatch(&mut self, a: &Assessment) {
        let snap = &a.snapshot;
        let mut reread: HashMap<Pid, Vec<Pid>> = HashMap::new();
        for j in a.judgements.iter().filter(|j| matches!(j.verdict, Verdict::Live | Verdict::Foreign | Verdict::Stale))
        {
            let Some(owner) = j.owner else { continue };
            let mut chain: Vec<usize> = vec![owner];
            // An owner that adopts (a namespace's PID 1 and its own command):
            // nothing above it orphans the tree.
            if !adopts(a, owner) {
                for up in a.forest.ancestors(owner) {
                    if adopts(a, up) || chain.len() >= MAX_CHAIN {
                        break;
                    }
                    chain.push(up);
                }
            }
            let members = j.members.iter().map(|&(m, _)| snap.procs[m].pid());
            let again: Vec<Pid> = chain.iter().map(|&c| snap.procs[c].pid()).chain(members).collect();
            for &c in &chain {
                reread.entry(snap.procs[c].pid()).or_default().extend(&again);
            }
            if let Some(h) = j.host {
                reread.entry(snap.procs[h].pid()).or_default().extend(&again);
            }
        }
        self.reread = reread;
        let want: HashSet<Pid> = self.reread.keys().copied().collect();
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

/// Ancestors watched above a tree's owner at most (a deep chain of shells
/// and wrappers; the host is within it in practice).
const MAX_CHAIN: usize = 16;

/// Whether process `i` adopts orphans (its exit orphans nothing: PID 1, the
/// scope, a subreaper such as `systemd --user`).
fn adopts(a: &Assessment, i: usize) -> bool {
    a.snapshot.procs[i].pid() == Pid::INIT || Some(i) == a.forest.scope || a.forest.role(i) == Role::Adopter
}
