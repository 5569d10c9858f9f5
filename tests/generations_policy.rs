//! Issue 35 items 2–4 with the real daemon: a live host that holds the
//! pipes of 12 copies of one server in 4 generations and writes to the
//! newest only (and to one old copy: a request inside the window). The
//! daemon samples them, tells once that they pile up, shows in a dry run
//! exactly what `[generations] end_idle` would end, and, with it on, ends
//! the old idle copies (the first alone, the rest after the respawn guard's
//! window) while the host, its busy copies and its newest stay. A host that
//! restarts every copy it loses trips the guard after one ending.
//!
//! The host stand-in is `common::pile`'s: bash on a terminal holding each
//! copy's stdin, fakeproc `serve` copies whose I/O counters move only when
//! they are sent something. Every daemon is `--scope`d to the sandbox.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Daemon, Launch, Sandbox, TempDir, alive, pile, text};
use serde_json::Value;

const GENERATIONS: usize = 4;
const PER_GENERATION: usize = 3;
const COPIES: usize = GENERATIONS * PER_GENERATION;
/// The old copy the host keeps sending requests to.
const POKED: usize = 4;

struct World {
    sb: Sandbox,
    dir: TempDir,
    host: i32,
    /// Copy pids, oldest first.
    copies: Vec<i32>,
    respawned: std::path::PathBuf,
}

fn world(name: &str, respawn: bool) -> Option<World> {
    let shape = pile::Shape { generations: GENERATIONS, per_generation: PER_GENERATION, busy: vec![POKED], respawn };
    let p = pile::start(name, "generations-policy", &shape)?;
    Some(World { sb: p.sb, dir: p.dir, host: p.host, copies: p.copies, respawned: p.respawned })
}

fn config(w: &World, keys: &str) -> std::path::PathBuf {
    w.dir.write(
        "config.toml",
        format!(
            "[reaper]\ngrace_secs = 0\ninterval_secs = 1\nterm_timeout_secs = 2\n[generations]\nsample_secs = 1\n\
             notify_copies = 10\nnotify_memory_mib = 0\n{keys}"
        ),
    )
}

fn daemon(w: &World, cfg: &Path, sub: &str, args: &[&str]) -> Daemon {
    let d = w.dir.path().join(sub);
    std::fs::create_dir_all(&d).unwrap();
    Daemon::start_in(w.sb.scope_pid(), cfg, &d, &Launch::with_args(args))
}

/// The status's one pile.
fn pile(st: &Value) -> Option<&Value> {
    st["generations"].as_array()?.first()
}

/// Log lines of outcomes (acts or plans) of surplus copies, by root pid.
fn surplus_lines(d: &Daemon, pid: i32) -> usize {
    d.log_text()
        .lines()
        .filter(|l| l.contains("surplus") && (l.contains("reap") || l.contains("would")))
        .filter(|l| l.contains(&format!("root={pid} ")) || l.contains(&format!("root={pid}:")))
        .count()
}

#[test]
fn old_idle_copies_are_shown_told_once_and_ended_the_newest_and_busy_kept() {
    let name = "old_idle_copies_are_shown_told_once_and_ended_the_newest_and_busy_kept";
    let Some(w) = world(name, false) else { return };
    let idle = "end_idle = true\nkeep_newest = 1\nidle_secs = 8\nrespawn_guard_secs = 4\n";
    let cfg = config(&w, idle);
    let want_ended: Vec<i32> = (0..COPIES - PER_GENERATION).filter(|&i| i != POKED).map(|i| w.copies[i]).collect();
    let kept: Vec<i32> = (COPIES - PER_GENERATION..COPIES).chain([POKED]).map(|i| w.copies[i]).collect();

    // A dry run first: exactly what the policy would end, said once each.
    {
        let d = daemon(&w, &cfg, "dry", &["--dry-run"]);
        let st = d.status_until(Duration::from_secs(120), "the dry run's plan", |st| {
            pile(st).is_some_and(|p| p["ending"] == want_ended.len())
        });
        let p = pile(&st).unwrap();
        assert_eq!(p["copies"], COPIES, "{p:#}");
        assert_eq!(p["generation_count"], GENERATIONS, "{p:#}");
        assert_eq!(p["host_pid"], w.host, "{p:#}");
        let planned: Vec<i64> = p["copy_samples"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["end"] == true)
            .map(|c| c["pid"].as_i64().unwrap())
            .collect();
        let mut want: Vec<i64> = want_ended.iter().map(|&p| i64::from(p)).collect();
        want.sort_unstable();
        let mut got = planned.clone();
        got.sort_unstable();
        assert_eq!(got, want, "{p:#}");
        let sentence = p["sentence"].as_str().unwrap();
        assert!(sentence.contains("holds 12 copies of @playwright/mcp in 4 generations"), "{sentence}");
        assert!(sentence.contains(&format!("; {} idle for more than 8s", want_ended.len())), "{sentence}");
        // Some samples later, each plan was still said once.
        let scans = st["scans"]["count"].as_u64().unwrap();
        d.status_until(Duration::from_secs(60), "more samples", |st| {
            st["scans"]["count"].as_u64().unwrap() > scans + 4
        });
        for &pid in &want_ended {
            assert_eq!(surplus_lines(&d, pid), 1, "pid {pid}, log:\n{}", d.log_text());
        }
        assert_eq!(d.count("MCP servers piling up"), 1, "told once:\n{}", d.log_text());
        let words = text(&d.ctl(&["status"]).stdout);
        assert!(
            words.contains("generations: host ") && words.contains(&format!("(pid {}) holds 12 copies", w.host)),
            "{words}"
        );
    }
    assert!(w.copies.iter().all(|&p| alive(p)), "the dry run ended nothing");

    // Enforcing: the first ending alone, then the rest.
    let d = daemon(&w, &cfg, "enforce", &[]);
    let first = w.copies[0];
    assert!(
        common::wait_until(Duration::from_secs(120), || !alive(first)),
        "the oldest idle copy should end first:\n{}",
        d.log_text()
    );
    let others_then: usize = want_ended[1..].iter().filter(|&&p| !alive(p)).count();
    assert_eq!(others_then, 0, "the rest wait for the respawn guard's window:\n{}", d.log_text());
    assert!(
        common::wait_until(Duration::from_secs(120), || want_ended.iter().all(|&p| !alive(p))),
        "the old idle copies should end: still alive {:?}\n{}",
        want_ended.iter().filter(|&&p| alive(p)).collect::<Vec<_>>(),
        d.log_text()
    );
    let st = d.status();
    let scans = st["scans"]["count"].as_u64().unwrap();
    d.status_until(Duration::from_secs(60), "more samples", |st| st["scans"]["count"].as_u64().unwrap() > scans + 10);
    assert!(alive(w.host), "the host stays");
    for &pid in &kept {
        assert!(alive(pid), "copy {pid} (the newest, or busy) stays:\n{}", d.log_text());
    }
    let log = d.log_text();
    assert!(log.contains(&format!("(pid {}) holds 12 copies of @playwright/mcp; this one", w.host)), "{log}");
    assert_eq!(d.count("MCP servers piling up"), 1, "told once:\n{log}");

    let h = d.ctl(&["history", "--json"]);
    assert!(h.status.success(), "{}", text(&h.stderr));
    let h: Value = serde_json::from_slice(&h.stdout).unwrap();
    let surplus = h["entries"].as_array().unwrap().iter().filter(|e| e["verdict"] == "surplus").count();
    assert_eq!(surplus, want_ended.len(), "{h:#}");
    let m = text(&d.ctl(&["metrics"]).stdout);
    assert!(
        m.contains(&format!("mcp_reaper_reaped_trees_by_verdict_total{{verdict=\"surplus\"}} {}", want_ended.len())),
        "{m}"
    );
    assert!(m.contains("mcp_reaper_generation_copies 4"), "{m}");
}

#[test]
fn a_host_that_restarts_what_it_loses_trips_the_guard_after_one() {
    let name = "a_host_that_restarts_what_it_loses_trips_the_guard_after_one";
    let Some(w) = world(name, true) else { return };
    let cfg = config(&w, "end_idle = true\nkeep_newest = 1\nidle_secs = 4\nrespawn_guard_secs = 60\n");
    let d = daemon(&w, &cfg, "enforce", &[]);
    let first = w.copies[0];
    let respawned = &w.respawned;
    assert!(
        common::wait_until(Duration::from_secs(120), || std::fs::read_to_string(respawned)
            .is_ok_and(|r| !r.is_empty())),
        "the host should restart the copy it lost (pid {first} alive: {}):\n{}",
        alive(first),
        d.log_text()
    );
    let st = d.status_until(Duration::from_secs(60), "the guard", |st| {
        pile(st).is_some_and(|p| p["guard"].as_str().is_some_and(|g| g.contains("restarts what it loses")))
    });
    // Long past the idle window of every copy, the new one's included.
    let scans = st["scans"]["count"].as_u64().unwrap();
    d.status_until(Duration::from_secs(60), "more samples", |st| st["scans"]["count"].as_u64().unwrap() > scans + 10);
    let ended: Vec<i32> = w.copies.iter().copied().filter(|&p| !alive(p)).collect();
    assert_eq!(ended, [first], "one ending, then the guard:\n{}", d.log_text());
    let tripped = format!("respawn guard: its host {}", "");
    let said = d
        .log_text()
        .lines()
        .filter(|l| l.contains(&tripped) && l.contains(&format!("(pid {}) started a copy", w.host)))
        .count();
    assert_eq!(said, 1, "said once:\n{}", d.log_text());
    assert!(alive(w.host));
    let words = text(&d.ctl(&["status"]).stdout);
    assert!(words.contains("respawn guard:"), "{words}");
}
