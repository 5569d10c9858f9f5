//! Load (issues #6, #24): the real `mcp-reaperd`, in enforce mode, against
//! thousands of idle processes, hundreds of short-lived processes a second
//! (some of them MCP servers and hosts under live hosts), live trees that must
//! never be signalled, and a tree to reap every few seconds; then 100 orphan
//! trees at once (30 of them ignoring SIGTERM).
//!
//! The stand-ins behave like the programs they stand for, so that the
//! verdicts they get are the ones the real programs would get:
//! - a host keeps the write ends of its servers' stdin (and the read ends of
//!   their stdout) for as long as each server lives; launchers (`npm exec`,
//!   `uvx`) pass their own stdio on; browsers get `/dev/null`;
//! - a host's own stdin is a terminal (an interactive shell on a pty whose
//!   master the bench holds, the host its foreground job), a pipe whose
//!   writer lives (the bench), or `/dev/null` (desktop launchers, a GUI
//!   editor's main process and its extension host);
//! - bystanders: daemons, a detached server (`</dev/null >/dev/null`), a
//!   server owned by a user's script that is no host (foreign);
//! - trees to reap, made on purpose and each counted as an expected reap:
//!   *orphan* (the host, on `/dev/null`, is `SIGKILL`ed), *abandoned* (a live
//!   host drops its server's pipes; the server does not exit on EOF; the host
//!   lives on), *stale* (an interactive `claude` ignoring SIGHUP in a shell on
//!   a pty; the bench closes the pty's master, the shell dies of the hangup).
//!   Abandoned and stale trees are used (alive, held) for one interval and 2 s
//!   before they are let go, so the daemon has seen them live first.
//!
//! Checks: no missed tree, no wrong kill; measures reap latency (host death
//! → first SIGTERM a member receives, "signalled": each member of a tree to
//! reap notes its arrival in the events file; and → every member gone), the
//! daemon's RSS (start/end/max, and once a minute) and CPU, and compares its
//! memory accounting with `smaps_rollup` read by the bench just before each
//! host is killed.
//!
//! `cargo bench --bench load` (as root for event mode; the pidfd mode runs as
//! anyone). Env:
//! - `MCP_REAPER_LOAD_SECS` (default 600): length of the churn phase, per mode;
//! - `MCP_REAPER_LOAD_PROCS` (default 10000): idle background processes;
//! - `MCP_REAPER_LOAD_CHURN` (default 300): short-lived processes per second;
//! - `MCP_REAPER_LOAD_MODES` (default "events,pidfd"): daemon modes, in order;
//! - `MCP_REAPER_LOAD_INTERVAL` (default 5): the daemon's `interval_secs`;
//! - `MCP_REAPER_LOAD_ORPHAN_EVERY` (default 3): seconds between orphan trees;
//! - `MCP_REAPER_LOAD_BURST` (default 100): trees of the burst (0: none);
//! - `MCP_REAPER_LOAD_LOG` (default "info"): the daemon's log level (its log
//!   goes to a file in the bench's temp dir);
//! - `MCP_REAPER_LOAD_DAEMON`: the `mcp-reaperd` to measure (default the one
//!   `cargo bench` built), e.g. a build of the commit before a change.
//!
//! Without `--bench` (e.g. `cargo test --benches`) a few-second smoke run.
//! `.ci/run` runs a short form (20 s a mode, 1,000 processes, a tree every
//! 1.5 s, a burst of 20) and fails on any wrong kill or missed tree.
//!
//! Safety: this bench makes itself a child subreaper, so every orphan it
//! makes re-parents to it, and the daemon runs with `--scope <this bench>`:
//! it can only ever see and signal what the bench started. The bench itself
//! only signals processes it started (by pidfd) and, at the end, whatever is
//! still below it. Its helper processes are this binary again in a "node"
//! mode: each blocks on (or polls) a lifeline pipe whose only write end the
//! bench holds, so when the bench ends, however it ends, they all see EOF and
//! exit; the processes the bench starts directly also get PDEATHSIG.
//!
//! Files: `setup` (parameters, limits, background load), `node` (the helper
//! processes), `bench` (the bench's state and its processes), `phase` (one
//! daemon mode: churn, then burst), `procfs` (what it reads from /proc),
//! `report` (the figures).

mod bench;
mod goals;
mod node;
mod phase;
mod procfs;
mod report;
mod setup;

use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::node::node_main;
use crate::phase::PhaseResult;
use crate::procfs::{descendants_of, exited, pidfd, ppid_of};

const NODE_ENV: &str = "MCP_REAPER_LOAD_NODE";
const LIFELINE_ENV: &str = "MCP_REAPER_LOAD_LIFELINE";
const EVENTS_ENV: &str = "MCP_REAPER_LOAD_EVENTS";
const TERM_TIMEOUT_SECS: f64 = 2.0;
/// The daemon's `kill_wait` after SIGKILL (src/daemon/mod.rs `settings`).
const KILL_WAIT_SECS: f64 = 1.0;
/// Touched memory of each orphan server and browser.
const ORPHAN_TOUCH_MIB: u64 = 4;
const BURST_TOUCH_MIB: u64 = 2;

fn main() {
    if let Ok(spec) = std::env::var(NODE_ENV) {
        node_main(&spec);
    }
    let p = setup::params();
    let root = rustix::process::geteuid().is_root();
    let modes: Vec<String> = p.modes.iter().filter(|m| m.as_str() != "events" || root).cloned().collect();
    if modes.len() < p.modes.len() {
        eprintln!("event mode skipped: the proc connector needs root");
    }
    setup::check_limits(&p);
    let mut b = setup::new_bench(&p);
    let bg = setup::start_background(&mut b);
    let me = b.me;
    let dir = b.dir.clone();

    // ---- the phases
    let run_start = Instant::now();
    let results: Vec<PhaseResult> = modes.iter().map(|m| b.run_phase(m)).collect();

    // ---- live processes: every one still there?
    b.read_events();
    b.reap();
    let mut dead_live = Vec::new();
    for (pid, l) in &b.long_lived {
        if l.dead || exited(&l.fd) {
            dead_live.push(format!("{} {pid} ({})", l.tag, l.argv));
        }
    }
    let churn_secs = run_start.elapsed().as_secs_f64();

    // ---- shutdown: EOF on the lifeline ends every helper
    b.shutting_down = true;
    drop(b.lifeline_w.take());
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        b.tick(Duration::from_millis(20));
        if b.long_lived.values().all(|l| l.dead || exited(&l.fd)) && descendants_of(me).is_empty() {
            break;
        }
    }
    let leftovers = descendants_of(me);
    let mut left_argv: Vec<String> = Vec::new();
    for &pid in &leftovers {
        if left_argv.len() < 10 {
            let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = state.rsplit_once(')').map_or("", |x| x.1).split_whitespace().next().unwrap_or("?").to_string();
            let pp = ppid_of(pid).unwrap_or(0);
            let pargv = std::fs::read(format!("/proc/{pp}/cmdline")).unwrap_or_default();
            let pstat = std::fs::read_to_string(format!("/proc/{pp}/stat")).unwrap_or_default();
            let pstate =
                pstat.rsplit_once(')').map_or("", |x| x.1).split_whitespace().next().unwrap_or("?").to_string();
            left_argv.push(format!(
                "{pid} [{state}] {} (parent {pp} [{pstate}] {})",
                String::from_utf8_lossy(&argv).replace('\0', " ").trim_end(),
                String::from_utf8_lossy(&pargv).replace('\0', " ").trim_end()
            ));
        }
        if let Some(fd) = pidfd(pid)
            && ppid_of(pid).is_some()
        {
            let _ = rustix::process::pidfd_send_signal(&fd, Signal::KILL);
        }
    }
    let t = Instant::now();
    while !descendants_of(me).is_empty() && t.elapsed() < Duration::from_secs(10) {
        b.tick(Duration::from_millis(20));
    }
    b.read_events();
    b.reap();

    report::print(&b, &results, &modes, &bg, churn_secs, &dead_live, &leftovers);
    let goals_missed = goals::print(&results, &p);
    for l in &left_argv {
        println!("    left over: {l}");
    }
    let failed =
        results.iter().any(|r| r.missed > 0 || r.wrong_kills > 0) || !dead_live.is_empty() || !b.wrong.is_empty();
    // The logs stay for a look; the rest of the dir goes.
    for f in ["mcp-reaperd", "reaperctl", "events"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    if failed {
        println!("  RESULT: FAILED (missed orphans or wrong kills)");
        std::process::exit(1);
    }
    if goals_missed.is_empty() {
        println!("  RESULT: ok (no missed orphan, no wrong kill); every goal met");
    } else {
        println!("  RESULT: ok (no missed orphan, no wrong kill); goals missed: {}", goals_missed.join("; "));
    }
}
