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
//!
//! What churn costs (issue 24): an exit scans only when it leaves a child
//! or tree member alive (an orphan); otherwise it is a lookup in the last
//! snapshot and the events since. A host or server exec'd below a watched
//! process (or, in event mode, below a host: the chain up is then marked)
//! asks for no scan; one with no owner but an adopter is scanned soon. In
//! event mode what is exec'd below such a process since the last scan is
//! covered without being read (`ExitWatch::covering`).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::rc::Rc;

use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use super::schedule::Schedule;
use crate::config::Role;
use crate::ids::Pid;
use crate::sys;

/// What a batch of process events asks of the loop.
pub struct Intake {
    /// The kernel dropped events: the next read must take nothing over.
    pub lost: bool,
    /// A watched or not-yet-seen process exited leaving children (now
    /// orphans of it): scan shortly.
    pub exit: bool,
}

/// A process as read now, for deciding whether its exec needs a scan.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    pub id: crate::ids::Identity,
    pub role: Role,
    pub ppid: Option<Pid>,
}

/// How many exits and execs cost a scan, and how many did not: logged when
/// the daemon stops (what the load bench reads to tell where scans come from).
#[derive(Clone, Copy, Debug, Default)]
pub struct Costs {
    /// Exits of watched or unseen processes that left children: scanned.
    pub exits_scanned: u64,
    /// Exits of watched or unseen processes without children: a lookup.
    pub exits_looked_up: u64,
    /// Host or server execs whose host was already watched or marked: no scan.
    pub execs_covered: u64,
    /// Host or server execs that asked for a scan soon.
    pub execs_scanned: u64,
    /// Event mode: execs read (command line first, see `born::look_at_exec`).
    pub execs_read: u64,
}

pub struct ExitWatch {
    /// The proc connector, in event mode; `None` in pidfd mode.
    connector: Option<Socket>,
    buf: Vec<u8>,
    /// The processes whose exit orphans a tree.
    watched: HashSet<Pid>,
    /// Per watched process, what to read again when it exits: the members
    /// of the trees it was watched for and the chain between them and it.
    reread: HashMap<Pid, Vec<Pid>>,
    /// One task per watched process, waiting for its exit, by the identity
    /// it was opened for (a reused pid is another process). In event mode
    /// it only rings: the connector's events are then read at once.
    pidfd_tasks: HashMap<Pid, (crate::ids::Identity, tokio::task::JoinHandle<()>)>,
    /// Watched processes whose pidfd said they exited (pidfd mode).
    exited: Rc<RefCell<HashSet<Pid>>>,
    wake: Rc<Notify>,
    /// Hosts and servers exec'd since the last scan, and (event mode) the
    /// owners and ancestors above them up to a watched process or the
    /// adopter: not watched yet, so their exit must trigger a scan by itself
    /// (when it leaves children).
    unseen: HashSet<Pid>,
    /// Event mode, since the last scan: the children each process forked
    /// (not in the last snapshot), their parents, and the processes that
    /// exited. With the last snapshot they tell whether an exit leaves
    /// children behind, and whether an exec is below a watched process.
    forked: HashMap<Pid, Vec<Pid>>,
    parent_of: HashMap<Pid, Pid>,
    gone: HashSet<Pid>,
    /// Event mode, since the last scan: the processes below which an exec
    /// is covered without being read. Each is unseen, and either below a
    /// watched process (exec'd below one or below another such, or passed
    /// by a walk that ended at one) or a host whose walk covered it (a host
    /// owns the trees it starts). A host's servers, exec'd a moment after
    /// it, were each read with the host above them (issue 37: two reads
    /// of every short-lived server under churn).
    covering: HashSet<Pid>,
    /// Pidfd mode: per watched process, the members of the trees below it
    /// (as last judged): its exit orphans something only if one of them, or
    /// a child it had then, is still alive.
    below: HashMap<Pid, Vec<crate::ids::Identity>>,
    /// Hosts of kept trees that are not above them (a `reaperctl run`
    /// wrapper's host): their exit orphans a tree without leaving a child,
    /// so it always brings a scan.
    apart: HashSet<Pid>,
    /// Pidfd mode: what the walks since the last scan passed on their way
    /// from a host (or a server below one) to the adopter, to be watched
    /// until the next scan ([`ExitWatch::watch_passed`]): event mode marks
    /// them unseen instead.
    passed: Vec<crate::ids::Identity>,
    /// Pidfd mode: those watched, one pidfd task each, until the next scan.
    /// Event mode: hosts exec'd since the last scan that outlived a batch of
    /// events, whose exit then has the events read at once (see
    /// [`ExitWatch::ring_for_young_hosts`]).
    provisional: HashMap<Pid, tokio::task::JoinHandle<()>>,
    /// Event mode: hosts read at their exec in the last batch of events.
    young_hosts: Vec<Pid>,
    /// Event mode: when the next batch of events may be read.
    next_drain: Option<std::time::Instant>,
    pub costs: Costs,
}

impl ExitWatch {
    pub fn new(connector: Option<AsyncFd<OwnedFd>>) -> ExitWatch {
        ExitWatch {
            connector: connector.map(Socket::Waiting),
            buf: vec![0u8; 64 * 1024],
            watched: HashSet::new(),
            reread: HashMap::new(),
            pidfd_tasks: HashMap::new(),
            exited: Rc::default(),
            wake: Rc::new(Notify::new()),
            unseen: HashSet::new(),
            forked: HashMap::new(),
            parent_of: HashMap::new(),
            gone: HashSet::new(),
            covering: HashSet::new(),
            below: HashMap::new(),
            apart: HashSet::new(),
            passed: Vec::new(),
            provisional: HashMap::new(),
            young_hosts: Vec::new(),
            next_drain: None,
            costs: Costs::default(),
        }
    }

    /// Whether the kernel's process events flow (event mode).
    pub fn events(&self) -> bool {
        self.connector.is_some()
    }

    /// A scan starts: what was exec'd before it will be seen by it.
    pub fn scanning(&mut self) {
        self.unseen.clear();
        self.passed.clear();
        for (_, t) in self.provisional.drain() {
            t.abort();
        }
        self.young_hosts.clear();
        self.forked.clear();
        self.parent_of.clear();
        self.gone.clear();
        self.covering.clear();
    }

    /// Pidfd mode: the members of trees just reaped are read again at the
    /// next scan, and their children with them, as if watched processes had
    /// exited (without a scan now).
    pub fn reaped(&mut self, pids: impl IntoIterator<Item = Pid>) {
        self.exited.borrow_mut().extend(pids);
    }

    /// The watched processes whose pidfd said they exited since last asked.
    pub fn take_exited(&mut self) -> HashSet<Pid> {
        std::mem::take(&mut *self.exited.borrow_mut())
    }

    /// Pidfd mode: whether the watched processes that exited (and are not
    /// taken yet) left anything behind: a child they had at the last scan,
    /// or a member of a tree below them, still alive (same identity). When
    /// not, their exit orphaned nothing and costs no scan; they stay in the
    /// exited set for the next one. A host or server born since the last scan
    /// is known here when [`ExitWatch::covered`] found it below a watched
    /// process; one that [`super::births`] has not seen yet is seen within
    /// a fifth of a second, re-parented: then it is not covered, and scanned.
    pub fn exits_left_orphans(&mut self, schedule: &Schedule, alive: impl Fn(crate::ids::Identity) -> bool) -> bool {
        let exited = self.exited.borrow();
        let left = exited.iter().any(|pid| {
            if self.apart.contains(pid) {
                return true;
            }
            // No snapshot to go by (a failed cycle): scan.
            let Some(children) = schedule.children_of(*pid) else { return true };
            children.into_iter().chain(self.below.get(pid).into_iter().flatten().copied()).any(&alive)
        });
        drop(exited);
        if left {
            self.costs.exits_scanned += 1;
        } else {
            self.costs.exits_looked_up += 1;
        }
        left
    }

    /// A host or server was exec'd (event mode) or born (pidfd mode): is its
    /// tree's owner already watched, so that its orphaning will be heard
    /// without a scan now? Walks up from `seen`'s parent through launchers
    /// and servers to the owner, then on up: a watched process covers it; a
    /// host among those passed (or `seen` itself) covers it as well. Either
    /// way every process passed on the way must be watched too (its exit
    /// may orphan `seen`): in event mode (`mark`) they are marked unseen (an
    /// exit with children then brings a scan); in pidfd mode they, and
    /// `seen` when it is a host, are watched through a pidfd each until the
    /// next scan ([`ExitWatch::watch_passed`]), and their exit must find
    /// `seen` dead. A tree with no owner but an adopter, or one whose parent
    /// is gone, is not covered: it is judged by a scan soon.
    pub fn covered(&mut self, seen: Seen, mark: bool, scope: Option<Pid>, look: impl Fn(Pid) -> Option<Seen>) -> bool {
        let mut host = seen.role == Role::Host;
        let mut up = seen.ppid;
        // A host owns the trees it will start.
        let mut owner_found = host;
        let mut passed = Vec::new();
        if host && !mark {
            passed.push(seen.id);
        }
        // Event mode: the processes marked unseen on the way.
        let mut marked = Vec::new();
        // Stopped at a process whose cover holds for all below it (watched,
        // rung for, or covering): the processes passed are covering too.
        let mut at_cover = false;
        let covered = 'walk: {
            for _ in 0..MAX_CHAIN {
                let Some(p) = up else { break 'walk host && owner_found };
                if p == Pid::INIT || Some(p) == scope {
                    break 'walk host && owner_found;
                }
                // Not one that exited since (its pid may be another
                // process's by now): in pidfd mode its pidfd said so, in
                // event mode its exit event.
                let gone = if mark { self.gone.contains(&p) } else { self.exited.borrow().contains(&p) };
                let watched = self.watched.contains(&p) || self.provisional.contains_key(&p);
                if (watched || (mark && self.covering.contains(&p))) && !gone {
                    // Pidfd mode knows no forks: its exit must find this one
                    // alive below it, as it finds the trees it was watched for.
                    if !mark {
                        self.below.entry(p).or_default().push(seen.id);
                    }
                    at_cover = true;
                    break 'walk true;
                }
                let Some(q) = look(p) else { break 'walk false };
                if q.role == Role::Adopter {
                    break 'walk host && owner_found;
                }
                owner_found |= !q.role.is_tree_link();
                host |= q.role == Role::Host;
                if mark {
                    self.unseen.insert(p);
                    marked.push(p);
                } else {
                    passed.push(q.id);
                }
                up = q.ppid;
            }
            false
        };
        if covered && mark {
            if at_cover {
                self.covering.extend(marked);
                self.covering.insert(seen.id.pid);
            } else if seen.role == Role::Host {
                self.covering.insert(seen.id.pid);
            }
        }
        if covered {
            for id in passed.iter().filter(|&&id| id != seen.id) {
                self.below.entry(id.pid).or_default().push(seen.id);
            }
            self.passed.extend(passed);
            self.costs.execs_covered += 1;
        } else {
            self.costs.execs_scanned += 1;
        }
        covered
    }

    /// Pidfd mode: watches what [`ExitWatch::covered`] passed, until the
    /// next scan. A pidfd is kept only if the pid's start time, read after
    /// the open (`started`), is the process's (its pid was not reused).
    /// False when [`MAX_PROVISIONAL`] are watched already: the caller scans
    /// soon instead (which watches what it must, and ends these).
    pub fn watch_passed(&mut self, started: impl Fn(Pid) -> Option<u64>) -> bool {
        for id in std::mem::take(&mut self.passed) {
            if self.watched.contains(&id.pid) || self.provisional.contains_key(&id.pid) {
                continue;
            }
            if self.provisional.len() >= MAX_PROVISIONAL {
                return false;
            }
            let Ok(fd) = sys::pidfd_open(id.pid) else { continue };
            if started(id.pid) != Some(id.start_time.0) {
                continue;
            }
            let task = self.pidfd_task(id.pid, fd);
            self.provisional.insert(id.pid, task);
        }
        true
    }

    /// A task that notes `pid`'s exit when its pidfd says so (pidfd mode),
    /// or only wakes the loop (event mode: the exit is among the events).
    fn pidfd_task(&self, pid: Pid, fd: OwnedFd) -> tokio::task::JoinHandle<()> {
        let (wake, exited) = (self.wake.clone(), self.connector.is_none().then(|| self.exited.clone()));
        tokio::task::spawn_local(async move {
            if let Ok(afd) = sys::async_fd(fd) {
                let _ = afd.readable().await;
                if let Some(exited) = exited {
                    exited.borrow_mut().insert(pid);
                }
                wake.notify_one();
            }
        })
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
}

/// Processes watched between two scans at most (pidfd mode; event mode
/// rings for young hosts as many): a user who
/// starts host after host must not fill the daemon's fd table with pidfds.
const MAX_PROVISIONAL: usize = 1024;

/// Ancestors watched above a tree's owner at most (a deep chain of shells
/// and wrappers; the host is within it in practice).
const MAX_CHAIN: usize = 16;

#[path = "exits_events.rs"]
mod events;
#[path = "exits_rewatch.rs"]
mod rewatch;
pub use events::Looks;
use events::Socket;

#[cfg(test)]
#[path = "exits_tests.rs"]
mod tests;
