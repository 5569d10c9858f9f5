//! Termination latency, side by side with the MCP SDK's 100 ms poll baseline.
//!
//! `cargo bench --bench reap` — prints, for N runs each:
//! - pidfd wait: time from SIGTERM to "confirmed gone" for a process that exits
//!   on SIGTERM (mcp-reaper's `reap::terminate`, one tree of one process);
//! - poll baseline: the same with `kill(pid, 0)`-style polling every 100 ms;
//! - stubborn: a tree whose members ignore SIGTERM, against `term_timeout`.
//!
//! Only processes this bench starts are signalled.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use mcp_reaper::ids::Pid;
use mcp_reaper::policy::Verdict;
use mcp_reaper::reap::{self, Order, Settings};
use mcp_reaper::scan::ProcFs;

/// A one-process order, read the way a scan reads it.
fn order(procfs: &ProcFs, pid: u32) -> Order {
    let pid = Pid::new(pid.cast_signed()).expect("child pid");
    let mut p = procfs.process(pid).expect("child is alive");
    while !p.identity_settled() {
        // Read within its start tick: the policy would wait for the next scan too.
        std::thread::sleep(Duration::from_millis(2));
        p = procfs.process(pid).expect("child is alive");
    }
    Order::new(Verdict::Orphan, "bench".into(), &p, &[&p])
}

/// Spawns `sleep` and waits until it has exec'd (its comm is "sleep").
fn spawn(cmd: &str) -> Child {
    let child = Command::new("sh").arg("-c").arg(cmd).spawn().expect("spawn");
    let procfs = ProcFs::default();
    let pid = Pid::new(child.id().cast_signed()).unwrap();
    let t = Instant::now();
    while procfs.stat(pid).is_none_or(|s| s.comm != "sleep") && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(1));
    }
    child
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let procfs = ProcFs::default();
    let runs = 20;
    let settings = Settings { term_timeout: Duration::from_secs(2), kill_wait: Duration::from_secs(1), dry_run: false };

    let mut pidfd_ms = Vec::new();
    for _ in 0..runs {
        let mut c = spawn("exec sleep 600");
        let t = Instant::now();
        let out = reap::terminate(&procfs, vec![order(&procfs, c.id())], &settings);
        pidfd_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(out[0].gone, 1, "{}", out[0].line());
        c.wait().unwrap();
    }

    let mut poll_ms = Vec::new();
    for _ in 0..runs {
        let mut c = spawn("exec sleep 600");
        let pid = Pid::new(c.id().cast_signed()).unwrap();
        let t = Instant::now();
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid.get()).unwrap(),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        // The SDK's shape: check, sleep 100 ms, check again.
        while procfs.stat(pid).is_some_and(|s| s.state != b'Z') {
            std::thread::sleep(Duration::from_millis(100));
        }
        poll_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        c.wait().unwrap();
    }

    let mut stubborn_ms = Vec::new();
    for _ in 0..3 {
        // Ten stubborn trees in one cycle: they must cost one timeout, not ten.
        let mut kids: Vec<Child> = (0..10).map(|_| spawn("trap '' TERM; exec sleep 600")).collect();
        let orders = kids.iter().map(|c| order(&procfs, c.id())).collect();
        let t = Instant::now();
        let out = reap::terminate(&procfs, orders, &settings);
        stubborn_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(out.iter().all(|o| o.escalated && o.gone == 1));
        for k in &mut kids {
            k.wait().unwrap();
        }
    }

    println!("termination latency, {runs} runs each (median / max, ms)");
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let (pm, pmax) = (median(&mut pidfd_ms.clone()), max(&pidfd_ms));
    let (bm, bmax) = (median(&mut poll_ms.clone()), max(&poll_ms));
    println!("  SIGTERM → confirmed gone, pidfd wait (mcp-reaper): {pm:8.2} / {pmax:8.2}");
    println!("  SIGTERM → confirmed gone, 100 ms poll (baseline):  {bm:8.2} / {bmax:8.2}   ratio {:.1}x", bm / pm);
    let (sm, smax) = (median(&mut stubborn_ms.clone()), max(&stubborn_ms));
    println!(
        "  10 SIGTERM-ignoring trees, term_timeout 2000 ms:   {sm:8.2} / {smax:8.2}   overhead over the timeout {:.0} ms (target ≤ 200)",
        smax - 2000.0
    );
}
