//! Prometheus text exposition (`node_exporter` textfile collector and
//! `reaperctl metrics`). Names are only ever added, never renamed or given
//! new labels: dashboards and the alert rules in `packaging/prometheus/`
//! (checked by `promtool` in `.ci/run`) depend on them.

use std::fmt::Write;
use std::path::Path;

use super::status::Status;
use crate::config::Mode;
use crate::policy::Verdict;

pub fn render(s: &Status) -> String {
    let mut o = String::new();
    identity(&mut o, s);
    let t = &s.totals;
    for (name, help, v) in [
        ("mcp_reaper_reaped_trees_total", "Server trees terminated since the daemon started.", t.trees_reaped),
        ("mcp_reaper_reaped_processes_total", "Processes terminated since the daemon started.", t.processes_reaped),
        ("mcp_reaper_reclaimed_bytes_total", "Memory (PSS + swap) of terminated processes.", t.reclaimed_bytes),
        ("mcp_reaper_escalations_total", "Trees that needed SIGKILL after SIGTERM.", t.escalations),
        ("mcp_reaper_failures_total", "Trees with members that could not be terminated.", t.failures),
        (
            "mcp_reaper_containers_stopped_total",
            "Containers of docker/podman run clients stopped through their engine.",
            t.containers_stopped,
        ),
        (
            "mcp_reaper_container_reclaimed_bytes_total",
            "Memory of stopped containers (their cgroup's, before the stop).",
            t.container_bytes,
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
    }
    namespaces(&mut o, s);
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_trees Server trees seen in the last scan, by verdict.\n# TYPE mcp_reaper_trees gauge"
    );
    for v in Verdict::ALL {
        let n = s.by_verdict.get(&v).copied().unwrap_or(0);
        let _ = writeln!(o, "mcp_reaper_trees{{verdict=\"{}\"}} {n}", v.as_str());
    }
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_duplicate_servers Copies of a server command beyond the first under one live host, in the last scan.\n# TYPE mcp_reaper_duplicate_servers gauge\nmcp_reaper_duplicate_servers {}",
        super::status::DuplicateServers::extra(&s.duplicates)
    );
    generations(&mut o, s);
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_last_scan_duration_seconds Duration of the last scan.\n# TYPE mcp_reaper_last_scan_duration_seconds gauge\nmcp_reaper_last_scan_duration_seconds {}",
        s.scans.last_duration_ms / 1000.0
    );
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_last_scan_timestamp_seconds Unix time of the last scan.\n# TYPE mcp_reaper_last_scan_timestamp_seconds gauge\nmcp_reaper_last_scan_timestamp_seconds {}",
        s.scans.last_at_unix
    );
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_scans_total Scans since the daemon started.\n# TYPE mcp_reaper_scans_total counter\nmcp_reaper_scans_total {}",
        s.scans.count
    );
    pressure(&mut o, s);
    by_verdict(&mut o, s);
    would_reap(&mut o, s);
    o
}

/// Trees reaped in Kubernetes pods by namespace: a bounded label set (see
/// [`super::status::Totals::reaped_by_namespace`]), values escaped as the
/// exposition format's label grammar requires.
fn namespaces(o: &mut String, s: &Status) {
    let name = "mcp_reaper_reaped_trees_by_namespace_total";
    let _ = writeln!(
        o,
        "# HELP {name} Server trees terminated in Kubernetes pods, by the pod's namespace (at most {} namespaces; the rest as {}, pods known only by UID as {}).\n# TYPE {name} counter",
        super::status::NAMESPACES,
        super::status::OTHER_NAMESPACE,
        super::status::UNKNOWN_NAMESPACE,
    );
    for (ns, n) in &s.totals.reaped_by_namespace {
        let _ = writeln!(o, "{name}{{k8s_namespace=\"{}\"}} {n}", label(ns));
    }
}

/// Live hosts' piles of server copies (issue 35), summed over the node: no
/// label per host or command, which users name (and could multiply).
fn generations(o: &mut String, s: &Status) {
    let g = &s.generations;
    for (name, help, v) in [
        (
            "mcp_reaper_generation_piles",
            "Server commands a live host holds two or more copies of, at the last sample.",
            g.len() as u64,
        ),
        ("mcp_reaper_generation_copies", "Copies in those piles.", g.iter().map(|x| x.copies as u64).sum()),
        (
            "mcp_reaper_generation_memory_bytes",
            "Memory (PSS + swap) of the copies in those piles.",
            g.iter().map(|x| x.memory_bytes).sum(),
        ),
        (
            "mcp_reaper_generation_idle_copies",
            "Copies in those piles that did no I/O and used no CPU for [generations] idle_secs.",
            g.iter().map(|x| x.idle_copies as u64).sum(),
        ),
        (
            "mcp_reaper_generation_guards_tripped",
            "Piles whose host restarted an ended copy: nothing more of them is ended.",
            g.iter().filter(|x| x.guard.is_some()).count() as u64,
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
    }
}

/// Which build runs, and in which mode: fleets join on these.
fn identity(o: &mut String, s: &Status) {
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_build_info The running mcp-reaperd's version (always 1).\n# TYPE mcp_reaper_build_info gauge\nmcp_reaper_build_info{{version=\"{}\"}} 1",
        label(&s.version)
    );
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_mode 1 for the mode the daemon runs in (enforce signals, dry-run only reports).\n# TYPE mcp_reaper_mode gauge"
    );
    for m in [Mode::Enforce, Mode::DryRun] {
        let _ = writeln!(o, "mcp_reaper_mode{{mode=\"{m}\"}} {}", u8::from(s.mode == m));
    }
}

/// The verdicts a tree can be reaped under: only an orphan, a stale or an
/// abandoned tree is ever acted on (`Judgement::reap` is set for no other),
/// so only these have reap totals.
const REAPABLE: [Verdict; 4] = [Verdict::Orphan, Verdict::Stale, Verdict::Abandoned, Verdict::Surplus];

/// Reaps and memory returned per verdict: every verdict a tree can be reaped
/// under, 0 included. The other five (young, live, foreign, protected,
/// detached) are kept, never reaped, so their series could only ever be 0:
/// they are not emitted (a `sum by (verdict)` is the same without them), unless
/// a total under one of them is somehow not 0, which is then shown, not lost.
fn by_verdict(o: &mut String, s: &Status) {
    let get = |v: Verdict| s.totals.by_verdict.get(v.as_str()).cloned().unwrap_or_default();
    let shown: Vec<Verdict> = Verdict::ALL
        .into_iter()
        .chain([Verdict::Surplus])
        .filter(|v| REAPABLE.contains(v) || get(*v) != crate::report::status::VerdictTotals::default())
        .collect();
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_reaped_trees_by_verdict_total Server trees terminated since the daemon started, by verdict (orphan, stale, abandoned, and surplus for a live host's idle old copies: the only verdicts a tree is ended under).\n# TYPE mcp_reaper_reaped_trees_by_verdict_total counter"
    );
    for &v in &shown {
        let _ = writeln!(
            o,
            "mcp_reaper_reaped_trees_by_verdict_total{{verdict=\"{}\"}} {}",
            v.as_str(),
            get(v).trees_reaped
        );
    }
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_reclaimed_bytes_by_verdict_total Memory (PSS + swap) of terminated processes, by verdict (orphan, stale, abandoned, and surplus for a live host's idle old copies: the only verdicts a tree is ended under).\n# TYPE mcp_reaper_reclaimed_bytes_by_verdict_total counter"
    );
    for &v in &shown {
        let _ = writeln!(
            o,
            "mcp_reaper_reclaimed_bytes_by_verdict_total{{verdict=\"{}\"}} {}",
            v.as_str(),
            get(v).reclaimed_bytes
        );
    }
}

/// What a dry run would have done: counted once per tree, so a day's dry
/// run shows what enforcing would do before anyone turns it on.
fn would_reap(o: &mut String, s: &Status) {
    let w = &s.would_reap;
    for (name, kind, help, v) in [
        (
            "mcp_reaper_would_reap_trees_total",
            "counter",
            "Trees a dry run found due, each counted once.",
            w.trees_total,
        ),
        ("mcp_reaper_would_reap_processes_total", "counter", "Processes in those trees.", w.processes_total),
        (
            "mcp_reaper_would_reclaim_bytes_total",
            "counter",
            "Memory (PSS + swap) of those trees when found due.",
            w.bytes_total,
        ),
        (
            "mcp_reaper_would_reap_trees",
            "gauge",
            "Trees due and kept only by the dry run, at the last cycle.",
            w.trees_now,
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
    }
}

/// A label value escaped as the exposition format asks.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Memory pressure gauges, when the daemon measures it. Pressure and its
/// threshold as ratios (0–1, Prometheus's base unit: `…_ratio`), and as the
/// percentages the first releases exported (`…_percent`, deprecated, kept:
/// dashboards and alerts query them).
fn pressure(o: &mut String, s: &Status) {
    let Some(p) = &s.memory_pressure else { return };
    if let Some(v) = p.some_avg10 {
        let _ = writeln!(
            o,
            "# HELP mcp_reaper_memory_pressure_some_avg10_ratio Memory pressure (PSI some avg10) at the last read, as a ratio (0-1).\n# TYPE mcp_reaper_memory_pressure_some_avg10_ratio gauge\nmcp_reaper_memory_pressure_some_avg10_ratio {}",
            v / 100.0
        );
        let _ = writeln!(
            o,
            "# HELP mcp_reaper_memory_pressure_some_avg10_percent Deprecated: use mcp_reaper_memory_pressure_some_avg10_ratio (this times 100). Memory pressure (PSI some avg10) at the last read.\n# TYPE mcp_reaper_memory_pressure_some_avg10_percent gauge\nmcp_reaper_memory_pressure_some_avg10_percent {v}"
        );
    }
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_memory_pressure_threshold_ratio Pressure at which orphans skip their grace, as a ratio (0-1).\n# TYPE mcp_reaper_memory_pressure_threshold_ratio gauge\nmcp_reaper_memory_pressure_threshold_ratio {}",
        p.threshold_percent / 100.0
    );
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_memory_pressure_threshold_percent Deprecated: use mcp_reaper_memory_pressure_threshold_ratio (this times 100). Pressure at which orphans skip their grace.\n# TYPE mcp_reaper_memory_pressure_threshold_percent gauge\nmcp_reaper_memory_pressure_threshold_percent {}",
        p.threshold_percent
    );
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_memory_pressure_above 1 when the last reading is at or above the threshold.\n# TYPE mcp_reaper_memory_pressure_above gauge\nmcp_reaper_memory_pressure_above {}",
        u8::from(p.above)
    );
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_memory_pressure_triggers_total Times the PSI trigger woke the daemon.\n# TYPE mcp_reaper_memory_pressure_triggers_total counter\nmcp_reaper_memory_pressure_triggers_total {}",
        p.triggers
    );
}

/// Writes the textfile atomically ([`crate::atomic`]), as the textfile
/// collector requires; readable by the collector's user.
pub fn write_textfile(path: &Path, text: &str) -> std::io::Result<()> {
    crate::atomic::write(path, text.as_bytes(), 0o644)
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
