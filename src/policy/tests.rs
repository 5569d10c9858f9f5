//! Verdicts on synthetic snapshots: one test per verdict and per pitfall of
//! background.md.

use std::time::{Duration, SystemTime};

use super::*;
use crate::config::Config;
use crate::ids::{Identity, Pid, StartTime, Uid};
use crate::names::short_cmd;
use crate::scan::{Context, Details, FdTarget, ProcState, Process, Snapshot};
use crate::tree::Forest;

pub(super) const NS: u64 = 4026531836;

pub(super) struct World {
    pub(super) procs: Vec<Process>,
    pub(super) ctx: Context,
    pub(super) cfg: Config,
    scope: Option<Pid>,
    pub(super) book: GraceBook,
    pub(super) now: SystemTime,
    pub(super) pressure: Option<crate::scan::Pressure>,
}

pub(super) fn pid(n: i32) -> Pid {
    Pid::new(n).unwrap()
}

impl World {
    pub(super) fn new() -> World {
        // Compiled once: the generated corpora build thousands of worlds.
        static CFG: std::sync::OnceLock<Config> = std::sync::OnceLock::new();
        let cfg =
            CFG.get_or_init(|| Config::from_str_with_default("test", "[reaper]\ngrace_secs = 0\n").unwrap()).clone();
        let mut w = World {
            procs: Vec::new(),
            ctx: Context {
                self_pid: None,
                self_pidns: Some(NS),
                self_nspid_depth: Some(1),
                self_uid: Some(Uid::ROOT),
                uptime_secs: 100_000.0,
                clk_tck: 100,
            },
            cfg,
            scope: None,
            book: GraceBook::default(),
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
            pressure: None,
        };
        w.add(1, 0, "/sbin/init");
        w
    }

    pub(super) fn cfg(mut self, toml: &str) -> World {
        self.cfg = Config::from_str_with_default("test", toml).unwrap();
        self
    }

    pub(super) fn add(&mut self, p: i32, ppid: i32, cmd: &str) -> &mut Process {
        self.procs.push(Process {
            rss_kib: 1 << 10,
            details: Some(Box::new(Details {
                uid: Some(Uid(1000)),
                swap_bytes: Some(0),
                nspid_depth: Some(1),
                pidns: Some(NS),
                exe: None,
                // What a host gives its stdio servers (and what tests give
                // every process unless they say otherwise).
                fds: [
                    Some(FdTarget(format!("pipe:[{}]", 9000 + p))),
                    Some(FdTarget(format!("pipe:[{}]", 9500 + p))),
                    Some(FdTarget(format!("pipe:[{}]", 9500 + p))),
                ],
                unit: None,
                nspid_inner: Some(p.cast_unsigned()),
                container: None,
                run_session: None,
                run_host: None,
                stdin: None,
                // Answered: the stale rules weigh it (`stale.rs`).
                listening: Some(crate::scan::Listening::No),
                high_links: Vec::new(),
                read_tick: 0,
            })),
            ..Process::synthetic(p, ppid, p as u64 * 7, cmd)
        });
        self.procs.last_mut().unwrap()
    }

    pub(super) fn judge(&self) -> (Snapshot, Vec<Judgement>) {
        let snap = Snapshot::from_processes(self.procs.clone(), self.ctx.clone());
        let forest = Forest::build(&snap, &self.cfg.matcher, self.scope);
        let shapes = forest.server_trees(&snap);
        let inp = Inputs { config: &self.cfg, grace: &self.book, now: self.now, pressure: self.pressure };
        let j = judge(&snap, &forest, &shapes, &inp);
        (snap, j)
    }

    /// The single tree's verdict, root pid, member pids and reason.
    pub(super) fn one(&self) -> (Verdict, i32, Vec<i32>, String) {
        let (snap, js) = self.judge();
        assert_eq!(js.len(), 1, "expected one tree, got {:#?}", js.iter().map(|j| &j.reason).collect::<Vec<_>>());
        let j = &js[0];
        let members = j.members.iter().map(|&(m, _)| snap.procs[m].pid().get()).collect();
        (j.verdict, snap.procs[j.root].pid().get(), members, j.reason.clone())
    }
}

/// Puts fds 0–2 on the terminal `path`; a `/dev/pts/N` (live or deleted)
/// becomes the controlling terminal too, as for a process started in it.
pub(super) fn tty(p: &mut Process, path: &str) {
    if let Some(n) = path.strip_prefix("/dev/pts/").and_then(|r| r.trim_end_matches(" (deleted)").parse::<u32>().ok()) {
        p.tty_nr = tty_nr_of_pts(n);
    }
    let d = p.details.as_mut().unwrap();
    d.fds = [Some(FdTarget(path.into())), Some(FdTarget(path.into())), Some(FdTarget(path.into()))];
}

/// claude → npm exec → node playwright-mcp → chrome (+ setsid helper).
pub(super) fn playwright_under(w: &mut World, parent: i32) {
    w.add(200, parent, "npm exec @playwright/mcp@latest");
    w.add(201, 200, "node /home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp");
    w.add(202, 201, "/opt/google/chrome/chrome --headless --user-data-dir=/tmp/mcp-chrome-1");
    let helper = w.add(203, 202, "/opt/google/chrome/chrome --type=zygote");
    helper.pgid = Pid::new(203);
    helper.sid = Pid::new(203);
}

#[test]
fn orphan_adopted_by_pid1_is_reaped_from_the_wrapper_down() {
    let mut w = World::new();
    playwright_under(&mut w, 1);
    let (v, root, members, reason) = w.one();
    assert_eq!(v, Verdict::Orphan);
    assert_eq!(root, 200, "the wrapper with the dead parent is the root, not the node below it");
    assert_eq!(members, vec![200, 201, 202, 203], "setsid helper included");
    assert!(reason.contains("adopted by PID 1"), "{reason}");
}

#[test]
fn orphan_with_a_member_read_in_its_own_start_tick_waits_for_the_next_scan() {
    let mut w = World::new();
    playwright_under(&mut w, 1);
    // Chrome was read within the tick it started in: a same-tick pid reuse
    // could still hide behind its identity.
    let chrome = w.procs.iter_mut().find(|p| p.pid().get() == 202).unwrap();
    chrome.checked_tick = chrome.id.start_time.0;
    let (snap, js) = w.judge();
    let j = &js[0];
    assert_eq!(j.verdict, Verdict::Young, "{}", j.reason);
    assert!(!j.reap && j.candidate, "held, not dropped from the grace book");
    assert!(j.grace_left.is_some_and(|d| d <= Duration::from_millis(50)), "{:?}", j.grace_left);
    assert!(j.reason.contains("pid 202") && j.reason.contains("clock tick"), "{}", j.reason);
    assert_eq!(snap.procs[j.root].pid().get(), 200);

    // Read again a tick later: reaped.
    let chrome = w.procs.iter_mut().find(|p| p.pid().get() == 202).unwrap();
    chrome.checked_tick = chrome.id.start_time.0 + 1;
    assert_eq!(w.one().0, Verdict::Orphan);
}

#[test]
fn orphan_of_a_hidden_pid_1_is_still_an_orphan() {
    // /proc mounted with hidepid=2: PID 1 (root's) is not in the snapshot.
    let mut w = World::new();
    w.procs.retain(|p| p.pid() != Pid::INIT);
    playwright_under(&mut w, 1);
    let (v, root, _, reason) = w.one();
    assert_eq!((v, root), (Verdict::Orphan, 200));
    assert!(reason.contains("hidepid"), "{reason}");

    // Any other unreadable parent keeps the tree: it may be a live host.
    let mut w = World::new();
    playwright_under(&mut w, 77);
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Foreign, "{reason}");
}

#[test]
fn orphan_adopted_by_a_user_subreaper() {
    let mut w = World::new();
    w.add(812, 1, "/usr/lib/systemd/systemd --user");
    playwright_under(&mut w, 812);
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Orphan);
    assert!(reason.contains("systemd --user (pid 812)"), "{reason}");
}

/// A server that kept its dead host's session, under a subreaper no list
/// knows (`relayd`): its adopter did not start it.
fn kept_session_under_relayd(relayd_sid: Option<i32>, server_sid: Option<i32>) -> (Verdict, String) {
    let mut w = World::new();
    w.add(33, 1, "relayd").sid = relayd_sid.map(pid);
    let s = w.add(200, 33, "npx -y @playwright/mcp@latest");
    s.sid = server_sid.map(pid);
    s.pgid = server_sid.map(pid);
    let (v, _, _, reason) = w.one();
    (v, reason)
}

#[test]
fn a_server_that_kept_its_dead_hosts_session_was_adopted_by_whoever_holds_it() {
    let (v, reason) = kept_session_under_relayd(Some(30), Some(100));
    assert_eq!(v, Verdict::Orphan, "{reason}");
    assert!(reason.contains("kept the session (sid 100)") && reason.contains("(sid 30)"), "{reason}");
    // relayd in session 0 (a CI runner's under a PID 1 that never called
    // setsid; one led outside our PID namespace): still another session.
    let (v, reason) = kept_session_under_relayd(None, Some(100));
    assert_eq!(v, Verdict::Orphan, "{reason}");
    assert!(reason.contains("not its adopter's (sid 0, which no process here leads)"), "{reason}");
    // The same session, or neither seen, or a server that leads its own:
    // nothing says who started it.
    for (r, s) in [(Some(100), Some(100)), (None, None), (Some(30), Some(200))] {
        let (v, reason) = kept_session_under_relayd(r, s);
        assert_eq!(v, Verdict::Foreign, "{r:?} {s:?}: {reason}");
    }
}

#[test]
fn live_host_with_terminal_keeps_its_servers() {
    let mut w = World::new();
    w.add(50, 1, "sshd: u@pts/3");
    w.add(51, 50, "-bash");
    tty(w.add(100, 51, "claude --resume"), "/dev/pts/3");
    playwright_under(&mut w, 100);
    let (v, root, _, reason) = w.one();
    assert_eq!((v, root), (Verdict::Live, 200));
    assert!(reason.contains("claude --resume (pid 100)") && reason.contains("/dev/pts/3"), "{reason}");
}

#[test]
fn headless_host_without_terminal_is_live() {
    let mut w = World::new();
    w.add(100, 1, "node /usr/lib/node_modules/@anthropic-ai/claude-code/cli.js -p hi");
    w.add(300, 100, "uvx mcp-server-fetch");
    let (v, root, _, reason) = w.one();
    assert_eq!((v, root), (Verdict::Live, 300));
    assert!(reason.contains("no terminal"), "{reason}");
}

#[test]
fn host_found_through_a_shell_between_it_and_the_tree() {
    let mut w = World::new();
    w.add(100, 1, "claude");
    w.add(110, 100, "/bin/bash --norc");
    w.add(300, 110, "python -m mcp_server_git");
    assert_eq!(w.one().0, Verdict::Live);
}

#[test]
fn host_identified_by_exe_only() {
    let mut w = World::new();
    let host = w.add(100, 1, "2.0.14");
    // What /proc/PID/exe shows for the native binary: the resolved version file.
    host.details.as_mut().unwrap().exe = Some("/home/u/.local/share/claude/versions/2.0.14".into());
    w.add(300, 100, "mcp-remote https://x.invalid/sse");
    assert_eq!(w.one().0, Verdict::Live);
}

#[test]
fn multiplexer_held_terminal_is_alive() {
    let mut w = World::new();
    w.add(40, 1, "tmux new -s work");
    w.add(41, 40, "-bash");
    tty(w.add(100, 41, "claude"), "/dev/pts/7");
    playwright_under(&mut w, 100);
    assert_eq!(w.one().0, Verdict::Live);
}

#[test]
fn dead_terminal_makes_the_host_and_its_subtree_stale() {
    let mut w = World::new();
    tty(w.add(100, 1, "claude"), "/dev/pts/4 (deleted)");
    playwright_under(&mut w, 100);
    w.add(300, 100, "uvx mcp-server-fetch");
    w.add(400, 100, "bash -c sleep 100");
    let (v, root, members, reason) = w.one();
    assert_eq!(v, Verdict::Stale);
    assert_eq!(root, 100, "the host is reaped with its servers");
    assert_eq!(members, vec![100, 200, 201, 202, 203, 300, 400]);
    assert!(reason.contains("/dev/pts/4 (deleted) is gone"), "{reason}");
}

#[test]
fn a_connection_alone_does_not_keep_a_dead_terminals_host() {
    // A terminal UI busy with its model's API when its terminal died: the
    // terminal was its only way in (only a listener is another).
    let mut w = World::new();
    let host = w.add(100, 1, "claude");
    tty(host, "/dev/pts/4 (deleted)");
    host.details.as_mut().unwrap().listening =
        Some(crate::scan::Listening::Connected("a TCP connection to port 443".into()));
    playwright_under(&mut w, 100);
    let (v, root, _, reason) = w.one();
    assert_eq!((v, root), (Verdict::Stale, 100), "{reason}");
}

#[test]
fn dead_terminal_kept_when_stale_reaping_is_off() {
    let mut w = World::new().cfg("[reaper]\ngrace_secs = 0\nreap_stale_hosts = false\n");
    tty(w.add(100, 1, "claude"), "/dev/pts/4 (deleted)");
    playwright_under(&mut w, 100);
    let (snap, js) = w.judge();
    assert_eq!(js[0].verdict, Verdict::Stale);
    assert!(!js[0].reap);
    assert_eq!(snap.procs[js[0].root].pid().get(), 200, "not grown to the host when it is not reaped");
}

#[test]
fn login_shell_is_no_launcher_so_its_tree_is_foreign() {
    let mut w = World::new();
    w.add(51, 1, "-bash");
    w.add(300, 51, "node /x/node_modules/.bin/context7-mcp");
    let (v, root, _, reason) = w.one();
    assert_eq!((v, root), (Verdict::Foreign, 300));
    assert!(reason.contains("-bash (pid 51)"), "{reason}");
}

#[test]
fn sh_dash_c_is_a_launcher_link() {
    let mut w = World::new();
    w.add(60, 1, "sh -c npx -y @modelcontextprotocol/server-filesystem /");
    w.add(61, 60, "npm exec @modelcontextprotocol/server-filesystem /");
    w.add(62, 61, "node /x/.bin/mcp-server-filesystem /");
    let (v, root, members, _) = w.one();
    assert_eq!((v, root), (Verdict::Orphan, 60));
    assert_eq!(members, vec![60, 61, 62]);
}

#[test]
fn protect_pattern_wins() {
    let mut w = World::new().cfg("[reaper]\ngrace_secs = 0\n[patterns]\nprotect = ['--transport http']\n");
    w.add(300, 1, "node /x/mcp-server-shared --transport http");
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Protected);
    assert!(reason.contains("protect pattern '--transport http'"), "{reason}");
}

#[test]
fn young_until_the_grace_has_passed() {
    let mut w = World::new().cfg("[reaper]\ngrace_secs = 60\n");
    playwright_under(&mut w, 1);
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Young);
    assert!(reason.contains("60s left"), "{reason}");
    let root = Identity { pid: pid(200), start_time: StartTime(1400) };
    w.book.insert(root, w.now - Duration::from_secs(59));
    let (snap, js) = w.judge();
    assert_eq!((js[0].verdict, js[0].grace_left), (Verdict::Young, Some(Duration::from_secs(1))));
    assert_eq!(js[0].root_id(&snap), root);
    w.book.insert(root, w.now - Duration::from_secs(60));
    assert_eq!(w.one().0, Verdict::Orphan);
}

/// A server with its stdio on /dev/null, a terminal or a file.
pub(super) fn stdio(p: &mut Process, fd0: &str, fd1: &str) {
    let d = p.details.as_mut().unwrap();
    d.fds[0] = Some(FdTarget(fd0.into()));
    d.fds[1] = Some(FdTarget(fd1.into()));
}

#[test]
fn shared_process_group_bystander_is_not_a_member() {
    let mut w = World::new();
    w.add(90, 1, "python3 build.py");
    w.add(91, 90, "sleep 1000").pgid = Pid::new(200);
    playwright_under(&mut w, 1);
    let (_, _, members, _) = w.one();
    assert!(!members.contains(&91));
}

#[test]
fn nested_servers_make_one_tree() {
    let mut w = World::new();
    playwright_under(&mut w, 1);
    w.add(204, 202, "node /x/.bin/chrome-devtools-mcp");
    let (v, root, members, _) = w.one();
    assert_eq!((v, root), (Verdict::Orphan, 200));
    assert!(members.contains(&204));
}

#[test]
fn zombie_members_do_not_block() {
    let mut w = World::new();
    playwright_under(&mut w, 1);
    let z = w.add(205, 201, "");
    z.state = ProcState(b'Z');
    z.details = None;
    assert_eq!(w.one().0, Verdict::Orphan);
}

#[test]
fn scope_limits_judgement_and_acts_as_adopter() {
    let mut w = World::new();
    w.add(500, 1, "cargo test");
    w.add(600, 500, "npm exec foo-mcp");
    w.add(700, 1, "mcp-remote outside");
    w.scope = Some(pid(500));
    let (v, root, _, reason) = w.one();
    assert_eq!((v, root), (Verdict::Orphan, 600));
    assert!(reason.contains("scope process"), "{reason}");
}

#[test]
fn vanished_parent_is_kept() {
    let mut w = World::new();
    w.add(300, 999, "mcp-remote x");
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Foreign);
    assert!(reason.contains("not readable"), "{reason}");
}

#[test]
fn secrets_are_matched_raw_but_shown_masked() {
    let mut w = World::new();
    w.add(100, 1, "claude --api-key=SEKRET0");
    w.add(200, 100, "node /usr/lib/mcp-remote --token=SEKRETSEKRETSEKRET");
    let (v, _, _, reason) = w.one();
    assert_eq!(v, Verdict::Live);
    assert!(reason.contains("--api-key=***") && !reason.contains("SEKRET"), "{reason}");
    // Cut after masking: a secret straddling the cut leaks no prefix.
    let p = w.procs.iter().find(|p| p.pid().get() == 200).unwrap();
    assert_eq!(short_cmd(p, 40), "node /usr/lib/mcp-remote --token=***");
    assert_eq!(short_cmd(p, 30), "node /usr/lib/mcp-remote --to…");
    // protect still sees the real command line.
    let w = w.cfg("[reaper]\ngrace_secs = 0\n[patterns]\nprotect = ['--token=SEKRETSEKRET']\n");
    assert_eq!(w.one().0, Verdict::Protected);
}

/// The `stat` `tty_nr` of `/dev/pts/N` (the kernel's `new_encode_dev`).
pub(super) fn tty_nr_of_pts(n: u32) -> u32 {
    let (major, minor) = (136 + n / 256, n % 256);
    (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)
}
