//! Things that look like MCP servers but are not a host's leftovers, beside
//! real orphans, with real processes and an enforcing `mcp-reaperd --once`:
//! a real tmux server whose argv (its first client's) names a session
//! `foo-mcp`; servers started detached on `/dev/null`; a systemd service's
//! main process; adoption by a user manager (`systemd --user`) and by PID 1
//! of a PID namespace. The orphans must go, the bystanders must stay.
//!
//! Safety: every tree lives below its own sandbox scope process (a child
//! subreaper) and every enforcing run is `--scope`d to it, except in
//! `adoption_by_pid_1_in_a_pid_namespace`, where the reaper runs unscoped
//! inside a PID namespace the test creates (root only), which dies with its
//! PID 1. The tmux server is started from inside the sandbox on a private
//! socket (`-S` in a temp dir) and ended with `kill-server` on that socket.
//! Cgroups are created (root only) under their own unique names and removed.

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{
    Ready, Sandbox, Spec, TempDir, alive, descendants_of, find_tool, is_root, member, pid_namespace_tool, ppid_of, s,
    scan_json, skip, stat_of, text, tree_rooted_at, wait_until,
};
use rustix::process::Signal;
use serde_json::Value;

const CLAUDE: &[&str] = &["claude", "--resume"];
const NPM_PLAYWRIGHT: &[&str] = &["npm", "exec", "@playwright/mcp@latest"];
const NODE_PLAYWRIGHT: &[&str] = &["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"];
const GITHUB_STDIO: &[&str] = &["/usr/local/bin/github-mcp-server", "stdio"];
const TSC_WATCH: &[&str] = &["node", "/home/u/src/mcp-server-weather/node_modules/.bin/tsc", "--watch"];
const FAKE_TMUX: &[&str] = &["tmux", "new", "-s", "foo-mcp"];
/// The shell a person started something from with `&` and then left: its
/// children are adopted when it exits.
const SHELL: &[&str] = &["bash"];

/// Bounds how long a test waits for processes to get ready (never a timed
/// assertion on the reaper).
const READY: Duration = Duration::from_secs(10);

// ------------------------------------------------------------------ helpers

/// `mcp-reaperd --once --json [--scope S] --config C`, asserting exit 0.
fn once(scope: Option<i32>, cfg: &Path) -> (Value, Output) {
    common::once_output(scope, cfg, &[])
}

fn scan(sb: &Sandbox, cfg: &Path) -> Value {
    scan_json(cfg, &["--scope", &sb.scope_pid().to_string()])
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v[key].as_array().unwrap_or_else(|| panic!("no {key} array: {v:#}"))
}

/// Root pids of the outcomes of a `--once --json` run.
fn outcome_roots(v: &Value) -> Vec<i64> {
    arr(v, "outcomes").iter().map(|o| o["root"]["pid"].as_i64().expect("an outcome's root pid")).collect()
}

/// The outcome for the tree rooted at `root`.
fn outcome_for(v: &Value, root: i32) -> &Value {
    arr(v, "outcomes")
        .iter()
        .find(|o| o["root"]["pid"] == root)
        .unwrap_or_else(|| panic!("no outcome for root {root}: {v:#}"))
}

/// The kept tree rooted at `root` in a `--once --json` run.
fn kept_for(v: &Value, root: i32) -> &Value {
    arr(v, "kept").iter().find(|k| k["root"] == root).unwrap_or_else(|| panic!("{root} was not kept: {v:#}"))
}

/// Every tree of a scan report that has `pid` among its members.
fn trees_with(v: &Value, pid: i32) -> Vec<&Value> {
    arr(v, "trees").iter().filter(|t| arr(t, "members").iter().any(|m| m["pid"] == pid)).collect()
}

/// Asserts that `pid` is in no tree of the scan, or only in trees that are
/// kept (not reaped now, nor later).
fn assert_not_targeted(v: &Value, pid: i32, what: &str) {
    for t in trees_with(v, pid) {
        let verdict = t["verdict"].as_str().unwrap_or("");
        assert!(
            t["reap"] == false && !matches!(verdict, "orphan" | "stale" | "young"),
            "{what} (pid {pid}) is in a tree the reaper acts on: {t:#}"
        );
    }
}

fn assert_gone(pids: &[i32]) {
    for &p in pids {
        assert!(!alive(p), "{p} should be gone: {:?}", stat_of(p));
    }
}

fn assert_alive(pids: &[i32], what: &str) {
    for &p in pids {
        assert!(alive(p), "{what}: {p} should still be alive: {:?}", stat_of(p));
    }
}

/// The ready lines of the sandbox processes whose argv starts with `prefix`.
fn ready_with<'a>(sb: &'a Sandbox, prefix: &str) -> Vec<&'a Ready> {
    sb.ready().iter().filter(|r| r.cmd.starts_with(prefix)).collect()
}

/// The one sandbox process whose argv starts with `prefix` and whose parent
/// (when it started) was `parent`.
fn pid_under(sb: &Sandbox, parent: i32, prefix: &str) -> i32 {
    let hits: Vec<&Ready> = ready_with(sb, prefix).into_iter().filter(|r| r.ppid == parent).collect();
    match hits.as_slice() {
        [one] => one.pid,
        _ => panic!("expected one process {prefix:?} started by {parent}: {:#?}", sb.ready()),
    }
}

/// Waits until each of `pids` has `adopter` as its parent (its parent exited).
fn wait_adopted(pids: &[i32], adopter: i32) {
    for &p in pids {
        assert!(
            wait_until(READY, || ppid_of(p) == Some(adopter)),
            "{p} was not adopted by {adopter}: parent {:?}",
            ppid_of(p)
        );
    }
}

/// argv of a process joined by spaces, or `None` if it is gone.
fn cmdline(pid: i32) -> Option<String> {
    let b = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> =
        b.split(|&c| c == 0).filter(|w| !w.is_empty()).map(|w| String::from_utf8_lossy(w).into_owned()).collect();
    Some(words.join(" "))
}

/// Start time of a process (clock ticks since boot, `/proc/PID/stat` field 22).
fn start_time(pid: i32) -> u64 {
    let buf = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_else(|e| panic!("stat of {pid}: {e}"));
    let rest = &buf[buf.rfind(')').expect("a stat line") + 1..];
    // Fields after comm start at 3 (state): field 22 is the 20th of them.
    rest.split_ascii_whitespace().nth(19).and_then(|f| f.parse().ok()).unwrap_or_else(|| panic!("stat: {buf}"))
}

// ------------------------------------------------------------------ 1. a real tmux server

/// Ends a tmux server on its private socket (never the default server).
struct TmuxServer {
    tmux: PathBuf,
    socket: PathBuf,
}

impl TmuxServer {
    fn cmd(&self, args: &[&str]) -> Output {
        Command::new(&self.tmux)
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .output()
            .expect("running tmux")
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        if self.socket.exists() {
            let _ = self.cmd(&["kill-server"]);
        }
    }
}

#[test]
fn tmux_session_named_like_a_server_survives_beside_real_orphans() {
    const TEST: &str = "tmux_session_named_like_a_server_survives_beside_real_orphans";
    let Some(tmux) = find_tool("tmux") else {
        return skip(TEST, "tmux is not installed");
    };
    let dir = TempDir::new("tmux");
    let socket = dir.path().join("sock");
    let mcp_dir = dir.path().join("mcp");
    std::fs::create_dir(&mcp_dir).expect("creating the mcp directory");
    let (sock_s, mcp_s) = (s(socket.display()), s(mcp_dir.display()));
    // The first tmux client runs below the sandbox: the server it forks
    // daemonizes (its parent exits) and is adopted by the scope process, like
    // a real tmux server is adopted by PID 1 or `systemd --user`. The shell
    // starts it on SIGUSR1 (a real program through `exe`, no ready line).
    let first_client =
        Spec::new(&["tmux", "-S", &sock_s, "new-session", "-d", "-s", "foo-mcp", "-c", &mcp_s, "sleep 600"])
            .exe(&tmux)
            .stdio_null();
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT))),
        Spec::new(&["bash", "-l"]).on_usr1(first_client),
    ]);
    let server_guard = TmuxServer { tmux: tmux.clone(), socket: socket.clone() };
    let scope = sb.scope_pid();
    let (host, npm, node) = (sb.pid_of("claude"), sb.pid_of("npm exec"), sb.pid_of("node "));
    sb.signal(sb.pid_of("bash -l"), Signal::USR1);

    // The tmux server: below the scope, adopted by it, its argv the first
    // client's.
    let mut server = None;
    let found = wait_until(READY, || {
        server = descendants_of(scope)
            .into_iter()
            .find(|&p| ppid_of(p) == Some(scope) && alive(p) && cmdline(p).is_some_and(|c| c.starts_with("tmux ")));
        server.is_some() && server_guard.cmd(&["has-session", "-t", "foo-mcp"]).status.success()
    });
    assert!(
        found,
        "no tmux server adopted by the scope {scope}: below it {:?}\nsandbox stderr:\n{}",
        descendants_of(scope).iter().map(|&p| (p, ppid_of(p), cmdline(p))).collect::<Vec<_>>(),
        std::fs::read_to_string(sb.dir().path().join("stderr.log")).unwrap_or_default()
    );
    let server = server.unwrap();
    let server_cmd = cmdline(server).unwrap_or_default();
    assert!(server_cmd.contains("foo-mcp") && server_cmd.contains(&mcp_s), "tmux server argv: {server_cmd:?}");
    // A second session, from a client outside the sandbox: its pane is the
    // server's child, so inside.
    let out = server_guard.cmd(&["new-session", "-d", "-s", "mcp-server-dev", "sleep 600"]);
    assert!(out.status.success(), "tmux new-session: {}", text(&out.stderr));
    let mut panes = Vec::new();
    let ready = wait_until(READY, || {
        panes = descendants_of(server).into_iter().filter(|&p| alive(p)).collect();
        panes.iter().filter(|&&p| cmdline(p).is_some_and(|c| c.contains("sleep 600"))).count() >= 2
    });
    assert!(ready, "the two panes' sleep did not start below the tmux server {server}: {panes:?}");
    let listed = text(&server_guard.cmd(&["list-sessions", "-F", "#{session_name}"]).stdout);
    assert!(listed.contains("foo-mcp") && listed.contains("mcp-server-dev"), "{listed}");

    // The real orphan beside it.
    sb.kill_host(host);
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let t = tree_rooted_at(&v, npm);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    assert_eq!(member(t, node)["evidence"]["fd0"], "pipe", "{t:#}");
    // tmux is a bystander by its program: in no tree at all.
    assert!(trees_with(&v, server).is_empty(), "the tmux server is in a tree: {v:#}");
    for &p in &panes {
        assert_not_targeted(&v, p, "a tmux pane");
    }
    // The second line of defence: a pattern that does call it a server (on
    // the whole command line) still leaves it kept, by its /dev/null stdio.
    let loose = sb.dir().write(
        "loose.toml",
        std::fs::read_to_string(&cfg).unwrap()
            + "[patterns]\nbystanders = []\nservers = ['cmdline:foo-mcp', '(^|/)mcp$', '[-_]mcp$']\n",
    );
    let lv = scan(&sb, &loose);
    let lt = tree_rooted_at(&lv, server);
    assert_eq!(lt["verdict"], "detached", "{lt:#}");
    assert_eq!(member(lt, server)["role"], "server", "{lt:#}");
    assert_not_targeted(&lv, server, "the tmux server (loose patterns)");

    let (v, out) = once(Some(scope), &cfg);
    assert_eq!(v["mode"], "enforce", "{v:#}");
    assert_eq!(outcome_roots(&v), vec![i64::from(npm)], "only the orphan is reaped: {v:#}\n{}", text(&out.stderr));
    let o = outcome_for(&v, npm);
    assert_eq!(o["verdict"], "orphan", "{o:#}");
    assert_eq!(o["members"], 2, "{o:#}");
    assert_eq!(o["gone"], 2, "{o:#}");
    assert_gone(&[npm, node]);
    assert_alive(&[server], "the tmux server");
    assert_alive(&panes, "a tmux pane");
    let listed = text(&server_guard.cmd(&["list-sessions", "-F", "#{session_name}"]).stdout);
    assert!(listed.contains("foo-mcp") && listed.contains("mcp-server-dev"), "sessions after the run: {listed}");
    assert!(alive(scope), "the scope process must survive");

    let out = server_guard.cmd(&["kill-server"]);
    assert!(out.status.success(), "tmux kill-server: {}", text(&out.stderr));
    assert!(wait_until(READY, || !alive(server)), "the tmux server outlived kill-server");
}

// ------------------------------------------------------------------ 2. /dev/null stdio

#[test]
fn named_like_a_server_with_dev_null_stdio_is_detached_and_survives() {
    let sb = Sandbox::new(vec![
        Spec::new(SHELL).exit_after_spawn().child(Spec::new(TSC_WATCH).stdio_null()),
        Spec::new(SHELL).exit_after_spawn().child(Spec::new(GITHUB_STDIO).stdio_null()),
        Spec::new(CLAUDE).child(Spec::new(GITHUB_STDIO)),
    ]);
    let scope = sb.scope_pid();
    let host = sb.pid_of("claude");
    let tsc = sb.pid_of(&TSC_WATCH.join(" "));
    let piped = pid_under(&sb, host, GITHUB_STDIO[0]);
    let detached: Vec<i32> =
        ready_with(&sb, GITHUB_STDIO[0]).into_iter().map(|r| r.pid).filter(|&p| p != piped).collect();
    let [detached] = detached[..] else { panic!("expected one detached server: {detached:?}") };
    wait_adopted(&[tsc, detached], scope);
    sb.kill_host(host);
    wait_adopted(&[piped], scope);

    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let t = tree_rooted_at(&v, detached);
    assert_eq!(t["verdict"], "detached", "{t:#}");
    assert_eq!(t["reap"], false, "{t:#}");
    assert!(t["reason"].as_str().unwrap().contains("/dev/null"), "{t:#}");
    let m = member(t, detached);
    assert_eq!(m["role"], "server", "{m:#}");
    assert_eq!(m["program"], "github-mcp-server", "{m:#}");
    assert_eq!(m["evidence"]["fd0"], "/dev/null", "{m:#}");
    assert_eq!(m["evidence"]["fd1"], "/dev/null", "{m:#}");
    let t = tree_rooted_at(&v, piped);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    assert_eq!(t["reap"], true, "{t:#}");
    assert_eq!(member(t, piped)["evidence"]["fd0"], "pipe", "{t:#}");
    assert!(trees_with(&v, tsc).is_empty(), "tsc --watch (in a directory named mcp-server-…) is no server: {v:#}");

    let (v, _) = once(Some(scope), &cfg);
    assert_eq!(outcome_roots(&v), vec![i64::from(piped)], "{v:#}");
    assert_eq!(outcome_for(&v, piped)["verdict"], "orphan");
    assert_eq!(kept_for(&v, detached)["verdict"], "detached", "{v:#}");
    assert_gone(&[piped]);
    assert_alive(&[detached, tsc, scope], "a detached bystander");
}

// ------------------------------------------------------------------ 3. service units

/// A cgroup directory of this test, emptied and removed on drop.
struct Cgroup {
    mount: PathBuf,
    dir: PathBuf,
    name: String,
}

impl Cgroup {
    fn create(mount: &Path, name: String) -> Cgroup {
        let dir = mount.join(&name);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("creating cgroup {}: {e}", dir.display()));
        Cgroup { mount: mount.to_path_buf(), dir, name }
    }

    fn add(&self, pid: i32) {
        let path = self.dir.join("cgroup.procs");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
        f.write_all(pid.to_string().as_bytes()).unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", path.display()));
    }

    fn procs(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Our processes are killed by now (the sandbox is dropped first);
        // anything still here goes back to the root cgroup it came from.
        let ok = wait_until(Duration::from_secs(60), || {
            for p in self.procs() {
                let _ = std::fs::write(self.mount.join("cgroup.procs"), p.to_string());
            }
            std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists()
        });
        if !ok {
            eprintln!("could not remove cgroup {} (still holds {:?})", self.dir.display(), self.procs());
        }
    }
}

/// (cgroup2?, mount point) of the hierarchies that name units: cgroup2 and
/// v1 `name=systemd`, from `/proc/self/mountinfo`; read-write ones only.
fn unit_hierarchies() -> Vec<(bool, PathBuf)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out: Vec<(bool, PathBuf)> = Vec::new();
    for l in info.lines() {
        let Some((pre, post)) = l.split_once(" - ") else { continue };
        let f: Vec<&str> = pre.split(' ').collect();
        let g: Vec<&str> = post.split(' ').collect();
        if f.len() < 6 || g.len() < 3 || f[3] != "/" || !f[5].split(',').any(|o| o == "rw") {
            continue;
        }
        let v2 = g[0] == "cgroup2";
        let v1 = g[0] == "cgroup" && g[2].split(',').any(|o| o == "name=systemd");
        if (v2 || v1) && !out.iter().any(|(k, _)| *k == v2) {
            out.push((v2, PathBuf::from(f[4])));
        }
    }
    out
}

#[test]
fn main_process_of_a_service_cgroup_is_protected() {
    const TEST: &str = "main_process_of_a_service_cgroup_is_protected";
    if !is_root() {
        return skip(TEST, "needs root (to create cgroups and move processes into them)");
    }
    // Writable: try to create (and remove) a probe cgroup.
    let usable: Vec<(bool, PathBuf)> = unit_hierarchies()
        .into_iter()
        .filter(|(_, m)| {
            let probe = m.join(format!("mcp-reaper-test-{}-probe", std::process::id()));
            std::fs::create_dir(&probe).is_ok() && std::fs::remove_dir(&probe).is_ok()
        })
        .collect();
    if usable.is_empty() {
        return skip(TEST, "no writable cgroup2 or v1 name=systemd hierarchy in /proc/self/mountinfo");
    }
    for (n, (v2, mount)) in usable.iter().enumerate() {
        let kind = if *v2 { "cgroup2" } else { "cgroup v1 name=systemd" };
        eprintln!("{TEST}: {kind} at {}", mount.display());
        let me = std::process::id();
        // Declared before the sandbox: removed after its processes are gone.
        let main_cg = Cgroup::create(mount, format!("mcp-reaper-test-{me}-{n}.service"));
        let crashed_cg = Cgroup::create(mount, format!("mcp-reaper-test-{me}-{n}b.service"));
        let mut sb = Sandbox::new(vec![
            Spec::new(SHELL).exit_after_spawn().child(Spec::new(&["mcp-proxy", "--stdio"])),
            Spec::new(SHELL).exit_after_spawn().child(Spec::new(&["cron", "-f"])),
            Spec::new(CLAUDE).on_usr1(Spec::new(&["mcp-server-fetch"])),
        ]);
        let scope = sb.scope_pid();
        let (proxy, cron, host) = (sb.pid_of("mcp-proxy"), sb.pid_of("cron"), sb.pid_of("claude"));
        wait_adopted(&[proxy, cron], scope);
        // The leftover starts in a later clock tick than cron (the service's
        // main process), so cron is the older of the two.
        std::thread::sleep(Duration::from_millis(50));
        sb.signal(host, Signal::USR1);
        sb.wait_ready(sb.ready().len() + 1);
        let fetch = sb.pid_of("mcp-server-fetch");
        assert!(start_time(cron) < start_time(fetch), "cron must have started before the leftover server");
        sb.kill_host(host);
        wait_adopted(&[fetch], scope);

        main_cg.add(proxy);
        crashed_cg.add(cron);
        crashed_cg.add(fetch);
        for (p, cg) in [(proxy, &main_cg), (cron, &crashed_cg), (fetch, &crashed_cg)] {
            let line = std::fs::read_to_string(format!("/proc/{p}/cgroup")).unwrap_or_default();
            assert!(line.contains(&format!("/{}\n", cg.name)), "{p} is not in {}: {line}", cg.name);
        }

        let cfg = sb.dir().config(0, "");
        let v = scan(&sb, &cfg);
        let t = tree_rooted_at(&v, proxy);
        assert_eq!(t["verdict"], "protected", "{kind}: {t:#}");
        let reason = t["reason"].as_str().unwrap();
        assert!(reason.contains("runs as systemd unit") && reason.contains(&main_cg.name), "{kind}: {reason}");
        let m = member(t, proxy);
        assert_eq!(m["evidence"]["unit"], main_cg.name.as_str(), "{kind}: {m:#}");
        assert_eq!(m["evidence"]["unit_main"], true, "{kind}: {m:#}");
        assert_eq!(m["evidence"]["fd0"], "pipe", "{kind}: only the unit keeps it: {m:#}");
        let t = tree_rooted_at(&v, fetch);
        assert_eq!(t["verdict"], "orphan", "{kind}: the leftover in a service is no main process: {t:#}");
        let m = member(t, fetch);
        assert_eq!(m["evidence"]["unit"], crashed_cg.name.as_str(), "{kind}: {m:#}");
        assert_eq!(m["evidence"]["unit_main"], false, "{kind}: {m:#}");
        assert!(trees_with(&v, cron).is_empty(), "{kind}: cron is no server: {v:#}");

        let (v, _) = once(Some(scope), &cfg);
        assert_eq!(outcome_roots(&v), vec![i64::from(fetch)], "{kind}: {v:#}");
        assert_eq!(kept_for(&v, proxy)["verdict"], "protected", "{kind}: {v:#}");
        assert_gone(&[fetch]);
        assert_alive(&[proxy, cron, scope], kind);
        drop(sb);
        for cg in [&main_cg, &crashed_cg] {
            assert!(wait_until(READY, || cg.procs().is_empty()), "{} still holds {:?}", cg.name, cg.procs());
        }
    }
}

// ------------------------------------------------------------------ 4. systemd --user

#[test]
fn adoption_by_a_user_manager_named_systemd_user() {
    let manager = &["/usr/lib/systemd/systemd", "--user"];
    let sb = Sandbox::new(vec![
        Spec::new(manager)
            .subreaper()
            .child(Spec::new(CLAUDE).child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT))))
            .child(Spec::new(SHELL).exit_after_spawn().child(Spec::new(FAKE_TMUX)))
            .child(Spec::new(SHELL).exit_after_spawn().child(Spec::new(GITHUB_STDIO).stdio_null())),
    ]);
    let scope = sb.scope_pid();
    let user_manager = sb.pid_of("/usr/lib/systemd/systemd");
    let (host, npm, node) = (sb.pid_of("claude"), sb.pid_of("npm exec"), sb.pid_of("node "));
    let (tmux, github) = (sb.pid_of("tmux"), sb.pid_of(GITHUB_STDIO[0]));
    wait_adopted(&[tmux, github], user_manager);
    sb.signal(host, Signal::KILL);
    assert!(wait_until(READY, || !alive(host)), "the host survived SIGKILL");
    wait_adopted(&[npm], user_manager);

    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let t = tree_rooted_at(&v, npm);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    assert!(t["reason"].as_str().unwrap().contains("systemd --user"), "{t:#}");
    assert_eq!(t["owner"]["pid"], user_manager, "{t:#}");
    assert_eq!(tree_rooted_at(&v, github)["verdict"], "detached", "{v:#}");
    assert!(trees_with(&v, tmux).is_empty(), "a tmux named foo-mcp is no server: {v:#}");
    assert!(trees_with(&v, user_manager).is_empty(), "the user manager is in a tree: {v:#}");

    let (v, out) = once(Some(scope), &cfg);
    assert_eq!(outcome_roots(&v), vec![i64::from(npm)], "{v:#}");
    let o = outcome_for(&v, npm);
    assert_eq!(o["verdict"], "orphan", "{o:#}");
    assert!(o["reason"].as_str().unwrap().contains("systemd --user"), "{o:#}");
    assert!(text(&out.stderr).contains(&format!("reaped orphan tree root={npm}")), "{}", text(&out.stderr));
    assert_gone(&[npm, node]);
    assert_alive(&[user_manager, tmux, github, scope], "a bystander of the user manager");
}

// ------------------------------------------------------------------ 5. PID 1 of a namespace

/// Runs in a fresh PID namespace as its PID 1: starts the fake processes
/// (each through a parent that exits, so PID 1 adopts them), waits until all
/// are ready, runs the reaper unscoped, then prints each fake process's state.
const NS_DRIVER: &str = r#"
FAKEPROC="$SPEC_ORPHAN" "$FP" </dev/null >/dev/null 2>>"$LOG" & a=$!
FAKEPROC="$SPEC_TMUX" "$FP" </dev/null >/dev/null 2>>"$LOG" & b=$!
FAKEPROC="$SPEC_NULL" "$FP" </dev/null >/dev/null 2>>"$LOG" & c=$!
# The parents exit right after spawning: their children are PID 1's now.
wait $a $b $c
n=0
while [ "$(wc -l < "$FAKEPROC_READY")" -lt "$TOTAL" ]; do
  n=$((n + 1))
  if [ $n -gt 1000 ]; then echo "not ready: $(cat "$FAKEPROC_READY")" >&2; exit 3; fi
  sleep 0.01
done
echo "pid1 $$"
# Past the clock tick the last one started in: a process read in its own
# start tick has no settled identity yet, and its tree would be "young".
sleep 0.02
"$REAPERD" --once --json --log-target stderr --config "$CFG" > "$OUT" || echo "reaperd exit $?"
while read -r pid ppid rest; do
  st=$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)
  echo "state $pid ${st:-gone} $rest"
done < "$FAKEPROC_READY"
"#;

#[test]
fn adoption_by_pid_1_in_a_pid_namespace() {
    const TEST: &str = "adoption_by_pid_1_in_a_pid_namespace";
    let Some(unshare) = pid_namespace_tool(TEST, "a PID namespace of its own") else { return };
    let work = TempDir::new("pidns");
    let orphan = Spec::new(SHELL).exit_after_spawn().child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT)));
    let tmux = Spec::new(SHELL).exit_after_spawn().child(Spec::new(FAKE_TMUX));
    let null = Spec::new(SHELL).exit_after_spawn().child(Spec::new(GITHUB_STDIO).stdio_null());
    let total = orphan.count() + tmux.count() + null.count();
    let script = work.write("ns-driver.sh", NS_DRIVER);
    let ready = work.path().join("ready");
    let out_json = work.path().join("once.json");
    // Runs as root (uid 0): TempDir::config sets min_uid = 0.
    let cfg = work.config(0, "");
    let out = Command::new(&unshare)
        .args(["--pid", "--fork", "--mount-proc", "sh"])
        .arg(&script)
        .env("FP", common::fakeproc_path())
        .env("REAPERD", env!("CARGO_BIN_EXE_mcp-reaperd"))
        .env("CFG", &cfg)
        .env("OUT", &out_json)
        .env("LOG", work.path().join("fakeproc.log"))
        .env("FAKEPROC_READY", &ready)
        .env("TOTAL", total.to_string())
        .env("SPEC_ORPHAN", orphan.to_json().to_string())
        .env("SPEC_TMUX", tmux.to_json().to_string())
        .env("SPEC_NULL", null.to_json().to_string())
        .stdin(Stdio::null())
        .output()
        .expect("running unshare");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let fplog = std::fs::read_to_string(work.path().join("fakeproc.log")).unwrap_or_default();
    assert!(out.status.success(), "the namespace driver failed: {:?}\n{stdout}\n{stderr}\n{fplog}", out.status);
    assert!(stdout.contains("pid1 1\n"), "the driver is not PID 1 of its namespace: {stdout}");
    assert!(!stdout.contains("reaperd exit"), "{stdout}\n{stderr}");
    let json = std::fs::read_to_string(&out_json).unwrap_or_default();
    let v: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json:?}\n{stdout}\n{stderr}"));

    // (pid, state, argv) of every fake process, as the namespace saw them.
    let states: Vec<(i32, String, String)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("state "))
        .map(|l| {
            let mut f = l.splitn(3, ' ');
            let pid = f.next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("bad line {l:?}"));
            let st = f.next().unwrap_or("").to_string();
            (pid, st, f.next().unwrap_or("").to_string())
        })
        .collect();
    assert_eq!(states.len(), total, "{stdout}");
    let find = |prefix: &str| -> (i32, &str) {
        let hits: Vec<_> = states.iter().filter(|(_, _, cmd)| cmd.starts_with(prefix)).collect();
        match hits.as_slice() {
            [(pid, st, _)] => (*pid, st.as_str()),
            _ => panic!("expected one {prefix:?}: {states:?}"),
        }
    };
    let (npm, npm_st) = find("npm exec");
    let (node, node_st) = find("node ");
    let (ftmux, tmux_st) = find("tmux");
    let (github, github_st) = find(GITHUB_STDIO[0]);
    let ctx = format!("{v:#}\n{stdout}\n{stderr}");

    assert_eq!(outcome_roots(&v), vec![i64::from(npm)], "only the orphan is reaped: {ctx}");
    let o = outcome_for(&v, npm);
    assert_eq!(o["verdict"], "orphan", "{ctx}");
    assert!(o["reason"].as_str().unwrap().contains("adopted by PID 1"), "{ctx}");
    assert_eq!(o["members"], 2, "{ctx}");
    assert_eq!(o["gone"], 2, "{ctx}");
    assert_eq!(kept_for(&v, github)["verdict"], "detached", "{ctx}");
    assert!(arr(&v, "kept").iter().all(|k| k["root"] != ftmux), "a fake tmux is no server tree: {ctx}");
    // Killed members are zombies of the driver (PID 1) or gone.
    for (pid, st) in [(npm, npm_st), (node, node_st)] {
        assert!(matches!(st, "gone" | "Z" | "X"), "orphan member {pid} still runs ({st}): {ctx}");
    }
    for (pid, st) in [(ftmux, tmux_st), (github, github_st)] {
        assert!(matches!(st, "S" | "R" | "D"), "bystander {pid} was ended ({st}): {ctx}");
    }
}
