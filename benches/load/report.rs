//! The report: figures per phase, side by side, and statistics.

use std::fmt::Write as _;

use crate::TERM_TIMEOUT_SECS;
use crate::bench::{Bench, bound};
use crate::phase::PhaseResult;
use crate::setup::Background;

pub(crate) fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // an index, from a fraction in 0..=1
pub(crate) fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

pub(crate) fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

pub(crate) fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

/// Prints the figures of every phase, side by side, and what went wrong.
#[allow(clippy::too_many_lines)] // one row per figure, in the order printed
pub(crate) fn print(
    b: &Bench,
    results: &[PhaseResult],
    modes: &[String],
    bg: &Background,
    churn_secs: f64,
    dead_live: &[String],
    leftovers: &[i32],
) {
    let p = &b.p;
    let mut forks = 0u64;
    let mut spawns = 0u64;
    for s in &b.stats {
        let get =
            |k: &str| -> u64 { s.split(' ').find_map(|f| f.strip_prefix(k).and_then(|v| v.parse().ok())).unwrap_or(0) };
        forks += get("forks=");
        spawns += get("spawns=");
    }
    println!();
    println!(
        "load: {} idle processes (~{} MiB), churn target {}/s ({:.0}/s fork+exit, {:.0}/s exec'd MCP-looking servers and \
         hosts under live hosts), {} live hosts with {} live members; a tree to reap every {} s per mode for {} s; \
         daemon interval {} s, grace 0, term_timeout {TERM_TIMEOUT_SECS} s, enforce, --scope <bench>",
        p.procs,
        bg.idle_cost_kib / 1024,
        p.churn,
        p.churn as f64 * 0.8,
        p.churn as f64 * 0.2,
        bg.hosts,
        bg.hosts * 5,
        p.orphan_every,
        p.secs,
        p.interval
    );
    println!(
        "churn achieved over the run ({churn_secs:.0} s): {:.0} forks/s, {:.0} exec'd spawns/s (+ their children)",
        forks as f64 / churn_secs,
        spawns as f64 / churn_secs
    );
    let bnd = bound(p);
    let row = |name: &str, f: &dyn Fn(&PhaseResult) -> String| {
        let mut line = format!("  {name:<52}");
        for r in results {
            let _ = write!(line, " {:>22}", f(r));
        }
        println!("{line}");
    };
    row("", &|r| r.mode.clone());
    row("daemon event mode (status)", &|r| r.event_mode.clone());
    row("churn phase (s)", &|r| format!("{:.0}", r.steady_secs));
    row("trees to reap made (of them ignoring SIGTERM)", &|r| format!("{} ({})", r.created, r.stubborn));
    row("  orphan / abandoned / stale", &|r| format!("{} / {} / {}", r.made[0], r.made[1], r.made[2]));
    row("trees reaped", &|r| r.reaped.to_string());
    row("  orphan / abandoned / stale", &|r| {
        format!("{} / {} / {}", r.reaped_kind[0], r.reaped_kind[1], r.reaped_kind[2])
    });
    row(&format!("missed orphans / reaped late (> {:.0} s)", bnd.as_secs_f64()), &|r| {
        format!("{} / {}", r.missed, r.late)
    });
    row("wrong kills", &|r| r.wrong_kills.to_string());
    row("host death → orphans signalled, ms: median (goal ≤ 50, events)", &|r| {
        format!("{:.0}", median(&r.signal_lat_ms))
    });
    row("  p95 / max (trees measured)", &|r| {
        format!("{:.0} / {:.0} ({})", percentile(&r.signal_lat_ms, 0.95), max(&r.signal_lat_ms), r.signal_lat_ms.len())
    });
    row("host death → tree gone, ms: median", &|r| format!("{:.0}", median(&r.tree_lat_ms)));
    row("  p95 / max", &|r| format!("{:.0} / {:.0}", percentile(&r.tree_lat_ms, 0.95), max(&r.tree_lat_ms)));
    row("host death → server gone, ms: median / max", &|r| {
        format!("{:.0} / {:.0}", median(&r.server_lat_ms), max(&r.server_lat_ms))
    });
    row("daemon RSS KiB: start → end of churn (max)", &|r| {
        format!("{} → {} ({})", r.rss_start, r.rss_end, r.rss_max)
    });
    row("daemon RSS KiB after the burst", &|r| r.rss_after_burst.to_string());
    row("daemon CPU, % of one core: churn phase", &|r| format!("{:.2}", r.cpu_steady));
    row("  of it user / system", &|r| format!("{:.2} / {:.2}", r.cpu_user, r.cpu_sys));
    row("daemon wake-ups a second (main thread)", &|r| format!("{:.0}", r.wakeups));
    row("daemon CPU, % of one core: whole phase", &|r| format!("{:.2}", r.cpu_all));
    row("daemon scans (last: ms, processes)", &|r| {
        format!("{} ({:.0} ms, {})", r.scans, r.last_scan_ms, r.last_processes)
    });
    row("daemon log lines (of them \"live tree\")", &|r| format!("{} ({})", r.log_lines, r.live_logged));
    row("daemon totals: trees / processes reaped", &|r| format!("{} / {}", r.totals_trees, r.totals_processes));
    row("daemon totals: escalations / failures", &|r| format!("{} / {}", r.totals_escalations, r.totals_failures));
    row("churn phase: trees reaped, daemon vs bench", &|r| format!("{} vs {}", r.steady_daemon_trees, r.reaped));
    row("churn phase: escalations, daemon vs stubborn", &|r| {
        format!("{} vs {}", r.steady_daemon_escalations, r.stubborn)
    });
    row("churn phase: reclaimed MiB, daemon vs smaps", &|r| {
        format!("{:.1} vs {:.1}", mib(r.steady_daemon_reclaimed), mib(r.steady_measured))
    });
    row("burst: trees (ignoring SIGTERM), members", &|r| {
        format!("{} ({}), {}", r.burst.trees, r.burst.stubborn, r.burst.members)
    });
    row("burst: host deaths → every member gone, ms", &|r| {
        r.burst.all_gone.map_or_else(|| "NOT ALL".into(), |d| format!("{:.0}", d.as_secs_f64() * 1000.0))
    });
    row("burst: reaped per bench / per daemon", &|r| {
        format!("{} / {}", r.burst.reaped_by_bench_count, r.burst.daemon_trees)
    });
    row("burst: daemon escalations / failures", &|r| {
        format!("{} / {}", r.burst.daemon_escalations, r.burst.daemon_failures)
    });
    row("burst: reclaimed MiB, daemon vs smaps", &|r| {
        format!("{:.1} vs {:.1}", mib(r.burst.daemon_reclaimed), mib(r.burst.measured))
    });
    row("daemon exit on SIGTERM", &|r| r.daemon_exit.clone());
    for r in results {
        let trace: Vec<String> = r.rss_trace.iter().map(|(t, kib)| format!("{t}s:{kib}")).collect();
        println!("  daemon RSS (KiB), lowest of each minute, {}: {}", r.mode, trace.join(" "));
        let anon: Vec<String> = r.anon_trace.iter().map(u64::to_string).collect();
        println!("    of it anonymous (RssAnon), lowest of each minute: {}", anon.join(" "));
    }
    println!("  live processes (hosts, trees, helpers) dead at the end: {}", dead_live.len());
    for d in dead_live {
        println!("    {d}");
    }
    println!("  processes adopted by the bench that exited normally: {}", b.adopted_normal);
    println!("  left over at shutdown and SIGKILLed by the bench: {}", leftovers.len());
    for (ph, w) in &b.wrong {
        println!("  WRONG KILL [{}]: {w}", if *ph == 0 { "setup" } else { &modes[ph - 1] });
    }
    for u in b.unexpected.iter().take(20) {
        println!("  unexpected: {u}");
    }
    for e in b.errors.iter().take(20) {
        println!("  error: {e}");
    }
    println!("  daemon logs: {} (kept)", b.dir.display());
}
