//! The bench's helper processes ("nodes"): this binary again, in node mode,
//! spawning, forking and touching memory as its spec says.

// Helper processes stand in for other programs (hosts, servers, forking
// helpers) and need raw system calls; every block has a `// SAFETY:` note.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::io::Write;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::process::WaitOptions;
use serde::{Deserialize, Serialize};

use crate::{EVENTS_ENV, LIFELINE_ENV, NODE_ENV};

/// One helper process: this binary again, with its spec in `NODE_ENV`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Node {
    pub(crate) argv: Vec<String>,
    /// What the bench makes of it: helper, live-host, live, orphan-host,
    /// orphan, churn-mcp.
    pub(crate) tag: String,
    /// Orphan tree id.
    pub(crate) tree: u64,
    pub(crate) children: Vec<Node>,
    pub(crate) ignore_term: bool,
    /// Exit (status 0) this long after start, once its children are gone.
    pub(crate) life_ms: Option<u64>,
    /// Write a ready line (and a stats line when it ends).
    pub(crate) report: bool,
    pub(crate) touch_mib: u64,
    /// Children forked (no exec) that block on the lifeline.
    pub(crate) idle_forks: u32,
    /// Plain fork+exit churn: children that live up to `fork_life_ms`.
    pub(crate) fork_per_sec: f64,
    pub(crate) fork_life_ms: u64,
    /// Exec'd churn, taken in turn from `spawn`.
    pub(crate) spawn_per_sec: f64,
    pub(crate) spawn: Vec<Node>,
}

impl Node {
    pub(crate) fn new(argv: &[&str], tag: &str) -> Node {
        Node { argv: argv.iter().map(std::string::ToString::to_string).collect(), tag: tag.into(), ..Node::default() }
    }
    pub(crate) fn child(mut self, c: Node) -> Node {
        self.children.push(c);
        self
    }
    pub(crate) fn report(mut self) -> Node {
        self.report = true;
        self
    }
    pub(crate) fn tree(mut self, id: u64) -> Node {
        self.tree = id;
        self
    }
    pub(crate) fn life(mut self, ms: u64) -> Node {
        self.life_ms = Some(ms);
        self
    }
}

/// A command that runs `node` (this binary, argv[0] and args from the spec).
pub(crate) fn node_command(node: &Node) -> Command {
    // /proc/self/exe: the very binary running, even if cargo replaces the file.
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0(&node.argv[0])
        .args(&node.argv[1..])
        .env(NODE_ENV, serde_json::to_string(node).expect("a node serializes"))
        // What a host gives its stdio servers: pipes (the reaper keeps trees
        // whose servers have /dev/null there). The parent's ends close when
        // its `Child` drops; the fds stay pipes, and nodes never write them.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    cmd
}

pub(crate) fn write_line(f: &mut std::fs::File, line: &str) {
    // One write on an O_APPEND file: lines of different processes never mix.
    let _ = f.write_all(line.as_bytes());
}

/// Forks; the child runs `body` and exits with status 0.
pub(crate) fn fork_child(body: impl FnOnce()) -> i32 {
    // SAFETY: node processes are single-threaded (no thread is ever started
    // in node mode), so the child may run ordinary code after fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        body();
        exit_now(0);
    }
    pid
}

pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit ends the process at once; no destructors needed.
    unsafe { libc::_exit(code) }
}

/// A forked idle child: blocks on the lifeline until the bench goes away.
pub(crate) fn idle_child(lifeline: RawFd) -> ! {
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
pub(crate) fn node_main(text: &str) -> ! {
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
