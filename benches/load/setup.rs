//! The run's parameters and limits, the bench's start and its background load.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::BURST_TOUCH_MIB;
use crate::bench::{Bench, Start};
use crate::node::{Io, Node};
use crate::procfs::{meminfo_kib, read_num};

#[derive(Clone, Debug)]
pub(crate) struct Params {
    pub(crate) secs: u64,
    pub(crate) procs: u64,
    pub(crate) churn: u64,
    pub(crate) interval: u64,
    pub(crate) orphan_every: f64,
    pub(crate) burst: usize,
    pub(crate) log_level: String,
    pub(crate) modes: Vec<String>,
}

pub(crate) fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The run's parameters: a few-second smoke run without `--bench`, else from the env.
pub(crate) fn params() -> Params {
    let quick = std::env::args().all(|a| a != "--bench");
    if quick {
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
    }
}

/// Refuses a run that would come near the pid, thread or memory limits.
pub(crate) fn check_limits(p: &Params) {
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
}

/// Makes the bench a child subreaper, its temp dir and the lifeline.
pub(crate) fn new_bench(p: &Params) -> Bench {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).expect("become a child subreaper");
    let dir = std::env::temp_dir().join(format!("mcp-reaper-bench-load-{me}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Private copies: a rebuild elsewhere during a long run must not swap binaries.
    let daemon_bin = dir.join("mcp-reaperd");
    let ctl_bin = dir.join("reaperctl");
    // `MCP_REAPER_LOAD_DAEMON`: another build to measure (a before/after
    // pair is two runs of this bench, one with it).
    let measured = std::env::var_os("MCP_REAPER_LOAD_DAEMON")
        .map_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_mcp-reaperd")), std::path::PathBuf::from);
    std::fs::copy(&measured, &daemon_bin).expect("copy mcp-reaperd");
    std::fs::copy(env!("CARGO_BIN_EXE_reaperctl"), &ctl_bin).expect("copy reaperctl");
    let events_path = dir.join("events");
    std::fs::write(&events_path, "").expect("events file");
    let (lifeline_r, lifeline_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("pipe");
    // The read end is inherited by every helper; the write end stays here only.
    rustix::io::fcntl_setfd(&lifeline_r, rustix::io::FdFlags::empty()).expect("fcntl");

    Bench {
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
        held: HashMap::new(),
        terminals: Vec::new(),
    }
}

/// What the background costs and holds, for the report.
pub(crate) struct Background {
    pub(crate) idle_cost_kib: u64,
    pub(crate) hosts: usize,
}

/// Starts the background: idle processes, churn, live trees; waits until it is ready.
#[allow(clippy::too_many_lines)] // the stand-ins, side by side
pub(crate) fn start_background(b: &mut Bench) -> Background {
    let p = b.p.clone();
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
        b.spawn(&idle, Start::Null);
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
    b.spawn(&churn, Start::Null);
    helpers += 1;
    let mcp_churn: Vec<Node> = vec![
        short(&["node", "/home/u/.npm/_npx/c7c7/node_modules/.bin/context7-mcp"], 80),
        short(&["python", "-m", "mcp_server_git", "--repository", "."], 300),
        Node::new(&["npx", "-y", "@modelcontextprotocol/server-memory"], "churn-mcp").life(0).child(
            short(
                &["node", "/home/u/.npm/_npx/5e5e/node_modules/@modelcontextprotocol/server-memory/dist/index.js"],
                200,
            )
            .io(Io::Inherit),
        ),
        short(&["mcp-remote", "https://example.invalid/sse"], 500),
    ];
    // Live hosts, each as people run it, with two live trees and a stream
    // of short-lived servers; every one keeps its servers' pipes.
    let term = |shell: &str, host: Node| {
        let mut sh = Node::new(&[shell], "live").report().child(host.io(Io::Inherit));
        sh.shell = true;
        sh
    };
    let hosts: Vec<(Node, Start)> = vec![
        // In a terminal: a shell on a pty (the bench holds the master), the
        // host its foreground job.
        (term("-bash", Node::new(&["claude"], "live-host")), Start::Pty),
        (
            term(
                "-zsh",
                Node::new(&["node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", "--resume"], "live-host"),
            ),
            Start::Pty,
        ),
        (term("-bash", Node::new(&["opencode"], "live-host")), Start::Pty),
        // Fed by a script that still writes (the bench holds the pipe).
        (Node::new(&["codex"], "live-host"), Start::Pipe),
        // From a desktop launcher or a user service: /dev/null.
        (Node::new(&["gemini"], "live-host"), Start::Null),
        // A GUI editor: its main process and its extension host.
        (
            Node::new(&["/usr/share/cursor/cursor"], "live").report().child(
                Node::new(
                    &["/usr/share/cursor/cursor", "--type=utility", "--utility-sub-type=node.mojom.NodeService"],
                    "live-host",
                )
                .io(Io::Null),
            ),
            Start::Null,
        ),
    ];
    let n_hosts = hosts.len();
    let mut want_long = helpers;
    for (i, (top, start)) in hosts.into_iter().enumerate() {
        let with_trees = |mut host: Node| {
            host.report = true;
            host.spawn_per_sec = churn_f * 0.15 / n_hosts as f64;
            host.spawn.clone_from(&mcp_churn);
            host.child(
                Node::new(&["npm", "exec", "@playwright/mcp@latest"], "live").report().child(
                    Node::new(
                        &["node", &format!("/home/u/.npm/_npx/live{i}/node_modules/.bin/playwright-mcp")],
                        "live",
                    )
                    .report()
                    .io(Io::Inherit)
                    .child(Node::new(&["/opt/google/chrome/chrome", "--headless"], "live").report().io(Io::Null)),
                ),
            )
            .child(
                Node::new(&["uvx", "mcp-server-fetch"], "live").report().child(
                    Node::new(&["python", "/home/u/.cache/uv/archive-v0/x/bin/mcp-server-fetch"], "live")
                        .report()
                        .io(Io::Inherit),
                ),
            )
        };
        let top = if top.tag == "live-host" {
            with_trees(top)
        } else {
            let mut top = top;
            let host = top.children.pop().expect("a host below");
            top.child(with_trees(host))
        };
        want_long += reporting(&top);
        let (_, master) = b.spawn_on(&top, start);
        b.terminals.extend(master);
    }
    // Bystanders: daemons; a detached server (`nohup … </dev/null >log`);
    // servers owned by a program that is no host (a script of the user's).
    let bystanders = [
        Node::new(&["/usr/sbin/sshd", "-D"], "live").report(),
        Node::new(&["/usr/sbin/cron", "-f"], "live").report(),
        Node::new(&["dbus-daemon", "--session", "--address=unix:path=/tmp/lt-bus"], "live").report(),
        Node::new(&["node", "/home/u/.npm/_npx/dd00/node_modules/.bin/mcp-server-memory"], "live").report(),
        Node::new(&["python3", "/home/u/agent.py"], "live").report().child(
            Node::new(&["uvx", "mcp-server-fetch"], "live").report().child(
                Node::new(&["python", "/home/u/.cache/uv/archive-v0/y/bin/mcp-server-fetch"], "live")
                    .report()
                    .io(Io::Inherit),
            ),
        ),
    ];
    for n in &bystanders {
        want_long += reporting(n);
        b.spawn(n, Start::Null);
    }
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
        n_hosts,
        n_hosts * 5
    );
    Background { idle_cost_kib, hosts: n_hosts }
}

/// How many processes of `n`'s tree write a ready line.
fn reporting(n: &Node) -> usize {
    usize::from(n.report) + n.children.iter().map(reporting).sum::<usize>()
}
