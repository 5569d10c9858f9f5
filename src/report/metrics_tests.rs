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
        quiet_interval_secs: 60,
        quiet: false,
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
                s.metric == "mcp_reaper_reaped_trees_by_namespace_total" && s.labels.get("k8s_namespace") == Some(ns)
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
