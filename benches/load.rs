//! Load (issue #6): the real `mcp-reaperd`, in enforce mode, against
//! thousands of idle processes, hundreds of short-lived processes a second
//! (some of them MCP servers and hosts under live hosts), live trees that must
//! never be signalled, and an orphan tree every few seconds that must be
//! reaped; then 100 orphan trees at once (30 of them ignoring SIGTERM).
//! Checks: no missed orphan, no wrong kill; measures reap latency, the
//! daemon's RSS (start/end/max) and CPU, and compares its memory accounting
//! with `smaps_rollup` read by the bench just before each host is killed.
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
//!   goes to a file in the bench's temp dir).
//!
//! Without `--bench` (e.g. `cargo test --benches`) a few-second smoke run.
//!
//! Safety: this bench makes itself a child subreaper, so every orphan it
//! makes re-parents to it, and the daemon runs with `--scope <this bench>`:
//! it can only ever see and signal what the bench started. The bench itself
//! only signals processes it started (by pidfd) and, at the end, whatever is
//! still below it. Its helper processes are this binary again in a "node"
//! mode: each blocks on (or polls) a lifeline pipe whose only write end the
//! bench holds, so when the bench ends, however it ends, they all see EOF and
//! exit; the processes the bench starts directly also get PDEATHSIG.

// This program stands in for other programs (hosts, servers, forking
// helpers) and needs raw system calls; every block has a `// SAFETY:` note.
#![allow(unsafe_code)]

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcp_reaper::ctl::proto::Status;
use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid as RPid, PidfdFlags, Signal, WaitOptions, WaitStatus};
use serde::{Deserialize, Serialize};

const NODE_ENV: &str = "MCP_REAPER_LOAD_NODE";
const LIFELINE_ENV: &str = "MCP_REAPER_LOAD_LIFELINE";
const EVENTS_ENV: &str = "MCP_REAPER_LOAD_EVENTS";
const TERM_TIMEOUT_SECS: f64 = 2.0;
/// The daemon's `kill_wait` after SIGKILL (src/daemon/mod.rs `settings`).
const KILL_WAIT_SECS: f64 = 1.0;
/// Touched memory of each orphan server and browser.
const ORPHAN_TOUCH_MIB: u64 = 4;
const BURST_TOUCH_MIB: u64 = 2;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

// =================================================================== nodes

/// One helper process: this binary again, with its spec in `NODE_ENV`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Node {
    argv: Vec<String>,
    /// What the bench makes of it: helper, live-host, live, orphan-host,
    /// orphan, churn-mcp.
    tag: String,
    /// Orphan tree id.
    tree: u64,
    children: Vec<Node>,
    ignore_term: bool,
    /// Exit (status 0) this long after start, once its children are gone.
    life_ms: Option<u64>,
    /// Write a ready line (and a stats line when it ends).
    report: bool,
    touch_mib: u64,
    /// Children forked (no exec) that block on the lifeline.
    idle_forks: u32,
    /// Plain fork+exit churn: children that live up to `fork_life_ms`.
    fork_per_sec: f64,
    fork_life_ms: u64,
    /// Exec'd churn, taken in turn from `spawn`.
    spawn_per_sec: f64,
    spawn: Vec<Node>,
}

impl Node {
    fn new(argv: &[&str], tag: &str) -> Node {
        Node { argv: argv.iter().map(std::string::ToString::to_string).collect(), tag: tag.into(), ..Node::default() }
    }
    fn child(mut self, c: Node) -> Node {
        self.children.push(c);
        self
    }
    fn report(mut self) -> Node {
        self.report = true;
        self
    }
    fn tree(mut self, id: u64) -> Node {
        self.tree = id;
        self
    }
    fn life(mut self, ms: u64) -> Node {
        self.life_ms = Some(ms);
        self
    }
}

/// A command that runs `node` (this binary, argv[0] and args from the spec).
fn node_command(node: &Node) -> Command {
    // /proc/self/exe: the very binary running, even if cargo replaces the file.
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0(&node.argv[0])
        .args(&node.argv[1..])
        .env(NODE_ENV, serde_json::to_string(node).expect("a node serializes"))
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    cmd
}

fn write_line(f: &mut std::fs::File, line: &str) {
    // One write on an O_APPEND file: lines of different processes never mix.
    let _ = f.write_all(line.as_bytes());
}

/// Forks; the child runs `body` and exits with status 0.
fn fork_child(body: impl FnOnce()) -> i32 {
    // SAFETY: node processes are single-threaded (no thread is ever started
    // in node mode), so the child may run ordinary code after fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        body();
        exit_now(0);
    }
    pid
}

fn exit_now(code: i32) -> ! {
    // SAFETY: _exit ends the process at once; no destructors needed.
    unsafe { libc::_exit(code) }
}

/// A forked idle child: blocks on the lifeline until the bench goes away.
fn idle_child(lifeline: RawFd) -> ! {
    let mut b = [0u8; 16];
    loop {
        // SAFETY: a valid buffer of that length; a bad fd only makes read fail.
        let n = unsafe { libc::read(lifeline, b.as_mut_ptr().cast(), b.len()) };
        if n == 0 || (n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)) {
            exit_now(0);
        }
    }
}

#[allow(clippy::too_many_lines)] // one helper process, its modes side by side
fn node_main(text: &str) -> ! {
    let node: Node = match serde_json::from_str(text) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("load node: bad spec: {e}");
            exit_now(2)
        }
    };
    let lifeline: RawFd = std::env::var(LIFELINE_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(-1);
    let events_path = std::env::var_os(EVENTS_ENV).unwrap_or_default();
    let mut events = match std::fs::OpenOptions::new().append(true).open(&events_path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("load node: events file: {e}");
            exit_now(2)
        }
    };
    let me = std::process::id();
    // A parent that ignored SIGTERM passes that on through exec.
    let handler = if node.ignore_term { libc::SIG_IGN } else { libc::SIG_DFL };
    // SAFETY: single-threaded; setting a disposition to SIG_IGN/SIG_DFL.
    unsafe { libc::signal(libc::SIGTERM, handler) };

    let mut kinds: HashMap<i32, String> = HashMap::new();
    let (mut forks, mut spawns, mut normal, mut signaled, mut failed) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for c in &node.children {
        match node_command(c).spawn() {
            Ok(ch) => {
                kinds.insert(ch.id().cast_signed(), c.argv.join(" "));
            }
            Err(e) => {
                write_line(&mut events, &format!("error {me} spawning {:?}: {e}\n", c.argv));
                exit_now(3)
            }
        }
    }
    for _ in 0..node.idle_forks {
        let pid = fork_child(|| idle_child(lifeline));
        if pid < 0 {
            write_line(&mut events, &format!("error {me} fork: {}\n", std::io::Error::last_os_error()));
            exit_now(3)
        }
        kinds.insert(pid, "idle fork".into());
    }
    if node.touch_mib > 0 {
        let mut mem = vec![0u8; usize::try_from(node.touch_mib).expect("touch_mib") << 20];
        for page in mem.chunks_mut(4096) {
            page[0] = 1;
        }
        std::hint::black_box(&mem);
        std::mem::forget(mem);
    }
    if node.report {
        let line = format!(
            "ready {} {} {me} {} {}\n",
            node.tag,
            node.tree,
            std::os::unix::process::parent_id(),
            node.argv.join(" ")
        );
        write_line(&mut events, &line);
    }

    let start = Instant::now();
    #[allow(clippy::cast_possible_truncation)] // a seed: the low bits are enough
    let mut rng: u64 = (u64::from(me) << 32) ^ 0x9e37_79b9_7f4a_7c15 ^ start.elapsed().as_nanos() as u64;
    let mut next_rand = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let fork_period = (node.fork_per_sec > 0.0).then(|| Duration::from_secs_f64(1.0 / node.fork_per_sec));
    let spawn_period =
        (node.spawn_per_sec > 0.0 && !node.spawn.is_empty()).then(|| Duration::from_secs_f64(1.0 / node.spawn_per_sec));
    let (mut next_fork, mut next_spawn) = (start, start);
    let mut shutdown = false;
    loop {
        let now = Instant::now();
        let ending = shutdown || node.life_ms.is_some_and(|ms| now >= start + Duration::from_millis(ms));
        if !ending {
            if let Some(p) = fork_period {
                let mut n = 0;
                while next_fork <= now && n < 64 {
                    let life_ms = if node.fork_life_ms > 0 { next_rand() % node.fork_life_ms } else { 0 };
                    let pid = fork_child(|| std::thread::sleep(Duration::from_millis(life_ms)));
                    if pid > 0 {
                        forks += 1;
                        kinds.insert(pid, "churn fork".into());
                    } else {
                        failed += 1;
                    }
                    next_fork += p;
                    n += 1;
                }
                if now.saturating_duration_since(next_fork) > Duration::from_secs(1) {
                    next_fork = now; // after a stall: no burst to catch up
                }
            }
            if let Some(p) = spawn_period {
                let mut n = 0;
                while next_spawn <= now && n < 16 {
                    let c = &node.spawn[usize::try_from(spawns).expect("spawns") % node.spawn.len()];
                    match node_command(c).spawn() {
                        Ok(ch) => {
                            kinds.insert(ch.id().cast_signed(), c.argv.join(" "));
                        }
                        Err(_) => failed += 1,
                    }
                    spawns += 1;
                    next_spawn += p;
                    n += 1;
                }
                if now.saturating_duration_since(next_spawn) > Duration::from_secs(1) {
                    next_spawn = now;
                }
            }
        }
        // Reap children, reporting any that died of a signal.
        let mut no_children = false;
        loop {
            match rustix::process::waitpid(None, WaitOptions::NOHANG) {
                Ok(Some((pid, st))) => {
                    let pid = pid.as_raw_nonzero().get();
                    let kind = kinds.remove(&pid).unwrap_or_else(|| "adopted?".into());
                    if let Some(sig) = st.terminating_signal() {
                        signaled += 1;
                        write_line(&mut events, &format!("sig {pid} {sig} {} {} {kind}\n", node.tag, node.tree));
                    } else if let Some(code) = st.exit_status() {
                        normal += 1;
                        if code != 0 {
                            write_line(&mut events, &format!("exit {pid} {code} {} {} {kind}\n", node.tag, node.tree));
                        }
                    }
                }
                Ok(None) => break,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => {
                    no_children = true;
                    break;
                }
            }
        }
        if ending && no_children {
            if node.report {
                let line = format!(
                    "stats {} {me} forks={forks} spawns={spawns} normal={normal} signaled={signaled} failed={failed} \
                     secs={:.1}\n",
                    node.tag,
                    start.elapsed().as_secs_f64()
                );
                write_line(&mut events, &line);
            }
            exit_now(0);
        }
        // Sleep until the next thing to do, or the lifeline's EOF.
        let mut until = now + Duration::from_millis(if ending { 10 } else { 200 });
        if !ending {
            if fork_period.is_some() {
                until = until.min(next_fork);
            }
            if spawn_period.is_some() {
                until = until.min(next_spawn);
            }
            if let Some(ms) = node.life_ms {
                until = until.min(start + Duration::from_millis(ms));
            }
        }
        let left = until.saturating_duration_since(Instant::now());
        if shutdown || lifeline < 0 {
            std::thread::sleep(left);
            continue;
        }
        // SAFETY: the lifeline fd stays open for the life of this process.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(lifeline) };
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let ts = rustix::fs::Timespec {
            tv_sec: left.as_secs().try_into().unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        if let Ok(n) = rustix::event::poll(&mut fds, Some(&ts))
            && n > 0
        {
            let mut b = [0u8; 16];
            match rustix::io::read(fd, &mut b) {
                Ok(0) | Err(rustix::io::Errno::BADF) => shutdown = true,
                _ => {}
            }
            if !fds[0].revents().intersects(PollFlags::IN) {
                shutdown = true; // POLLHUP/POLLERR
            }
        }
    }
}

// =================================================================== /proc

fn read_status_kib(pid: i32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.split_whitespace().next()?.parse().ok()))
        .unwrap_or(0)
}

/// (utime, stime) in clock ticks.
fn cpu_split(pid: i32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit_once(')').map_or("", |x| x.1);
    let f: Vec<&str> = after.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (n(11), n(12))
}

fn cpu_ticks(pid: i32) -> u64 {
    let (u, s) = cpu_split(pid);
    u + s
}

fn ppid_of(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// Pss + `SwapPss` in bytes, from `smaps_rollup`.
fn pss_swap_pss(pid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let kib = |key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.split_whitespace().next()?.parse().ok()))
            .unwrap_or(0)
    };
    (kib("Pss:") + kib("SwapPss:")) * 1024
}

fn meminfo_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.split_whitespace().next()?.parse().ok()))
        .unwrap_or(0)
}

fn read_num(path: &str) -> u64 {
    std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// Every strict descendant of `root`, by ppid links, as of now.
fn descendants_of(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if let Some(pp) = ppid_of(pid) {
            children.entry(pp).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    let mut seen = HashSet::new();
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            if c != root && seen.insert(c) {
                out.push(c);
                stack.push(c);
            }
        }
    }
    out
}

fn pidfd(pid: i32) -> Option<OwnedFd> {
    rustix::process::pidfd_open(RPid::from_raw(pid)?, PidfdFlags::empty()).ok()
}

/// Whether the process behind `fd` has exited (zombie or reaped).
fn exited(fd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let ts = rustix::fs::Timespec { tv_sec: 0, tv_nsec: 0 };
    matches!(rustix::event::poll(&mut fds, Some(&ts)), Ok(n) if n > 0)
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // an index, from a fraction in 0..=1
fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

// =================================================================== the bench

#[derive(Clone, Debug)]
struct Params {
    secs: u64,
    procs: u64,
    churn: u64,
    interval: u64,
    orphan_every: f64,
    burst: usize,
    log_level: String,
    modes: Vec<String>,
}

struct Member {
    pid: i32,
    argv: String,
    fd: OwnedFd,
    gone_at: Option<Instant>,
}

struct OrphanTree {
    phase: usize,
    burst: bool,
    stubborn: bool,
    host: i32,
    /// Members expected to report ready (launcher, server, browser).
    expected: usize,
    members: Vec<Member>,
    created: Instant,
    kill_at: Instant,
    killed_at: Option<Instant>,
    /// The same moment on the wall clock, to compare with the daemon's log.
    killed_unix: f64,
    measured: u64,
    /// Tree gone (every member) and server gone, after the host's death.
    tree_latency: Option<Duration>,
    server_latency: Option<Duration>,
    abandoned: bool,
}

struct LongLived {
    tag: String,
    argv: String,
    fd: OwnedFd,
    dead: bool,
}

#[derive(Default, Clone)]
struct BurstResult {
    trees: usize,
    stubborn: usize,
    members: usize,
    all_gone: Option<Duration>,
    reaped_by_bench_count: usize,
    daemon_trees: u64,
    daemon_escalations: u64,
    daemon_failures: u64,
    daemon_reclaimed: u64,
    measured: u64,
}

#[derive(Default)]
struct PhaseResult {
    mode: String,
    event_mode: String,
    steady_secs: f64,
    created: usize,
    stubborn: usize,
    reaped: usize,
    late: usize,
    missed: usize,
    tree_lat_ms: Vec<f64>,
    server_lat_ms: Vec<f64>,
    wrong_kills: usize,
    rss_start: u64,
    rss_end: u64,
    rss_max: u64,
    rss_after_burst: u64,
    cpu_steady: f64,
    cpu_user: f64,
    cpu_sys: f64,
    cpu_all: f64,
    /// (seconds into the churn phase, `VmRSS` KiB), once a minute.
    rss_trace: Vec<(u64, u64)>,
    scans: u64,
    last_scan_ms: f64,
    last_processes: usize,
    totals_trees: u64,
    totals_processes: u64,
    totals_escalations: u64,
    totals_failures: u64,
    totals_reclaimed: u64,
    steady_daemon_trees: u64,
    steady_daemon_escalations: u64,
    steady_daemon_reclaimed: u64,
    steady_measured: u64,
    burst: BurstResult,
    log_lines: usize,
    /// Log lines about a (new) live tree: the MCP-looking churn was seen.
    live_logged: usize,
    daemon_exit: String,
}

struct Bench {
    p: Params,
    dir: PathBuf,
    daemon_bin: PathBuf,
    ctl_bin: PathBuf,
    me: i32,
    lifeline_w: Option<OwnedFd>,
    lifeline_r: OwnedFd,
    events_path: PathBuf,
    events_off: u64,
    events_partial: Vec<u8>,
    /// Helpers, live hosts and live members, by pid.
    long_lived: HashMap<i32, LongLived>,
    trees: HashMap<u64, OrphanTree>,
    next_tree: u64,
    /// Orphan-tree members and hosts not yet reaped: their deaths are expected.
    expected_deaths: HashSet<i32>,
    /// pidfds of orphan hosts, opened at spawn, until they are killed.
    host_fds: HashMap<i32, OwnedFd>,
    daemon_pid: Option<i32>,
    daemon_status: Option<WaitStatus>,
    phase: usize,
    wrong: Vec<(usize, String)>,
    unexpected: Vec<String>,
    errors: Vec<String>,
    stats: Vec<String>,
    adopted_normal: u64,
    shutting_down: bool,
}

fn bound(p: &Params) -> Duration {
    // grace 0 + one interval + term_timeout + kill_wait + slack
    Duration::from_secs_f64(p.interval as f64 + TERM_TIMEOUT_SECS + KILL_WAIT_SECS + 3.0)
}

impl Bench {
    // Reaped by `Bench::reap` (waitpid(-1)), not through the Child.
    #[allow(clippy::zombie_processes)]
    fn spawn(&mut self, node: &Node) -> i32 {
        let mut cmd = node_command(node);
        cmd.env(LIFELINE_ENV, self.lifeline_r.as_raw_fd().to_string()).env(EVENTS_ENV, &self.events_path);
        mcp_reaper::sys::kill_with_parent(&mut cmd);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawning {:?}: {e}", node.argv));
        // Never waited through the Child: the bench reaps with waitpid(-1).
        child.id().cast_signed()
    }

    /// Reads new lines of the events file.
    fn read_events(&mut self) {
        let Ok(mut f) = std::fs::File::open(&self.events_path) else { return };
        if f.seek(SeekFrom::Start(self.events_off)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        let Ok(n) = f.read_to_end(&mut buf) else { return };
        self.events_off += n as u64;
        self.events_partial.extend_from_slice(&buf);
        let Some(end) = self.events_partial.iter().rposition(|&b| b == b'\n') else { return };
        let complete: Vec<u8> = self.events_partial.drain(..=end).collect();
        for line in String::from_utf8_lossy(&complete).lines() {
            self.event(line);
        }
    }

    fn event(&mut self, line: &str) {
        let f: Vec<&str> = line.splitn(6, ' ').collect();
        match f.as_slice() {
            ["ready", tag, tree, pid, _ppid, argv] => {
                let pid: i32 = pid.parse().unwrap_or(0);
                let tree: u64 = tree.parse().unwrap_or(0);
                let Some(fd) = pidfd(pid) else {
                    self.errors.push(format!("{tag} {pid} ({argv}) gone before its pidfd was opened"));
                    return;
                };
                match *tag {
                    "orphan" => {
                        self.expected_deaths.insert(pid);
                        match self.trees.get_mut(&tree) {
                            Some(t) => t.members.push(Member { pid, argv: argv.to_string(), fd, gone_at: None }),
                            None => self.errors.push(format!("ready line of unknown tree {tree}: {line}")),
                        }
                    }
                    _ => {
                        self.long_lived
                            .insert(pid, LongLived { tag: tag.to_string(), argv: argv.to_string(), fd, dead: false });
                    }
                }
            }
            ["sig", pid, sig, tag, _tree, kind] => {
                let pid: i32 = pid.parse().unwrap_or(0);
                if *tag == "orphan" || *tag == "orphan-host" {
                    // A member of an orphan tree reaped by its own parent.
                    self.expected_deaths.remove(&pid);
                } else {
                    let what = format!(
                        "pid {pid} ({kind}) died of signal {sig}; its parent is a {tag} process{}",
                        if self.shutting_down { " (during the bench's shutdown)" } else { "" }
                    );
                    self.wrong.push((self.phase, what));
                }
            }
            ["exit", pid, code, tag, _tree, kind] => {
                self.unexpected.push(format!("pid {pid} ({kind}, child of a {tag} process) exited with {code}"));
            }
            ["stats", ..] => self.stats.push(line.to_string()),
            _ => self.errors.push(format!("event: {line}")),
        }
    }

    /// Reaps whatever re-parented to the bench (and its own children).
    fn reap(&mut self) {
        loop {
            let (pid, st) = match rustix::process::waitpid(None, WaitOptions::NOHANG) {
                Ok(Some((pid, st))) => (pid.as_raw_nonzero().get(), st),
                Err(rustix::io::Errno::INTR) => continue,
                Ok(None) | Err(_) => return,
            };
            if Some(pid) == self.daemon_pid {
                self.daemon_status = Some(st);
                continue;
            }
            if self.expected_deaths.remove(&pid) {
                continue;
            }
            let sig = st.terminating_signal();
            if let Some(l) = self.long_lived.get_mut(&pid) {
                l.dead = true;
                if let Some(sig) = sig {
                    let what = format!("{} {pid} ({}) died of signal {sig}", l.tag, l.argv);
                    self.wrong.push((self.phase, what));
                } else if !self.shutting_down {
                    self.unexpected.push(format!("{} {pid} ({}) exited early: {st:?}", l.tag, l.argv));
                }
                continue;
            }
            match sig {
                Some(sig) => self
                    .wrong
                    .push((self.phase, format!("pid {pid} (unknown, reaped by the bench) died of signal {sig}"))),
                None => self.adopted_normal += 1,
            }
        }
    }

    /// One round of bookkeeping; waits up to `wait` for an orphan member to go.
    fn tick(&mut self, wait: Duration) {
        self.read_events();
        // Members of orphan trees whose host is dead: when does each go?
        let mut watch: Vec<(u64, usize)> = Vec::new();
        for (&id, t) in &self.trees {
            if t.killed_at.is_some() && t.tree_latency.is_none() && !t.abandoned {
                for (i, m) in t.members.iter().enumerate() {
                    if m.gone_at.is_none() {
                        watch.push((id, i));
                    }
                }
            }
        }
        if watch.is_empty() {
            std::thread::sleep(wait);
        } else {
            let mut fds: Vec<PollFd<'_>> =
                watch.iter().map(|&(id, i)| PollFd::new(&self.trees[&id].members[i].fd, PollFlags::IN)).collect();
            let ts = rustix::fs::Timespec {
                tv_sec: wait.as_secs().try_into().unwrap_or(i64::MAX),
                tv_nsec: i64::from(wait.subsec_nanos()),
            };
            let _ = rustix::event::poll(&mut fds, Some(&ts));
            let now = Instant::now();
            let done: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
            drop(fds);
            for (k, &(id, i)) in watch.iter().enumerate() {
                if done[k] {
                    self.trees.get_mut(&id).unwrap().members[i].gone_at = Some(now);
                }
            }
        }
        for t in self.trees.values_mut() {
            let Some(killed) = t.killed_at else { continue };
            if t.tree_latency.is_none() && t.members.iter().all(|m| m.gone_at.is_some()) {
                let last = t.members.iter().filter_map(|m| m.gone_at).max().unwrap_or(killed);
                t.tree_latency = Some(last.saturating_duration_since(killed));
                // The server: the member whose argv names the MCP package's bin.
                if let Some(s) = t.members.iter().find(|m| m.argv.contains("-mcp")) {
                    t.server_latency = s.gone_at.map(|g| g.saturating_duration_since(killed));
                }
            }
        }
        self.reap();
    }

    /// Starts an orphan tree's host; its death (by the bench's SIGKILL) is expected.
    fn spawn_host(&mut self, host: &Node) -> i32 {
        let pid = self.spawn(host);
        self.expected_deaths.insert(pid);
        self.host_fds.insert(pid, pidfd(pid).expect("pidfd of a new host"));
        pid
    }

    fn orphan_tree_spec(&mut self, stubborn: bool, touch: u64) -> (u64, Node) {
        let id = self.next_tree;
        self.next_tree += 1;
        let mut server =
            Node::new(&["node", &format!("/home/u/.npm/_npx/{id:08x}/node_modules/.bin/playwright-mcp")], "orphan")
                .report()
                .tree(id);
        let mut chrome = Node::new(
            &["/opt/google/chrome/chrome", "--headless", &format!("--user-data-dir=/tmp/lt-chrome-{id}")],
            "orphan",
        )
        .report()
        .tree(id);
        server.ignore_term = stubborn;
        chrome.ignore_term = stubborn;
        server.touch_mib = touch;
        chrome.touch_mib = touch;
        let launcher = Node::new(&["npm", "exec", "@playwright/mcp@latest"], "orphan")
            .report()
            .tree(id)
            .child(server.child(chrome));
        (id, launcher)
    }

    fn new_tree(&mut self, id: u64, host: i32, stubborn: bool, burst: bool, kill_at: Instant) {
        self.trees.insert(
            id,
            OrphanTree {
                phase: self.phase,
                burst,
                stubborn,
                host,
                expected: 3,
                members: Vec::new(),
                created: Instant::now(),
                kill_at,
                killed_at: None,
                killed_unix: 0.0,
                measured: 0,
                tree_latency: None,
                server_latency: None,
                abandoned: false,
            },
        );
    }

    /// One orphan-to-be: `claude` → npm → node …/playwright-mcp → chrome.
    fn spawn_orphan(&mut self, stubborn: bool, host_life: Duration) {
        let (id, launcher) = self.orphan_tree_spec(stubborn, ORPHAN_TOUCH_MIB);
        let host = Node::new(&["claude", "--orphan-to-be", &id.to_string()], "orphan-host").tree(id).child(launcher);
        let pid = self.spawn_host(&host);
        self.new_tree(id, pid, stubborn, false, Instant::now() + host_life);
    }

    /// Kills the host of every tree whose time has come and whose members
    /// are all ready (measuring their memory first).
    fn kill_due_hosts(&mut self, force: bool) {
        let now = Instant::now();
        let mut hosts: Vec<i32> = Vec::new();
        for t in self.trees.values() {
            if t.killed_at.is_none() && !t.abandoned && (force || t.kill_at <= now) {
                if t.members.len() < t.expected {
                    if now.duration_since(t.created) > Duration::from_secs(30) {
                        hosts.push(-t.host); // never got ready: abandon
                    }
                    continue;
                }
                if !hosts.contains(&t.host) {
                    hosts.push(t.host);
                }
            }
        }
        // A host with several trees (the burst) waits for all of them.
        hosts.retain(|&h| {
            h < 0
                || self
                    .trees
                    .values()
                    .filter(|t| t.host == h && t.killed_at.is_none())
                    .all(|t| t.members.len() >= t.expected)
        });
        for &h in hosts.iter().filter(|&&h| h < 0) {
            for t in self.trees.values_mut().filter(|t| t.host == -h && t.killed_at.is_none()) {
                t.abandoned = true;
                self.errors.push(format!("orphan tree of host {} never became ready", -h));
            }
        }
        hosts.retain(|&h| h > 0);
        // Memory first, for every tree, then the hosts back to back: trees
        // orphaned "at once" are orphaned within a millisecond.
        for t in self.trees.values_mut().filter(|t| hosts.contains(&t.host) && t.killed_at.is_none()) {
            t.measured = t.members.iter().map(|m| pss_swap_pss(m.pid)).sum();
        }
        let mut killed_at = HashMap::new();
        for &h in &hosts {
            let killed = self.host_fds.remove(&h).map(|fd| rustix::process::pidfd_send_signal(&fd, Signal::KILL));
            if !matches!(killed, Some(Ok(()))) {
                self.errors.push(format!("could not kill orphan host {h}: {killed:?}"));
            }
            killed_at.insert(h, Instant::now());
        }
        let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        for t in self.trees.values_mut().filter(|t| t.killed_at.is_none()) {
            t.killed_at = killed_at.get(&t.host).copied();
            if t.killed_at.is_some() {
                t.killed_unix = unix;
            }
        }
    }

    fn ctl_status(&self, sock: &Path) -> Option<Status> {
        let out = Command::new(&self.ctl_bin)
            .arg("--socket")
            .arg(sock)
            .args(["status", "--json"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        serde_json::from_slice(&out.stdout).ok()
    }

    fn wait_status(&mut self, sock: &Path, timeout: Duration, mut ok: impl FnMut(&Status) -> bool) -> Option<Status> {
        let t = Instant::now();
        loop {
            let s = self.ctl_status(sock);
            if let Some(s) = &s
                && ok(s)
            {
                return Some(s.clone());
            }
            if t.elapsed() > timeout {
                return s;
            }
            self.tick(Duration::from_millis(100));
        }
    }

    #[allow(clippy::too_many_lines)] // one phase, read top to bottom
    fn run_phase(&mut self, mode: &str) -> PhaseResult {
        self.phase += 1;
        let phase = self.phase;
        let p = self.p.clone();
        let mut r = PhaseResult { mode: mode.to_string(), ..PhaseResult::default() };
        let cfg = self.dir.join("config.toml");
        std::fs::write(
            &cfg,
            format!(
                "[reaper]\nmode = \"enforce\"\ngrace_secs = 0\nmin_uid = 0\ninterval_secs = {}\nterm_timeout_secs = {TERM_TIMEOUT_SECS}\n",
                p.interval
            ),
        )
        .expect("writing the config");
        let sock = self.dir.join(format!("{mode}.sock"));
        let log = self.dir.join(format!("{mode}.log"));
        let mut cmd = Command::new(&self.daemon_bin);
        cmd.arg("--config")
            .arg(&cfg)
            .args(["--scope", &self.me.to_string(), "--log-target", "stderr", "--log-level", &p.log_level])
            .arg("--socket")
            .arg(&sock)
            .arg("--state-file")
            .arg(self.dir.join(format!("{mode}.state")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("daemon log"));
        if mode == "pidfd" {
            cmd.arg("--no-events");
        }
        mcp_reaper::sys::kill_with_parent(&mut cmd);
        let daemon = cmd.spawn().expect("starting mcp-reaperd").id().cast_signed();
        self.daemon_pid = Some(daemon);
        self.daemon_status = None;
        let daemon_fd = pidfd(daemon).expect("pidfd of the daemon");
        let first = self.wait_status(&sock, Duration::from_secs(120), |s| s.scans.count >= 1);
        let Some(first) = first else {
            panic!("mcp-reaperd ({mode}) did not answer within 120 s; log: {}", log.display());
        };
        r.event_mode.clone_from(&first.event_mode);
        eprintln!(
            "[{mode}] daemon {daemon} up: events={}, first scan of {} processes took {:.1} ms",
            first.event_mode, first.scans.last_processes, first.scans.last_duration_ms
        );

        // ---- steady phase: churn plus an orphan tree every few seconds
        let tck = rustix::param::clock_ticks_per_second() as f64;
        let (c0, t0) = (cpu_ticks(daemon), Instant::now());
        let (u0, s0) = cpu_split(daemon);
        r.rss_start = read_status_kib(daemon, "VmRSS:");
        r.rss_max = r.rss_start;
        let every = Duration::from_secs_f64(p.orphan_every);
        let host_lives = [0.3, 1.5, 3.0, 6.0, 0.8, 4.5];
        let mut next_orphan = t0 + Duration::from_secs(1);
        let mut next_sample = t0 + Duration::from_secs(1);
        let mut next_progress = t0 + Duration::from_secs(60);
        let mut k = 0usize;
        let end = t0 + Duration::from_secs(p.secs);
        while Instant::now() < end {
            self.tick(Duration::from_millis(5));
            let now = Instant::now();
            if now >= next_orphan {
                let life = Duration::from_secs_f64(host_lives[k % host_lives.len()]);
                self.spawn_orphan(k % 4 == 3, life);
                k += 1;
                next_orphan += every;
            }
            self.kill_due_hosts(false);
            if now >= next_sample {
                r.rss_max = r.rss_max.max(read_status_kib(daemon, "VmRSS:"));
                next_sample += Duration::from_secs(1);
            }
            if now >= next_progress {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // whole seconds since t0
                r.rss_trace.push((t0.elapsed().as_secs_f64().round() as u64, read_status_kib(daemon, "VmRSS:")));
                let ts: Vec<&OrphanTree> = self.trees.values().filter(|t| t.phase == phase && !t.burst).collect();
                eprintln!(
                    "[{mode}] {:4.0} s: orphans {} created, {} reaped; wrong kills {}; daemon RSS {} KiB (max {}), CPU {:.2} %",
                    t0.elapsed().as_secs_f64(),
                    ts.len(),
                    ts.iter().filter(|t| t.tree_latency.is_some()).count(),
                    self.wrong.len(),
                    read_status_kib(daemon, "VmRSS:"),
                    r.rss_max,
                    (cpu_ticks(daemon) - c0) as f64 / tck / t0.elapsed().as_secs_f64() * 100.0
                );
                next_progress += Duration::from_secs(60);
            }
            if exited(&daemon_fd) {
                break;
            }
        }
        r.steady_secs = t0.elapsed().as_secs_f64();
        r.cpu_steady = (cpu_ticks(daemon) - c0) as f64 / tck / r.steady_secs * 100.0;
        let (u1, s1) = cpu_split(daemon);
        r.cpu_user = (u1 - u0) as f64 / tck / r.steady_secs * 100.0;
        r.cpu_sys = (s1 - s0) as f64 / tck / r.steady_secs * 100.0;
        r.rss_end = read_status_kib(daemon, "VmRSS:");
        r.rss_max = r.rss_max.max(r.rss_end);
        // The last trees: kill their hosts now, wait out the bound.
        self.kill_due_hosts(true);
        let last_kill = Instant::now();
        while Instant::now() < last_kill + bound(&p) + Duration::from_secs(5) {
            let pending = self
                .trees
                .values()
                .any(|t| t.phase == phase && t.killed_at.is_some() && t.tree_latency.is_none() && !t.abandoned);
            if !pending {
                break;
            }
            self.tick(Duration::from_millis(5));
        }
        let before_burst = self.wait_status(&sock, Duration::from_secs(10), |_| true);
        if let Some(s) = &before_burst {
            r.steady_daemon_trees = s.totals.trees_reaped;
            r.steady_daemon_escalations = s.totals.escalations;
            r.steady_daemon_reclaimed = s.totals.reclaimed_bytes;
        }

        // ---- burst: many orphan trees at once
        if p.burst > 0 && !exited(&daemon_fd) {
            r.burst = self.burst(&sock, before_burst.as_ref());
        }
        r.rss_after_burst = read_status_kib(daemon, "VmRSS:");
        r.rss_max = r.rss_max.max(r.rss_after_burst);
        r.cpu_all = (cpu_ticks(daemon) - c0) as f64 / tck / t0.elapsed().as_secs_f64() * 100.0;
        let end_status = self.wait_status(&sock, Duration::from_secs(10), |_| true);

        // ---- results of the phase
        let bnd = bound(&p);
        let mut csv = String::from(
            "tree,burst,stubborn,host_life_ms,host_killed_unix,tree_gone_ms,server_gone_ms,measured_bytes,members\n",
        );
        let mut ids: Vec<&u64> = self.trees.iter().filter(|(_, t)| t.phase == phase).map(|(id, _)| id).collect();
        ids.sort();
        for id in ids {
            let t = &self.trees[id];
            let ms = |d: Option<Duration>| d.map_or(String::new(), |d| format!("{:.1}", d.as_secs_f64() * 1000.0));
            let _ = writeln!(
                csv,
                "{id},{},{},{},{:.3},{},{},{},{}",
                t.burst,
                t.stubborn,
                t.killed_at.map_or(String::new(), |k| k.saturating_duration_since(t.created).as_millis().to_string()),
                t.killed_unix,
                ms(t.tree_latency),
                ms(t.server_latency),
                t.measured,
                t.members.iter().map(|m| m.pid.to_string()).collect::<Vec<_>>().join(" ")
            );
        }
        let _ = std::fs::write(self.dir.join(format!("trees-{mode}.csv")), csv);
        for t in self.trees.values_mut().filter(|t| t.phase == phase && !t.burst) {
            r.created += 1;
            r.stubborn += usize::from(t.stubborn);
            r.steady_measured += t.measured;
            if let Some(l) = t.tree_latency {
                r.reaped += 1;
                r.late += usize::from(l > bnd);
                r.tree_lat_ms.push(l.as_secs_f64() * 1000.0);
                if let Some(s) = t.server_latency {
                    r.server_lat_ms.push(s.as_secs_f64() * 1000.0);
                }
            } else {
                r.missed += 1;
                let alive: Vec<String> = t
                    .members
                    .iter()
                    .filter(|m| m.gone_at.is_none())
                    .map(|m| format!("{} ({})", m.pid, m.argv))
                    .collect();
                self.errors.push(format!(
                    "[{mode}] MISSED orphan tree (host {}, killed {:?} ago): still alive: {}",
                    t.host,
                    t.killed_at.map(|k| k.elapsed()),
                    alive.join(", ")
                ));
                // Don't leave it running.
                for m in t.members.iter().filter(|m| m.gone_at.is_none()) {
                    let _ = rustix::process::pidfd_send_signal(&m.fd, Signal::KILL);
                }
                t.abandoned = true;
            }
        }
        if let Some(s) = &end_status {
            r.scans = s.scans.count;
            r.last_scan_ms = s.scans.last_duration_ms;
            r.last_processes = s.scans.last_processes;
            r.totals_trees = s.totals.trees_reaped;
            r.totals_processes = s.totals.processes_reaped;
            r.totals_escalations = s.totals.escalations;
            r.totals_failures = s.totals.failures;
            r.totals_reclaimed = s.totals.reclaimed_bytes;
        }
        r.wrong_kills = self.wrong.iter().filter(|(ph, _)| *ph == phase).count();

        // ---- stop the daemon
        let _ = rustix::process::pidfd_send_signal(&daemon_fd, Signal::TERM);
        let t = Instant::now();
        while self.daemon_status.is_none() && t.elapsed() < Duration::from_secs(15) {
            self.tick(Duration::from_millis(10));
        }
        if self.daemon_status.is_none() {
            let _ = rustix::process::pidfd_send_signal(&daemon_fd, Signal::KILL);
            while self.daemon_status.is_none() && t.elapsed() < Duration::from_secs(20) {
                self.tick(Duration::from_millis(10));
            }
        }
        r.daemon_exit = match self.daemon_status {
            Some(st) => match (st.exit_status(), st.terminating_signal()) {
                (Some(c), _) => format!("exit {c}"),
                (_, Some(sig)) => format!("signal {sig}"),
                _ => "?".into(),
            },
            None => "did not stop".into(),
        };
        self.daemon_pid = None;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        r.log_lines = text.lines().count();
        r.live_logged = text.lines().filter(|l| l.contains("live tree root=")).count();
        r
    }

    fn burst(&mut self, sock: &Path, before: Option<&Status>) -> BurstResult {
        let p = self.p.clone();
        let mut b = BurstResult { trees: p.burst, ..BurstResult::default() };
        let hosts_n = p.burst.div_ceil(10);
        let far = Instant::now() + Duration::from_secs(3600);
        let mut ids = Vec::new();
        let mut made = 0;
        for h in 0..hosts_n {
            let mut host = Node::new(&["claude", "--burst-host", &h.to_string()], "orphan-host");
            let mut mine = Vec::new();
            while made < p.burst && mine.len() < 10 {
                let stubborn = made * 30 / 100 != (made + 1) * 30 / 100;
                let (id, launcher) = self.orphan_tree_spec(stubborn, BURST_TOUCH_MIB);
                host = host.child(launcher);
                mine.push((id, stubborn));
                made += 1;
            }
            let pid = self.spawn_host(&host);
            for (id, stubborn) in mine {
                b.stubborn += usize::from(stubborn);
                self.new_tree(id, pid, stubborn, true, far);
                ids.push(id);
            }
        }
        // All ready, then one interval so that the hosts are known (watched) in both modes.
        let t = Instant::now();
        while ids.iter().any(|id| self.trees[id].members.len() < 3) && t.elapsed() < Duration::from_secs(60) {
            self.tick(Duration::from_millis(10));
        }
        let settle = Instant::now() + Duration::from_secs(p.interval + 1);
        while Instant::now() < settle {
            self.tick(Duration::from_millis(10));
        }
        for id in &ids {
            self.trees.get_mut(id).unwrap().kill_at = Instant::now();
        }
        let first_kill = Instant::now();
        self.kill_due_hosts(true);
        while ids.iter().any(|id| self.trees[id].tree_latency.is_none() && !self.trees[id].abandoned)
            && first_kill.elapsed() < Duration::from_secs(60)
        {
            self.tick(Duration::from_millis(2));
        }
        let done: Vec<&OrphanTree> = ids.iter().map(|id| &self.trees[id]).collect();
        b.members = done.iter().map(|t| t.members.len()).sum();
        b.measured = done.iter().map(|t| t.measured).sum();
        b.reaped_by_bench_count = done.iter().filter(|t| t.tree_latency.is_some()).count();
        if b.reaped_by_bench_count == done.len() {
            let last = done.iter().flat_map(|t| t.members.iter().filter_map(|m| m.gone_at)).max();
            b.all_gone = last.map(|l| l.saturating_duration_since(first_kill));
        }
        let (t0, e0, f0, m0) = before
            .map(|s| (s.totals.trees_reaped, s.totals.escalations, s.totals.failures, s.totals.reclaimed_bytes))
            .unwrap_or_default();
        let want = t0 + p.burst as u64;
        if let Some(s) = self.wait_status(sock, Duration::from_secs(15), |s| s.totals.trees_reaped >= want) {
            b.daemon_trees = s.totals.trees_reaped - t0;
            b.daemon_escalations = s.totals.escalations - e0;
            b.daemon_failures = s.totals.failures - f0;
            b.daemon_reclaimed = s.totals.reclaimed_bytes - m0;
        }
        b
    }
}

#[allow(clippy::too_many_lines)] // the whole run, phase by phase, read top to bottom
fn main() {
    if let Ok(spec) = std::env::var(NODE_ENV) {
        node_main(&spec);
    }
    let quick = std::env::args().all(|a| a != "--bench");
    let p = if quick {
        Params {
            secs: 8,
            procs: 200,
            churn: 60,
            interval: 2,
            orphan_every: 1.5,
            burst: 10,
            log_level: "info".into(),
            modes: vec!["events".into(), "pidfd".into()],
        }
    } else {
        Params {
            secs: env_num("MCP_REAPER_LOAD_SECS", 600),
            procs: env_num("MCP_REAPER_LOAD_PROCS", 10_000),
            churn: env_num("MCP_REAPER_LOAD_CHURN", 300),
            interval: env_num("MCP_REAPER_LOAD_INTERVAL", 5).max(1),
            orphan_every: std::env::var("MCP_REAPER_LOAD_ORPHAN_EVERY")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(3.0f64)
                .max(0.2),
            burst: usize::try_from(env_num("MCP_REAPER_LOAD_BURST", 100)).expect("MCP_REAPER_LOAD_BURST"),
            log_level: std::env::var("MCP_REAPER_LOAD_LOG").unwrap_or_else(|_| "info".into()),
            modes: std::env::var("MCP_REAPER_LOAD_MODES")
                .unwrap_or_else(|_| "events,pidfd".into())
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        }
    };
    let root = rustix::process::geteuid().is_root();
    let modes: Vec<String> = p.modes.iter().filter(|m| m.as_str() != "events" || root).cloned().collect();
    if modes.len() < p.modes.len() {
        eprintln!("event mode skipped: the proc connector needs root");
    }

    // ---- limits: pids, threads, memory
    let pid_max = read_num("/proc/sys/kernel/pid_max");
    let threads_max = read_num("/proc/sys/kernel/threads-max");
    let running = std::fs::read_dir("/proc")
        .map_or(0, |d| d.flatten().filter(|e| e.file_name().to_str().is_some_and(|s| s.parse::<u32>().is_ok())).count())
        as u64;
    let need_pids = p.procs + p.churn + 4 * p.burst as u64 + 500;
    assert!(
        running + need_pids < pid_max.min(threads_max) * 9 / 10,
        "{need_pids} processes would come near pid_max {pid_max} / threads-max {threads_max} ({running} running now)"
    );
    let avail_kib = meminfo_kib("MemAvailable:");
    let need_kib = p.procs * 100 + 2 * p.burst as u64 * BURST_TOUCH_MIB * 1024 + 1024 * 1024;
    assert!(
        avail_kib > need_kib,
        "MemAvailable {} MiB is short of the ~{} MiB this run needs",
        avail_kib / 1024,
        need_kib / 1024
    );

    let me = rustix::process::getpid().as_raw_nonzero().get();
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).expect("become a child subreaper");
    let dir = std::env::temp_dir().join(format!("mcp-reaper-bench-load-{me}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Private copies: a rebuild elsewhere during a long run must not swap binaries.
    let daemon_bin = dir.join("mcp-reaperd");
    let ctl_bin = dir.join("reaperctl");
    std::fs::copy(env!("CARGO_BIN_EXE_mcp-reaperd"), &daemon_bin).expect("copy mcp-reaperd");
    std::fs::copy(env!("CARGO_BIN_EXE_reaperctl"), &ctl_bin).expect("copy reaperctl");
    let events_path = dir.join("events");
    std::fs::write(&events_path, "").expect("events file");
    let (lifeline_r, lifeline_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("pipe");
    // The read end is inherited by every helper; the write end stays here only.
    rustix::io::fcntl_setfd(&lifeline_r, rustix::io::FdFlags::empty()).expect("fcntl");

    let mut b = Bench {
        p: p.clone(),
        dir: dir.clone(),
        daemon_bin,
        ctl_bin,
        me,
        lifeline_w: Some(lifeline_w),
        lifeline_r,
        events_path,
        events_off: 0,
        events_partial: Vec::new(),
        long_lived: HashMap::new(),
        trees: HashMap::new(),
        next_tree: 1,
        expected_deaths: HashSet::new(),
        host_fds: HashMap::new(),
        daemon_pid: None,
        daemon_status: None,
        phase: 0,
        wrong: Vec::new(),
        unexpected: Vec::new(),
        errors: Vec::new(),
        stats: Vec::new(),
        adopted_normal: 0,
        shutting_down: false,
    };

    // ---- the background: idle processes, churn, live trees
    let avail0 = meminfo_kib("MemAvailable:");
    let t = Instant::now();
    let per_helper = 1000u64;
    let mut helpers = 0;
    let mut left = p.procs;
    while left > 0 {
        let n = left.min(per_helper);
        let mut idle = Node::new(&["lt-idle", &format!("{helpers}")], "helper").report();
        idle.idle_forks = u32::try_from(n).expect("idle forks");
        b.spawn(&idle);
        helpers += 1;
        left -= n;
    }
    let churn_f = p.churn as f64;
    let short = |argv: &[&str], ms: u64| Node::new(argv, "churn-mcp").life(ms);
    let mut churn = Node::new(&["lt-churn"], "helper").report();
    churn.fork_per_sec = churn_f * 0.8;
    churn.fork_life_ms = 200;
    // Short-lived hosts with a server each (the host waits for its server).
    churn.spawn_per_sec = churn_f * 0.05;
    churn.spawn = vec![
        Node::new(&["claude", "-p", "summarize this"], "churn-mcp")
            .life(0)
            .child(short(&["node", "/home/u/.npm/_npx/77aa/node_modules/.bin/playwright-mcp"], 150)),
        Node::new(&["codex", "exec", "fix it"], "churn-mcp").life(0).child(short(&["uvx", "mcp-server-fetch"], 100)),
    ];
    b.spawn(&churn);
    helpers += 1;
    let host_argvs: [&[&str]; 6] = [
        &["claude"],
        &["node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", "--resume"],
        &["codex"],
        &["/usr/share/cursor/cursor", "--type=utility"],
        &["gemini"],
        &["opencode"],
    ];
    let mcp_churn: Vec<Node> = vec![
        short(&["node", "/home/u/.npm/_npx/c7c7/node_modules/.bin/context7-mcp"], 80),
        short(&["python", "-m", "mcp_server_git", "--repository", "."], 300),
        Node::new(&["npx", "-y", "@modelcontextprotocol/server-memory"], "churn-mcp").life(0).child(short(
            &["node", "/home/u/.npm/_npx/5e5e/node_modules/@modelcontextprotocol/server-memory/dist/index.js"],
            200,
        )),
        short(&["mcp-remote", "https://example.invalid/sse"], 500),
    ];
    for (i, argv) in host_argvs.iter().enumerate() {
        let mut host = Node::new(argv, "live-host").report();
        host.spawn_per_sec = churn_f * 0.15 / host_argvs.len() as f64;
        host.spawn.clone_from(&mcp_churn);
        host = host
            .child(
                Node::new(&["npm", "exec", "@playwright/mcp@latest"], "live").report().child(
                    Node::new(
                        &["node", &format!("/home/u/.npm/_npx/live{i}/node_modules/.bin/playwright-mcp")],
                        "live",
                    )
                    .report()
                    .child(Node::new(&["/opt/google/chrome/chrome", "--headless"], "live").report()),
                ),
            )
            .child(
                Node::new(&["uvx", "mcp-server-fetch"], "live").report().child(
                    Node::new(&["python", "/home/u/.cache/uv/archive-v0/x/bin/mcp-server-fetch"], "live").report(),
                ),
            );
        b.spawn(&host);
    }
    let want_long = helpers + host_argvs.len() * 6;
    while b.long_lived.len() < want_long && t.elapsed() < Duration::from_secs(300) {
        b.tick(Duration::from_millis(20));
    }
    assert_eq!(b.long_lived.len(), want_long, "helpers not ready after 300 s: {:?}", b.errors);
    let idle_cost_kib = avail0.saturating_sub(meminfo_kib("MemAvailable:"));
    eprintln!(
        "background ready in {:.1} s: {} idle processes (~{} MiB), churn {}/s, {} live hosts with {} live members",
        t.elapsed().as_secs_f64(),
        p.procs,
        idle_cost_kib / 1024,
        p.churn,
        host_argvs.len(),
        host_argvs.len() * 5
    );

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
    for &pid in &leftovers {
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

    // ---- report
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
         hosts under live hosts), {} live hosts with {} live members; an orphan tree every {} s per mode for {} s; \
         daemon interval {} s, grace 0, term_timeout {TERM_TIMEOUT_SECS} s, enforce, --scope <bench>",
        p.procs,
        idle_cost_kib / 1024,
        p.churn,
        p.churn as f64 * 0.8,
        p.churn as f64 * 0.2,
        host_argvs.len(),
        host_argvs.len() * 5,
        p.orphan_every,
        p.secs,
        p.interval
    );
    println!(
        "churn achieved over the run ({churn_secs:.0} s): {:.0} forks/s, {:.0} exec'd spawns/s (+ their children)",
        forks as f64 / churn_secs,
        spawns as f64 / churn_secs
    );
    let bnd = bound(&p);
    let row = |name: &str, f: &dyn Fn(&PhaseResult) -> String| {
        let mut line = format!("  {name:<52}");
        for r in &results {
            let _ = write!(line, " {:>22}", f(r));
        }
        println!("{line}");
    };
    row("", &|r| r.mode.clone());
    row("daemon event mode (status)", &|r| r.event_mode.clone());
    row("churn phase (s)", &|r| format!("{:.0}", r.steady_secs));
    row("orphan trees created (of them ignoring SIGTERM)", &|r| format!("{} ({})", r.created, r.stubborn));
    row("orphan trees reaped", &|r| r.reaped.to_string());
    row(&format!("missed orphans / reaped late (> {:.0} s)", bnd.as_secs_f64()), &|r| {
        format!("{} / {}", r.missed, r.late)
    });
    row("wrong kills", &|r| r.wrong_kills.to_string());
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
    for r in &results {
        let trace: Vec<String> = r.rss_trace.iter().map(|(t, kib)| format!("{t}s:{kib}")).collect();
        println!("  daemon RSS (KiB) every minute, {}: {}", r.mode, trace.join(" "));
    }
    println!("  live processes (hosts, trees, helpers) dead at the end: {}", dead_live.len());
    for d in &dead_live {
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
    println!("  daemon logs: {} (kept)", dir.display());
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
    println!("  RESULT: ok (no missed orphan, no wrong kill)");
}
