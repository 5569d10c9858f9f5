//! The bench's state: the processes it started, the orphan trees it made,
//! and what it learns from its helpers' events; spawning, reaping, killing hosts.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcp_reaper::proto::Status;
use rustix::event::{PollFd, PollFlags};
use rustix::process::{Signal, WaitOptions, WaitStatus};

use crate::node::{Held, Io, Node, node_command, on_terminal, open_pty};
use crate::procfs::{mono_ns, pidfd, pss_swap_pss};
use crate::setup::Params;
use crate::{EVENTS_ENV, KILL_WAIT_SECS, LIFELINE_ENV, ORPHAN_TOUCH_MIB, TERM_TIMEOUT_SECS};

pub(crate) struct Member {
    pub(crate) pid: i32,
    pub(crate) argv: String,
    pub(crate) fd: OwnedFd,
    pub(crate) gone_at: Option<Instant>,
}

/// How a tree is to be left for the daemon to reap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Its host is `SIGKILL`ed: the tree is adopted (by the bench, a subreaper).
    Orphan,
    /// Its host, alive, drops the tree's stdin and stdout pipes; the server
    /// does not exit on EOF. The host lives on.
    Abandoned,
    /// An interactive `claude` in a shell on a terminal; the terminal is
    /// closed (the bench drops the pty master), the shell dies of SIGHUP, the
    /// host (ignoring SIGHUP) and its server live on.
    Stale,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Orphan => "orphan",
            Kind::Abandoned => "abandoned",
            Kind::Stale => "stale",
        }
    }
}

pub(crate) struct OrphanTree {
    pub(crate) kind: Kind,
    /// The pty master of a stale tree's terminal, until the bench closes it.
    pub(crate) terminal: Option<OwnedFd>,
    pub(crate) phase: usize,
    pub(crate) burst: bool,
    pub(crate) stubborn: bool,
    pub(crate) host: i32,
    /// Members expected to report ready (launcher, server, browser).
    pub(crate) expected: usize,
    pub(crate) members: Vec<Member>,
    pub(crate) created: Instant,
    pub(crate) kill_at: Instant,
    pub(crate) killed_at: Option<Instant>,
    /// The same moment on the wall clock, to compare with the daemon's log.
    pub(crate) killed_unix: f64,
    pub(crate) measured: u64,
    /// Tree gone (every member) and server gone, after the host's death.
    pub(crate) tree_latency: Option<Duration>,
    pub(crate) server_latency: Option<Duration>,
    /// The first SIGTERM a member received, after the host's death (or the
    /// tree's letting go).
    pub(crate) signal_latency: Option<Duration>,
    pub(crate) abandoned: bool,
}

pub(crate) struct LongLived {
    pub(crate) tag: String,
    pub(crate) argv: String,
    pub(crate) fd: OwnedFd,
    pub(crate) dead: bool,
}

pub(crate) struct Bench {
    pub(crate) p: Params,
    pub(crate) dir: PathBuf,
    pub(crate) daemon_bin: PathBuf,
    pub(crate) ctl_bin: PathBuf,
    pub(crate) me: i32,
    pub(crate) lifeline_w: Option<OwnedFd>,
    pub(crate) lifeline_r: OwnedFd,
    pub(crate) events_path: PathBuf,
    pub(crate) events_off: u64,
    pub(crate) events_partial: Vec<u8>,
    /// Helpers, live hosts and live members, by pid.
    pub(crate) long_lived: HashMap<i32, LongLived>,
    pub(crate) trees: HashMap<u64, OrphanTree>,
    pub(crate) next_tree: u64,
    /// Orphan-tree members and hosts not yet reaped: their deaths are expected.
    pub(crate) expected_deaths: HashSet<i32>,
    /// pidfds of orphan hosts, opened at spawn, until they are killed.
    pub(crate) host_fds: HashMap<i32, OwnedFd>,
    pub(crate) daemon_pid: Option<i32>,
    pub(crate) daemon_status: Option<WaitStatus>,
    pub(crate) phase: usize,
    pub(crate) wrong: Vec<(usize, String)>,
    pub(crate) unexpected: Vec<String>,
    pub(crate) errors: Vec<String>,
    pub(crate) stats: Vec<String>,
    pub(crate) adopted_normal: u64,
    pub(crate) shutting_down: bool,
    /// Far ends of the stdin and stdout pipes of the processes the bench
    /// started with [`Start::Pipe`], until they are reaped.
    pub(crate) held: HashMap<i32, Held>,
    /// Pty masters of the live terminals the bench started shells on.
    pub(crate) terminals: Vec<OwnedFd>,
}

/// What the bench gives a process it starts itself as its stdio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// `/dev/null` (a daemon, a GUI app, a host started by a launcher).
    Null,
    /// Pipes whose far ends the bench holds (a host fed by a live script).
    Pipe,
    /// A new terminal (a pty whose master the bench holds), of which the
    /// process is the session leader (a shell in a terminal window).
    Pty,
}

/// Parent tags whose children die of signals on purpose (the trees the
/// daemon must reap, and the shells of closed terminals).
const EXPECTED_SIG_PARENTS: [&str; 4] = ["orphan", "orphan-host", "abandon-host", "stale-shell"];

fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64()
}

pub(crate) fn bound(p: &Params) -> Duration {
    // grace 0 + one interval + term_timeout + kill_wait + slack
    Duration::from_secs_f64(p.interval as f64 + TERM_TIMEOUT_SECS + KILL_WAIT_SECS + 3.0)
}

impl Bench {
    // Reaped by `Bench::reap` (waitpid(-1)), not through the Child.
    #[allow(clippy::zombie_processes)]
    pub(crate) fn spawn(&mut self, node: &Node, start: Start) -> i32 {
        self.spawn_on(node, start).0
    }

    /// Starts `node` below the bench; for [`Start::Pty`] also returns the
    /// terminal's master (the caller keeps it for as long as the terminal is
    /// to stay open).
    #[allow(clippy::zombie_processes)]
    pub(crate) fn spawn_on(&mut self, node: &Node, start: Start) -> (i32, Option<OwnedFd>) {
        let mut node = node.clone();
        node.io = match start {
            Start::Null => Io::Null,
            Start::Pipe => Io::Pipe,
            Start::Pty => Io::Inherit, // set below
        };
        let mut cmd = node_command(&node);
        cmd.env(LIFELINE_ENV, self.lifeline_r.as_raw_fd().to_string()).env(EVENTS_ENV, &self.events_path);
        let mut master = None;
        if start == Start::Pty {
            let (m, slave) = open_pty().expect("a pseudo-terminal");
            on_terminal(&mut cmd, &slave).expect("a pty's slave");
            master = Some(m);
        } else {
            // The session leader of a terminal is not: a parent's death
            // signal is no hangup.
            mcp_reaper::sys::kill_with_parent(&mut cmd);
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawning {:?}: {e}", node.argv));
        let pid = child.id().cast_signed();
        if start == Start::Pipe {
            self.held.insert(pid, (child.stdin.take(), child.stdout.take()));
        }
        // Never waited through the Child: the bench reaps with waitpid(-1).
        (pid, master)
    }

    /// Reads new lines of the events file.
    pub(crate) fn read_events(&mut self) {
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

    pub(crate) fn event(&mut self, line: &str) {
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
            ["dropped", _tag, tree, _pid] => {
                // An abandoned tree: its clock starts when its host dropped its pipes.
                let tree: u64 = tree.parse().unwrap_or(0);
                if let Some(t) = self.trees.get_mut(&tree).filter(|t| t.killed_at.is_none()) {
                    t.killed_at = Some(Instant::now());
                    t.killed_unix = unix_now();
                    t.measured = t.members.iter().map(|m| pss_swap_pss(m.pid)).sum();
                }
            }
            ["sig", pid, sig, tag, _tree, kind] => {
                let pid: i32 = pid.parse().unwrap_or(0);
                if EXPECTED_SIG_PARENTS.contains(tag) {
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
            ["term", pid, ns] => {
                // The monotonic clock is `Instant`'s: back from now by the age.
                let (pid, ns): (i32, u64) = (pid.parse().unwrap_or(0), ns.parse().unwrap_or(u64::MAX));
                let at = Instant::now().checked_sub(Duration::from_nanos(mono_ns().saturating_sub(ns)));
                let tree = self.trees.values_mut().find(|t| t.members.iter().any(|m| m.pid == pid));
                if let (Some(t), Some(at)) = (tree, at)
                    && let Some(killed) = t.killed_at
                {
                    let l = at.saturating_duration_since(killed);
                    t.signal_latency = Some(t.signal_latency.map_or(l, |s| s.min(l)));
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
    pub(crate) fn reap(&mut self) {
        // wait(2), i.e. waitpid(-1): children of every process group (rustix's
        // `waitpid(None)` is waitpid(0), this group only, and the shells on
        // terminals are sessions of their own).
        loop {
            let (pid, st) = match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, st))) => (pid.as_raw_nonzero().get(), st),
                Err(rustix::io::Errno::INTR) => continue,
                Ok(None) | Err(_) => return,
            };
            if Some(pid) == self.daemon_pid {
                self.daemon_status = Some(st);
                continue;
            }
            self.held.remove(&pid);
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
    pub(crate) fn tick(&mut self, wait: Duration) {
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
    pub(crate) fn spawn_host(&mut self, host: &Node) -> i32 {
        // A host started from a launcher or a desktop: stdin on /dev/null (not a
        // pipe nobody writes to, which would make it look unused).
        let pid = self.spawn(host, Start::Null);
        self.expected_deaths.insert(pid);
        self.host_fds.insert(pid, pidfd(pid).expect("pidfd of a new host"));
        pid
    }

    pub(crate) fn orphan_tree_spec(&mut self, stubborn: bool, touch: u64) -> (u64, Node) {
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
        // npm runs the server on its own stdio; the browser gets /dev/null
        // on stdin (playwright talks to it over fds 3 and 4).
        let launcher = Node::new(&["npm", "exec", "@playwright/mcp@latest"], "orphan")
            .report()
            .tree(id)
            .child(server.io(Io::Inherit).child(chrome.io(Io::Null)));
        (id, launcher)
    }

    pub(crate) fn new_tree(
        &mut self,
        id: u64,
        host: i32,
        stubborn: bool,
        burst: bool,
        kill_at: Instant,
    ) -> &mut OrphanTree {
        self.trees
            .entry(id)
            .insert_entry(OrphanTree {
                kind: Kind::Orphan,
                terminal: None,
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
                signal_latency: None,
                abandoned: false,
            })
            .into_mut()
    }

    /// One orphan-to-be: `claude` → npm → node …/playwright-mcp → chrome.
    pub(crate) fn spawn_orphan(&mut self, stubborn: bool, host_life: Duration) {
        let (id, launcher) = self.orphan_tree_spec(stubborn, ORPHAN_TOUCH_MIB);
        let host = Node::new(&["claude", "--orphan-to-be", &id.to_string()], "orphan-host").tree(id).child(launcher);
        let pid = self.spawn_host(&host);
        self.new_tree(id, pid, stubborn, false, Instant::now() + host_life);
    }

    /// One tree to be abandoned: `gemini` (on /dev/null, as from a desktop
    /// launcher) → node …/playwright-mcp → chrome. The host drops the
    /// server's pipes after `after` and lives on until the tree is gone.
    pub(crate) fn spawn_abandoned(&mut self, after: Duration) {
        let (id, launcher) = self.orphan_tree_spec(false, ORPHAN_TOUCH_MIB);
        // The server directly below its host (the host owns the tree), the
        // launcher left out.
        let server = launcher.children.into_iter().next().expect("a server").io(Io::Pipe);
        let mut host =
            Node::new(&["gemini", "--abandon-to-be", &id.to_string()], "abandon-host").tree(id).child(server);
        host.abandon_ms = Some(u64::try_from(after.as_millis()).unwrap_or(u64::MAX));
        let pid = self.spawn(&host, Start::Null);
        let t = self.new_tree(id, pid, false, false, Instant::now() + Duration::from_secs(24 * 3600));
        t.kind = Kind::Abandoned;
        t.expected = 2;
    }

    /// One tree to go stale: a shell on a new terminal → `claude`
    /// (interactive, in the foreground, ignoring SIGHUP) → node
    /// …/playwright-mcp → chrome. At `after` the bench closes the terminal.
    pub(crate) fn spawn_stale(&mut self, after: Duration) {
        let (id, launcher) = self.orphan_tree_spec(false, ORPHAN_TOUCH_MIB);
        let server = launcher.children.into_iter().next().expect("a server").io(Io::Pipe);
        let mut host = Node::new(&["claude"], "orphan").report().tree(id).io(Io::Inherit).child(server);
        host.ignore_hup = true;
        let mut shell = Node::new(&["-bash"], "stale-shell").tree(id).child(host);
        shell.shell = true;
        let (pid, master) = self.spawn_on(&shell, Start::Pty);
        // The shell dies of the hangup, on purpose.
        self.expected_deaths.insert(pid);
        let t = self.new_tree(id, pid, false, false, Instant::now() + after);
        t.kind = Kind::Stale;
        t.terminal = master;
        t.expected = 3;
    }

    /// Kills the host of every tree whose time has come and whose members
    /// are all ready (measuring their memory first).
    pub(crate) fn kill_due_hosts(&mut self, force: bool) {
        let now = Instant::now();
        self.close_due_terminals(force);
        for t in self.trees.values_mut().filter(|t| t.kind == Kind::Abandoned && t.killed_at.is_none() && !t.abandoned)
        {
            if t.members.len() < t.expected && now.duration_since(t.created) > Duration::from_secs(30) {
                t.abandoned = true;
                self.errors.push(format!("abandoned-to-be tree of host {} never became ready", t.host));
            }
        }
        let mut hosts: Vec<i32> = Vec::new();
        for t in self.trees.values().filter(|t| t.kind == Kind::Orphan) {
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
        let unix = unix_now();
        for t in self.trees.values_mut().filter(|t| t.killed_at.is_none()) {
            t.killed_at = killed_at.get(&t.host).copied();
            if t.killed_at.is_some() {
                t.killed_unix = unix;
            }
        }
    }

    /// Closes the terminal of every stale-to-be tree whose time has come and
    /// whose members are all ready (measuring their memory first).
    fn close_due_terminals(&mut self, force: bool) {
        let now = Instant::now();
        for t in self.trees.values_mut().filter(|t| t.kind == Kind::Stale && t.killed_at.is_none() && !t.abandoned) {
            if !force && t.kill_at > now {
                continue;
            }
            if t.members.len() < t.expected {
                if now.duration_since(t.created) > Duration::from_secs(30) {
                    t.abandoned = true;
                    self.errors.push(format!("stale-to-be tree of shell {} never became ready", t.host));
                }
                continue;
            }
            t.measured = t.members.iter().map(|m| pss_swap_pss(m.pid)).sum();
            // The terminal window closes: the pty hangs up, /dev/pts/N goes.
            t.terminal = None;
            t.killed_at = Some(Instant::now());
            t.killed_unix = unix_now();
        }
    }

    pub(crate) fn ctl_status(&self, sock: &Path) -> Option<Status> {
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

    pub(crate) fn wait_status(
        &mut self,
        sock: &Path,
        timeout: Duration,
        mut ok: impl FnMut(&Status) -> bool,
    ) -> Option<Status> {
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
}
