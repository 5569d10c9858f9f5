//! How much a full scan costs next to the floor: reading every `/proc/*/stat`
//! and `/proc/*/cmdline` once, and next to `ps`.
//!
//! For each level of `MCP_REAPER_BENCH_LEVELS` (default `500,5000`: processes
//! on the machine in all), starts idle `sleep` processes as children of this
//! bench until /proc holds that many (each also dies with it:
//! `PR_SET_PDEATHSIG`), then times, round-robin so drift hits all alike,
//! `MCP_REAPER_BENCH_REPS` (default 15) runs of:
//!
//! - `reaperctl scan --json` as a subprocess, output to /dev/null;
//! - `reaperctl --version` as a subprocess (process start-up alone);
//! - `mcp_reaper::cycle::assess` in process (scan + trees + policy);
//! - `Config::load` in process (TOML + regex compilation, paid per start);
//! - `ProcFs::snapshot` in process (the scan stage alone);
//! - a raw pass: `read_dir(/proc)` + `fs::read` of stat and cmdline;
//! - `ps -eo pid,ppid,pgid,sid,tty,args` to /dev/null;
//! - `true` as a subprocess: any process's start-up, the floor of a
//!   whole-process scan beside the raw pass.
//!
//! At the end, side by side for every level: whole-process `reaperctl scan
//! --json` against one raw pass, with the goals of issue 24 (≤ 2× at 500
//! processes, ≤ 1.2× at 5,000).
//!
//! Run: `cargo bench --bench scan` (`MCP_REAPER_BENCH_REAPERCTL=path` times
//! that `reaperctl` instead of this build's; `MCP_REAPER_BENCH_BASE=path`
//! times that one too, in the same rounds: a before/after in one run). Kills exactly the processes it
//! started.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use mcp_reaper::config::{Config, Sources};
use mcp_reaper::cycle;
use mcp_reaper::policy::GraceBook;
use mcp_reaper::scan::{ProcFs, Reuse};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The idle processes; all killed and waited for on drop, panic or not.
struct Idle(Vec<Child>);

impl Idle {
    /// Adds `n` idle processes.
    fn grow(&mut self, n: usize) {
        let idle = self;
        for i in 0..n {
            let mut cmd = Command::new("sleep");
            cmd.arg("600").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
            mcp_reaper::sys::kill_with_parent(&mut cmd);
            match cmd.spawn() {
                Ok(c) => idle.0.push(c),
                Err(e) => {
                    panic!("spawning idle process {i} of {n}: {e} (raise RLIMIT_NPROC / pid_max?)")
                }
            }
        }
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

/// One raw pass: what any /proc scanner must at least do.
fn raw_pass() -> usize {
    let mut n = 0;
    for e in std::fs::read_dir("/proc").expect("reading /proc").flatten() {
        let name = e.file_name();
        let Some(s) = name.to_str() else { continue };
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let dir = e.path();
        if let (Ok(stat), Ok(cmd)) = (std::fs::read(dir.join("stat")), std::fs::read(dir.join("cmdline"))) {
            std::hint::black_box((&stat, &cmd));
            n += 1;
        }
    }
    n
}

fn run_quiet(cmd: &mut Command) {
    let st = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(st.as_ref().is_ok_and(std::process::ExitStatus::success), "{cmd:?}: {st:?}");
}

struct Series {
    name: &'static str,
    times: Vec<Duration>,
}

impl Series {
    fn median(&self) -> Duration {
        let mut t = self.times.clone();
        t.sort();
        t[t.len() / 2]
    }
    fn min(&self) -> Duration {
        *self.times.iter().min().unwrap()
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One level's figures: processes scanned, then median and minimum of
/// `reaperctl scan --json` and of the raw pass.
struct Level {
    /// The level asked for (processes on the machine), and those scanned.
    want: usize,
    procs: usize,
    scan: (Duration, Duration),
    raw: (Duration, Duration),
    /// The median start-up of an empty process (`true`).
    floor: Duration,
    /// The base build's `scan --json`, when one was named.
    base: Option<(Duration, Duration)>,
}

/// The goals of issue 24 for whole-process `scan --json` over the raw pass.
fn goal(procs: usize) -> f64 {
    if procs >= 5000 { 1.2 } else { 2.0 }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it once quickly.
    let quick = std::env::args().all(|a| a != "--bench");
    let reps = if quick { 2 } else { env_usize("MCP_REAPER_BENCH_REPS", 15) };
    let before = raw_pass();
    let levels: Vec<usize> = if quick {
        vec![before + 50]
    } else {
        std::env::var("MCP_REAPER_BENCH_LEVELS")
            .unwrap_or_else(|_| "500,5000".into())
            .split(',')
            .filter_map(|v| v.trim().parse().ok())
            .collect()
    };

    let tmp = std::env::temp_dir().join(format!("mcp-reaper-bench-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let cfg_path: PathBuf = tmp.join("config.toml");
    std::fs::write(&cfg_path, format!("[daemon]\nstate_file = {:?}\n", tmp.join("state.json").display().to_string()))
        .unwrap();
    let cfg = Config::load(&Sources::explicit(&cfg_path)).expect("bench config");

    let mut idle = Idle(Vec::new());
    let mut done = Vec::new();
    for &want in &levels {
        let now = raw_pass();
        let t = Instant::now();
        idle.grow(want.saturating_sub(now));
        eprintln!(
            "{} idle processes started in {:.1} s: {} processes now ({before} before the bench)",
            idle.0.len(),
            t.elapsed().as_secs_f64(),
            raw_pass()
        );
        done.push(Level { want, ..level(&cfg, &cfg_path, reps) });
    }
    drop(idle);
    let _ = std::fs::remove_dir_all(&tmp);

    println!();
    println!("whole-process `reaperctl scan --json` against one raw pass over /proc (stat + cmdline), side by side:");
    println!(
        "{:>10} {:>9} {:>14} {:>12} {:>16} {:>8} {:>8}",
        "level", "scanned", "scan ms (min)", "raw ms (min)", "ratio med (min)", "goal", ""
    );
    for l in &done {
        let (r, rmin) = (ms(l.scan.0) / ms(l.raw.0), ms(l.scan.1) / ms(l.raw.1));
        let g = goal(l.want);
        println!(
            "{:>10} {:>9} {:>6.2} ({:>5.2}) {:>5.2} ({:>4.2}) {:>7.2}× ({:>4.2}×) {:>6.1}× {:>8}",
            l.want,
            l.procs,
            ms(l.scan.0),
            ms(l.scan.1),
            ms(l.raw.0),
            ms(l.raw.1),
            r,
            rmin,
            g,
            if r <= g { "met" } else { "MISSED" }
        );
        println!(
            "{:>10} {:>9} attainable: raw pass + an empty process's start-up = {:.2}× raw (median)",
            "",
            "",
            (ms(l.raw.0) + ms(l.floor)) / ms(l.raw.0)
        );
        if let Some((bm, bmin)) = l.base {
            println!(
                "{:>10} {:>9} {:>6.2} ({:>5.2}) {:>5.2} ({:>4.2}) {:>7.2}× ({:>4.2}×)   (base build)",
                "",
                "",
                ms(bm),
                ms(bmin),
                ms(l.raw.0),
                ms(l.raw.1),
                ms(bm) / ms(l.raw.0),
                ms(bmin) / ms(l.raw.1)
            );
        }
    }
}

/// Times every series at the current process count; prints its table.
#[allow(clippy::too_many_lines)] // the whole round, read top to bottom
fn level(cfg: &Config, cfg_path: &std::path::Path, reps: usize) -> Level {
    // Another build to compare (e.g. one from before a change), if named.
    let reaperctl =
        std::env::var("MCP_REAPER_BENCH_REAPERCTL").unwrap_or_else(|_| env!("CARGO_BIN_EXE_reaperctl").into());
    let reaperctl = reaperctl.as_str();
    let base = std::env::var("MCP_REAPER_BENCH_BASE").ok();
    let procfs = ProcFs::default();
    let grace = GraceBook::default();
    let mut series: Vec<Series> = [
        "reaperctl scan --json (subprocess)",
        "reaperctl --version (subprocess)",
        "cycle::assess (in process)",
        "Config::load (in process)",
        "ProcFs::snapshot (in process)",
        "raw pass: stat + cmdline",
        "ps -eo pid,ppid,pgid,sid,tty,args",
        "daemon full read: assess, cmdlines reused",
        "daemon pidfd-mode tick: assess, new pids only",
        "true (subprocess: any process's start-up)",
        "reaperctl scan --json (base build, subprocess)",
    ]
    .into_iter()
    .take(if base.is_some() { 11 } else { 10 })
    .map(|name| Series { name, times: Vec::with_capacity(reps) })
    .collect();

    let mut trees = 0;
    let mut scanned = 0;
    let mut prev: Option<mcp_reaper::scan::Snapshot> = None;
    let none = std::collections::HashSet::new();
    // One warm-up round, not recorded.
    for rep in 0..=reps {
        let mut timings = Vec::with_capacity(series.len());
        let t = Instant::now();
        run_quiet(Command::new(reaperctl).args(["scan", "--json", "--config"]).arg(cfg_path));
        timings.push(t.elapsed());

        let t = Instant::now();
        run_quiet(Command::new(reaperctl).arg("--version"));
        timings.push(t.elapsed());

        let t = Instant::now();
        let a = cycle::assess(&procfs, cfg, None, &grace, SystemTime::now(), None).expect("assess");
        timings.push(t.elapsed());
        trees = a.judgements.len();
        scanned = a.snapshot.len();
        if rep == 0 {
            for j in &a.judgements {
                let root = &a.snapshot.procs[j.root];
                eprintln!("tree {} ({}): {}", root.pid(), j.verdict, root.display_cmd());
            }
        }
        drop(a);

        let t = Instant::now();
        std::hint::black_box(Config::load(&Sources::explicit(cfg_path)).expect("bench config"));
        timings.push(t.elapsed());

        let t = Instant::now();
        let s = procfs.snapshot().expect("snapshot");
        timings.push(t.elapsed());
        std::hint::black_box(&s);
        drop(s);

        let t = Instant::now();
        std::hint::black_box(raw_pass());
        timings.push(t.elapsed());

        let t = Instant::now();
        run_quiet(Command::new("ps").args(["-eo", "pid,ppid,pgid,sid,tty,args"]));
        timings.push(t.elapsed());

        // The daemon's two kinds of read, each from the snapshot before it.
        for reuse in [Reuse::Cmdlines, Reuse::Unchanged] {
            let t = Instant::now();
            let snap = procfs.rescan(prev.as_ref(), reuse, &none, &[]).expect("rescan");
            let a = cycle::assess_snapshot(
                &procfs,
                cfg,
                None,
                &grace,
                SystemTime::now(),
                snap,
                t,
                None,
                cycle::Young::Defer,
            )
            .expect("assess");
            timings.push(t.elapsed());
            prev = Some(a.snapshot);
        }

        // The floor of any whole-process scan: an empty process's fork,
        // exec and exit (an empty Rust binary measured the same, ±0.1 ms).
        let t = Instant::now();
        run_quiet(&mut Command::new("true"));
        timings.push(t.elapsed());

        if let Some(b) = &base {
            let t = Instant::now();
            run_quiet(Command::new(b).args(["scan", "--json", "--config"]).arg(cfg_path));
            timings.push(t.elapsed());
        }

        if rep > 0 {
            for (s, d) in series.iter_mut().zip(timings) {
                s.times.push(d);
            }
        }
    }

    let raw = series.iter().find(|s| s.name.starts_with("raw pass")).unwrap();
    let (raw_med, raw_min) = (raw.median(), raw.min());
    println!();
    println!("{scanned} processes scanned, {trees} server trees, {reps} runs each");
    println!("{:<46} {:>10} {:>10} {:>10} {:>10}", "", "median ms", "min ms", "× raw med", "× raw min");
    for s in &series {
        println!(
            "{:<46} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            s.name,
            ms(s.median()),
            ms(s.min()),
            ms(s.median()) / ms(raw_med),
            ms(s.min()) / ms(raw_min)
        );
    }
    let assess = &series[2];
    let ratio = ms(assess.median()) / ms(raw_med);
    println!(
        "target: in-process scan ≤ 1.2× raw pass — cycle::assess is {ratio:.2}× ({})",
        if ratio <= 1.2 { "met" } else { "MISSED" }
    );
    let sub = ms(series[0].median()) - ms(series[1].median());
    println!("reaperctl scan --json minus process start-up: {sub:.2} ms ({:.2}× raw)", sub / ms(raw_med));
    Level {
        want: 0,
        procs: scanned,
        scan: (series[0].median(), series[0].min()),
        raw: (raw_med, raw_min),
        floor: series[9].median(),
        base: series.get(10).map(|s| (s.median(), s.min())),
    }
}
