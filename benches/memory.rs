//! The reaper's memory under a hostile process table (issue 22): any user can
//! start processes with huge command lines, and forks share one argv at no
//! cost to them. Tables built here, each from one `sh` of this bench:
//!
//! - 1,500 forks sharing one 200 KB argv (the attack of the issue: 302 MiB
//!   for `--once` before the cap);
//! - 10,000 forks sharing one 128 KiB argv;
//! - `MCP_REAPER_BENCH_DISTINCT` (default 1,000) processes each with its own
//!   128 KiB argv, distinct in their first 4 KiB (nothing to share: the cap
//!   alone bounds them; each costs the machine ~300 KiB, hence fewer).
//!
//! For each, the peak resident set (`ru_maxrss`) of one `mcp-reaperd --once
//! --dry-run --config -`, and the daemon's `VmHWM` after three full scans
//! (`--dry-run --no-events`, interval 1 s), against the budget the README
//! states: 32 MiB (the shipped unit's `MemoryMax` is 256M). `cargo bench
//! --bench memory`; `MCP_REAPER_BENCH_DAEMON` / `MCP_REAPER_BENCH_CTL` name
//! other binaries (see benches/daemon.rs on the bench build's extra text).
//!
//! Safety: the daemons run in dry-run, signalling nothing. The table's
//! processes are blocked opening a FIFO of the bench's; opening its write end
//! and closing it lets every one of them exit (no signal is sent).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BUDGET_KIB: u64 = 32 * 1024;
/// The argument this bench re-executes itself with to measure one child.
const PEAK: &str = "__mcp_reaper_peak_of";

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn binary(var: &str, built: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(|| PathBuf::from(built), PathBuf::from)
}

fn daemon_binary() -> PathBuf {
    binary("MCP_REAPER_BENCH_DAEMON", env!("CARGO_BIN_EXE_mcp-reaperd"))
}

fn ctl_binary() -> PathBuf {
    binary("MCP_REAPER_BENCH_CTL", env!("CARGO_BIN_EXE_reaperctl"))
}

/// A hostile table: `count` processes below one `sh`, each blocked opening
/// `fifo` for reading.
struct Table {
    sh: Child,
    fifo: PathBuf,
}

impl Table {
    /// `count` forks of one `sh` whose argv is `pad` (shared), or, with
    /// `distinct`, `count` `sh`s each with its own argv: its number, then `pad`.
    fn start(dir: &Path, count: u64, pad: &[String], distinct: bool) -> Table {
        let fifo = dir.join(format!("fifo-{count}-{distinct}"));
        let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(made.success(), "mkfifo {}", fifo.display());
        let each = if distinct {
            // Each its own `sh`, the number first: distinct in the part kept.
            r#"sh -c 'read x < "$0"' "$F" "$i" "$@" &"#
        } else {
            // A subshell is a fork: the same argv, no exec.
            r#"(read x < "$F") &"#
        };
        let script = format!("i=0; while [ $i -lt {count} ]; do {each} i=$((i+1)); done; wait");
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script).arg("sh").args(pad).env("F", &fifo).stdin(Stdio::null());
        mcp_reaper::sys::kill_with_parent(&mut cmd);
        let sh = cmd.spawn().expect("sh");
        let t = Table { sh, fifo };
        let pid = t.sh.id();
        let start = Instant::now();
        let children = || {
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .map_or(0, |c| c.split_whitespace().count() as u64)
        };
        while children() < count {
            assert!(start.elapsed() < Duration::from_secs(600), "only {} of {count} started", children());
            std::thread::sleep(Duration::from_millis(50));
        }
        // The last ones may still be between fork and their blocking open.
        std::thread::sleep(Duration::from_millis(500));
        t
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // Every reader is blocked in open(2): a writer lets them all on, its
        // close gives them end-of-file, and they exit.
        drop(std::fs::OpenOptions::new().write(true).open(&self.fifo));
        let _ = self.sh.wait();
        let _ = std::fs::remove_file(&self.fifo);
    }
}

/// `count` arguments of `size` bytes each.
fn pad(count: usize, size: usize) -> Vec<String> {
    (0..count).map(|i| format!("{i:04}{}", "A".repeat(size - 4))).collect()
}

/// Peak RSS (KiB) of one `mcp-reaperd --once --dry-run`, measured by a
/// helper (this bench again) that has no other child.
fn once_peak(dir: &Path) -> u64 {
    let out = Command::new(std::env::current_exe().expect("own path"))
        .arg(PEAK)
        .arg(daemon_binary())
        .args(["--once", "--dry-run", "--config", "-", "--log-target", "stderr", "--log-level", "warn"])
        .arg("--state-file")
        .arg(dir.join("once.state"))
        .stderr(Stdio::inherit())
        .output()
        .expect("the peak helper");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or_else(|_| panic!("helper said {out:?}"))
}

/// The daemon's `VmHWM` (KiB) after three full scans, and the last scan's ms.
fn daemon_peak(dir: &Path) -> (u64, f64) {
    let cfg = dir.join("daemon.toml");
    std::fs::write(
        &cfg,
        format!(
            "[reaper]\ninterval_secs = 1\n[daemon]\nstate_file = {:?}\n",
            dir.join("d.state").display().to_string()
        ),
    )
    .unwrap();
    let sock = dir.join("d.sock");
    let mut cmd = Command::new(daemon_binary());
    cmd.args(["--dry-run", "--no-events", "--log-target", "stderr", "--log-level", "warn", "--config"])
        .arg(&cfg)
        .arg("--socket")
        .arg(&sock)
        .stdin(Stdio::null());
    mcp_reaper::sys::kill_with_parent(&mut cmd);
    let mut child = cmd.spawn().expect("mcp-reaperd");
    let start = Instant::now();
    let last_ms = loop {
        assert!(start.elapsed() < Duration::from_secs(600), "the daemon did not scan three times");
        assert!(child.try_wait().ok().flatten().is_none(), "the daemon exited");
        let out = Command::new(ctl_binary()).arg("--socket").arg(&sock).args(["status", "--json"]).output();
        if let Some(v) = out.ok().and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
            && v["scans"]["count"].as_u64() >= Some(3)
        {
            break v["scans"]["last_duration_ms"].as_f64().unwrap_or(0.0);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let _ = child.kill();
    let _ = child.wait();
    (hwm, last_ms)
}

fn verdict(kib: u64) -> &'static str {
    if kib <= BUDGET_KIB { "ok" } else { "OVER BUDGET" }
}

fn measure(dir: &Path, what: &str, processes: usize) {
    let once = once_peak(dir);
    let (daemon, ms) = daemon_peak(dir);
    println!(
        "{what:<48} {processes:>6} procs  --once peak {:>7.1} MiB ({})  daemon VmHWM {:>7.1} MiB ({})  scan {ms:.0} ms",
        once as f64 / 1024.0,
        verdict(once),
        daemon as f64 / 1024.0,
        verdict(daemon),
    );
    let _ = std::io::stdout().flush();
}

fn count_processes() -> usize {
    std::fs::read_dir("/proc").map_or(0, |d| {
        d.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))).count()
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(PEAK) {
        let st = Command::new(&args[2]).args(&args[3..]).stdout(Stdio::null()).status().expect("the measured binary");
        assert!(st.success(), "{} exited with {st}", args[2]);
        println!("{}", mcp_reaper::sys::children_peak_rss_kib().unwrap_or(0));
        return;
    }
    if args.iter().any(|a| a == "--list") {
        println!("memory: bench");
        return;
    }
    let dir = std::env::temp_dir().join(format!("mcp-reaper-bench-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    println!(
        "goal: peak resident memory <= {} MiB under every table (the unit's MemoryMax is 256M)",
        BUDGET_KIB / 1024
    );
    // `MCP_REAPER_BENCH_TABLES`: which tables to build (default all: 0123).
    let tables = std::env::var("MCP_REAPER_BENCH_TABLES").unwrap_or_else(|_| "0123".into());
    let want = |t: char| tables.contains(t);
    if want('0') {
        measure(&dir, "this machine as it is", count_processes());
    }
    if want('1') {
        let _t = Table::start(&dir, 1500, &pad(2, 100_000), false);
        measure(&dir, "1,500 forks sharing one 200 KB argv", count_processes());
    }
    if want('2') {
        let _t = Table::start(&dir, 10_000, &pad(2, 65_536), false);
        measure(&dir, "10,000 forks sharing one 128 KiB argv", count_processes());
    }
    if want('3') {
        let n = env_num("MCP_REAPER_BENCH_DISTINCT", 1000);
        let _t = Table::start(&dir, n, &pad(128, 1024), true);
        measure(&dir, &format!("{n} processes, each its own 128 KiB argv"), count_processes());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
