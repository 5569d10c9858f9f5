//! Issue 24's goals, each beside the figure measured: printed, never
//! asserted (a busy machine must not fail a run; wrong kills and missed
//! orphans do, in `main`).
//!
//! - daemon CPU in the churn phase: ≤ 3 % of a core in event mode, ≤ 2 %
//!   in pidfd mode;
//! - host death → orphans signalled, median: ≤ 50 ms in event mode;
//! - RSS flat: after the first two minutes (the tables and caches warm up),
//!   the lowest RSS of each minute (the daemon between scans: a sample that
//!   caught a scan's snapshot in flight cannot hide a trend) is, over the
//!   later half (its median), within 10 % of the earlier half; runs shorter
//!   than six minutes cannot tell.
//!
//! Issue 37's (a daemon on every machine costs what earlyoom costs), stated
//! for the default run (10,000 processes, 300 forks a second, 10 minutes a
//! mode) and printed with the run's own parameters beside them:
//!
//! - daemon CPU in the churn phase: ≤ 1 % of a core in both modes;
//! - `RssAnon` as the run left it (the lowest of its last minute): ≤ 3 MiB.

use crate::phase::PhaseResult;
use crate::report::median;
use crate::setup::Params;

/// How RSS went (the medians of the earlier and later minutes' lows after
/// the warm-up): `None` when the run was too short to tell.
fn rss_flat(r: &PhaseResult) -> Option<(bool, u64, u64)> {
    let after: Vec<u64> = r.rss_trace.iter().filter(|&&(t, _)| t > 120).map(|&(_, k)| k).collect();
    if after.len() < 4 {
        return None;
    }
    let (earlier, later) = after.split_at(after.len() / 2);
    let median = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2]
    };
    let (base, now) = (median(earlier), median(later));
    Some((now <= base + base / 10, base, now))
}

/// Prints one line per goal and phase; returns the goals missed.
pub(crate) fn print(results: &[PhaseResult], p: &Params) -> Vec<String> {
    let mut missed = issue_24(results);
    missed.extend(issue_37(results, p));
    missed
}

fn issue_37(results: &[PhaseResult], p: &Params) -> Vec<String> {
    let mut missed = Vec::new();
    println!(
        "  goals (issue 37, stated at 10,000 processes, 300 forks/s, 600 s; this run {} processes, {} forks/s, {} s):",
        p.procs, p.churn, p.secs
    );
    // The daemon's safety-net reads of every process come every 120 s (a
    // full read, pidfd mode), 300 s (event mode) and 600 s (a fresh one):
    // a shorter run leaves them out and reads low (issue 37: 0.8–1.0 % in
    // 60 s runs, 1.04 and 1.12 % over 600 s, the same binary).
    if p.secs < 600 {
        println!(
            "    note: a {} s run leaves out the safety-net reads (a full read every 120 s in pidfd mode, \
             300 s in event mode, a fresh one every 600 s): its CPU reads low against the goal",
            p.secs
        );
    }
    for r in results {
        let mut line = |what: String, ok: bool| {
            println!("    [{}] {what}: {}", r.mode, if ok { "met" } else { "MISSED" });
            if !ok {
                missed.push(format!("{} {what}", r.mode));
            }
        };
        line(format!("daemon CPU {:.2} % of a core (goal ≤ 1)", r.cpu_steady), r.cpu_steady <= 1.0);
        line(format!("RssAnon {} KiB, lowest of the last minute (goal ≤ 3072)", r.anon_end), r.anon_end <= 3072);
    }
    missed
}

fn issue_24(results: &[PhaseResult]) -> Vec<String> {
    let mut missed = Vec::new();
    println!("  goals (issue 24), each beside what was measured:");
    for r in results {
        let events = r.mode == "events";
        let cpu_goal = if events { 3.0 } else { 2.0 };
        let mut line = |what: String, ok: bool| {
            println!("    [{}] {what}: {}", r.mode, if ok { "met" } else { "MISSED" });
            if !ok {
                missed.push(format!("{} {what}", r.mode));
            }
        };
        line(format!("daemon CPU {:.2} % of a core (goal ≤ {cpu_goal})", r.cpu_steady), r.cpu_steady <= cpu_goal);
        if events {
            let m = median(&r.signal_lat_ms);
            line(format!("host death → orphans signalled, median {m:.0} ms (goal ≤ 50)"), m <= 50.0);
        }
        match rss_flat(r) {
            Some((ok, base, now)) => {
                let line_text = format!(
                    "RSS flat: minutes' lows {now} KiB in the later half after 2 min (median), against {base} KiB \
                     in the earlier (goal ≤ +10 %; {} → {} KiB, at most {})",
                    r.rss_start, r.rss_end, r.rss_max
                );
                line(line_text, ok);
            }
            None => println!("    [{}] RSS flat: not told (the churn phase is under 6 minutes)", r.mode),
        }
    }
    missed
}
