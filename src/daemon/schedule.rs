//! When the daemon scans next, and how much that read takes over from the
//! last snapshot: the periodic tick, young trees' deadlines, scans wanted
//! soon after an exec or an exit, and the full and fresh reads that
//! double-check the incremental ones. Which pids an incremental read must
//! read again is scan's business ([`crate::scan::Read`]).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::ids::{Identity, Pid};
use crate::policy::Judgement;
use crate::scan::{Process, Read, Snapshot, Sweep};

/// In event mode, how often a full read of /proc double-checks the deltas.
const RESYNC: Duration = Duration::from_secs(300);
/// In pidfd mode, ticks read only new pids; how often a full read catches up
/// with what such ticks miss (an exec under the same pid, a re-parenting
/// whose old parent was not watched).
const PIDFD_RESYNC: Duration = Duration::from_secs(120);
/// How often a read takes nothing over at all, in case an exec kept its comm
/// (pidfd mode cannot see those).
const FRESH: Duration = Duration::from_secs(600);
/// Event mode while quiet ([`Schedule::period`]): the kernel reports every
/// fork, exec and exit (and says when it lost some: a fresh read then), so
/// the full and fresh reads only double-check deltas, with nothing to
/// follow; they come this many times further apart (issue 37: at 5,000
/// processes a full read is ~92 ms, a fresh one ~235 ms, together ~0.055 %
/// of a core in event mode at the usual spacing). Pidfd mode keeps its
/// spacing: its full reads are how it learns of an exec under the same pid.
const QUIET_SPACING: u32 = 3;
/// Pidfd mode while quiet: no full or fresh read of every process at once;
/// each periodic scan reads the `stat` of the processes whose pid is its
/// turn modulo this again, as a full read does (the command line taken over
/// unless start time, comm or `startstack` changed: an exec), so that every
/// process is read again within this many quiet scans (an hour at the
/// default `quiet_interval_secs`). What a decision needs at once is read
/// where it happens (`scan/family.rs`): the children of a parent gone
/// unwatched, the parent of a newcomer. What waits for its turn is an exec
/// under the same pid that forked nothing, while no host or server runs.
/// Issue 37: at 5,000 processes a full read is ~100 ms every 120 s, a fresh
/// one ~220 ms every 600 s: ~0.12 % of a core in all, the idle goal 0.05 %;
/// a turn is ~170 `stat`s, a few ms.
const SPREAD: u32 = 30;

/// Pidfd mode: the periodic scan's sweep asks the
/// kernel about every process whose exit re-parents something (it has
/// children), every member of a tree, and one pid in this many of the
/// rest, in turn. A leaf's exit orphans nothing: its entry, kept until its
/// turn (this many periodic scans at most), costs memory and keeps nothing
/// a verdict needs. Issue 37: a sweep of every pid was ~6 ms of the daemon
/// at 10,000 processes in the load bench, at each periodic scan.
const SWEEP_SPREAD: u32 = 8;

/// Pidfd mode: how the next read finds the processes that exited unwatched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Listing {
    /// The periodic scan sweeps the snapshot for them; those between take
    /// the new pids counted and the watched exits.
    #[default]
    AsDue,
    /// Pids were created faster than they could be counted (or the counter
    /// wrapped, or cannot be read): it lists `/proc`.
    Wanted,
    /// Nothing was created or reaped since the last listing (see
    /// `births::Census`): it need not sweep either.
    Unneeded,
}

pub struct Schedule {
    /// The last judged snapshot, what the next read builds on, and what the
    /// kernel reported changed since (event mode).
    last: Option<Snapshot>,
    /// The children of each parent in `last`, indexed when first asked: an
    /// exit costs a lookup, not a pass over the table (at 10,000 processes
    /// and 300 exits a second that pass was 7.5 % of the daemon's time).
    kids: std::cell::OnceCell<HashMap<Pid, Vec<Identity>>>,
    changed: HashSet<Pid>,
    /// Events were lost or never flowed: the next cycle reads everything afresh.
    need_full: bool,
    /// A reap happened, or a user asked: the next read is a full one.
    want_full: bool,
    /// Pidfd mode: how the next read finds unwatched exits.
    listing: Listing,
    last_full: Instant,
    last_fresh: Instant,
    /// When the last scan started. The periodic scan is due `interval` after
    /// it, whatever events arrive in between (they must not push it back).
    last_scan: Instant,
    /// When a read last dropped every detail (fds, stdin ends, sockets):
    /// reads in between keep those of the processes they do not read again,
    /// and one at least every `interval` drops them (the periodic scan).
    last_details: Instant,
    /// A young tree's grace runs out.
    next_young: Option<Instant>,
    /// A scan wanted shortly (a host or server was just exec'd).
    soon: Option<Instant>,
    /// The last scan found nothing to follow (see [`Schedule::period`]).
    quiet: bool,
    /// Pidfd mode while quiet: whose turn it is to be read afresh ([`SPREAD`]).
    turn: u32,
    /// Pidfd mode: the members of the trees last judged, and whose turn it
    /// is to be swept ([`SWEEP_SPREAD`]).
    members: HashSet<Pid>,
    sweep_turn: u32,
}

impl Schedule {
    pub fn new() -> Schedule {
        let now = Instant::now();
        Schedule {
            last: None,
            kids: std::cell::OnceCell::new(),
            changed: HashSet::new(),
            need_full: true,
            want_full: false,
            listing: Listing::AsDue,
            last_full: now,
            last_fresh: now,
            last_scan: now,
            last_details: now,
            next_young: None,
            soon: None,
            quiet: false,
            turn: 0,
            members: HashSet::new(),
            sweep_turn: 0,
        }
    }

    /// The periodic scan's period: `quiet` while the last scan found no
    /// host or server, `interval` otherwise (issue 37).
    ///
    /// The periodic scan is for what no event or look announces: the fds
    /// and terminals of the trees there are, an exec that forked nothing
    /// (pidfd mode). With no tree, no host and no server, what is left is a
    /// server only its program shows (`hostcfg`'s SDK evidence), under a
    /// host no pattern names, or an exec without a fork in pidfd mode:
    /// found by the next quiet scan rather than the next interval. Every
    /// host and server a pattern names is heard (event mode) or counted
    /// (pidfd mode) when it starts and scanned for soon, which ends the
    /// quiet. Waiting longer can delay a reap, never make one: each reap
    /// is decided by a scan, on what it reads then.
    pub fn period(&self, interval: Duration, quiet: Duration) -> Duration {
        if self.quiet { quiet.max(interval) } else { interval }
    }

    /// Whether the last scan found nothing to follow.
    pub fn quiet(&self) -> bool {
        self.quiet
    }

    /// What the last scan found: something to follow, or nothing.
    pub fn found(&mut self, nothing_to_follow: bool) {
        self.quiet = nothing_to_follow;
    }

    /// When the next scan is due unless something calls for one earlier.
    pub fn deadline(&self, interval: Duration) -> Instant {
        let mut deadline = (self.last_scan + interval).min(self.last_details + interval);
        if let Some(y) = self.next_young {
            deadline = deadline.min(y);
        }
        if let Some(s) = self.soon {
            deadline = deadline.min(s);
        }
        deadline
    }

    /// Whether a tree waits out its grace (a reason to scan early when
    /// memory pressure would cut it short).
    pub fn young_waiting(&self) -> bool {
        self.next_young.is_some()
    }

    /// A scan starts now (or, after the first cycle, the clock starts).
    pub fn mark_scan(&mut self) {
        self.last_scan = Instant::now();
        self.soon = None;
    }

    /// When a scan for an exited host or owner may start: 5 ms from now (the
    /// kernel re-parents its children meanwhile), and 50 ms after the last
    /// scan at the earliest, which keeps reaction well within the 200 ms
    /// target, and no more than twenty such scans a second when hosts exit by
    /// the dozen (`claude -p` loops).
    pub fn exit_scan_at(&self) -> Instant {
        (Instant::now() + Duration::from_millis(5)).max(self.last_scan + Duration::from_millis(50))
    }

    /// A new host or server: look soon, so its host is watched before it can
    /// die. At most two such scans a second: a busy machine may exec hosts
    /// and servers all the time.
    pub fn soon_after_exec(&mut self) {
        if self.soon.is_none() {
            self.soon =
                Some((Instant::now() + Duration::from_millis(50)).max(self.last_scan + Duration::from_millis(500)));
        }
    }

    /// The children `pid` had at the last judged snapshot (`None`: there is none).
    pub fn children_of(&self, pid: Pid) -> Option<Vec<Identity>> {
        let s = self.last.as_ref()?;
        let kids = self.kids.get_or_init(|| {
            let mut kids: HashMap<Pid, Vec<Identity>> = HashMap::new();
            for p in &s.procs {
                if let Some(pp) = p.ppid {
                    kids.entry(pp).or_default().push(p.id);
                }
            }
            kids
        });
        Some(kids.get(&pid).cloned().unwrap_or_default())
    }

    /// The parent of `pid` at the last judged snapshot.
    pub fn parent_of(&self, pid: Pid) -> Option<Pid> {
        self.last.as_ref()?.get(pid)?.ppid
    }

    /// The kernel reported a fork, exec or exit of `pid`.
    pub fn changed(&mut self, pid: Pid) {
        self.changed.insert(pid);
    }

    /// A pid born since the last scan is gone already: the next read need
    /// not open it (under churn most are, ~250 a second, each a failed
    /// lookup; issue 37). Pidfd mode: the births look found it gone; gone
    /// stays gone until the pid counter wraps, which makes the next read a
    /// listing (see `births`), and a listing reads every new pid anyway.
    /// Event mode: the kernel reported its exit; a later fork that reuses
    /// the pid marks it changed again. Only a pid the last snapshot lacks:
    /// one it holds must be read to leave it (a zombie is read as one).
    pub fn gone_unread(&mut self, pid: Pid) {
        if self.last.as_ref().is_some_and(|s| s.get(pid).is_none()) {
            self.changed.remove(&pid);
        }
    }

    /// The next read takes nothing over (events lost, a failed cycle).
    pub fn need_full(&mut self) {
        self.need_full = true;
    }

    /// The next read re-reads every `stat` (a user asked to reap now).
    pub fn want_full(&mut self) {
        self.want_full = true;
    }

    /// Pidfd mode: the new pids are not all known; the next read lists `/proc`.
    pub fn want_listing(&mut self) {
        self.listing = Listing::Wanted;
    }

    /// A cycle judged `snapshot`: the next read builds on it; a young tree's deadline
    /// wakes the loop a moment after it passes.
    pub fn judged(&mut self, snapshot: Snapshot, judgements: &[Judgement]) {
        let now = Instant::now();
        self.next_young = judgements
            .iter()
            .filter_map(|j| j.grace_left)
            .map(|left| now + left)
            .min()
            .map(|t| t + Duration::from_millis(20));
        self.members =
            judgements.iter().flat_map(|j| j.members.iter().map(|&(m, _)| snapshot.procs[m].pid())).collect();
        self.last = Some(snapshot);
        self.kids = std::cell::OnceCell::new();
    }

    /// Event mode reads only what the kernel reported changed; pidfd mode
    /// reads only new pids, and what the watched processes that `exited`
    /// leave behind: the scans between two periodic ones take the new pids
    /// from the pid counter ([`super::births`], marked `changed`), not from
    /// a listing of `/proc`; a process that exited unwatched stays in the
    /// snapshot until the next periodic scan finds it gone (a leaf outside
    /// every tree: up to [`SWEEP_SPREAD`] of them), which can only keep a
    /// tree (an owner, a host seen alive), and never one to reap: the
    /// re-check reads every member and the chain above afresh.
    /// The periodic scan does not list `/proc` either: it sweeps the
    /// snapshot instead ([`Sweep`]: is there still a task at each pid?),
    /// which finds the same exits, the pid counter having told every pid
    /// allocated since (issue 37: at 10,000 processes a listing is ~16 ms of
    /// the kernel's, 1.6 µs a directory entry; at the load bench's 5 s
    /// interval the listings were ~0.3 % of a core, more than half its
    /// churn budget). Only when the pids were not
    /// all counted ([`Schedule::want_listing`]) does a read list `/proc`,
    /// besides the full and fresh reads.
    /// A scan with nothing created or reaped since the last listing
    /// ([`Schedule::table_unchanged`]) needs neither.
    /// Full reads still come every `RESYNC` / `PIDFD_RESYNC`,
    /// and fresh ones every `FRESH` (event mode while quiet: `QUIET_SPACING`
    /// times as far apart; pidfd mode while quiet reads a turn of processes
    /// afresh at each periodic scan instead, see [`SPREAD`]) and whenever
    /// events were lost. Such a
    /// read keeps the details of the processes it takes over unless the last
    /// one that dropped them is `interval` old: the periodic scan reads every
    /// detail afresh, the scans that exits and execs bring in between read
    /// them for what they read again.
    /// Pidfd mode: the table is as the last listing found it (see
    /// `births::Census`): the next read needs no listing of its own.
    pub fn table_unchanged(&mut self) {
        if self.listing != Listing::Wanted {
            self.listing = Listing::Unneeded;
        }
    }

    pub fn next_read(&mut self, events: bool, exited: HashSet<Pid>, interval: Duration) -> Read {
        let listing = std::mem::take(&mut self.listing);
        let prev = self.last.take();
        self.kids = std::cell::OnceCell::new();
        let changed = std::mem::take(&mut self.changed);
        let want_full = std::mem::take(&mut self.want_full);
        let now = Instant::now();
        let spacing = if events && self.quiet { QUIET_SPACING } else { 1 };
        let spread = !events && self.quiet;
        if self.need_full || prev.is_none() || (!spread && self.last_fresh.elapsed() >= FRESH * spacing) {
            self.need_full = false;
            (self.last_full, self.last_fresh, self.last_details) = (now, now, now);
            return Read::Fresh;
        }
        let resync = (if events { RESYNC } else { PIDFD_RESYNC }) * spacing;
        match prev {
            Some(prev) if !want_full && (spread || self.last_full.elapsed() < resync) => {
                // A little early counts: the periodic scan is due right at `interval`.
                let details = self.last_details.elapsed() + Duration::from_millis(50) < interval;
                if !details {
                    self.last_details = now;
                }
                let turn = if spread && !details { self.next_turn(&prev) } else { Vec::new() };
                if spread {
                    // The turns stand in for the full and fresh reads, which
                    // resume on their clocks when the quiet ends.
                    (self.last_full, self.last_fresh) = (now, now);
                }
                if events {
                    Read::Delta { prev, changed, details, turn, sweep: Sweep::Off }
                } else if listing == Listing::Wanted {
                    Read::NewPids { prev, changed, exited, details, turn }
                } else {
                    let mut changed = changed;
                    changed.extend(exited);
                    let sweep = if details || listing != Listing::AsDue {
                        Sweep::Off
                    } else {
                        Sweep::Only(self.pids_to_sweep(&prev))
                    };
                    Read::Delta { prev, changed, details, turn, sweep }
                }
            }
            prev => {
                (self.last_full, self.last_details) = (now, now);
                Read::Stats { prev, changed }
            }
        }
    }

    /// The pids of `prev` to sweep ([`SWEEP_SPREAD`]).
    fn pids_to_sweep(&mut self, prev: &Snapshot) -> Vec<Pid> {
        let turn = self.sweep_turn;
        self.sweep_turn = (turn + 1) % SWEEP_SPREAD;
        let parents: HashSet<Pid> = prev.procs.iter().filter_map(|p| p.ppid).collect();
        let wanted = |pid: Pid| {
            pid.get().cast_unsigned() % SWEEP_SPREAD == turn || parents.contains(&pid) || self.members.contains(&pid)
        };
        prev.procs.iter().map(Process::pid).filter(|&pid| wanted(pid)).collect()
    }

    /// The pids of `prev` whose turn it is to be read afresh ([`SPREAD`]).
    fn next_turn(&mut self, prev: &Snapshot) -> Vec<Pid> {
        let turn = self.turn;
        self.turn = (turn + 1) % SPREAD;
        prev.procs
            .iter()
            .filter(|p| !p.kernel_thread && p.pid().get().cast_unsigned() % SPREAD == turn)
            .map(Process::pid)
            .collect()
    }
}

/// Whether `read` finds every process that exited since the last read
/// (pidfd mode: a listing of `/proc`; a sweep does not, asking of leaves
/// in turn): the census the listing began with then stands for the table.
pub fn finds_exits(read: &Read) -> bool {
    !matches!(read, Read::Delta { .. })
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
