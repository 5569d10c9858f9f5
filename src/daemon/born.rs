//! Pidfd mode's new processes, as the loop meets them: each is marked for
//! the next read, and a host or server among them is watched or scanned
//! soon ([`super::births`] counts and reads them, [`super::exits`] decides
//! whether they are covered).

use super::births::Born;
use super::exits::Seen;
use super::run::{Daemon, Step};
use crate::config::{Config, Role};
use crate::ids::Pid;
use crate::scan::{ProcFs, Process, Unopened};

impl Daemon {
    /// Pidfd mode: a host or server counted at the last look (see
    /// [`super::births`]) is scanned soon (its host then watched, or its
    /// orphans found), unless its tree's owner is watched already, or it is
    /// (or is below) a host: the host and the chain above it are then watched
    /// until the next scan, as a scan would watch them.
    pub(super) fn born(&mut self) -> Step {
        let pids = match self.births_since() {
            Born::Nothing => self.births.ripe(Vec::new()),
            Born::Pids(counted) => self.births.ripe(counted),
            Born::Many => {
                // Too many to read one by one: a scan soon reads them all.
                self.births.read_by_scan();
                self.schedule.soon_after_exec();
                return Step::Idle;
            }
        };
        let shared = self.shared.borrow();
        let (cfg, scope) = (&shared.cfg, shared.args.scope);
        let seen = |p: &Process| seen_as(cfg, p);
        let look = |pid| look_at(&self.procfs, cfg, pid);
        let mut wanted = false;
        for pid in pids {
            let seen = match self.births.look(&self.procfs, pid, seen) {
                Ok(seen) => seen,
                // The next read need not find that out again.
                Err(Unopened::Gone) => {
                    self.schedule.gone_unread(pid);
                    continue;
                }
                Err(Unopened::Failed) => {
                    self.schedule.changed(pid);
                    continue;
                }
            };
            // Alive a look after its birth: the next read reads it.
            self.schedule.changed(pid);
            if matches!(seen.role, Role::Host | Role::Server) {
                // Every one is looked at (the counters), none read twice.
                // Covered or not, the quiet ends (see `Schedule::period`).
                wanted |= !self.exits.covered(seen, false, scope, look) || self.schedule.quiet();
            }
        }
        // Too many to watch: a scan watches what it must.
        wanted |= !self.exits.watch_passed(|pid| self.procfs.stat(pid).map(|st| st.start_time));
        drop(shared);
        if wanted {
            self.schedule.soon_after_exec();
        }
        Step::Idle
    }

    /// Pidfd mode, before a scan's read: the pids created since the last
    /// look wait for the next look, as those counted at it do (the read
    /// takes those looked at and found alive); the table's census, the read
    /// told that it needs no listing when it is the one the last listing
    /// began with (see [`super::births::Census::spares_listing`]).
    pub(super) fn births_before_read(&mut self) -> Option<super::births::Census> {
        if self.exits.events() {
            return None;
        }
        match self.births_since() {
            Born::Pids(counted) => self.births.wait_for_look(counted),
            // The read lists `/proc`: it reads them all.
            Born::Many => self.births.read_by_scan(),
            Born::Nothing => {}
        }
        let census = self.births.census();
        if census.is_none() {
            // No counter: what was born is known only from a listing.
            self.schedule.want_listing();
        }
        if census.is_some_and(|c| c.spares_listing(self.births.listed_at(), self.schedule.quiet())) {
            self.schedule.table_unchanged();
        }
        census
    }

    /// The pids created since the last look (each marked for a read once a
    /// look found it alive, see [`Daemon::born`]); when they cannot be
    /// counted, the next read lists `/proc`.
    pub(super) fn births_since(&mut self) -> Born {
        let born = self.births.since(&self.procfs);
        if matches!(born, Born::Many) {
            self.schedule.want_listing();
        }
        born
    }
}

/// What a pid is (read now): its role by its command line, and its parent.
pub(super) fn look_at(procfs: &ProcFs, cfg: &Config, pid: Pid) -> Option<Seen> {
    procfs.process(pid).map(|p| seen_as(cfg, &p))
}

/// What a pid just exec'd is, when its command line makes it a host or a
/// server; `None` otherwise (its `stat` is then not read).
pub(super) fn look_at_exec(procfs: &ProcFs, cfg: &Config, pid: Pid) -> Option<Seen> {
    let mcp = |cmdline: &str, program| {
        let role = cfg.matcher.classify_subject(crate::config::Subject { cmdline, program, exe: None }).role;
        matches!(role, Role::Host | Role::Server).then_some(role)
    };
    procfs.process_if(pid, mcp).map(|(p, role)| Seen { id: p.id, role, ppid: p.ppid })
}

/// What a process read is: its role by its command line, and its parent.
fn seen_as(cfg: &Config, p: &Process) -> Seen {
    Seen { id: p.id, role: cfg.matcher.classify_subject(crate::tree::subject(p)).role, ppid: p.ppid }
}
