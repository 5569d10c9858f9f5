//! How much a full scan costs next to the floor: reading every `/proc/*/stat`
//! and `/proc/*/cmdline` once, and next to `ps`.
//!
//! Starts `MCP_REAPER_BENCH_PROCS` (default 5,000) idle `sleep` processes as
//! children of this bench (each also dies with it: `PR_SET_PDEATHSIG`), then
//! times, round-robin so drift hits all alike, `MCP_REAPER_BENCH_REPS`
//! (default 15) runs of:
//!
//! - `reaperctl scan --json` as a subprocess, output to /dev/null;
//! - `reaperctl --version` as a subprocess (process start-up alone);
//! - `mcp_reaper::cycle::assess` in process (scan + trees + policy);
//! - `Config::load` in process (TOML + regex compilation, paid per start);
//! - `ProcFs::snapshot` in process (the scan stage alone);
//! - a raw pass: `read_dir(/proc)` + `fs::read` of stat and cmdline;
//! - `ps -eo pid,ppid,pgid,sid,tty,args` to /dev/null.
//!
//! Run: `cargo bench --bench scan`. Kills exactly the processes it started.

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
    fn spawn(n: usize) -> Idle {
        let mut idle = Idle(Vec::with_capacity(n));
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
        idle
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

#[allow(clippy::too_many_lines)] // the whole bench, read top to bottom
fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it once quickly.
    let quick = std::env::args().all(|a| a != "--bench");
    let n = if quick { 50 } else { env_usize("MCP_REAPER_BENCH_PROCS", 5000) };
    let reps = if quick { 2 } else { env_usize("MCP_REAPER_BENCH_REPS", 15) };

    let tmp = std::env::temp_dir().join(format!("mcp-reaper-bench-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let cfg_path: PathBuf = tmp.join("config.toml");
    std::fs::write(&cfg_path, format!("[daemon]\nstate_file = {:?}\n", tmp.join("state.json").display().to_string()))
        .unwrap();
    let cfg = Config::load(&Sources::explicit(&cfg_path)).expect("bench config");
    let reaperctl = env!("CARGO_BIN_EXE_reaperctl");

    let before = raw_pass();
    let t = Instant::now();
    let idle = Idle::spawn(n);
    eprintln!("started {n} idle processes in {:.1} s", t.elapsed().as_secs_f64());
    let procs = raw_pass();
    eprintln!("{procs} processes now ({before} before)");

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
    ]
    .into_iter()
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
        run_quiet(Command::new(reaperctl).args(["scan", "--json", "--config"]).arg(&cfg_path));
        timings.push(t.elapsed());

        let t = Instant::now();
        run_quiet(Command::new(reaperctl).arg("--version"));
        timings.push(t.elapsed());

        let t = Instant::now();
        let a = cycle::assess(&procfs, &cfg, None, &grace, SystemTime::now(), None).expect("assess");
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
        std::hint::black_box(Config::load(&Sources::explicit(&cfg_path)).expect("bench config"));
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
            let snap = procfs.rescan(prev.as_ref(), reuse, &none).expect("rescan");
            let a =
                cycle::assess_snapshot(&procfs, &cfg, None, &grace, SystemTime::now(), snap, t, None).expect("assess");
            timings.push(t.elapsed());
            prev = Some(a.snapshot);
        }

        if rep > 0 {
            for (s, d) in series.iter_mut().zip(timings) {
                s.times.push(d);
            }
        }
    }
    drop(idle);
    let _ = std::fs::remove_dir_all(&tmp);

    let raw = series.iter().find(|s| s.name.starts_with("raw pass")).unwrap();
    let (raw_med, raw_min) = (raw.median(), raw.min());
    println!();
    println!("{scanned} processes scanned ({n} idle started), {trees} server trees, {reps} runs each");
    println!("{:<38} {:>10} {:>10} {:>10} {:>10}", "", "median ms", "min ms", "× raw med", "× raw min");
    for s in &series {
        println!(
            "{:<38} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            s.name,
            ms(s.median()),
            ms(s.min()),
            ms(s.median()) / ms(raw_med),
            ms(s.min()) / ms(raw_min)
        );
    }
    let assess = &series[2];
    let ratio = ms(assess.median()) / ms(raw_med);
    println!();
    println!(
        "target: scan ≤ 1.2× raw pass — cycle::assess is {ratio:.2}× ({})",
        if ratio <= 1.2 { "met" } else { "MISSED" }
    );
    let sub = ms(series[0].median()) - ms(series[1].median());
    println!("reaperctl scan --json minus process start-up: {sub:.2} ms ({:.2}× raw)", sub / ms(raw_med));
}
