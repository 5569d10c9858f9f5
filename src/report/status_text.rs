//! The human view of `reaperctl status`: the daemon's status in words.

use std::fmt::Write;

use super::status::{PressureStatus, Status, Totals};
use super::{age, bytes};

/// Text the daemon sent that may hold a user's (command lines, reasons):
/// escaped here too, whatever the daemon did (see [`crate::names::printable`]).
fn p(s: &str) -> String {
    crate::names::printable(s).into_owned()
}

/// Trees (and duplicate groups) listed at most.
const MAX_TREES: usize = 50;

/// How often the daemon scans now.
fn period(s: &Status) -> String {
    if s.quiet && s.quiet_interval_secs > s.interval_secs {
        format!("every {}s while no host or server runs, as now", s.quiet_interval_secs)
    } else {
        format!("every {}s", s.interval_secs)
    }
}

/// The human view of `reaperctl status`.
pub fn render(s: &Status) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "mcp-reaperd {} (pid {}), up {}", s.version, s.pid, age(s.uptime_secs));
    let _ = writeln!(o, "mode:     {}", s.mode);
    let _ = writeln!(o, "config:   {}", p(&s.config_sources.join(", ")));
    if let Some(r) = &s.last_reload {
        let what = if r.ok { "ok" } else { "FAILED, previous config kept" };
        let _ = writeln!(
            o,
            "reload:   {what}{}",
            if r.messages.is_empty() { String::new() } else { format!(": {}", p(&r.messages.join("; "))) }
        );
    }
    let _ = writeln!(o, "events:   {} (full scan {}, grace {}s)", s.event_mode, period(s), s.grace_secs);
    if let Some(why) = &s.event_mode_reason {
        let _ = writeln!(o, "          no process events: {}", p(why));
    }
    let _ = writeln!(
        o,
        "scans:    {} (last {:.1} ms over {} processes)",
        s.scans.count, s.scans.last_duration_ms, s.scans.last_processes
    );
    if let Some(p) = &s.memory_pressure {
        let _ = writeln!(o, "pressure: {}", pressure(p));
    }
    // By name, as when the protocol's verdicts were strings.
    let mut counts: Vec<(&str, usize)> =
        s.by_verdict.iter().filter(|(_, n)| **n > 0).map(|(v, &n)| (v.as_str(), n)).collect();
    counts.sort_unstable();
    let counts: Vec<String> = counts.iter().map(|(v, n)| format!("{n} {v}")).collect();
    let _ = writeln!(o, "trees:    {}", if counts.is_empty() { "none".into() } else { counts.join(", ") });
    trees(&mut o, &s.trees);
    for d in s.duplicates.iter().take(MAX_TREES) {
        let roots: Vec<String> = d.root_pids.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            o,
            "  duplicate {}× {} under host {} ({}) in {} generation(s), {} RSS: trees {}",
            d.count,
            p(&d.command),
            d.host_pid,
            p(&d.host_cmd),
            d.generation_count,
            bytes(d.rss_bytes),
            roots.join(", ")
        );
    }
    for g in s.generations.iter().take(MAX_TREES) {
        let _ = writeln!(o, "  generations: {}", p(&g.sentence));
        if let Some(why) = &g.guard {
            let _ = writeln!(o, "    respawn guard: {}", p(why));
        }
    }
    if s.generations.len() > MAX_TREES {
        let _ = writeln!(o, "  … {} more piles: reaperctl status --json", s.generations.len() - MAX_TREES);
    }
    let t = &s.totals;
    let _ = writeln!(
        o,
        "reaped:   {} tree(s), {} process(es), {} reclaimed, {} escalation(s), {} failure(s)",
        t.trees_reaped,
        t.processes_reaped,
        bytes(t.reclaimed_bytes),
        t.escalations,
        t.failures
    );
    if t.containers_stopped > 0 {
        let _ = writeln!(o, "          {} container(s) stopped, {}", t.containers_stopped, bytes(t.container_bytes));
    }
    if let Some(l) = &s.lifetime {
        let since = l.since_unix.map_or_else(|| "nothing yet".to_string(), |t| format!("since {}", super::utc(t)));
        let _ = writeln!(o, "lifetime: {} ({since}; `reaperctl history`)", totals_words(&l.totals));
    }
    recent(&mut o, s);
    if !s.run_sessions.is_empty() {
        let _ = writeln!(o, "run sessions:");
        for r in &s.run_sessions {
            let host = match (r.host_pid, &r.host_cmd) {
                (Some(pid), Some(c)) => format!("{} (pid {pid})", p(c)),
                _ => "host exited".to_string(),
            };
            let _ = writeln!(
                o,
                "  wrapper {:>7}  {} member(s), {} ({})  {host}{}",
                r.wrapper_pid,
                r.members,
                bytes(r.memory_bytes),
                r.memory_source,
                r.cgroup.as_deref().map(|c| format!("\n            cgroup {}", p(c))).unwrap_or_default()
            );
        }
    }
    if !s.session_ends.is_empty() {
        let _ = writeln!(o, "hosts ending their session (their trees go without grace once they exit):");
        for e in &s.session_ends {
            // The reason names the host (and the hook's reason).
            let _ = writeln!(o, "  pid {:>7}  {} tree(s)  {}", e.host_pid, e.trees, p(&e.reason));
        }
    }
    if let Some(uid) = s.filtered_for_uid {
        let _ = writeln!(o, "(showing only trees of uid {uid})");
    }
    o
}

/// A total in words: the lifetime line here, and `reaperctl history`'s.
pub fn totals_words(t: &Totals) -> String {
    let mut s = format!(
        "{} tree(s), {} process(es), {} returned",
        t.trees_reaped,
        t.processes_reaped,
        bytes(t.reclaimed_bytes)
    );
    if t.containers_stopped > 0 {
        let _ = write!(s, ", {} container(s) stopped ({})", t.containers_stopped, bytes(t.container_bytes));
    }
    if t.escalations > 0 {
        let _ = write!(s, ", {} needed SIGKILL", t.escalations);
    }
    if t.failures > 0 {
        let _ = write!(s, ", {} failed", t.failures);
    }
    s
}

/// The last reaps (and plans), a repeated one once with its count.
fn recent(o: &mut String, s: &Status) {
    if s.recent.is_empty() {
        return;
    }
    let _ = writeln!(o, "recent:");
    for e in s.recent.iter().take(10) {
        let again = if e.repeats == 0 {
            String::new()
        } else {
            let over = e.at_unix.saturating_sub(e.first_at_unix);
            #[allow(clippy::cast_precision_loss)] // seconds: far below 2^52
            let over = age(over as f64);
            format!(" [{} times over {over}]", e.repeats + 1)
        };
        let _ = writeln!(o, "  {}{again}", p(&e.line));
    }
}

/// "memory some avg10=23.4% avg60=5.0% avg300=1.2% (threshold 10%: grace skipped; PSI trigger)".
fn pressure(p: &PressureStatus) -> String {
    let how = match p.watch.as_str() {
        "trigger" => "PSI trigger".to_string(),
        "each-cycle" => "read every cycle".to_string(),
        other => other.to_string(),
    };
    let note = p.note.as_ref().map(|n| format!(": {}", crate::names::printable(n))).unwrap_or_default();
    match (p.some_avg10, p.some_avg60, p.some_avg300) {
        (Some(a10), Some(a60), Some(a300)) => format!(
            "memory some avg10={a10:.1}% avg60={a60:.1}% avg300={a300:.1}% (threshold {}%{}; {how})",
            p.threshold_percent,
            if p.above { ": orphans skip their grace" } else { "" }
        ),
        _ if p.watch == "off" => format!("off{note}"),
        _ => format!("memory: not read yet ({how})"),
    }
}

/// Bounded, whatever users start: the rest are in `--json`.
fn trees(o: &mut String, trees: &[super::status::TreeStatus]) {
    for t in trees.iter().take(MAX_TREES) {
        tree(o, t);
    }
    if let Some(more) = trees.len().checked_sub(MAX_TREES).filter(|&n| n > 0) {
        let _ = writeln!(o, "  … and {more} more tree(s) (`reaperctl status --json` lists them all)");
    }
}

fn tree(o: &mut String, t: &super::status::TreeStatus) {
    let left = t.grace_left_secs.map(|l| format!(" ({:.0}s left)", l.ceil())).unwrap_or_default();
    let _ = writeln!(
        o,
        "  {:<9} {:>7} {:>8}  {}{left}\n            {}",
        t.verdict,
        t.root,
        bytes(t.memory_bytes),
        p(&t.root_cmd),
        p(&t.reason)
    );
    if let Some(s) = &t.suspect {
        let _ = writeln!(o, "            suspect, kept: {}", p(s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_with_many_trees_lists_fifty() {
        let t: crate::report::status::TreeStatus = serde_json::from_value(serde_json::json!({
            "verdict": "live", "reap": false, "root": 7, "members": 1, "memory_bytes": 1, "root_cmd": "npx x",
            "reason": "r"
        }))
        .expect("a tree status");
        let mut text = String::new();
        trees(&mut text, &vec![t; 120]);
        assert_eq!(text.lines().filter(|l| l.contains("npx x")).count(), MAX_TREES, "{text}");
        assert!(text.contains("… and 70 more tree(s)"), "{text}");
    }
}
