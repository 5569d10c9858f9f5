//! PID reuse against `reap::terminate`, for the integration tests.
//!
//! Must run as PID 1 of a new PID namespace, as root:
//!
//! ```sh
//! unshare --pid --fork --mount-proc target/debug/examples/pidreuse 200
//! ```
//!
//! Each attempt: spawn `sleep 600` as child A and read its identity (pid,
//! start time); kill A and wait for it; write `A.pid - 1` to
//! `/proc/sys/kernel/ns_last_pid` so the next child, B, gets A's pid; then ask
//! `reap::terminate` to end A — by its stale identity — and check that B, the
//! innocent process now holding that pid, was not touched.
//!
//! `/proc/PID/stat`'s start time counts clock ticks (10 ms), so B is only
//! spawned once the tick A started in is over: two processes started in the
//! same tick have the same identity. `--same-tick` skips that wait, to show
//! what happens then (a reuse inside one tick); its wrong kills are reported
//! as `same_tick_wrong_kills`, not `wrong_kills`.
//!
//! Prints one line: `reuse attempts=N reused=M wrong_kills=K same_tick=S
//! same_tick_wrong_kills=T` and exits 0 (1 on a setup failure). Only its own
//! children are ever signalled, and all of them die with the namespace.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_reaper::ids::{Identity, Pid, StartTime};
use mcp_reaper::policy::Verdict;
use mcp_reaper::reap::{self, Order, Settings};
use mcp_reaper::scan::ProcFs;

fn fail(msg: &str) -> ! {
    eprintln!("pidreuse: {msg}");
    std::process::exit(1);
}

fn spawn_sleep() -> Child {
    Command::new("sleep")
        .arg("600")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| fail(&format!("spawning sleep: {e}")))
}

fn identity(procfs: &ProcFs, child: &Child) -> Identity {
    let pid = Pid::new(child.id() as i32).unwrap_or_else(|| fail("child pid"));
    let st = procfs.stat(pid).unwrap_or_else(|| fail("a child just spawned has no /proc entry"));
    Identity { pid, start_time: StartTime(st.start_time) }
}

/// Clock ticks since boot now, on the clock start times are counted in.
fn now_ticks(tck: u64) -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    (t.tv_sec as u64) * tck + (t.tv_nsec as u64) * tck / 1_000_000_000
}

fn kill_and_wait(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut n: usize = 200;
    let mut same_tick = false;
    for a in args.by_ref() {
        match a.as_str() {
            "--same-tick" => same_tick = true,
            s => n = s.parse().unwrap_or_else(|_| fail(&format!("usage: pidreuse [--same-tick] N (got {s:?})"))),
        }
    }
    if rustix::process::getpid().as_raw_nonzero().get() != 1 {
        fail("must run as PID 1 of a new PID namespace (unshare --pid --fork --mount-proc …)");
    }
    let procfs = ProcFs::default();
    let tck = rustix::param::clock_ticks_per_second();
    let settings =
        Settings { term_timeout: Duration::from_millis(200), kill_wait: Duration::from_millis(200), dry_run: false };
    let (mut reused, mut wrong, mut same, mut same_wrong) = (0usize, 0usize, 0usize, 0usize);
    for _ in 0..n {
        let a = spawn_sleep();
        let a_id = identity(&procfs, &a);
        kill_and_wait(a);
        if !same_tick {
            // B must start in a later tick than A, or the two are one identity.
            let t = Instant::now();
            while now_ticks(tck) <= a_id.start_time.0 {
                if t.elapsed() > Duration::from_secs(1) {
                    fail("the boot-time clock does not advance");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        std::fs::write("/proc/sys/kernel/ns_last_pid", format!("{}", a_id.pid.get() - 1))
            .unwrap_or_else(|e| fail(&format!("writing ns_last_pid: {e}")));
        let mut b = spawn_sleep();
        if b.id() as i32 != a_id.pid.get() {
            kill_and_wait(b);
            continue;
        }
        reused += 1;
        let b_id = identity(&procfs, &b);
        let one_tick = b_id.start_time == a_id.start_time;
        same += usize::from(one_tick);
        let order = Order {
            verdict: Verdict::Orphan,
            reason: "pid reuse test".into(),
            root: a_id,
            root_cmd: "sleep 600".into(),
            members: vec![a_id],
        };
        let out = reap::terminate(&procfs, vec![order], &settings);
        let o = &out[0];
        let b_alive = matches!(b.try_wait(), Ok(None));
        let ok = b_alive && o.dropped == 1 && o.gone == 0 && o.members == 0;
        if !ok {
            if one_tick {
                same_wrong += 1;
            } else {
                wrong += 1;
                eprintln!(
                    "pidreuse: wrong kill: A={a_id} B={b_id} b_alive={b_alive} dropped={} gone={} members={}",
                    o.dropped, o.gone, o.members
                );
            }
        }
        kill_and_wait(b);
    }
    println!(
        "reuse attempts={n} reused={reused} wrong_kills={wrong} same_tick={same} same_tick_wrong_kills={same_wrong}"
    );
}
