//! `MCPReaperTargetDown` (packaging/prometheus/mcp-reaper.rules.yml) only
//! fires for the scrape jobs it names: those must be the job of the scrape
//! config `docs/fleets.md` gives and the `PodMonitor`'s (the operator names its
//! job `namespace/name`). A renamed job would silence the alert without a
//! word (issue 36, item 3).

use std::path::Path;

fn read(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The value after `key:` on the first line (after `from`) that has it.
fn value_after<'a>(text: &'a str, from: &str, key: &str) -> &'a str {
    let at = text.find(from).unwrap_or_else(|| panic!("no {from:?}"));
    text[at..]
        .lines()
        .find_map(|l| l.trim().trim_start_matches("- ").strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} after {from:?}"))
        .trim()
        .trim_matches('"')
}

#[test]
fn the_target_down_alert_matches_the_documented_scrape_job_and_the_podmonitors() {
    let rules = read("packaging/prometheus/mcp-reaper.rules.yml");
    let expr = value_after(&rules, "alert: MCPReaperTargetDown", "expr:");
    let matcher = expr.split("job=~\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or_else(|| panic!("{expr}"));
    // Prometheus anchors a label regex at both ends.
    let job = regex::Regex::new(&format!("^(?:{matcher})$")).unwrap();

    let fleets = read("docs/fleets.md");
    let documented = value_after(&fleets, "scrape_configs:", "job_name:");
    assert!(job.is_match(documented), "docs/fleets.md scrapes job {documented}, which {expr} misses");

    let pm = read("deploy/kubernetes/monitoring/podmonitor.yaml");
    let (name, namespace) = (value_after(&pm, "metadata:", "name:"), value_after(&pm, "metadata:", "namespace:"));
    let operator_job = format!("{namespace}/{name}");
    assert!(job.is_match(&operator_job), "the PodMonitor's job {operator_job} is missed by {expr}");
    assert!(!pm.contains("jobLabel"), "the PodMonitor names its job from a label: check the alert's matcher");

    // And nobody else's failed scrape: node_exporter's, say.
    assert!(!job.is_match("node"), "{expr}");
}
