//! Many orphan trees at once (issue #6, load): 100 orphaned server trees, 30
//! of them ignoring SIGTERM, each with two members holding touched memory, are
//! reaped by one `mcp-reaperd --once` in about one `term_timeout`, with one
//! escalation per stubborn tree, and the memory it reports as reclaimed
//! matches what `/proc/PID/smaps_rollup` said just before.
//!
//! Safety: every process lives below the sandbox's scope process (a child
//! subreaper) and the reaper is `--scope`d to it with a temporary config and
//! state file. One test in this file: the ~400 processes it makes never share
//! the machine with another test of this binary.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Ready, Sandbox, Spec, alive, reaperd, s, text};
use serde_json::Value;

const TREES: usize = 100;
/// Trees whose server and browser ignore SIGTERM (npm above them does not).
const STUBBORN: usize = 30;
/// Touched private memory of each server and each browser.
const TOUCH_MIB: u64 = 2;
const TERM_TIMEOUT_SECS: f64 = 2.0;

fn host_argv(i: usize) -> [String; 3] {
    // Fixed width: `Sandbox::pid_of` matches prefixes.
    ["claude".into(), "--resume".into(), format!("load-{i:03}")]
}

/// Exactly `STUBBORN` of the trees, spread evenly.
fn stubborn(i: usize) -> bool {
    i * STUBBORN / TREES != (i + 1) * STUBBORN / TREES
}

/// `claude` → `npm exec @playwright/mcp@latest` → `node …/playwright-mcp` →
/// `chrome --headless`; server and chrome hold touched memory.
fn orphan_tree(i: usize) -> Spec {
    let mut server = Spec::new(&["node", &format!("/home/u/.npm/_npx/{i:04x}/node_modules/.bin/playwright-mcp")])
        .touch_mib(TOUCH_MIB);
    let mut chrome =
        Spec::new(&["/opt/google/chrome/chrome", "--headless", &format!("--user-data-dir=/tmp/mcp-chrome-{i:03}")])
            .touch_mib(TOUCH_MIB);
    if stubborn(i) {
        server = server.ignore_term();
        chrome = chrome.ignore_term();
    }
    let h = host_argv(i);
    let h: Vec<&str> = h.iter().map(String::as_str).collect();
    Spec::new(&h).child(Spec::new(&["npm", "exec", "@playwright/mcp@latest"]).child(server.child(chrome)))
}

/// Pss + `SwapPss` of a process, in bytes, from `/proc/PID/smaps_rollup`.
fn pss_swap_pss(pid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_else(|e| panic!("reading smaps_rollup of {pid}: {e}"));
    let kib = |key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.split_whitespace().next()?.parse().ok()))
            .unwrap_or(0)
    };
    (kib("Pss:") + kib("SwapPss:")) * 1024
}

fn child_of<'a>(ready: &'a [Ready], ppid: i32, prefix: &str) -> &'a Ready {
    let hits: Vec<&Ready> = ready.iter().filter(|r| r.ppid == ppid && r.cmd.starts_with(prefix)).collect();
    match hits.as_slice() {
        [one] => one,
        _ => panic!("expected one child of {ppid} starting with {prefix:?}, found {hits:#?}"),
    }
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

struct Tree {
    host: i32,
    /// npm, node, chrome: npm is the tree's root once the host is gone.
    members: [i32; 3],
    stubborn: bool,
    /// Pss + `SwapPss` of the members just before the reaper ran.
    measured: u64,
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
fn hundred_orphan_trees_are_reaped_in_about_one_timeout_with_correct_memory_accounting() {
    assert_eq!((0..TREES).filter(|&i| stubborn(i)).count(), STUBBORN, "the stubborn pattern is off");
    let live_server = ["node", "/home/u/.npm/_npx/beef/node_modules/.bin/context7-mcp"];
    let mut specs: Vec<Spec> = (0..TREES).map(orphan_tree).collect();
    // Bystanders: a live tree (host alive) and a process of no tree.
    specs.push(Spec::new(&["claude", "--live-host"]).child(Spec::new(&live_server)));
    specs.push(Spec::new(&["sleep", "600"]));
    let sb = Sandbox::new(specs);
    let ready = sb.ready().to_vec();

    let mut trees: Vec<Tree> = (0..TREES)
        .map(|i| {
            let host = sb.pid_of(&host_argv(i).join(" "));
            let npm = child_of(&ready, host, "npm exec").pid;
            let node = child_of(&ready, npm, "node ").pid;
            let chrome = child_of(&ready, node, "/opt/google/chrome/chrome").pid;
            Tree { host, members: [npm, node, chrome], stubborn: stubborn(i), measured: 0 }
        })
        .collect();
    let live_host = sb.pid_of("claude --live-host");
    let keep = [live_host, child_of(&ready, live_host, "node ").pid, sb.pid_of("sleep")];

    for t in &trees {
        sb.kill_host(t.host);
    }
    // Measured after the hosts are gone (their exit changes nobody's Pss
    // here: they share only the binary's pages) and right before the reaper.
    for t in &mut trees {
        t.measured = t.members.iter().map(|&p| pss_swap_pss(p)).sum();
    }

    let cfg = sb.dir().config_with(0, &format!("term_timeout_secs = {TERM_TIMEOUT_SECS}"), "");
    let started = Instant::now();
    let out = reaperd([
        s("--once"),
        s("--json"),
        s("--log-target"),
        s("stderr"),
        s("--log-level"),
        s("warn"),
        s("--scope"),
        s(sb.scope_pid()),
        s("--config"),
        s(cfg.display()),
    ]);
    let elapsed = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON on stdout ({e}):\n{}", text(&out.stdout)));

    // Every member of every tree is gone (zombies count as gone: the scope reaps them).
    let survivors: Vec<i32> = trees.iter().flat_map(|t| t.members).filter(|&p| alive(p)).collect();
    assert!(survivors.is_empty(), "members still alive after the reaper ran: {survivors:?}\n{v:#}");
    sb.assert_alive(&keep);

    let outcomes: HashMap<i64, &Value> = v["outcomes"]
        .as_array()
        .expect("outcomes")
        .iter()
        .map(|o| (o["root"]["pid"].as_i64().expect("root pid"), o))
        .collect();
    assert_eq!(outcomes.len(), TREES, "one outcome per orphan tree: {v:#}");
    let summary = &v["summary"];
    assert_eq!(num(&summary["trees_reaped"]), TREES as u64, "{summary:#}");
    assert_eq!(num(&summary["processes_reaped"]), 3 * TREES as u64, "{summary:#}");
    assert_eq!(num(&summary["escalations"]), STUBBORN as u64, "one escalation per stubborn tree: {summary:#}");
    assert_eq!(num(&summary["failures"]), 0, "{summary:#}");

    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let (mut reported_total, mut measured_total, mut worst_diff, mut max_took) = (0u64, 0u64, 0f64, 0u64);
    for t in &trees {
        let o =
            outcomes.get(&i64::from(t.members[0])).unwrap_or_else(|| panic!("no outcome for root {}", t.members[0]));
        assert_eq!(o["escalated"], t.stubborn, "escalated iff the tree ignores SIGTERM: {o:#}");
        assert_eq!(num(&o["members"]), 3, "{o:#}");
        assert_eq!(num(&o["gone"]), 3, "{o:#}");
        assert_eq!(o["reclaimed"]["estimated_from_rss"], false, "{o:#}");
        let reported = num(&o["reclaimed"]["pss_bytes"]) + num(&o["reclaimed"]["swap_bytes"]);
        assert!(
            reported >= 2 * (TOUCH_MIB << 20),
            "tree {} reports {reported} bytes reclaimed, less than the {} MiB its server and browser touched",
            t.members[0],
            2 * TOUCH_MIB
        );
        // Nothing of these trees changes between the two readings: only
        // the kernel's rounding and a page or two of stack may differ.
        let diff = reported.abs_diff(t.measured);
        let tolerance = (t.measured / 20).max(256 << 10);
        assert!(
            diff <= tolerance,
            "tree {}: reported {reported} bytes reclaimed, smaps_rollup said {} just before (diff {diff})",
            t.members[0],
            t.measured
        );
        worst_diff = worst_diff.max(diff as f64 / t.measured as f64);
        reported_total += reported;
        measured_total += t.measured;
        max_took = max_took.max(num(&o["took_ms"]));
    }
    assert_eq!(num(&summary["reclaimed_bytes"]), reported_total, "the summary is the sum of the trees: {summary:#}");
    let total_diff = reported_total.abs_diff(measured_total);
    assert!(
        total_diff <= measured_total / 50,
        "reported {reported_total} bytes in all, smaps_rollup said {measured_total}"
    );

    eprintln!(
        "{TREES} orphan trees ({STUBBORN} ignoring SIGTERM, term_timeout {TERM_TIMEOUT_SECS} s): mcp-reaperd --once took \
         {:.2} s in all, slowest tree {max_took} ms after its SIGTERM; reclaimed {:.1} MiB reported vs {:.1} MiB \
         measured (worst tree off by {:.2} %)",
        elapsed.as_secs_f64(),
        mib(reported_total),
        mib(measured_total),
        worst_diff * 100.0
    );
    // Machines are noisy: only a generous bound on the wall time.
    let bound = Duration::from_secs_f64(3.0 * TERM_TIMEOUT_SECS + 60.0);
    assert!(elapsed < bound, "mcp-reaperd --once took {elapsed:?} for {TREES} trees (bound {bound:?})");
}
