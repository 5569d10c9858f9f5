//! The daemon's reaction latency (event mode vs pidfd/polling mode) and its
//! idle footprint with thousands of extra processes, side by side in one run.
//!
//! `cargo bench --bench daemon` (as root for event mode; the pidfd mode runs
//! as anyone). Env: `MCP_REAPER_BENCH_PROCS` (default 5000),
//! `MCP_REAPER_BENCH_IDLE_SECS` (default 60), `MCP_REAPER_BENCH_DAEMON` (the
//! `mcp-reaperd` to measure; default the one `cargo bench` built). The
//! default is not the shipped binary: a bench build unifies dev-dependencies'
//! features into it (prometheus-parse turns on all of regex's Unicode
//! tables, 260 KiB more text), so its resident memory reads high. For the
//! shipped figure: `cargo build --release --target-dir target/shipped`, then
//! `MCP_REAPER_BENCH_DAEMON=target/shipped/release/mcp-reaperd cargo bench --bench daemon`.
//!
//! Goals (issue 37), each printed beside its figure, never asserted (a busy
//! machine must not fail a run): idle CPU ≤ 0.05 % of a core in both modes
//! and idle RSS ≤ 4 MiB (the mean of samples every 5 s; the maximum is
//! printed beside it), with 5,000 extra processes over 60 s; `RssAnon` ≤
//! 1 MiB and flat (at the end no more than 10 % over the start) with 1,000
//! over 2 minutes (`MCP_REAPER_BENCH_ANON_SECS`), as the issue measured
//! it: the same daemon, before the rest are started; the binary ≤ 4 MB;
//! the reaction latencies no worse than the issue's baselines (event mode
//! 10.6 ms, pidfd mode with the host watched 50.9 ms, a newborn host 10.6
//! ms), with 10 % for a machine's noise. Idle CPU is the whole process's
//! (every thread, to the nanosecond: [`cpu_secs`]).
//!
//! Safety: the latency runs use `--scope` on this bench process, which makes
//! itself a child subreaper, so the daemon can only ever see what the bench
//! started. The footprint run is `--dry-run`: it signals nothing.

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_reaper::ids::Pid;
use mcp_reaper::scan::ProcFs;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The `mcp-reaperd` measured (see the header).
fn daemon_binary() -> PathBuf {
    std::env::var_os("MCP_REAPER_BENCH_DAEMON")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_mcp-reaperd")), PathBuf::from)
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(p) = rustix::process::Pid::from_raw(self.0.id().cast_signed()) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
        }
        let _ = self.0.wait();
    }
}

fn sock_of(dir: &Path, tag: &str) -> PathBuf {
    dir.join(format!("{tag}.sock"))
}

fn start_daemon(dir: &Path, tag: &str, args: &[&str]) -> Daemon {
    let sock = sock_of(dir, tag);
    let mut cmd = Command::new(daemon_binary());
    mcp_reaper::sys::kill_with_parent(&mut cmd);
    let child = cmd
        .args(args)
        .arg("--socket")
        .arg(&sock)
        .arg("--state-file")
        .arg(dir.join(format!("{tag}.state")))
        .args(["--log-target", "stderr", "--log-level", "warn"])
        .stdin(Stdio::null())
        .spawn()
        .expect("start mcp-reaperd");
    let t = Instant::now();
    while !sock.exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200)); // first scan done
    Daemon(child)
}

/// host (`claude`) → `npm exec @playwright/mcp` → `node …/playwright-mcp`
/// built from sh with `exec -a`; returns (host, server pids).
fn spawn_tree() -> (Child, i32) {
    let script = r#"(exec -a "npm exec @playwright/mcp@latest" bash -c '(exec -a "node /x/.bin/playwright-mcp" sleep 600) & wait') & echo $! ; wait"#;
    let mut host = Command::new("bash");
    host.arg0("claude").args(["-c", script]).stdout(Stdio::piped()).stdin(Stdio::null());
    mcp_reaper::sys::kill_with_parent(&mut host);
    let mut child = host.spawn().expect("spawn tree");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let server: i32 = line.trim().parse().expect("server pid");
    std::thread::sleep(Duration::from_millis(100)); // let the execs happen
    (child, server)
}

fn gone(pid: i32) -> bool {
    ProcFs::default().stat(Pid::new(pid).unwrap()).is_none_or(|s| s.state == b'Z')
}

/// `prime`: make the daemon scan once after the tree started (as its periodic
/// scan would on a host that has run for a while), so the host is watched.
fn latency(dir: &Path, tag: &str, extra: &[&str], runs: usize, prime: bool) -> Vec<f64> {
    let me = std::process::id().to_string();
    let cfg = dir.join("grace0.toml");
    std::fs::write(&cfg, "[reaper]\ngrace_secs = 0\nmin_uid = 0\ninterval_secs = 10\n").unwrap();
    let mut args = vec!["--config", cfg.to_str().unwrap(), "--scope", &me];
    args.extend_from_slice(extra);
    let _d = start_daemon(dir, tag, &args);
    let mut out = Vec::new();
    for _ in 0..runs {
        let (mut host, server) = spawn_tree();
        std::thread::sleep(Duration::from_millis(300));
        if prime {
            reap_now(dir, tag);
        }
        let t = Instant::now();
        host.kill().unwrap();
        host.wait().unwrap();
        while !gone(server) && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(1));
        }
        out.push(t.elapsed().as_secs_f64() * 1000.0);
        // Reap what the subreaper (this bench) inherited.
        while let Ok(Some(_)) = rustix::process::waitpid(None, rustix::process::WaitOptions::NOHANG) {}
    }
    out
}

/// Waits (75 s at most) for the daemon to drop from its page tables the
/// pages that the scan asked for and `reaperctl`'s own exec (read and
/// classified by the daemon) mapped: a wake-up's pages leave within a minute
/// (`AFTER_WAKE` in `src/daemon/resident.rs`), and the window is an idle
/// daemon's, not the minute after this bench's own work.
fn settle(pid: u32) {
    let start = status_kib(pid, "RssFile:");
    let deadline = Instant::now() + Duration::from_secs(75);
    while Instant::now() < deadline && status_kib(pid, "RssFile:") * 10 > start * 9 {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A scan now, in dry-run (`reaperctl reap-now --dry-run`), answered when it is done.
fn reap_now(dir: &Path, tag: &str) {
    let ok = Command::new(env!("CARGO_BIN_EXE_reaperctl"))
        .args(["reap-now", "--dry-run", "--socket"])
        .arg(sock_of(dir, tag))
        .stdout(Stdio::null())
        .status()
        .expect("reaperctl");
    assert!(ok.success());
}

/// CPU time used, in seconds, by every thread of the daemon (its cycles
/// run on tokio's blocking threads), those exited included, to the
/// nanosecond ([`mcp_reaper::sys::process_cpu_time`]). Until this session
/// the figure was the main thread's `schedstat` alone, which left the
/// cycles out: 0.060 % idle in pidfd mode read 0.181 % counted whole.
fn cpu_secs(pid: u32) -> f64 {
    mcp_reaper::sys::process_cpu_time(pid.cast_signed()).map_or(0.0, |d| d.as_secs_f64())
}

/// A `/proc/PID/status` figure in KiB (`VmRSS:`, `RssAnon:`, `RssFile:`).
fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.split_whitespace().next()?.parse().ok()))
        .unwrap_or(0)
}

/// Resident memory at one moment, KiB.
#[derive(Clone, Copy)]
struct Resident {
    rss: u64,
    anon: u64,
    file: u64,
}

fn resident(pid: u32) -> Resident {
    Resident { rss: status_kib(pid, "VmRSS:"), anon: status_kib(pid, "RssAnon:"), file: status_kib(pid, "RssFile:") }
}

/// One mode's idle figures: `RssAnon` at the issue's 1,000 processes, start
/// and end; CPU and resident memory at the many.
struct Footprint {
    tag: &'static str,
    cpu: f64,
    a0: Resident,
    a1: Resident,
    r0: Resident,
    r1: Resident,
    /// `VmRSS` every 5 s over the window (a point sample lands on a wake-up
    /// or a read's pages as often as between them).
    rss: Samples,
}

/// `n` idle processes (`sleep`), killed with this bench at the latest.
fn spawn_sleepers(n: u64) -> Vec<Child> {
    (0..n)
        .map(|_| {
            let mut cmd = Command::new("sleep");
            cmd.arg("600").stdin(Stdio::null());
            mcp_reaper::sys::kill_with_parent(&mut cmd);
            cmd.spawn().expect("spawn sleep")
        })
        .collect()
}

/// One goal's line: the figure, the goal, and whether it was met.
fn goal(what: &str, ok: bool, missed: &mut Vec<String>) {
    println!("    {what}: {}", if ok { "met" } else { "MISSED" });
    if !ok {
        missed.push(what.to_string());
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Whether the idle window holds the daemon's safety-net reads of /proc
/// and its quiet periodic scans (at 5,000 extra processes a full read took
/// ~100 ms, a fresh one ~220 ms).
fn note_safety_net(idle_secs: u64) {
    if idle_secs < 600 {
        println!(
            "  note: a {idle_secs} s window may miss event mode's safety-net reads of /proc (while quiet: full \
             every 900 s, fresh every 1,800 s) and the quiet periodic scans (every 120 s), where pidfd mode \
             reads its turn of processes afresh; MCP_REAPER_BENCH_IDLE_SECS=600 or more includes them"
        );
    }
}

/// Resident memory sampled over a window: its mean and maximum `VmRSS`.
struct Samples {
    sum: u64,
    n: u64,
    max: u64,
    every: Duration,
}

impl Samples {
    /// Samples `pid` every `every` for `secs`; the first sample at once.
    fn over(pid: u32, secs: Duration, every: Duration) -> Samples {
        let mut s = Samples { sum: 0, n: 0, max: 0, every };
        let t = Instant::now();
        loop {
            let rss = status_kib(pid, "VmRSS:");
            (s.sum, s.n, s.max) = (s.sum + rss, s.n + 1, s.max.max(rss));
            let left = secs.saturating_sub(t.elapsed());
            if left.is_zero() {
                return s;
            }
            std::thread::sleep(left.min(every));
        }
    }

    fn mean(&self) -> u64 {
        self.sum / self.n.max(1)
    }
}

/// The idle footprint's figures and their goals; `counts` is `[procs,
/// anon_procs, anon_secs, idle_secs]`.
fn report_footprint(footprint: &[Footprint], counts: [u64; 4], missed: &mut Vec<String>) {
    let [procs, anon_procs, anon_secs, idle_secs] = counts;
    let bin = daemon_binary();
    let size = std::fs::metadata(&bin).map_or(0, |m| m.len());
    println!("\nidle footprint (dry-run, default config, interval 10 s)");
    println!("  daemon measured: {} ({size} bytes)", bin.display());
    for f in footprint {
        println!(
            "  {:<12} {anon_procs} extra processes over {anon_secs} s: RssAnon {} → {} KiB (RSS {} → {})",
            f.tag, f.a0.anon, f.a1.anon, f.a0.rss, f.a1.rss
        );
        println!(
            "  {:<12} {procs} extra processes over {idle_secs} s: CPU {:6.3} % of one core   RSS {} KiB → {} KiB (anonymous {} → {}, file {} → {})",
            f.tag, f.cpu, f.r0.rss, f.r1.rss, f.r0.anon, f.r1.anon, f.r0.file, f.r1.file
        );
        println!(
            "  {:<12} RSS sampled every {} s: mean {} KiB, max {} KiB ({} samples)",
            f.tag,
            f.rss.every.as_secs(),
            f.rss.mean(),
            f.rss.max,
            f.rss.n
        );
    }
    note_safety_net(idle_secs);
    println!("  goals (issue 37):");
    goal(&format!("binary {size} bytes (goal ≤ 4,000,000)"), size <= 4_000_000, missed);
    for f in footprint {
        let tag = f.tag;
        goal(&format!("{tag} CPU {:.3} % of one core (goal ≤ 0.05)", f.cpu), f.cpu <= 0.05, missed);
        let mean = f.rss.mean();
        goal(
            &format!("{tag} RSS mean {mean} KiB (max {}) at {procs} processes (goal ≤ 4096 on the mean)", f.rss.max),
            mean <= 4096,
            missed,
        );
        let flat = f.a1.anon <= f.a0.anon + f.a0.anon / 10;
        goal(
            &format!(
                "{tag} RssAnon {} → {} KiB at {anon_procs} processes (goal ≤ 1024, flat: ≤ +10 %)",
                f.a0.anon, f.a1.anon
            ),
            f.a1.anon <= 1024 && flat,
            missed,
        );
    }
}

fn main() {
    let quick = std::env::args().all(|a| a != "--bench");
    let procs = if quick { 20 } else { env_num("MCP_REAPER_BENCH_PROCS", 5000) };
    let idle_secs = if quick { 2 } else { env_num("MCP_REAPER_BENCH_IDLE_SECS", 60) };
    let runs = if quick { 2 } else { 10 };
    let dir: PathBuf = std::env::temp_dir().join(format!("mcp-reaper-bench-daemon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).expect("become a child subreaper");
    let root = rustix::process::geteuid().is_root();

    let ev = if root { Some(latency(&dir, "events", &[], runs, false)) } else { None };
    let pidfd = latency(&dir, "pidfd", &["--no-events"], runs, true);
    let poll = latency(&dir, "polling", &["--no-events"], runs.min(3), false);

    // Idle footprint (issue 37's conditions): first with `anon_procs` extra
    // processes for `anon_secs` (is RssAnon flat, under 1 MiB?), then, the
    // same daemon, with `procs` for `idle_secs` (CPU and RSS). The extra
    // processes are children of this bench, killed at the end.
    let anon_procs = if quick { 10 } else { procs.min(1000) };
    let anon_secs = if quick { 2 } else { env_num("MCP_REAPER_BENCH_ANON_SECS", 120) };
    let mut footprint = Vec::new();
    for (tag, extra) in [("idle-events", &[][..]), ("idle-pidfd", &["--no-events"][..])] {
        if tag == "idle-events" && !root {
            continue;
        }
        let mut idle = spawn_sleepers(anon_procs);
        let mut args = vec!["--dry-run", "--config", "-"];
        args.extend_from_slice(extra);
        let d = start_daemon(&dir, tag, &args);
        let pid = d.0.id();
        std::thread::sleep(Duration::from_secs(2));
        let a0 = resident(pid);
        std::thread::sleep(Duration::from_secs(anon_secs));
        let a1 = resident(pid);
        idle.extend(spawn_sleepers(procs.saturating_sub(anon_procs)));
        // A scan reads them all before the window: the first reading of
        // 4,000 new processes is no idle cost. (A periodic scan 10 s later
        // used to, but while quiet they are 120 s apart: reading them, 127
        // ms of CPU, fell in the window and was most of pidfd mode's excess.)
        std::thread::sleep(Duration::from_secs(1));
        reap_now(&dir, tag);
        std::thread::sleep(Duration::from_secs(2));
        if !quick {
            settle(pid);
        }
        let (c0, r0) = (cpu_secs(pid), resident(pid));
        let t = Instant::now();
        let rss = Samples::over(pid, Duration::from_secs(idle_secs), Duration::from_secs(if quick { 1 } else { 5 }));
        let secs = t.elapsed().as_secs_f64();
        let (c1, r1) = (cpu_secs(pid), resident(pid));
        footprint.push(Footprint { tag, cpu: (c1 - c0) / secs * 100.0, a0, a1, r0, r1, rss });
        drop(d);
        for c in &mut idle {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);

    let mut missed = Vec::new();
    println!("\nreaction latency, host killed → orphan server gone (grace 0, interval 10 s), {runs} runs, ms");
    let show = |name: &str, v: &[f64]| {
        println!("  {name:<58} median {:8.1}  max {:8.1}", median(v.to_vec()), v.iter().copied().fold(0.0, f64::max));
    };
    match &ev {
        Some(ev) => show("event mode (proc connector; host exec seen, so watched)", ev),
        None => println!("  event mode: skipped (needs root)"),
    }
    show("pidfd mode (host seen by a scan, so watched by pidfd)", &pidfd);
    show("polling bound (pidfd mode, host born after the last scan)", &poll);
    println!("  goals (issue 37: no worse than its baselines, + 10 % for noise):");
    if let Some(ev) = &ev {
        let m = median(ev.clone());
        goal(&format!("event mode median {m:.1} ms (baseline 10.6)"), m <= 10.6 * 1.1, &mut missed);
    }
    let m = median(pidfd.clone());
    goal(&format!("pidfd mode, host watched, median {m:.1} ms (baseline 50.9)"), m <= 50.9 * 1.1, &mut missed);
    // The issue's "newborn host": born after the last scan, killed 400 ms
    // later; seen by the births looks (pidfd mode) in time to be watched.
    let m = median(poll.clone());
    goal(&format!("newborn host (polling bound) median {m:.1} ms (baseline 10.6)"), m <= 10.6 * 1.1, &mut missed);
    report_footprint(&footprint, [procs, anon_procs, anon_secs, idle_secs], &mut missed);
    if missed.is_empty() {
        println!("  every goal met");
    } else {
        println!("  goals missed: {}", missed.join("; "));
    }
}
