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
mod tests {
    use super::*;
    use crate::report::status::{ScanStats, Totals};

    fn status() -> Status {
        Status {
            version: "0".into(),
            pid: 1,
            uptime_secs: 1.0,
            mode: crate::config::Mode::Enforce,
            config_sources: vec![],
            last_reload: None,
            event_mode: "pidfd".into(),
            event_mode_reason: None,
            interval_secs: 10,
            grace_secs: 60,
            scans: ScanStats { count: 7, last_duration_ms: 12.5, last_processes: 400, last_at_unix: 1_790_000_000 },
            by_verdict: [(Verdict::Orphan, 2), (Verdict::Live, 3)].into_iter().collect(),
            trees: vec![],
            totals: Totals {
                trees_reaped: 4,
                processes_reaped: 9,
                reclaimed_bytes: 1 << 30,
                escalations: 1,
                containers_stopped: 2,
                container_bytes: 4096,
                failures: 0,
                by_verdict: [(
                    "stale".to_string(),
                    crate::report::status::VerdictTotals { trees_reaped: 3, reclaimed_bytes: 3 << 20 },
                )]
                .into_iter()
                .collect(),
                reaped_by_namespace: [("agents".to_string(), 3), ("_unknown".to_string(), 1)].into_iter().collect(),
            },
            lifetime: None,
            recent: vec![],
            would_reap: crate::report::status::WouldReap {
                trees_total: 5,
                processes_total: 11,
                bytes_total: 7 << 20,
                trees_now: 2,
            },
            filtered_for_uid: None,
            run_sessions: Vec::new(),
            session_ends: Vec::new(),
            memory_pressure: Some(crate::report::status::PressureStatus {
                watch: "trigger".into(),
                some_avg10: Some(23.5),
                threshold_percent: 10.0,
                above: true,
                triggers: 3,
                ..Default::default()
            }),
            duplicates: vec![crate::report::status::DuplicateServers {
                host_pid: 4100,
                host_cmd: "claude".into(),
                command: "@playwright/mcp".into(),
                count: 3,
                root_pids: vec![4200, 4300, 4400],
                generation_count: 1,
                rss_bytes: 3 << 20,
            }],
            generations: vec![crate::report::status::GenerationStatus {
                host_pid: 4100,
                copies: 3,
                memory_bytes: 3 << 20,
                idle_copies: 2,
                ..Default::default()
            }],
        }
    }

    #[test]
    fn exposition_parses_with_a_real_parser() {
        let text = render(&status());
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).expect("valid exposition format");
        let value = |name: &str, verdict: Option<&str>| {
            scrape
                .samples
                .iter()
                .find(|s| s.metric == name && verdict.is_none_or(|v| s.labels.get("verdict") == Some(v)))
                .map_or_else(
                    || panic!("{name} missing in\n{text}"),
                    |s| match s.value {
                        prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
                        _ => f64::NAN,
                    },
                )
        };
        assert_eq!(value("mcp_reaper_reaped_trees_total", None), 4.0);
        assert_eq!(value("mcp_reaper_reaped_processes_total", None), 9.0);
        assert_eq!(value("mcp_reaper_reclaimed_bytes_total", None), (1u64 << 30) as f64);
        assert_eq!(value("mcp_reaper_escalations_total", None), 1.0);
        assert_eq!(value("mcp_reaper_failures_total", None), 0.0);
        assert_eq!(value("mcp_reaper_containers_stopped_total", None), 2.0);
        assert_eq!(value("mcp_reaper_container_reclaimed_bytes_total", None), 4096.0);
        assert_eq!(value("mcp_reaper_trees", Some("orphan")), 2.0);
        assert_eq!(value("mcp_reaper_trees", Some("young")), 0.0);
        assert_eq!(value("mcp_reaper_trees", Some("abandoned")), 0.0);
        assert_eq!(value("mcp_reaper_duplicate_servers", None), 2.0);
        assert_eq!(value("mcp_reaper_last_scan_duration_seconds", None), 0.0125);
        assert_eq!(value("mcp_reaper_last_scan_timestamp_seconds", None), 1_790_000_000.0);
        assert_eq!(value("mcp_reaper_memory_pressure_some_avg10_percent", None), 23.5);
        assert_eq!(value("mcp_reaper_memory_pressure_threshold_percent", None), 10.0);
        // Issue 36 item 14: the same as ratios (0-1), the percentages kept and marked deprecated.
        assert_eq!(value("mcp_reaper_memory_pressure_some_avg10_ratio", None), 0.235);
        assert_eq!(value("mcp_reaper_memory_pressure_threshold_ratio", None), 0.1);
        for name in ["some_avg10", "threshold"] {
            let help = format!(
                "# HELP mcp_reaper_memory_pressure_{name}_percent Deprecated: use mcp_reaper_memory_pressure_{name}_ratio"
            );
            assert!(text.contains(&help), "{help} missing in\n{text}");
        }
        assert_eq!(value("mcp_reaper_memory_pressure_above", None), 1.0);
        assert_eq!(value("mcp_reaper_memory_pressure_triggers_total", None), 3.0);
        let by_ns = |ns: &str| {
            scrape
                .samples
                .iter()
                .find(|s| {
                    s.metric == "mcp_reaper_reaped_trees_by_namespace_total"
                        && s.labels.get("k8s_namespace") == Some(ns)
                })
                .map(|s| s.value.clone())
        };
        assert_eq!(by_ns("agents"), Some(prometheus_parse::Value::Counter(3.0)), "{text}");
        assert_eq!(by_ns("_unknown"), Some(prometheus_parse::Value::Counter(1.0)), "{text}");
        let labelled = |name: &str, label: &str, value: &str| {
            scrape.samples.iter().find(|s| s.metric == name && s.labels.get(label) == Some(value)).map_or_else(
                || panic!("{name}{{{label}={value}}} missing in\n{text}"),
                |s| match s.value {
                    prometheus_parse::Value::Counter(v)
                    | prometheus_parse::Value::Gauge(v)
                    | prometheus_parse::Value::Untyped(v) => v,
                    _ => f64::NAN,
                },
            )
        };
        assert_eq!(labelled("mcp_reaper_build_info", "version", "0"), 1.0);
        assert_eq!(labelled("mcp_reaper_mode", "mode", "enforce"), 1.0);
        assert_eq!(labelled("mcp_reaper_mode", "mode", "dry-run"), 0.0);
        assert_eq!(labelled("mcp_reaper_reaped_trees_by_verdict_total", "verdict", "stale"), 3.0);
        assert_eq!(labelled("mcp_reaper_reaped_trees_by_verdict_total", "verdict", "orphan"), 0.0);
        assert_eq!(labelled("mcp_reaper_reclaimed_bytes_by_verdict_total", "verdict", "stale"), f64::from(3u32 << 20));
        // Only the verdicts a tree is ended under have reap totals; the
        // other five would always be 0 and are not emitted.
        assert_eq!(value("mcp_reaper_generation_copies", None), 3.0);
        assert_eq!(value("mcp_reaper_generation_idle_copies", None), 2.0);
        for name in ["mcp_reaper_reaped_trees_by_verdict_total", "mcp_reaper_reclaimed_bytes_by_verdict_total"] {
            let mut verdicts: Vec<&str> =
                scrape.samples.iter().filter(|s| s.metric == name).filter_map(|s| s.labels.get("verdict")).collect();
            verdicts.sort_unstable();
            assert_eq!(verdicts, ["abandoned", "orphan", "stale", "surplus"], "{name} in\n{text}");
        }
        assert_eq!(value("mcp_reaper_would_reap_trees_total", None), 5.0);
        assert_eq!(value("mcp_reaper_would_reap_processes_total", None), 11.0);
        assert_eq!(value("mcp_reaper_would_reclaim_bytes_total", None), f64::from(7u32 << 20));
        assert_eq!(value("mcp_reaper_would_reap_trees", None), 2.0);
        assert!(matches!(
            scrape.samples.iter().find(|s| s.metric == "mcp_reaper_reaped_trees_total").unwrap().value,
            prometheus_parse::Value::Counter(_)
        ));
    }

    /// The alert rules, their tests and the dashboard ship with the package:
    /// every metric they name must be one the daemon exports (a rename
    /// would silence an alert without a word).
    #[test]
    fn shipped_rules_and_dashboard_name_only_exported_metrics() {
        let text = render(&status());
        let exported: std::collections::HashSet<&str> =
            text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split(['{', ' ']).next()).collect();
        let shipped = [
            ("rules", include_str!("../../packaging/prometheus/mcp-reaper.rules.yml")),
            ("rule tests", include_str!("../../packaging/prometheus/mcp-reaper.rules.test.yml")),
            ("dashboard", include_str!("../../packaging/grafana/mcp-reaper.json")),
        ];
        let mut named = 0;
        for (what, file) in shipped {
            for (i, _) in file.match_indices("mcp_reaper_") {
                let name: String = file[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                assert!(exported.contains(name.as_str()), "{what} names {name}, which the daemon does not export");
                named += 1;
            }
        }
        assert!(named > 20, "{named}");
        let dashboard: serde_json::Value = serde_json::from_str(shipped[2].1).expect("the dashboard is JSON");
        assert!(dashboard["panels"].as_array().is_some_and(|p| p.len() >= 10));
    }

    #[test]
    fn namespaces_are_counted_up_to_the_bound_and_escaped() {
        let mut t = Totals::default();
        for i in 0..40 {
            t.count_namespace(Some(&format!("ns-{i}")));
        }
        t.count_namespace(Some("ns-0"));
        t.count_namespace(None);
        let m = &t.reaped_by_namespace;
        assert_eq!(m.len(), crate::report::status::NAMESPACES + 2, "{m:?}");
        assert_eq!((m["ns-0"], m["_other"], m["_unknown"]), (2, 8, 1), "{m:?}");
        assert!(!m.contains_key("ns-39"));
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn textfile_is_replaced_atomically() {
        let dir = std::env::temp_dir().join(format!("mcp-reaper-metrics-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mcp_reaper.prom");
        write_textfile(&path, "a 1\n").unwrap();
        write_textfile(&path, &render(&status())).unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("mcp_reaper_scans_total 7"));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temp file left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
