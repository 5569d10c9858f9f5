//! `reaperctl generations --json`: per live host, its server copies by
//! command and generation, with the evidence per copy (issue 35). Fields
//! are only ever added, never renamed (docs/json.md's rule). The human view
//! is `generations_text.rs`.

use std::collections::HashMap;

use serde::Serialize;

use crate::policy::generations::{Group, WINDOW_SECS};
use crate::report::status::GenerationStatus;
use crate::scan::Snapshot;

/// What `idle` says when no daemon's samples are at hand: one look cannot
/// tell an idle copy from a busy one.
pub const IDLE_UNKNOWN: &str = "needs the daemon's samples";

/// What `idle` says when the daemon answered with its samples.
pub fn idle_sampled(every_secs: u64) -> String {
    format!("sampled by the daemon every {every_secs}s")
}

/// What was read of one copy's tree (every member summed), by the caller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub memory_bytes: u64,
    /// Members whose `smaps_rollup` was unreadable: counted by RSS + swap.
    pub memory_fallbacks: usize,
    /// utime + stime, in clock ticks; `None` when no member's `stat` read.
    pub cpu_ticks: Option<u64>,
    /// `rchar` / `wchar` of `/proc/PID/io`; `None` when no member's read.
    pub rchar: Option<u64>,
    pub wchar: Option<u64>,
    /// Members whose `io` could not be read (another user's, no ptrace
    /// access): the sums leave them out.
    pub io_unreadable: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct GenerationsReport {
    /// Copies started within this many seconds of a generation's first copy
    /// (and of one session) are one generation.
    pub window_secs: u64,
    /// What is known of idleness: [`IDLE_UNKNOWN`], or [`idle_sampled`].
    pub idle: String,
    pub hosts: Vec<HostCopies>,
    pub summary: Summary,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub hosts: usize,
    pub commands: usize,
    pub copies: usize,
    pub generations: usize,
    pub memory_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct HostCopies {
    pub host_pid: i32,
    /// With `host_pid`, the host's identity (clock ticks since boot).
    pub host_start_time: u64,
    /// Masked like every command line shown.
    pub host_cmd: String,
    pub copies: usize,
    pub memory_bytes: u64,
    pub servers: Vec<ServerCopies>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ServerCopies {
    pub command: String,
    pub copies: usize,
    pub generation_count: usize,
    pub memory_bytes: u64,
    /// "host H holds N copies of X in G generations, M", and, from the
    /// daemon's samples, "; I idle for more than W".
    pub sentence: String,
    /// From the daemon's samples (`null` without them): copies idle for
    /// `idle_secs` or more, and that window.
    pub idle_copies: Option<usize>,
    pub idle_secs: Option<u64>,
    /// Copies per session their environment names; `null`: none named.
    pub sessions: Vec<SessionCount>,
    /// Oldest first.
    pub generations: Vec<GenerationOut>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SessionCount {
    pub session: Option<String>,
    pub copies: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct GenerationOut {
    pub session: Option<String>,
    /// Seconds since its first copy started.
    pub age_secs: f64,
    pub memory_bytes: u64,
    pub copies: Vec<CopyOut>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CopyOut {
    pub pid: i32,
    /// Clock ticks since boot (`stat` field 22): with `pid`, its identity.
    pub start_time: u64,
    pub age_secs: f64,
    pub members: usize,
    pub memory_bytes: u64,
    /// `pss+swappss` (`smaps_rollup` of every member), or `rss+swap` when
    /// some member's could not be read (`rss+swap for N of M`).
    pub memory_source: String,
    pub cpu_secs: Option<f64>,
    pub rchar: Option<u64>,
    pub wchar: Option<u64>,
    pub io_unreadable_members: usize,
    /// Whether the host still holds the far end of its stdin (pipe's write
    /// end, socket's peer); `null`: not known.
    pub host_holds_transport: Option<bool>,
    pub session: Option<String>,
    /// The tree's verdict, as `scan` gives it.
    pub verdict: crate::policy::Verdict,
    /// From the daemon's samples, matched by (`pid`, `start_time`); `null`
    /// where it has none of this copy (no daemon, or not sampled yet):
    /// since its tree last read, wrote or used CPU, and since first sampled.
    pub idle_secs: Option<u64>,
    pub watched_secs: Option<u64>,
    /// What the daemon's `[generations]` policy decided of it, and why.
    pub policy_end: Option<bool>,
    pub policy_why: Option<String>,
}

/// The report for `groups`, with each copy's `usage` (by root index).
pub fn build(snap: &Snapshot, groups: &[Group], usage: &HashMap<usize, Usage>) -> GenerationsReport {
    let tck = snap.ctx.clk_tck.max(1) as f64;
    let age = |root: usize| snap.ctx.uptime_secs - snap.procs[root].id.start_time.0 as f64 / tck;
    let mut hosts: Vec<HostCopies> = Vec::new();
    for g in groups {
        let host = &snap.procs[g.host];
        if hosts.last().is_none_or(|h| h.host_pid != host.pid().get()) {
            hosts.push(HostCopies {
                host_pid: host.pid().get(),
                host_start_time: host.id.start_time.0,
                host_cmd: host.display_cmd().into_owned(),
                copies: 0,
                memory_bytes: 0,
                servers: Vec::new(),
            });
        }
        let none = Usage::default();
        let mut gens = Vec::new();
        for one in &g.generations {
            let copies: Vec<CopyOut> = one
                .copies
                .iter()
                .map(|c| {
                    let u = usage.get(&c.root).unwrap_or(&none);
                    let p = &snap.procs[c.root];
                    CopyOut {
                        pid: p.pid().get(),
                        start_time: p.id.start_time.0,
                        age_secs: age(c.root),
                        members: c.members.len(),
                        memory_bytes: u.memory_bytes,
                        memory_source: if u.memory_fallbacks == 0 {
                            "pss+swappss".into()
                        } else {
                            format!("rss+swap for {} of {}", u.memory_fallbacks, c.members.len())
                        },
                        cpu_secs: u.cpu_ticks.map(|t| t as f64 / tck),
                        rchar: u.rchar,
                        wchar: u.wchar,
                        io_unreadable_members: u.io_unreadable,
                        host_holds_transport: c.held,
                        session: c.session.clone(),
                        verdict: c.verdict,
                        idle_secs: None,
                        watched_secs: None,
                        policy_end: None,
                        policy_why: None,
                    }
                })
                .collect();
            gens.push(GenerationOut {
                session: one.session.clone(),
                age_secs: one.copies.first().map_or(0.0, |c| age(c.root)),
                memory_bytes: copies.iter().map(|c| c.memory_bytes).sum(),
                copies,
            });
        }
        let memory: u64 = gens.iter().map(|g| g.memory_bytes).sum();
        let mut sessions: Vec<SessionCount> = Vec::new();
        for c in g.copies() {
            match sessions.iter_mut().find(|s| s.session == c.session) {
                Some(s) => s.copies += 1,
                None => sessions.push(SessionCount { session: c.session.clone(), copies: 1 }),
            }
        }
        let h = hosts.last_mut().expect("pushed above");
        h.copies += g.count();
        h.memory_bytes += memory;
        h.servers.push(ServerCopies {
            sentence: sentence(&crate::names::name(host), &g.command, g.count(), gens.len(), memory),
            command: g.command.clone(),
            copies: g.count(),
            generation_count: gens.len(),
            memory_bytes: memory,
            idle_copies: None,
            idle_secs: None,
            sessions,
            generations: gens,
        });
    }
    let summary = Summary {
        hosts: hosts.len(),
        commands: groups.len(),
        copies: hosts.iter().map(|h| h.copies).sum(),
        generations: groups.iter().map(|g| g.generations.len()).sum(),
        memory_bytes: hosts.iter().map(|h| h.memory_bytes).sum(),
    };
    GenerationsReport { window_secs: WINDOW_SECS, idle: IDLE_UNKNOWN.into(), hosts, summary }
}

/// Adds the daemon's samples (`piles`, from its status; it samples every
/// `every_secs`) to the report: per copy by identity, per pile by host
/// identity and command. A copy the daemon has not sampled keeps `null`s:
/// its one look says nothing of idleness.
pub fn merge_samples(r: &mut GenerationsReport, piles: &[GenerationStatus], every_secs: u64) {
    r.idle = idle_sampled(every_secs);
    for h in &mut r.hosts {
        for s in &mut h.servers {
            let Some(p) = piles
                .iter()
                .find(|p| p.host_pid == h.host_pid && p.host_start_time == h.host_start_time && p.command == s.command)
            else {
                continue;
            };
            s.idle_copies = Some(p.idle_copies);
            s.idle_secs = Some(p.idle_secs);
            s.sentence.push_str(&idle_clause(p.idle_copies, p.idle_secs));
            for c in s.generations.iter_mut().flat_map(|g| g.copies.iter_mut()) {
                // A copy listed before its first sample has 0 watched: not seen yet.
                let Some(x) = p
                    .copy_samples
                    .iter()
                    .find(|x| x.pid == c.pid && x.start_time == c.start_time && x.watched_secs > 0)
                else {
                    continue;
                };
                c.idle_secs = Some(x.idle_secs);
                c.watched_secs = Some(x.watched_secs);
                c.policy_end = Some(x.end);
                c.policy_why = Some(x.why.clone());
            }
        }
    }
}

/// "; I idle for more than W", as the daemon's own sentence says it.
pub fn idle_clause(idle_copies: usize, idle_secs: u64) -> String {
    format!(
        "; {idle_copies} idle for more than {}",
        crate::policy::surplus::span(std::time::Duration::from_secs(idle_secs))
    )
}

/// The sentence issue 35 asks every view to say.
pub fn sentence(host: &str, command: &str, copies: usize, generations: usize, memory: u64) -> String {
    format!(
        "host {host} holds {copies} {} of {command} in {generations} {}, {}",
        if copies == 1 { "copy" } else { "copies" },
        if generations == 1 { "generation" } else { "generations" },
        super::bytes(memory)
    )
}

#[cfg(test)]
mod tests {
    use super::sentence;

    #[test]
    fn the_sentence_counts_in_words() {
        assert_eq!(
            sentence("claude (pid 5)", "@playwright/mcp", 80, 61, 26_500 * 1024 * 1024),
            "host claude (pid 5) holds 80 copies of @playwright/mcp in 61 generations, 25.9 GiB"
        );
        assert_eq!(sentence("c (pid 5)", "x", 1, 1, 0), "host c (pid 5) holds 1 copy of x in 1 generation, 0 B");
    }
}
