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

use crate::phase::PhaseResult;
use crate::report::median;

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
pub(crate) fn print(results: &[PhaseResult]) -> Vec<String> {
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
