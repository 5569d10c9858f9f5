//! Event mode's half of [`ExitWatch`]: reading the kernel's process events
//! in batches, and what each fork, exec and exit costs (see `exits.rs`).

use std::os::fd::AsFd;

use super::{ExitWatch, Intake, Seen};
use crate::config::Role;
use crate::daemon::schedule::Schedule;
use crate::ids::Pid;
use crate::scan::events::{Connector, ProcEvent};

/// How long events may wait to be read with the next ones: an exit that
/// orphans a tree is acted on this much later at most; the loop wakes at
/// most 100 times a second for events, not once for each.
const COALESCE: std::time::Duration = std::time::Duration::from_millis(10);

impl ExitWatch {
    /// Resolves when process events are waiting; never in pidfd mode.
    /// Batches are read [`COALESCE`] apart at most: under churn each fork and
    /// exit would otherwise wake the loop by itself.
    pub async fn events_ready(&self) {
        match &self.connector {
            Some(c) => {
                if let Some(t) = self.next_drain {
                    tokio::time::sleep_until(t.into()).await;
                }
                let _ = c.readable().await.map(|mut g| g.retain_ready());
            }
            None => std::future::pending().await,
        }
    }

    /// Reads the waiting process events into `schedule` (what changed, a
    /// scan soon after a host or server is exec'd that no watched process
    /// covers: `look` reads what it is). On a failure the connector is
    /// dropped: pidfd mode from now on.
    pub async fn intake(
        &mut self,
        schedule: &mut Schedule,
        scope: Option<Pid>,
        look: impl Fn(Pid) -> Option<Seen>,
    ) -> std::io::Result<Intake> {
        let Some(c) = &self.connector else { return Ok(Intake { lost: false, exit: false }) };
        self.next_drain = Some(std::time::Instant::now() + COALESCE);
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
        let mut exit = false;
        for e in &batch.events {
            match *e {
                ProcEvent::Exec { pid } => {
                    schedule.changed(pid);
                    // Below a watched process that lives, whatever it is:
                    // covered without reading it; marked, so that its exit
                    // with children brings a scan.
                    let parent = self.parent_of.get(&pid).copied().or_else(|| schedule.parent_of(pid));
                    if parent.is_some_and(|p| self.watched.contains(&p) && !self.gone.contains(&p)) {
                        self.unseen.insert(pid);
                        self.costs.execs_covered += 1;
                        continue;
                    }
                    if let Some(seen) = look(pid).filter(|s| matches!(s.role, Role::Host | Role::Server)) {
                        self.unseen.insert(pid);
                        if !self.covered(seen, true, scope, &look) {
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
                    self.gone.insert(pid);
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
        Ok(Intake { lost: batch.lost, exit })
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
