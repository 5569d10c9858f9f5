//! The bench's helper processes ("nodes"): this binary again, in node mode,
//! spawning, forking and touching memory as its spec says.

// Helper processes stand in for other programs (hosts, servers, forking
// helpers) and need raw system calls; every block has a `// SAFETY:` note.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid as RPid, WaitOptions};
use serde::{Deserialize, Serialize};

use crate::{EVENTS_ENV, LIFELINE_ENV, NODE_ENV};

/// What a node's stdin and stdout are, as its parent sets them up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Io {
    /// Pipes whose far ends the parent keeps until it has reaped the child
    /// (or drops on purpose, see `Node::abandon_ms`): what a host gives its
    /// stdio servers.
    #[default]
    Pipe,
    /// The parent's own: what launchers (`npm exec`, `uvx`) give the server
    /// they start.
    Inherit,
    /// `/dev/null`: a daemon, a GUI app's children, a detached server.
    Null,
}

/// One helper process: this binary again, with its spec in `NODE_ENV`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
#[allow(clippy::struct_excessive_bools)] // a spec: each flag is one behaviour of the stand-in
pub(crate) struct Node {
    pub(crate) argv: Vec<String>,
    /// What the bench makes of it: helper, live-host, live, orphan-host,
    /// orphan, churn-mcp.
    pub(crate) tag: String,
    /// Orphan tree id.
    pub(crate) tree: u64,
    pub(crate) children: Vec<Node>,
    /// Its stdin and stdout as its parent sets them up (the bench sets up
    /// those of the processes it starts itself).
    pub(crate) io: Io,
    pub(crate) ignore_term: bool,
    /// Ignore SIGHUP (inherited through fork and exec, as under `nohup`):
    /// a host that outlives its terminal.
    pub(crate) ignore_hup: bool,
    /// An interactive shell: each child in a process group of its own, the
    /// first one in the terminal's foreground (job control).
    pub(crate) shell: bool,
    /// Drop the stdin and stdout pipes of its children this long after start
    /// (a host done with a server that does not exit on EOF: the server is
    /// abandoned), write a `dropped` event, then end like `life_ms`.
    pub(crate) abandon_ms: Option<u64>,
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
    pub(crate) fn io(mut self, io: Io) -> Node {
        self.io = io;
        self
    }
}

/// The pipe ends a parent keeps for a child whose stdio it set up as [`Io::Pipe`].
pub(crate) type Held = (Option<std::process::ChildStdin>, Option<std::process::ChildStdout>);

/// A command that runs `node` (this binary, argv[0] and args from the spec),
/// its stdin and stdout as `node.io` says (the caller keeps the pipe ends of
/// the `Child` for as long as it stands for a parent that holds them).
pub(crate) fn node_command(node: &Node) -> Command {
    // /proc/self/exe: the very binary running, even if cargo replaces the file.
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0(&node.argv[0])
        .args(&node.argv[1..])
        .env(NODE_ENV, serde_json::to_string(node).expect("a node serializes"));
    match node.io {
        Io::Pipe => cmd.stdin(Stdio::piped()).stdout(Stdio::piped()),
        Io::Inherit => cmd.stdin(Stdio::inherit()).stdout(Stdio::inherit()),
        Io::Null => cmd.stdin(Stdio::null()).stdout(Stdio::null()),
    };
    cmd
}

/// Starts `node` as a child of this node, keeping the far ends of its pipes.
fn spawn_child(node: &Node, own_group: bool) -> std::io::Result<(i32, Held)> {
    let mut cmd = node_command(node);
    if own_group {
        // SAFETY: runs in the forked child before exec; setpgid(2) is
        // async-signal-safe and neither allocates nor takes locks.
        unsafe {
            cmd.pre_exec(|| rustix::process::setpgid(None, None).map_err(std::io::Error::from));
        }
    }
    let mut ch = cmd.spawn()?;
    Ok((ch.id().cast_signed(), (ch.stdin.take(), ch.stdout.take())))
}

/// A pseudo-terminal: (master, slave). Whoever holds the master keeps the
/// terminal alive; closing it hangs the terminal up and removes `/dev/pts/N`.
pub(crate) fn open_pty() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    // SAFETY: posix_openpt returns a new fd or -1; ownership passes to OwnedFd.
    let m = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
    if m < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: m is a fresh fd that nothing else owns.
    let master = unsafe { std::os::fd::OwnedFd::from_raw_fd(m) };
    // SAFETY: grantpt/unlockpt on a valid master fd.
    if unsafe { libc::grantpt(m) } != 0 || unsafe { libc::unlockpt(m) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut name = [0u8; 64];
    // SAFETY: a valid buffer of that length; ptsname_r NUL-terminates on success.
    let rc = unsafe { libc::ptsname_r(m, name.as_mut_ptr().cast(), name.len()) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    let path = std::ffi::CStr::from_bytes_until_nul(&name).map_err(std::io::Error::other)?;
    // SAFETY: a NUL-terminated path; open returns a new fd or -1.
    let s = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
    if s < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: s is a fresh fd that nothing else owns.
    Ok((master, unsafe { std::os::fd::OwnedFd::from_raw_fd(s) }))
}

/// Makes `cmd` a session leader whose stdin, stdout and stderr are the pty
/// `slave`, and whose controlling terminal it is (what a terminal emulator
/// does for the shell it starts).
pub(crate) fn on_terminal(cmd: &mut Command, slave: &std::os::fd::OwnedFd) -> std::io::Result<()> {
    cmd.stdin(slave.try_clone()?).stdout(slave.try_clone()?).stderr(slave.try_clone()?);
    // SAFETY: runs in the forked child before exec; setsid(2) and ioctl(2)
    // are async-signal-safe and neither allocates nor takes locks.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid().map_err(std::io::Error::from)?;
            let fd = std::os::fd::BorrowedFd::borrow_raw(0);
            rustix::process::ioctl_tiocsctty(fd).map_err(std::io::Error::from)
        });
    }
    Ok(())
}

pub(crate) fn write_line(f: &mut std::fs::File, line: &str) {
    // One write on an O_APPEND file: lines of different processes never mix.
    let _ = f.write_all(line.as_bytes());
}

/// The events file's fd, for [`on_term`].
static TERM_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// SIGTERM arrived: one `term PID MONOTONIC_NS` line, then death by SIGTERM
/// (the disposition reset, the signal raised again: delivered once this
/// handler returns). Async-signal-safe: no allocation, no lock.
extern "C" fn on_term(_: libc::c_int) {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill; clock_gettime is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    let ns = u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0);
    let mut line = [0u8; 64];
    let mut n = 0;
    for (i, part) in [u64::from(std::process::id()), ns].into_iter().enumerate() {
        for &b in if i == 0 { b"term ".as_slice() } else { b" ".as_slice() } {
            line[n] = b;
            n += 1;
        }
        let mut digits = [0u8; 20];
        let (mut v, mut d) = (part, 0);
        loop {
            digits[d] = b'0' + u8::try_from(v % 10).unwrap_or(0);
            d += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        for k in (0..d).rev() {
            line[n] = digits[k];
            n += 1;
        }
    }
    line[n] = b'\n';
    n += 1;
    // SAFETY: write, signal and raise are async-signal-safe; the buffer
    // holds `n` bytes; the fd is the events file, open for this process's life.
    unsafe {
        libc::write(TERM_FD.load(std::sync::atomic::Ordering::Relaxed), line.as_ptr().cast(), n);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        libc::raise(libc::SIGTERM);
    }
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
    // A parent that ignored SIGTERM passes that on through exec. A member
    // of a tree to reap notes when SIGTERM arrives (the "signalled" figure),
    // then dies of it as before.
    let handler = if node.ignore_term {
        libc::SIG_IGN
    } else if node.tag == "orphan" {
        TERM_FD.store(events.as_raw_fd(), std::sync::atomic::Ordering::Relaxed);
        on_term as extern "C" fn(libc::c_int) as libc::sighandler_t
    } else {
        libc::SIG_DFL
    };
    // SAFETY: single-threaded; setting a disposition to SIG_IGN/SIG_DFL.
    unsafe { libc::signal(libc::SIGTERM, handler) };
    if node.ignore_hup {
        // SAFETY: as above.
        unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
    }

    let mut kinds: HashMap<i32, String> = HashMap::new();
    // The pipe ends of each child, kept until it is reaped, as hosts do.
    let mut held: HashMap<i32, Held> = HashMap::new();
    let (mut forks, mut spawns, mut normal, mut signaled, mut failed) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for (i, c) in node.children.iter().enumerate() {
        match spawn_child(c, node.shell) {
            Ok((pid, h)) => {
                kinds.insert(pid, c.argv.join(" "));
                held.insert(pid, h);
                if node.shell && i == 0 {
                    // The first job in the terminal's foreground, as a shell
                    // puts the command it runs.
                    let tty = std::io::stdin();
                    if let Some(p) = RPid::from_raw(pid) {
                        let _ = rustix::termios::tcsetpgrp(&tty, p);
                    }
                }
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
    let mut dropped = false;
    loop {
        let now = Instant::now();
        if !dropped && node.abandon_ms.is_some_and(|ms| now >= start + Duration::from_millis(ms)) {
            dropped = true;
            held.clear();
            write_line(&mut events, &format!("dropped {} {} {me}\n", node.tag, node.tree));
        }
        let ending = shutdown || dropped || node.life_ms.is_some_and(|ms| now >= start + Duration::from_millis(ms));
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
                    match spawn_child(c, node.shell) {
                        Ok((pid, h)) => {
                            kinds.insert(pid, c.argv.join(" "));
                            held.insert(pid, h);
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
        // Reap children (of every process group: a shell's jobs have their
        // own), reporting any that died of a signal.
        let mut no_children = false;
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, st))) => {
                    let pid = pid.as_raw_nonzero().get();
                    held.remove(&pid);
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
            if let Some(ms) = node.abandon_ms.filter(|_| !dropped) {
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
