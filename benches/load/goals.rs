//! Issue 24's goals, each beside the figure measured: printed, never
//! asserted (a busy machine must not fail a run; wrong kills and missed
//! orphans do, in `main`).
//!
//! - daemon CPU in the churn phase: ≤ 3 % of a core in event mode, ≤ 2 %
//!   in pidfd mode;
//! - host death → orphans signalled, median: ≤ 50 ms in event mode;
//! - RSS flat: after the first two minutes (the tables and caches warm up),
//!   the daemon's RSS never exceeds the most it had by then by more than
//!   10 % (runs shorter than three minutes cannot tell).

use crate::phase::PhaseResult;
use crate::report::median;

/// How RSS went: `None` when the run was too short to tell.
fn rss_flat(r: &PhaseResult) -> Option<(bool, u64, u64)> {
    let warm: Vec<u64> = r.rss_trace.iter().filter(|&&(t, _)| t <= 120).map(|&(_, k)| k).collect();
    let later: Vec<u64> = r.rss_trace.iter().filter(|&&(t, _)| t > 120).map(|&(_, k)| k).chain([r.rss_end]).collect();
    if r.rss_trace.iter().all(|&(t, _)| t < 180) || warm.is_empty() {
        return None;
    }
    let (base, top) = (warm.into_iter().max()?, later.into_iter().max()?);
    Some((top <= base + base / 10, base, top))
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
            Some((ok, base, top)) => {
                line(format!("RSS flat: {top} KiB at most after 2 min, against {base} KiB by then (goal ≤ +10 %)"), ok);
            }
            None => println!("    [{}] RSS flat: not told (the churn phase is under 3 minutes)", r.mode),
        }
    }
    missed
}
