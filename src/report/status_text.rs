//! The human view of `reaperctl status`: the daemon's status in words.

use std::fmt::Write;

use super::status::Status;
use super::{age, bytes};

/// The human view of `reaperctl status`.
pub fn render(s: &Status) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "mcp-reaperd {} (pid {}), up {}", s.version, s.pid, age(s.uptime_secs));
    let _ = writeln!(o, "mode:     {}", s.mode);
    let _ = writeln!(o, "config:   {}", s.config_sources.join(", "));
    if let Some(r) = &s.last_reload {
        let what = if r.ok { "ok" } else { "FAILED, previous config kept" };
        let _ = writeln!(
            o,
            "reload:   {what}{}",
            if r.messages.is_empty() { String::new() } else { format!(": {}", r.messages.join("; ")) }
        );
    }
    let _ = writeln!(o, "events:   {} (full scan every {}s, grace {}s)", s.event_mode, s.interval_secs, s.grace_secs);
    let _ = writeln!(
        o,
        "scans:    {} (last {:.1} ms over {} processes)",
        s.scans.count, s.scans.last_duration_ms, s.scans.last_processes
    );
    // By name, as when the protocol's verdicts were strings.
    let mut counts: Vec<(&str, usize)> =
        s.by_verdict.iter().filter(|(_, n)| **n > 0).map(|(v, &n)| (v.as_str(), n)).collect();
    counts.sort_unstable();
    let counts: Vec<String> = counts.iter().map(|(v, n)| format!("{n} {v}")).collect();
    let _ = writeln!(o, "trees:    {}", if counts.is_empty() { "none".into() } else { counts.join(", ") });
    for t in &s.trees {
        let left = t.grace_left_secs.map(|l| format!(" ({:.0}s left)", l.ceil())).unwrap_or_default();
        let _ = writeln!(
            o,
            "  {:<9} {:>7} {:>8}  {}{left}\n            {}",
            t.verdict,
            t.root,
            bytes(t.memory_bytes),
            t.root_cmd,
            t.reason
        );
    }
    for d in &s.duplicates {
        let roots: Vec<String> = d.root_pids.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            o,
            "  duplicate {}× {} under host {} ({}): trees {}",
            d.count,
            d.command,
            d.host_pid,
            d.host_cmd,
            roots.join(", ")
        );
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
    if !s.recent.is_empty() {
        let _ = writeln!(o, "recent:");
        for e in s.recent.iter().take(10) {
            let _ = writeln!(o, "  {}", e.line);
        }
    }
    if let Some(uid) = s.filtered_for_uid {
        let _ = writeln!(o, "(showing only trees of uid {uid})");
    }
    o
}
