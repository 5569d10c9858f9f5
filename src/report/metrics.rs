//! Prometheus text exposition (node_exporter textfile collector and
//! `reaperctl metrics`).

use std::fmt::Write;
use std::path::Path;

use crate::ctl::proto::Status;
use crate::policy::Verdict;

pub fn render(s: &Status) -> String {
    let mut o = String::new();
    let t = &s.totals;
    for (name, help, v) in [
        ("mcp_reaper_reaped_trees_total", "Server trees terminated since the daemon started.", t.trees_reaped),
        ("mcp_reaper_reaped_processes_total", "Processes terminated since the daemon started.", t.processes_reaped),
        ("mcp_reaper_reclaimed_bytes_total", "Memory (PSS + swap) of terminated processes.", t.reclaimed_bytes),
        ("mcp_reaper_escalations_total", "Trees that needed SIGKILL after SIGTERM.", t.escalations),
        ("mcp_reaper_failures_total", "Trees with members that could not be terminated.", t.failures),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
    }
    let _ = writeln!(
        o,
        "# HELP mcp_reaper_trees Server trees seen in the last scan, by verdict.\n# TYPE mcp_reaper_trees gauge"
    );
    for v in Verdict::ALL {
        let n = s.by_verdict.get(v.as_str()).copied().unwrap_or(0);
        let _ = writeln!(o, "mcp_reaper_trees{{verdict=\"{}\"}} {n}", v.as_str());
    }
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
    o
}

/// Writes the textfile atomically (temp file in the same directory + rename),
/// as the textfile collector requires.
pub fn write_textfile(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("metrics"),
        std::process::id()
    ));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
