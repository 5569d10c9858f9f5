//! The long-running `mcp-reaperd` against real process trees: event-driven
//! reaping, config reload (control socket, inotify, SIGHUP), the control
//! socket's permission rules and its defences against hostile clients, one
//! instance per socket, and the journald fields of `--once`.
//!
//! Safety: every daemon is `--scope`d to its test's sandbox (a child
//! subreaper holding all the test's processes) and has its own temporary
//! config, socket and state file. A [`common::Daemon`] stops it (SIGTERM through
//! its `Child` handle, then SIGKILL after 5 s) when the test ends, panics
//! included. Signals only ever go to sandbox processes, to daemons these
//! tests started, and to a journald the journald test started itself.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{
    Daemon, Launch, Sandbox, Spec, TempDir, alive, find_tool, is_root, pid_namespace_tool, s, skip, text, wait_until,
    world_executable,
};
use rustix::process::Signal;
use serde_json::Value;

const CLAUDE: &[&str] = &["claude", "--resume"];
const NPM_PLAYWRIGHT: &[&str] = &["npm", "exec", "@playwright/mcp@latest"];
const NODE_PLAYWRIGHT: &[&str] = &["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"];
const BYSTANDER: &[&str] = &["sleep", "600"];

/// `claude → npm exec @playwright/mcp → node playwright-mcp`, and a bystander.
fn playwright_sandbox() -> Sandbox {
    Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT))),
        Spec::new(BYSTANDER),
    ])
}

fn send_signal(pid: i32, sig: Signal) {
    let p = rustix::process::Pid::from_raw(pid).expect("a positive pid");
    let _ = rustix::process::kill_process(p, sig);
}

/// Waits for `child` to exit, `timeout` at most.
fn wait_child(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + timeout;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ------------------------------------------------------------------ the daemon

/// The daemon's first cycle is done and it judged a tree rooted at `root`.
fn sees_tree(st: &Value, root: i32, verdict: &str) -> bool {
    st["trees"].as_array().is_some_and(|t| t.iter().any(|t| t["root"] == root && t["verdict"] == verdict))
}

/// `GLIBC_TUNABLES` as `/proc/PID/environ` holds it.
fn tunables_of(pid: i32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0)
        .find_map(|v| v.strip_prefix(b"GLIBC_TUNABLES=").map(|t| String::from_utf8_lossy(t).into_owned()))
}

/// Issue 37: glibc's per-thread cache of freed blocks is never trimmed, so
/// the daemon execs itself once without it (same pid, same arguments); an
/// administrator's own `GLIBC_TUNABLES` is left as it is.
#[test]
fn the_daemon_runs_without_glibcs_thread_cache_unless_told_otherwise() {
    if !cfg!(target_env = "gnu") {
        skip("the thread-cache exec", "glibc only");
        return;
    }
    let sb = playwright_sandbox();
    let npm = sb.pid_of("npm exec");
    let cfg = sb.dir().config(1, "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    assert_eq!(tunables_of(d.pid()).as_deref(), Some("glibc.malloc.tcache_count=0"), "{}", d.log_text());
    // The exec'd daemon is the one that answers, judging as before.
    d.status_until(Duration::from_secs(60), "the live tree is seen", |st| sees_tree(st, npm, "live"));
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", d.pid())).unwrap();
    assert!(cmdline.windows(7).any(|w| w == b"--scope"), "its arguments are kept");
    drop(d);
    let other = TempDir::new("daemon-tunables");
    let own = Launch { env: vec![("GLIBC_TUNABLES", s("glibc.malloc.check=0"))], ..Launch::default() };
    let d = Daemon::start_in(sb.scope_pid(), &cfg, other.path(), &own);
    assert_eq!(tunables_of(d.pid()).as_deref(), Some("glibc.malloc.check=0"));
    drop(d);
    // A config on stdin (`--config /dev/stdin`) is read once, by the image that runs.
    let piped = TempDir::new("daemon-tunables-stdin");
    let how = Launch {
        args: vec![s("--dry-run")],
        stdin: Some(piped.config_text(1, "interval_secs = 7", "")),
        ..Launch::default()
    };
    let d = Daemon::start_in(sb.scope_pid(), Path::new("/dev/stdin"), piped.path(), &how);
    let started = wait_until(Duration::from_secs(60), || d.log_text().contains("started:"));
    let text = d.log_text();
    assert!(started && text.contains("interval=7s"), "the piped config was not the one in effect:\n{text}");
}

// ------------------------------------------------------------------ 1. reaping

#[test]
fn orphan_is_reaped_within_grace_plus_interval() {
    let sb = playwright_sandbox();
    let (host, npm, node, bystander) =
        (sb.pid_of("claude"), sb.pid_of("npm exec"), sb.pid_of("node "), sb.pid_of("sleep"));
    let cfg = sb.dir().config_with(1, "interval_secs = 2", "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    d.status_until(Duration::from_secs(60), "the live tree is seen", |st| sees_tree(st, npm, "live"));

    let t0 = Instant::now();
    sb.kill_host(host);
    let gone = wait_until(Duration::from_secs(60), || !alive(npm) && !alive(node));
    let took = t0.elapsed();
    assert!(gone, "the orphan survived 30 s:\n{}", d.log_text());
    eprintln!("grace 1 s, interval 2 s: orphan gone {} ms after its host was killed", took.as_millis());
    // Grace 1 s + interval 2 s, and a busy machine's tolerance (10 s).
    assert!(took < Duration::from_secs(3 + 10), "took {took:?} (grace 1 s + interval 2 s)\n{}", d.log_text());

    let st = d.status_until(Duration::from_secs(60), "the reap is counted", |st| {
        st["totals"]["trees_reaped"].as_u64().unwrap_or(0) >= 1
    });
    let recent = st["recent"].as_array().unwrap();
    let ev = recent.iter().find(|e| e["root"] == npm).unwrap_or_else(|| panic!("no recent event for {npm}: {st:#}"));
    assert_eq!(ev["dry_run"], false, "{ev:#}");
    assert_eq!(ev["verdict"], "orphan", "{ev:#}");
    assert_eq!(ev["members"], 2, "{ev:#}");
    assert_eq!(ev["signals"], serde_json::json!(["TERM"]), "{ev:#}");
    assert!(st["totals"]["processes_reaped"].as_u64().unwrap() >= 2, "{st:#}");
    sb.assert_alive(&[bystander, sb.scope_pid()]);
}

/// Kills the host of a live tree under a daemon with `grace_secs = 0` and a
/// long interval; how long until every member is gone.
fn event_latency(extra: &[&str], want_mode: &str) -> Duration {
    let sb = playwright_sandbox();
    let (host, npm, node, bystander) =
        (sb.pid_of("claude"), sb.pid_of("npm exec"), sb.pid_of("node "), sb.pid_of("sleep"));
    // A long interval: only the host's exit event can explain a quick reap.
    let cfg = sb.dir().config_with(0, "interval_secs = 60", "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(extra));
    let st = d.status_until(Duration::from_secs(60), "the live tree is seen", |st| sees_tree(st, npm, "live"));
    assert_eq!(st["event_mode"], want_mode, "{st:#}");

    // SIGKILL to the host, then a 1 ms poll (finer than `kill_host`'s).
    let t0 = Instant::now();
    sb.signal(host, Signal::KILL);
    let mut gone = false;
    while t0.elapsed() < Duration::from_secs(30) {
        if !alive(npm) && !alive(node) {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let latency = t0.elapsed();
    assert!(gone, "the orphan survived 30 s (interval 60 s):\n{}", d.log_text());
    eprintln!("event-driven latency ({want_mode}): host killed → every member gone in {} ms", latency.as_millis());
    sb.assert_alive(&[bystander, sb.scope_pid()]);
    latency
}

#[test]
fn host_exit_triggers_a_reap_at_once_without_grace() {
    // As root the daemon gets the kernel's process events (netlink).
    let want = if is_root() { "netlink" } else { "pidfd" };
    let latency = event_latency(&[], want);
    // Well before the 60 s interval: the event, not a scan (the speed
    // itself is the benches' business, not a timed assertion's).
    assert!(latency < Duration::from_secs(30), "{latency:?} from the host's exit to the orphan's end");
}

#[test]
fn host_exit_triggers_a_reap_at_once_with_pidfd_watches() {
    let latency = event_latency(&["--no-events"], "pidfd");
    assert!(latency < Duration::from_secs(30), "{latency:?} from the host's exit to the orphan's end");
}

/// Pidfd mode, a host born after the last scan that dies 0.5 s later: with a
/// 30 s interval only the look at new pids (the namespace's last pid) can
/// explain a prompt reap.
#[test]
fn host_born_after_the_last_scan_is_noticed_without_process_events() {
    let host = Spec::new(CLAUDE).child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT)));
    let mut sb = Sandbox::new(vec![Spec::new(&["-bash"]).on_usr1(host), Spec::new(BYSTANDER)]);
    let (shell, bystander) = (sb.pid_of("-bash"), sb.pid_of("sleep"));
    let cfg = sb.dir().config_with(0, "interval_secs = 30", "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(&["--no-events"]));
    let st = d.status_until(Duration::from_secs(60), "the first scan", |st| st["scans"]["count"].as_u64() >= Some(1));
    assert_eq!(st["event_mode"], "pidfd", "{st:#}");
    let total = sb.ready().len() + 3;
    sb.signal(shell, Signal::USR1);
    sb.wait_ready(total);
    let (host, npm, node) = (sb.pid_of("claude"), sb.pid_of("npm exec"), sb.pid_of("node "));
    // Its birth was noticed (a look at the last pid, then a scan), long
    // before the 30 s interval: waited for, not slept on.
    d.status_until(Duration::from_secs(60), "the new host's tree is scanned", |st| sees_tree(st, npm, "live"));
    let t0 = Instant::now();
    sb.signal(host, Signal::KILL);
    let gone = wait_until(Duration::from_secs(20), || !alive(npm) && !alive(node));
    let latency = t0.elapsed();
    assert!(gone, "the orphan of a host born after the last scan survived 20 s (interval 30 s):\n{}", d.log_text());
    eprintln!(
        "pidfd mode, host born after the last periodic scan: every member gone {} ms after its death",
        latency.as_millis()
    );
    sb.assert_alive(&[bystander, shell, sb.scope_pid()]);
}

// ------------------------------------------------------------------ 2. reload errors

#[test]
fn invalid_config_on_reload_keeps_the_old_one() {
    let sb = playwright_sandbox();
    let cfg = sb.dir().config(60, "");
    let mut d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    assert_eq!(d.status()["grace_secs"], 60);

    std::fs::write(&cfg, "[reaper]\ngrace_secs = 5\nmin_uid = 0\nbogus = 1\n").unwrap();
    let out = d.ctl(&["reload"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(78), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(stdout.contains(&format!("{}:4:1: ", cfg.display())), "file:line:col of the problem: {stdout}");
    assert!(stdout.contains("unknown field `bogus`"), "{stdout}");
    assert!(stdout.contains("keeps its previous config"), "{stdout}");

    let st = d.status();
    assert_eq!(st["last_reload"]["ok"], false, "{st:#}");
    assert_eq!(st["grace_secs"], 60, "the old config stays in force: {st:#}");
    assert!(d.running(), "the daemon must keep running:\n{}", d.log_text());
    assert!(d.log_text().contains("keeping the previous config"), "{}", d.log_text());
}

#[test]
fn invalid_config_written_to_disk_is_noticed_and_rejected() {
    let sb = playwright_sandbox();
    let cfg = sb.dir().config(60, "");
    let mut d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());

    // Only written: the daemon notices through inotify.
    std::fs::write(&cfg, "[patterns]\nservers = ['(unclosed']\n").unwrap();
    let st = d.status_until(Duration::from_secs(60), "the bad file is noticed", |st| st["last_reload"]["ok"] == false);
    let msgs = st["last_reload"]["messages"].to_string();
    assert!(msgs.contains(&format!("{}:2:12: patterns.servers[0]: invalid regex", cfg.display())), "{msgs}");
    assert_eq!(st["grace_secs"], 60, "{st:#}");
    assert!(d.running());

    // A good file again: taken.
    std::fs::write(&cfg, sb.dir().config_text(7, "", "")).unwrap();
    let st = d.status_until(Duration::from_secs(60), "the fixed file is loaded", |st| st["grace_secs"] == 7);
    assert_eq!(st["last_reload"]["ok"], true, "{st:#}");
}

// ------------------------------------------------------------------ 3. SIGHUP

#[test]
fn sighup_reloads_the_config() {
    let sb = playwright_sandbox();
    let cfg = sb.dir().config(60, "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    assert_eq!(d.status()["grace_secs"], 60);

    // Rewritten in place and held open: inotify tells the daemon only once the
    // file is closed (CLOSE_WRITE), so until then only the SIGHUP can explain
    // a reload. (A symlinked config no longer hides edits: see tests/configs.rs.)
    let mut open = std::fs::File::create(&cfg).unwrap();
    open.write_all(sb.dir().config_text(42, "", "").as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let st = d.status();
    assert_eq!(st["grace_secs"], 60, "reloaded without a SIGHUP: the test cannot tell the two apart: {st:#}");

    send_signal(d.pid(), Signal::HUP);
    let st = d.status_until(Duration::from_secs(60), "SIGHUP reloads", |st| st["grace_secs"] == 42);
    assert_eq!(st["last_reload"]["ok"], true, "{st:#}");
    let msgs = st["last_reload"]["messages"].to_string();
    assert!(msgs.contains("grace_secs: 60 -> 42"), "{msgs}");
    drop(open);
}

// ------------------------------------------------------------------ 4. socket permissions

#[test]
fn unprivileged_client_sees_only_its_own_trees_and_may_not_act() {
    const TEST: &str = "unprivileged_client_sees_only_its_own_trees_and_may_not_act";
    if !is_root() {
        return skip(TEST, "needs root (to run a client as uid 65534)");
    }
    let Some(setpriv) = find_tool("setpriv") else {
        return skip(TEST, "setpriv (util-linux) is not installed");
    };
    if !world_executable(Path::new(env!("CARGO_BIN_EXE_reaperctl"))) {
        return skip(TEST, "reaperctl is not reachable by other users");
    }
    let sb = playwright_sandbox();
    let npm = sb.pid_of("npm exec");
    let cfg = sb.dir().config(60, "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    // Root sees root's live tree.
    let st = d.status_until(Duration::from_secs(60), "root sees the live tree", |st| sees_tree(st, npm, "live"));
    assert_eq!(st["filtered_for_uid"], Value::Null, "{st:#}");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&d.socket).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o666, "the socket is connectable by anyone");
    let dir_mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(sb.dir().path()).unwrap().permissions());
    assert_eq!(dir_mode & 0o001, 0o001, "the socket's directory must be traversable by others");

    let as_nobody = |args: &[&str]| -> Output {
        Command::new(&setpriv)
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups", env!("CARGO_BIN_EXE_reaperctl")])
            .args(args)
            .arg("--socket")
            .arg(&d.socket)
            .stdin(Stdio::null())
            .output()
            .expect("running setpriv")
    };
    let out = as_nobody(&["status", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let st: Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(st["filtered_for_uid"], 65534, "{st:#}");
    assert_eq!(st["trees"].as_array().unwrap().len(), 0, "uid 65534 must not see root's trees: {st:#}");
    assert!(st["by_verdict"].as_object().unwrap().values().all(|n| n == 0), "{st:#}");
    // Nowhere in the reply, in JSON or in words: command lines hold secrets.
    let words = as_nobody(&["status"]);
    for shown in [text(&out.stdout), text(&words.stdout)] {
        assert!(!shown.contains("playwright") && !shown.contains("npm exec"), "root's command lines leaked: {shown}");
    }

    for cmd in [&["reload"][..], &["reap-now"][..], &["reap-now", "--dry-run"][..]] {
        let out = as_nobody(cmd);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{cmd:?} as uid 65534 must fail: {}", text(&out.stdout));
        assert!(err.contains("permission denied"), "{cmd:?}: {err}");
        // From the reply's `kind`, not its words.
        assert_eq!(out.status.code(), Some(77), "{cmd:?}: {err}");
    }
    assert!(d.log_text().contains("refused"), "{}", d.log_text());
    sb.assert_alive(&sb.all_pids());
}

// ------------------------------------------------------------------ 5. hostile clients

/// Reads one reply frame, or `None` if the daemon closed the connection.
fn read_reply(c: &mut UnixStream) -> Option<Value> {
    let mut hdr = [0u8; 4];
    c.read_exact(&mut hdr).ok()?;
    let n = u32::from_be_bytes(hdr) as usize;
    assert!(n < 1 << 20, "reply of {n} bytes");
    let mut body = vec![0u8; n];
    c.read_exact(&mut body).ok()?;
    Some(serde_json::from_slice(&body).expect("reply JSON"))
}

#[test]
fn garbage_and_oversized_requests_get_an_error_and_the_daemon_stays_up() {
    let sb = playwright_sandbox();
    let cfg = sb.dir().config(60, "");
    let mut d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());

    // Garbage, then close.
    let mut c = UnixStream::connect(&d.socket).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\x00\xff\xfe garbage").unwrap();
    drop(c);
    // Garbage, then wait for what comes back.
    let mut c = UnixStream::connect(&d.socket).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"\x00\x00\x00\x05{{{{{").unwrap();
    let r = read_reply(&mut c).expect("an error reply to a malformed body");
    assert_eq!(r["ok"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("malformed"), "{r}");

    // A header claiming 4 GiB: refused at once, nothing allocated or awaited.
    let mut c = UnixStream::connect(&d.socket).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let t = Instant::now();
    c.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let r = read_reply(&mut c);
    eprintln!("the 4 GiB header answered after {:?}", t.elapsed());
    // Refused for its size, not cut off by the 5 s request timeout while
    // awaiting a body ("no complete request"): what the reply says, not
    // how long a busy machine took to deliver it.
    if let Some(r) = r {
        assert_eq!(r["ok"], false, "{r}");
        assert!(r["error"].as_str().unwrap().contains("over the limit"), "{r}");
    }

    assert!(d.running(), "{}", d.log_text());
    assert_eq!(d.status()["grace_secs"], 60);
}

/// Sends one raw request body and reads the reply.
fn raw_request(socket: &Path, body: &[u8]) -> Value {
    let mut c = UnixStream::connect(socket).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let len = u32::try_from(body.len()).unwrap();
    c.write_all(&len.to_be_bytes()).unwrap();
    c.write_all(body).unwrap();
    read_reply(&mut c).expect("a reply")
}

/// Every failed reply names its `kind`, the one thing clients act on; a
/// successful one has none. reaperctl's exit status follows the kind.
#[test]
fn error_replies_carry_a_typed_kind() {
    let sb = playwright_sandbox();
    let cfg = sb.dir().config(60, "");
    let mut d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());

    let r = raw_request(&d.socket, b"{{{{{");
    assert_eq!((&r["ok"], &r["kind"]), (&Value::Bool(false), &Value::from("bad-request")), "{r}");
    let r = raw_request(&d.socket, br#"{"v":2,"cmd":"status"}"#);
    assert_eq!(r["kind"], "bad-request", "{r}");
    assert!(r["error"].as_str().unwrap().contains("unsupported protocol version 2"), "{r}");
    let r = raw_request(&d.socket, br#"{"v":1,"cmd":"status"}"#);
    assert_eq!(r["ok"], true, "{r}");
    assert!(r.get("kind").is_none() && r.get("error").is_none(), "{r}");
    // The verdicts on the wire are the words of the JSON everywhere.
    assert!(r["status"]["by_verdict"].as_object().unwrap().contains_key("orphan"), "{r}");

    // A reload that finds errors: kind `config`, the findings in `reload`.
    std::fs::write(&cfg, "[reaper]\ngrace_secs = 5\nmin_uid = 0\nbogus = 1\n").unwrap();
    let r = raw_request(&d.socket, br#"{"v":1,"cmd":"reload"}"#);
    assert_eq!((&r["ok"], &r["kind"]), (&Value::Bool(false), &Value::from("config")), "{r}");
    assert_eq!(r["reload"]["ok"], false, "{r}");
    assert_eq!(d.ctl(&["reload"]).status.code(), Some(78));

    assert!(d.running(), "{}", d.log_text());
    assert_eq!(d.status()["grace_secs"], 60, "the previous config is kept");
}

#[test]
fn silent_client_is_cut_off_after_about_five_seconds() {
    let sb = playwright_sandbox();
    let cfg = sb.dir().config(60, "");
    let mut d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    let mut c = UnixStream::connect(&d.socket).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let t = Instant::now();
    let mut buf = Vec::new();
    let r = c.read_to_end(&mut buf);
    let took = t.elapsed();
    let said = String::from_utf8_lossy(&buf);
    eprintln!("silent client cut off after {} ms ({r:?}): {said}", took.as_millis());
    assert!(r.is_ok(), "expected an answer, then the connection closed: {r:?}");
    assert!(said.contains("no complete request within 5s"), "expected an error reply, got {said:?}");
    assert!(
        // Never before the 5 s; later only by a busy machine's wake-up delay.
        (Duration::from_millis(4500)..Duration::from_millis(14_500)).contains(&took),
        "cut off after {took:?}, expected about 5 s"
    );
    assert!(d.running());
    assert!(d.ctl(&["status"]).status.success());
}

/// A well-behaved root client gets its answer while another user holds 100
/// silent connections: that user only gets its own share of slots (root
/// only: the flood runs as uid 65534 through setpriv and python3).
#[test]
fn status_answers_while_another_user_floods_the_socket() {
    // The system python: a per-user install (pyenv under /root) is not
    // reachable by the other user.
    let python = PathBuf::from("/usr/bin/python3");
    let Some(setpriv) = find_tool("setpriv").filter(|_| world_executable(&python)) else {
        return skip("status_answers_while_another_user_floods_the_socket", "needs setpriv and /usr/bin/python3");
    };
    if !is_root() {
        return skip("status_answers_while_another_user_floods_the_socket", "needs root to act as another user");
    }
    let sb = playwright_sandbox();
    let cfg = sb.dir().config(60, "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    let script = "import socket,sys,time\nsocks=[]\nfor _ in range(100):\n    s=socket.socket(socket.AF_UNIX)\n    s.connect(sys.argv[1])\n    socks.append(s)\nprint('connected', flush=True)\ntime.sleep(4)\n";
    let mut flood = std::process::Command::new(setpriv)
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(python)
        .args(["-c", script])
        .arg(&d.socket)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("flood");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(flood.stdout.take().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "connected");
    let t = Instant::now();
    let out = d.ctl(&["status"]);
    let took = t.elapsed();
    let _ = flood.kill();
    let _ = flood.wait();
    assert!(out.status.success(), "status refused while another user floods: {}", text(&out.stderr));
    // Waiting behind the flood would take the silent clients' 5 s timeout.
    assert!(took < Duration::from_secs(5), "status took {took:?}");
}

/// What a well-behaved client sees while 100 silent clients are connected:
/// an answer (one process only gets 4 slots, see tests/faults.rs), or at
/// worst an error at once, not a hang ("busy", exit 75 — or, when the daemon
/// has closed the connection before reaperctl wrote its request, "Broken
/// pipe", exit 69), and answers again once the silent ones time out: the
/// daemon survives the flood.
#[test]
fn flood_of_silent_clients_gets_busy_replies_and_the_daemon_recovers() {
    let sb = playwright_sandbox();
    let cfg = sb.dir().config(60, "");
    let mut d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    let t = Instant::now();
    let silent: Vec<UnixStream> = (0..100).map(|_| UnixStream::connect(&d.socket).expect("connect")).collect();
    std::thread::sleep(Duration::from_millis(200));
    let q = Instant::now();
    let out = d.ctl(&["status"]);
    let quick = q.elapsed();
    let err = text(&out.stderr);
    eprintln!(
        "status during a flood of 100 silent clients: {:?} in {} ms: {err}",
        out.status.code(),
        quick.as_millis()
    );
    // A status that waited for a silent client's slot would take its 5 s
    // timeout: anything shorter is a busy machine, not a hang.
    assert!(quick < Duration::from_secs(5), "status hung for {quick:?} during the flood");
    if !out.status.success() {
        assert!(err.contains("busy") || err.contains("Broken pipe"), "{err}");
        assert_eq!(out.status.code(), Some(75), "busy is a temporary failure: {err}");
    }
    // The silent ones hold their slots for 5 s at most.
    // (Generous for a busy machine: slots held forever would never free.)
    let ok = wait_until(Duration::from_secs(60), || d.ctl(&["status"]).status.success());
    assert!(ok, "status still refused 30 s after the flood:\n{}", d.log_text());
    eprintln!("status answered again {:?} after the flood began", t.elapsed());
    drop(silent);
    assert!(d.running());
}

// ------------------------------------------------------------------ 6. one instance

#[test]
fn second_daemon_on_the_same_socket_exits_75() {
    let sb = playwright_sandbox();
    let cfg = sb.dir().config(60, "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    let other = TempDir::new("second");
    let log = other.path().join("daemon.log");
    let mut second =
        Daemon::spawn(sb.scope_pid(), &cfg, &d.socket, &other.path().join("state.json"), &log, &Launch::default());
    let st = wait_child(&mut second.child, Duration::from_secs(10));
    if st.is_none() {
        second.sigkill();
        panic!(
            "a second daemon on the same socket kept running:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    let msg = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(st.unwrap().code(), Some(75), "{msg}");
    assert!(msg.contains("already running"), "{msg}");
    assert!(msg.contains(&d.socket.display().to_string()), "{msg}");
    // The first one is unaffected.
    assert!(d.ctl(&["status"]).status.success(), "{}", d.log_text());
}

// ------------------------------------------------------------------ 7. journald

const JOURNALD: &str = "/lib/systemd/systemd-journald";
const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

fn journald_listening() -> bool {
    std::os::unix::net::UnixDatagram::unbound().is_ok_and(|s| s.connect(JOURNAL_SOCKET).is_ok())
}

/// A systemd-journald this test started; stopped (by its pid) on drop.
struct JournaldGuard {
    child: Child,
}

impl Drop for JournaldGuard {
    fn drop(&mut self) {
        send_signal(self.child.id().cast_signed(), Signal::TERM);
        if wait_child(&mut self.child, Duration::from_secs(5)).is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[test]
fn once_logs_reap_fields_to_journald() {
    const TEST: &str = "once_logs_reap_fields_to_journald";
    if !is_root() {
        return skip(TEST, "needs root (to start a journald and read the system journal)");
    }
    let Some(journalctl) = find_tool("journalctl") else {
        return skip(TEST, "journalctl is not installed");
    };
    // Across test processes too: one journald test at a time.
    let lock = std::fs::File::create(std::env::temp_dir().join("mcp-reaper-test-journald.lock")).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let _journald = if journald_listening() {
        None // use the running one
    } else if Path::new(JOURNALD).is_file() {
        std::fs::create_dir_all("/run/systemd/journal").unwrap();
        let child = Command::new(JOURNALD)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting systemd-journald");
        let g = JournaldGuard { child };
        assert!(wait_until(Duration::from_secs(60), journald_listening), "journald did not listen on {JOURNAL_SOCKET}");
        Some(g)
    } else {
        return skip(TEST, &format!("no journald is running and {JOURNALD} is missing"));
    };

    let sb = playwright_sandbox();
    let (host, npm, node) = (sb.pid_of("claude"), sb.pid_of("npm exec"), sb.pid_of("node "));
    sb.kill_host(host);
    let cfg = sb.dir().config(0, "");
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() - 1;
    let child = Command::new(env!("CARGO_BIN_EXE_mcp-reaperd"))
        .args(["--once", "--log-target", "journald", "--scope", &s(sb.scope_pid()), "--config"])
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning mcp-reaperd");
    let reaper_pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!alive(npm) && !alive(node), "the orphan was not reaped");
    assert!(!text(&out.stderr).contains("reaped orphan"), "logged to stderr, not journald: {}", text(&out.stderr));

    // This run's entry: by the reaper's pid (a trusted field) and the root.
    let mut entry = None;
    let found = wait_until(Duration::from_secs(60), || {
        let out = Command::new(&journalctl)
            .args(["-o", "json", "--no-pager", "--since", &format!("@{since}"), "-t", "mcp-reaperd"])
            .args([format!("_PID={reaper_pid}"), s("REAPER_ACTION=reap"), format!("REAPER_ROOT_PID={npm}")])
            .stdin(Stdio::null())
            .output()
            .expect("running journalctl");
        entry = text(&out.stdout).lines().find_map(|l| serde_json::from_str::<Value>(l).ok());
        entry.is_some()
    });
    assert!(found, "no REAPER_ACTION=reap entry for root {npm} from pid {reaper_pid} in the journal");
    let e = entry.unwrap();
    eprintln!("journal entry: {e}");
    assert_eq!(e["SYSLOG_IDENTIFIER"], "mcp-reaperd", "{e:#}");
    assert_eq!(e["REAPER_ROOT_PID"], npm.to_string(), "{e:#}");
    assert_eq!(e["REAPER_MEMBERS"], "2", "{e:#}");
    assert_eq!(e["REAPER_SIGNALS"], "TERM", "{e:#}");
    assert_eq!(e["REAPER_VERDICT"], "orphan", "{e:#}");
    for k in ["REAPER_RECLAIMED_BYTES", "REAPER_DURATION_MS"] {
        assert!(e[k].as_str().is_some_and(|v| v.parse::<u64>().is_ok()), "{k}: {e:#}");
    }
    assert!(e["REAPER_REASON"].as_str().is_some_and(|r| r.contains("adopted by the scope process")), "{e:#}");
    assert!(e["MESSAGE"].as_str().is_some_and(|m| m.contains(&format!("root={npm}"))), "{e:#}");
    drop(lock);
}

/// In a PID namespace of its own the proc connector accepts the subscription
/// but delivers nothing: the daemon must notice (its own child's events never
/// come), say why once, and run in pidfd mode rather than deaf in "netlink".
#[test]
fn a_subscription_that_delivers_nothing_falls_back_to_pidfds_and_says_why() {
    const TEST: &str = "a_subscription_that_delivers_nothing_falls_back_to_pidfds_and_says_why";
    let Some(unshare) = pid_namespace_tool(TEST, "the proc connector and a PID namespace") else { return };
    let dir = TempDir::new("pidns-events");
    let cfg = dir.config(60, "");
    let (sock, state) = (dir.path().join("control.sock"), dir.path().join("state.json"));
    // The daemon is PID 2 of a namespace whose PID 1 is `sh`; `timeout` ends
    // it after its start line, and the namespace dies with `sh`.
    let script = format!(
        "timeout -s TERM 3 {} --dry-run --log-target stderr --config {} --socket {} --state-file {}; true",
        env!("CARGO_BIN_EXE_mcp-reaperd"),
        cfg.display(),
        sock.display(),
        state.display()
    );
    let out = Command::new(unshare)
        .args(["--pid", "--fork", "--mount-proc", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .expect("running unshare");
    let err = text(&out.stderr);
    assert!(err.contains("events=pidfd"), "the start line must show the mode that works:\n{err}");
    assert!(err.contains("PID namespace other than the initial one"), "the reason, once:\n{err}");
    assert_eq!(err.matches("no event for a child of ours").count(), 1, "{err}");
}
