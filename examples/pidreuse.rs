//! PID reuse against the real scan → order → `reap::terminate` path, for the
//! integration tests.
//!
//! Must run as PID 1 of a new PID namespace, as root:
//!
//! ```sh
//! unshare --pid --fork --mount-proc target/debug/examples/pidreuse [--same-tick] 2000
//! ```
//!
//! Each attempt: spawn `sleep 600` as child A and read it the way a scan does
//! (`ProcFs::process`); kill A and wait for it; write `A.pid - 1` to
//! `/proc/sys/kernel/ns_last_pid` so the next child, B, gets A's pid; then
//! build the order for A from that read — by its stale identity — and hand it
//! to `reap::terminate`, and check that B, the innocent process now holding
//! the pid, was not touched.
//!
//! `stat`'s start time counts 10 ms ticks. By default A is read once the tick
//! it started in is over, so B starts in a later tick and only the start-time
//! check stands between B and the signal. With `--same-tick` A is read and B
//! is spawned at once, so
//! most reuses land in A's start tick and B has A's exact identity: only the
//! settled-identity rule (a process read within its own start tick is not
//! acted on) keeps B safe. Those refusals are counted as `unsettled`.
//!
//! Prints one line: `reuse attempts=N reused=M same_tick=S unsettled=U
//! wrong_kills=K` and exits 0 (1 on a setup failure). Only its own children
//! are ever signalled, and all of them die with the namespace.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_reaper::ids::Pid;
use mcp_reaper::policy::Verdict;
use mcp_reaper::reap::{self, Order, Settings};
use mcp_reaper::scan::{ProcFs, Process};

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

/// The child as a scan reads it.
fn read(procfs: &ProcFs, child: &Child) -> Process {
    let pid = Pid::new(child.id().cast_signed()).unwrap_or_else(|| fail("child pid"));
    procfs.process(pid).unwrap_or_else(|| fail("a child just spawned has no /proc entry"))
}

/// Clock ticks since boot now, on the clock start times are counted in.
fn now_ticks(tck: u64) -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    t.tv_sec.cast_unsigned() * tck + t.tv_nsec.cast_unsigned() * tck / 1_000_000_000
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
    let (mut reused, mut wrong, mut same, mut unsettled) = (0usize, 0usize, 0usize, 0usize);
    for _ in 0..n {
        let a = spawn_sleep();
        if !same_tick {
            // Read A only once its start tick is over: its identity is then
            // settled, and B necessarily starts in a later tick.
            let start = read(&procfs, &a).id.start_time.0;
            let t = Instant::now();
            while now_ticks(tck) <= start {
                if t.elapsed() > Duration::from_secs(1) {
                    fail("the boot-time clock does not advance");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let a_proc = read(&procfs, &a);
        let a_id = a_proc.id;
        kill_and_wait(a);
        std::fs::write("/proc/sys/kernel/ns_last_pid", format!("{}", a_id.pid.get() - 1))
            .unwrap_or_else(|e| fail(&format!("writing ns_last_pid: {e}")));
        let mut b = spawn_sleep();
        if b.id().cast_signed() != a_id.pid.get() {
            kill_and_wait(b);
            continue;
        }
        reused += 1;
        let b_id = read(&procfs, &b).id;
        same += usize::from(b_id.start_time == a_id.start_time);
        unsettled += usize::from(!a_proc.identity_settled());
        let order = Order::new(Verdict::Orphan, "pid reuse test".into(), &a_proc, &[&a_proc]);
        let out = reap::terminate(&procfs, vec![order], &settings);
        let o = &out[0];
        let b_alive = matches!(b.try_wait(), Ok(None));
        if !(b_alive && o.dropped == 1 && o.gone == 0 && o.members == 0) {
            wrong += 1;
            eprintln!(
                "pidreuse: wrong kill: A={a_id} (settled: {}) B={b_id} b_alive={b_alive} dropped={} gone={} members={}",
                a_proc.identity_settled(),
                o.dropped,
                o.gone,
                o.members
            );
        }
        kill_and_wait(b);
    }
    println!("reuse attempts={n} reused={reused} same_tick={same} unsettled={unsettled} wrong_kills={wrong}");
}
