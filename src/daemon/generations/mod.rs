//! Generations under live hosts, the daemon's part (issue 35): every
//! `sample_secs` it samples the copies of servers each live host holds two
//! or more of, tells the user when they pile up, and, with `[generations]
//! end_idle`, ends the old idle ones through the usual termination (behind
//! the respawn guard). What may end is [`crate::policy::surplus`]'s to say;
//! this file keeps the clocks and hands over the orders.

mod guard;
mod notices;
mod samples;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::cycle::Assessment;
use crate::ids::Identity;
use crate::policy::Verdict;
use crate::policy::generations::{ENVIRON_MAX, Group, SESSION_VAR, generations, session_in_environ};
use crate::policy::surplus::{self, Decision, Stage, Watch};
use crate::reap::{self, Order, Outcome};
use crate::report::status::{CopySample, GenerationStatus};
use crate::scan::{ProcFs, Snapshot};
use guard::Guard;
pub use notices::Notice;
use notices::Notices;
use samples::Samples;

/// What one sample did.
#[derive(Debug, Default)]
pub struct Sampled {
    /// The copies ended (or, in a dry run, that would be).
    pub outcomes: Vec<Outcome>,
    pub notices: Vec<Notice>,
}

/// What the loop is told of a sample, once its outcomes joined the cycle's.
#[derive(Debug, Default)]
pub struct Told {
    /// Copies were ended: the next read is a full one.
    pub ended: bool,
    pub notices: Vec<Notice>,
}

#[derive(Debug, Default)]
pub struct Generations {
    samples: Samples,
    guard: Guard,
    notices: Notices,
    /// Sessions the copies' environments name, read once per copy.
    sessions: HashMap<Identity, Option<String>>,
    last: Option<Instant>,
    /// Dry-run plans already logged: said once, not at every sample.
    told: HashSet<Identity>,
    /// The board's lines, each with its host's uid (for per-user status).
    pub status: Vec<(GenerationStatus, Option<u32>)>,
    /// The copies the last plan ends (or would end).
    pub planned: HashSet<(Identity, Verdict)>,
}

impl Generations {
    /// After a cycle `done`: samples (when due), and puts the copies it
    /// ended (or would end) with the cycle's outcomes and history entries.
    pub fn after(&mut self, procfs: &ProcFs, cfg: &Config, done: &mut crate::cycle::Done, dry_run: bool) -> Told {
        let Ok((a, _)) = &done.judged else { return Told::default() };
        let sampled = self.after_cycle(procfs, cfg, a, dry_run);
        if !dry_run && !sampled.outcomes.is_empty() {
            let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
            done.entries.extend(crate::history::entries(a, &sampled.outcomes, at));
        }
        let ended = sampled.outcomes.iter().any(|o| !o.dry_run);
        done.outcomes.extend(sampled.outcomes);
        Told { ended, notices: sampled.notices }
    }

    /// After a cycle: samples when `sample_secs` have passed since the last.
    pub fn after_cycle(&mut self, procfs: &ProcFs, cfg: &Config, a: &Assessment, dry_run: bool) -> Sampled {
        let now = Instant::now();
        let every = Duration::from_secs(cfg.generations.sample_secs);
        if self.last.is_some_and(|t| now.saturating_duration_since(t) < every) {
            return Sampled::default();
        }
        self.last = Some(now);
        let snap = &a.snapshot;
        let sessions = &mut self.sessions;
        let mut groups = generations(snap, &a.judgements, |root| {
            let id = snap.procs[root].id;
            sessions
                .entry(id)
                .or_insert_with(|| procfs.environ(id, ENVIRON_MAX).and_then(|e| session_in_environ(&e, SESSION_VAR)))
                .clone()
        });
        only_running(procfs, snap, &mut groups);
        let roots: HashSet<Identity> = groups.iter().flat_map(Group::copies).map(|c| snap.procs[c.root].id).collect();
        self.sessions.retain(|id, _| roots.contains(id));
        // Only piles are sampled: a host's one copy is never ended.
        let piles: Vec<&Group> = groups.iter().filter(|g| g.count() >= 2).collect();
        for g in &piles {
            for c in g.copies() {
                self.samples.sample(procfs, snap, c.root, &c.members, now);
            }
        }
        self.samples.prune();
        let alive: HashSet<Identity> = snap.procs.iter().map(|p| p.id).collect();
        self.guard.retain_hosts(|h| alive.contains(&h));
        self.notices.retain_piles(&piles.iter().map(|g| (snap.procs[g.host].id, g.command.as_str())).collect());
        let s = &cfg.generations;
        let window = Duration::from_secs(s.respawn_guard_secs);
        for why in self.guard.observe(snap, &groups, window, now) {
            tracing::warn!(reaper_action = "generations-guard", "respawn guard: {why}");
        }
        let decisions = self.decide(procfs, cfg, snap, &groups, dry_run, now);
        let mut out = Sampled::default();
        self.status.clear();
        for g in &piles {
            let (line, uid) = self.line(cfg, snap, g, &decisions, dry_run, now);
            let host = snap.procs[g.host].id;
            if let Some(n) = self.notices.check(s, host, &line.sentence, &g.command, line.copies, line.memory_bytes) {
                out.notices.push(n);
            }
            self.status.push((line, uid));
        }
        out.outcomes = self.end(procfs, cfg, snap, &groups, &decisions, dry_run, now);
        tracing::debug!(
            "generations: {} pile(s), {} copies sampled in {:.1} ms",
            piles.len(),
            piles.iter().map(|g| g.count()).sum::<usize>(),
            now.elapsed().as_secs_f64() * 1e3
        );
        out
    }

    /// The plan, when the policy is on; every copy kept otherwise.
    fn decide(
        &self,
        procfs: &ProcFs,
        cfg: &Config,
        snap: &Snapshot,
        groups: &[Group],
        dry_run: bool,
        now: Instant,
    ) -> HashMap<usize, Decision> {
        if !cfg.generations.end_idle {
            return HashMap::new();
        }
        let settings = surplus::Settings::of(&cfg.generations);
        let watch = |root: usize| {
            let id = snap.procs[root].id;
            let seen = self.samples.get(id, now)?;
            // Asked only of a copy idle for the whole window: it opens the pipe.
            let waiting = if seen.idle_for >= settings.idle { procfs.stdin_waiting(id) } else { Some(0) };
            Some(Watch { idle_for: seen.idle_for, waiting })
        };
        let window = Duration::from_secs(cfg.generations.respawn_guard_secs);
        // A dry run ends nothing, so the guard never sees a restart: it
        // shows every copy that would end, the first ending's alone first.
        let stage = |host: usize, command: &str| {
            if dry_run { Stage::Open } else { self.guard.stage(snap.procs[host].id, command, window, now) }
        };
        surplus::plan(snap, groups, settings, watch, stage).into_iter().map(|d| (d.root, d)).collect()
    }

    /// The board's line for one pile.
    fn line(
        &self,
        cfg: &Config,
        snap: &Snapshot,
        g: &Group,
        decisions: &HashMap<usize, Decision>,
        dry_run: bool,
        now: Instant,
    ) -> (GenerationStatus, Option<u32>) {
        let s = &cfg.generations;
        let host = &snap.procs[g.host];
        let idle = s.idle_window();
        let mut copies: Vec<CopySample> = g
            .copies()
            .map(|c| {
                let p = &snap.procs[c.root];
                let seen = self.samples.get(p.id, now);
                let d = decisions.get(&c.root);
                CopySample {
                    pid: p.pid().get(),
                    start_time: p.id.start_time.0,
                    idle_secs: seen.map_or(0, |s| s.idle_for.as_secs()),
                    watched_secs: seen.map_or(0, |s| s.watched_for.as_secs()),
                    memory_bytes: seen.map_or(0, |s| s.memory_bytes),
                    end: d.is_some_and(|d| d.end),
                    why: d.map_or_else(
                        || {
                            if s.end_idle {
                                format!("judged {}", c.verdict)
                            } else {
                                "[generations] end_idle is off".into()
                            }
                        },
                        |d| d.why.clone(),
                    ),
                }
            })
            .collect();
        copies.sort_unstable_by_key(|c| (c.start_time, c.pid));
        let memory: u64 = copies.iter().map(|c| c.memory_bytes).sum();
        let idle_copies = copies.iter().filter(|c| c.idle_secs >= idle.as_secs()).count();
        let ending = copies.iter().filter(|c| c.end).count();
        let mut sentence = crate::report::generations::sentence(
            &crate::names::name(host),
            &g.command,
            g.count(),
            g.generations.len(),
            memory,
        );
        let _ = write!(sentence, "; {idle_copies} idle for more than {}", surplus::span(idle));
        if ending > 0 {
            let _ = write!(sentence, "; {ending} {}", if dry_run { "would end" } else { "ending" });
        }
        let window = Duration::from_secs(s.respawn_guard_secs);
        let guard = match self.guard.stage(host.id, &g.command, window, now) {
            Stage::Tripped(why) => Some(why),
            _ => None,
        };
        let line = GenerationStatus {
            host_pid: host.pid().get(),
            host_start_time: host.id.start_time.0,
            host_cmd: host.display_cmd().into_owned(),
            command: g.command.clone(),
            copies: g.count(),
            generation_count: g.generations.len(),
            memory_bytes: memory,
            idle_copies,
            idle_secs: s.idle_secs,
            sample_secs: s.sample_secs,
            sentence,
            ending,
            guard,
            copy_samples: copies,
        };
        (line, host.uid().map(|u| u.0))
    }

    /// Ends the copies the plan says to end (a dry run logs them, once).
    #[allow(clippy::too_many_arguments)] // one sample's inputs, each its own thing
    fn end(
        &mut self,
        procfs: &ProcFs,
        cfg: &Config,
        snap: &Snapshot,
        groups: &[Group],
        decisions: &HashMap<usize, Decision>,
        dry_run: bool,
        now: Instant,
    ) -> Vec<Outcome> {
        let ending: Vec<&Decision> = decisions.values().filter(|d| d.end).collect();
        let planned: HashSet<(Identity, Verdict)> =
            ending.iter().map(|d| (snap.procs[d.root].id, Verdict::Surplus)).collect();
        self.told.retain(|id| planned.contains(&(*id, Verdict::Surplus)));
        self.planned = planned;
        let orders: Vec<Order> = ending
            .iter()
            .filter(|d| !dry_run || !self.told.contains(&snap.procs[d.root].id))
            .filter_map(|d| {
                let g = groups.iter().find(|g| g.host == d.host && g.command == d.command)?;
                let c = g.copies().find(|c| c.root == d.root)?;
                let members: Vec<_> =
                    c.members.iter().map(|&m| &snap.procs[m]).filter(|p| !p.state.is_zombie()).collect();
                Some(Order::new(Verdict::Surplus, d.why.clone(), &snap.procs[d.root], &members))
            })
            .collect();
        if orders.is_empty() {
            return Vec::new();
        }
        let settings = reap::Settings { term_timeout: cfg.term_timeout(), kill_wait: Duration::from_secs(1), dry_run };
        let outcomes = reap::terminate_with(procfs, orders, &settings, Some(snap));
        for o in &outcomes {
            crate::report::log::outcome(o);
            if dry_run {
                self.told.insert(o.root);
                continue;
            }
            if let Some(d) = ending.iter().find(|d| snap.procs[d.root].id == o.root)
                && let Some(g) = groups.iter().find(|g| g.host == d.host && g.command == d.command)
            {
                let newest = g.copies().map(|c| snap.procs[c.root].id.start_time.0).max().unwrap_or(0);
                self.guard.ended(snap.procs[g.host].id, &g.command, newest, now);
            }
        }
        outcomes
    }
}

/// Drops the copies whose root is not running now. A copy that exited
/// unwatched stays in a snapshot that took it over until `/proc` is listed
/// again (pidfd mode), and its counters, unreadable, never move: counted,
/// it would make the host's one running copy look neither the newest nor
/// the only one, and idle enough to end. Each root's `stat` is read (the
/// piles' copies, every `sample_secs`; a host's one copy is no pile either
/// way). A group left with none is no pile.
fn only_running(procfs: &ProcFs, snap: &Snapshot, groups: &mut [Group]) {
    let running = |root: usize| {
        let id = snap.procs[root].id;
        procfs.stat(id.pid).is_some_and(|st| st.start_time == id.start_time.0 && st.state != b'Z')
    };
    for g in groups.iter_mut().filter(|g| g.count() >= 2) {
        for generation in &mut g.generations {
            generation.copies.retain(|c| running(c.root));
        }
        g.generations.retain(|generation| !generation.copies.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::policy::generations::{Copy, Generation};
    use crate::scan::{Process, parse};

    /// Real processes: a running copy (this test's child) and one that
    /// exited and was reaped, still in the snapshot as a pidfd-mode scan
    /// between listings takes it over.
    #[test]
    fn a_copy_that_exited_unwatched_is_not_counted_beside_the_running_one() {
        let procfs = ProcFs::default();
        let mut running = Command::new("sleep").arg("60").spawn().expect("sleep");
        let mut gone = Command::new("true").spawn().expect("true");
        let gone_pid = gone.id().cast_signed();
        let read = |pid: u32| procfs.stat(crate::ids::Pid::new(pid.cast_signed()).unwrap()).expect("stat");
        let (run_st, gone_st): (parse::Stat, parse::Stat) = (read(running.id()), read(gone.id()));
        gone.wait().expect("reaped");
        let me = std::process::id().cast_signed();
        let mut procs = vec![
            Process::synthetic(me, 1, 1, "host"),
            Process::synthetic(running.id().cast_signed(), me, run_st.start_time, "server"),
            Process::synthetic(gone_pid, me, gone_st.start_time, "server"),
        ];
        procs.sort_by_key(Process::pid);
        let snap = Snapshot::from_processes(procs, crate::scan::Context::default());
        let at = |pid: i32| snap.index_of(crate::ids::Pid::new(pid).unwrap()).unwrap();
        let copy = |root| Copy { root, members: vec![root], session: None, held: None, verdict: Verdict::Live };
        let mut groups = vec![Group {
            host: at(me),
            command: "server".into(),
            generations: vec![
                Generation { session: None, copies: vec![copy(at(running.id().cast_signed()))] },
                Generation { session: None, copies: vec![copy(at(gone_pid))] },
            ],
        }];
        only_running(&procfs, &snap, &mut groups);
        running.kill().expect("kill our own sleep");
        running.wait().expect("reaped");
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].count(), 1, "the exited copy still counted: {groups:?}");
        assert_eq!(groups[0].copies().next().unwrap().root, at(running.id().cast_signed()));
    }
}
