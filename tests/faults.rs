//! Faults around the daemon (issue #6, "Faults"): SIGKILL in the middle of a
//! termination, a corrupt / unwritable / full state file, a missing runtime
//! dir, journald absent or refusing entries, `/proc` mounted with `hidepid=2`,
//! and hundreds of connections. Each is reported once and the daemon keeps
//! working.
//!
//! Safety: every daemon is `--scope`d to its test's sandbox (a child
//! subreaper holding all the test's processes), with its own config, socket
//! and state file, and is stopped by a [`Daemon`] guard (SIGTERM through its
//! `Child` handle, SIGKILL after 5 s) when the test ends. Signals only go to
//! sandbox processes and to daemons these tests started. Mounts (tmpfs, a
//! hidepid `/proc`) are made only inside a private mount namespace
//! (`unshare --mount`) that the daemon lives in, so they vanish with it.

mod common;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{
    Daemon, Launch, Sandbox, Spec, TempDir, alive, find_tool, is_root, ppid_of, s, skip, text, wait_until,
    world_executable,
};
use rustix::process::Signal;
use serde_json::{Value, json};

const REAPERD: &str = env!("CARGO_BIN_EXE_mcp-reaperd");
const NOBODY: &str = "65534";

/// `claude <tag> → npm exec @playwright/mcp@latest <tag> → node …/<tag>/…playwright-mcp`.
fn tree(tag: &str, server: impl Fn(Spec) -> Spec) -> Spec {
    Spec::new(&["claude", "--resume", tag]).child(
        server(Spec::new(&["npm", "exec", "@playwright/mcp@latest", tag]))
            .child(server(Spec::new(&["node", &format!("/home/u/.npm/_npx/{tag}/node_modules/.bin/playwright-mcp")]))),
    )
}

/// The host, launcher and server pids of [`tree`] `tag`.
fn pids(sb: &Sandbox, tag: &str) -> (i32, i32, i32) {
    (
        sb.pid_of(&format!("claude --resume {tag}")),
        sb.pid_of(&format!("npm exec @playwright/mcp@latest {tag}")),
        sb.pid_of(&format!("node /home/u/.npm/_npx/{tag}/")),
    )
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis().try_into().unwrap()
}

/// Start time (field 22 of `/proc/PID/stat`, clock ticks), for a state file.
fn start_time(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split(' ').nth(19).unwrap().parse().unwrap()
}

/// A config: enforce, every uid, `grace_secs`, a 3 s TERM timeout, a scan
/// every 2 s, and `daemon` keys (TOML lines).
fn config(dir: &Path, grace_secs: u64, daemon: &str) -> PathBuf {
    config_timeout(dir, grace_secs, 3.0, daemon)
}

/// [`config`] with another TERM timeout.
fn config_timeout(dir: &Path, grace_secs: u64, term_timeout_secs: f64, daemon: &str) -> PathBuf {
    let text = format!(
        "[reaper]\nmode = \"enforce\"\ngrace_secs = {grace_secs}\nmin_uid = 0\nterm_timeout_secs = {term_timeout_secs:.1}\n\
         interval_secs = 2\n\n[daemon]\n{daemon}\n"
    );
    let p = dir.join("config.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Single-quoted for sh.
fn sh_quote(p: impl AsRef<std::ffi::OsStr>) -> String {
    format!("'{}'", p.as_ref().to_string_lossy().replace('\'', r"'\''"))
}

// ------------------------------------------------------------------ the daemon

fn tree_in(st: &Value, root: i32) -> Option<&Value> {
    st["trees"].as_array().and_then(|t| t.iter().find(|t| t["root"] == root))
}

/// Kills the host of tree `tag` and waits (60 s: a busy machine) until the
/// daemon has reaped its orphan.
fn orphan_and_wait_reaped(sb: &Sandbox, d: &Daemon, tag: &str) {
    let (host, npm, node) = pids(sb, tag);
    sb.kill_host(host);
    let gone = wait_until(Duration::from_secs(60), || !alive(npm) && !alive(node));
    assert!(gone, "the orphan of tree {tag} was not reaped in 60 s:\n{}", d.log_text());
}

// ------------------------------------------------------------------ 1. SIGKILL mid-termination

#[test]
fn sigkill_mid_termination_then_restart_finishes_the_tree_and_keeps_grace() {
    // A's members catch SIGTERM (and note when) but keep running; B is an
    // orphan in its grace period; a bystander is never part of any tree.
    let sb = Sandbox::new(vec![tree("a", Spec::note_term), tree("b", |s| s), Spec::new(&["sleep", "600"])]);
    let (host_a, npm_a, node_a) = pids(&sb, "a");
    let (host_b, npm_b, node_b) = pids(&sb, "b");
    let bystander = sb.pid_of("sleep");
    sb.kill_host(host_a);
    sb.kill_host(host_b);

    // A has been an orphan for an hour (the state file says so): it is
    // reaped at once. B is first seen by the first daemon: 60 s of grace.
    let dir = sb.dir().path();
    let state = dir.join("state.json");
    let seeded = unix_ms() - 3_600_000;
    // Written in this boot (a file of another boot, or of no stated boot,
    // is not read: its identities may be new processes now).
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap().trim().to_string();
    let book = json!({"version": 1, "boot_id": boot,
        "trees": [{"pid": npm_a, "start_time": start_time(npm_a), "first_seen_unix_ms": seeded}]});
    std::fs::write(&state, book.to_string()).unwrap();
    // The first daemon's TERM timeout outlasts any busy machine's delay
    // between the SIGTERM notes and its SIGKILL below; the second one's is 3 s.
    let cfg = config_timeout(dir, 60, 300.0, "");
    let (socket, log1, log2) = (dir.join("control.sock"), dir.join("daemon1.log"), dir.join("daemon2.log"));

    let t_start1 = unix_ms();
    let mut d1 = Daemon::start(sb.scope_pid(), &cfg, &socket, &state, &log1, &Launch::default());
    // The SIGTERM wave has reached both members of A: the daemon now waits
    // out its 3 s timeout, and dies in the middle of it.
    let termed = wait_until(Duration::from_secs(60), || {
        let n = sb.term_notes();
        n.iter().any(|&(p, _)| p == npm_a) && n.iter().any(|&(p, _)| p == node_a)
    });
    assert!(termed, "no SIGTERM reached tree A: {:?}\n{}", sb.term_notes(), d1.log_text());
    d1.sigkill();
    let t_kill1 = unix_ms();
    sb.assert_alive(&[npm_a, node_a, npm_b, node_b, bystander, sb.scope_pid()]);

    // The grace book on disk: A's hour-old entry, and B's from this run,
    // written before the termination began.
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).expect("the state file parses");
    let entry = |v: &Value, pid: i32| v["trees"].as_array().unwrap().iter().find(|t| t["pid"] == pid).cloned();
    let a = entry(&saved, npm_a).unwrap_or_else(|| panic!("no entry for A ({npm_a}): {saved:#}"));
    assert_eq!(a["first_seen_unix_ms"], seeded, "{saved:#}");
    let b = entry(&saved, npm_b)
        .unwrap_or_else(|| panic!("B ({npm_b}) in grace was not saved before the SIGKILL: {saved:#}"));
    let b_first = b["first_seen_unix_ms"].as_u64().unwrap();
    assert!((t_start1.saturating_sub(1000)..=t_kill1).contains(&b_first), "{b_first} vs {t_start1}..{t_kill1}");

    // A gap, so that a grace clock restarted by the second daemon would show.
    std::thread::sleep(Duration::from_secs(2));
    config(dir, 60, "");
    let t_start2 = unix_ms();
    let d2 = Daemon::start(sb.scope_pid(), &cfg, &socket, &state, &log2, &Launch::default());
    let t = Instant::now();
    let gone = wait_until(Duration::from_secs(60), || !alive(npm_a) && !alive(node_a));
    assert!(gone, "the restarted daemon did not finish tree A:\n{}", d2.log_text());
    eprintln!("restarted daemon finished tree A in {} ms (TERM timeout 3 s)", t.elapsed().as_millis());
    let notes = sb.term_notes();
    assert!(notes.iter().filter(|&&(p, _)| p == npm_a).count() >= 2, "a second SIGTERM, then SIGKILL: {notes:?}");
    // Logged once the termination is over (after the SIGKILL's wait).
    let line = format!("reaped orphan tree root={npm_a}");
    assert!(wait_until(Duration::from_secs(60), || d2.count(&line) == 1), "{}", d2.log_text());
    let log = d2.log_text();
    let reaped = log.lines().find(|l| l.contains(&line)).unwrap();
    assert!(reaped.contains("signals=TERM,KILL"), "{reaped}");

    // B keeps the first daemon's clock: at most 60 s minus the gap left.
    let st = d2.status_until(Duration::from_secs(60), "tree B is judged", |st| tree_in(st, npm_b).is_some());
    let tb = tree_in(&st, npm_b).unwrap();
    assert_eq!(tb["verdict"], "young", "{tb:#}");
    let left = tb["grace_left_secs"].as_f64().unwrap();
    let max_left = 60.0 - (t_start2 - t_kill1) as f64 / 1000.0 + 0.25;
    assert!(left <= max_left, "grace restarted: {left:.2}s left, at most {max_left:.2}s expected: {tb:#}");
    assert!(left > 60.0 - (unix_ms() - t_start1) as f64 / 1000.0 - 1.0, "{left}: {tb:#}");
    // A is forgotten on the next scan; B's entry is the first daemon's.
    let mut saved = Value::Null;
    let forgotten = wait_until(Duration::from_secs(60), || {
        saved = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).expect("the state file parses");
        entry(&saved, npm_a).is_none()
    });
    assert!(forgotten, "A is gone but still in the state file: {saved:#}");
    assert_eq!(entry(&saved, npm_b).map(|b| b["first_seen_unix_ms"].clone()), Some(json!(b_first)), "{saved:#}");
    sb.assert_alive(&[npm_b, node_b, bystander, sb.scope_pid()]);
}

// ------------------------------------------------------------------ 2. state file faults

/// What is wrong with the state file.
#[derive(Clone, Copy, Debug, PartialEq)]
enum StateFault {
    Garbage,
    TruncatedJson,
    Directory,
    ReadOnly,
    FullFilesystem,
}

/// Starts a daemon whose state file has `fault`, reaps three orphans one
/// after the other (each a grace-book change, so a write), and checks that
/// the problem was logged once and the daemon kept working.
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
fn state_fault(test: &str, fault: StateFault) {
    let needs_root = matches!(fault, StateFault::FullFilesystem);
    if needs_root && !is_root() {
        return skip(test, "needs root (to mount a small tmpfs in a private mount namespace)");
    }
    if is_root() && matches!(fault, StateFault::ReadOnly | StateFault::FullFilesystem) && find_tool("unshare").is_none()
    {
        return skip(test, "unshare (util-linux) is not installed");
    }
    let sb = Sandbox::new(vec![
        tree("1", |s| s),
        tree("2", |s| s),
        tree("3", |s| s),
        tree("4", |s| s),
        Spec::new(&["sleep", "600"]),
    ]);
    let dir = sb.dir().path();
    let mut launch = Launch::default();
    let mut state = dir.join("state.json");
    let garbage: &[u8] = b"\x00\xff\xfe not a grace book \x89PNG\r\n";
    let truncated: &[u8] = br#"{"version": 1, "trees": [{"pid": 12, "start_ti"#;
    let mut metrics = dir.join("metrics.prom");
    match fault {
        StateFault::Garbage => std::fs::write(&state, garbage).unwrap(),
        StateFault::TruncatedJson => std::fs::write(&state, truncated).unwrap(),
        StateFault::Directory => {
            std::fs::create_dir(&state).unwrap();
            std::fs::write(state.join("keep"), "mine").unwrap();
        }
        StateFault::ReadOnly => {
            let ro = dir.join("ro");
            std::fs::create_dir(&ro).unwrap();
            if is_root() {
                // Root ignores file modes: a read-only mount (what
                // ProtectSystem=strict makes of /var/lib).
                launch.in_namespace = Some(format!("mount -t tmpfs -o ro,size=64k tmpfs {}", sh_quote(&ro)));
            } else {
                std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o500)).unwrap();
            }
            state = ro.join("state.json");
            metrics = ro.join("metrics.prom");
        }
        StateFault::FullFilesystem => {
            let full = dir.join("full");
            std::fs::create_dir(&full).unwrap();
            let q = sh_quote(&full);
            launch.in_namespace = Some(format!(
                "mount -t tmpfs -o size=16k tmpfs {q} && {{ head -c 1M /dev/zero > {q}/fill 2>/dev/null; true; }}"
            ));
            state = full.join("state.json");
            metrics = full.join("metrics.prom");
        }
    }
    let cfg = config(dir, 0, &format!("metrics_textfile = {:?}", metrics.display().to_string()));
    let d = Daemon::start(sb.scope_pid(), &cfg, &dir.join("control.sock"), &state, &dir.join("daemon.log"), &launch);
    for tag in ["1", "2", "3"] {
        orphan_and_wait_reaped(&sb, &d, tag);
    }
    // Cycles that follow the reaps (each forgets a tree: another write).
    let st = d.status_until(Duration::from_secs(60), "three trees reaped and two more scans", |st| {
        st["totals"]["trees_reaped"] == 3 && st["scans"]["count"].as_u64().unwrap_or(0) >= 6
    });
    let log = d.log_text();
    eprintln!("{test}: {} scans; log:\n{log}", st["scans"]["count"]);
    let writes_failed = d.count("cannot write state file");
    match fault {
        StateFault::Garbage | StateFault::TruncatedJson => {
            assert_eq!(d.count("is corrupt"), 1, "{log}");
            assert_eq!(writes_failed, 0, "{log}");
            let aside = dir.join("state.json.corrupt");
            let want = if fault == StateFault::Garbage { garbage } else { truncated };
            assert_eq!(std::fs::read(&aside).expect("the corrupt file is kept aside"), want);
            assert!(log.contains(&format!("moved it to {}", aside.display())), "{log}");
            let now: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).expect("a good state file again");
            assert_eq!(now["version"], 1, "{now}");
        }
        StateFault::Directory => {
            assert_eq!(d.count("is a directory"), 1, "{log}");
            assert_eq!(writes_failed, 1, "{log}");
            assert_eq!(std::fs::read_to_string(state.join("keep")).unwrap(), "mine", "the directory is left alone");
        }
        StateFault::ReadOnly => {
            assert_eq!(writes_failed, 1, "{log}");
            let cause = if is_root() { "Read-only file system" } else { "Permission denied" };
            let line = log.lines().find(|l| l.contains("cannot write state file")).unwrap();
            assert!(line.contains(&state.display().to_string()) && line.contains(cause), "{line}");
            assert_eq!(d.count("cannot write metrics textfile"), 1, "{log}");
        }
        StateFault::FullFilesystem => {
            assert_eq!(writes_failed, 1, "{log}");
            assert!(log.contains("No space left on device"), "{log}");
            assert_eq!(d.count("cannot write metrics textfile"), 1, "{log}");
            // Space again (seen through the daemon's own mount namespace):
            // the next writes work and say so, once each.
            let full = PathBuf::from(format!("/proc/{}/root{}", d.pid(), state.parent().unwrap().display()));
            std::fs::remove_file(full.join("fill")).expect("removing the filler");
            // A fourth orphan changes the grace book: the state file is written.
            orphan_and_wait_reaped(&sb, &d, "4");
            let again = |what: &str| {
                d.log_text().lines().filter(|l| l.contains(what) && l.contains("is writable again")).count()
            };
            // Each of the three files says so on its own write: wait for
            // every one by name (a count of any two raced the metrics write
            // once the history file joined them).
            let files = ["state file", "history file", "metrics textfile"];
            let ok = wait_until(Duration::from_secs(60), || files.iter().all(|f| again(f) >= 1));
            assert!(ok, "{}", d.log_text());
            for f in files {
                assert_eq!(again(f), 1, "{f}: {}", d.log_text());
            }
            let now: Value = serde_json::from_slice(&std::fs::read(full.join("state.json")).unwrap()).unwrap();
            assert_eq!(now["version"], 1, "{now}");
            let leftovers: Vec<_> = std::fs::read_dir(&full)
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .filter(|n| n.to_string_lossy().contains(".tmp"))
                .collect();
            assert!(leftovers.is_empty(), "temporary files left on the full filesystem: {leftovers:?}");
        }
    }
    assert!(d.status()["totals"]["failures"] == 0, "{}", d.log_text());
    sb.assert_alive(&[sb.pid_of("sleep"), sb.scope_pid()]);
}

#[test]
fn state_file_of_garbage_is_set_aside_once() {
    state_fault("state_file_of_garbage_is_set_aside_once", StateFault::Garbage);
}

#[test]
fn state_file_of_truncated_json_is_set_aside_once() {
    state_fault("state_file_of_truncated_json_is_set_aside_once", StateFault::TruncatedJson);
}

#[test]
fn state_file_that_is_a_directory_is_reported_once() {
    state_fault("state_file_that_is_a_directory_is_reported_once", StateFault::Directory);
}

#[test]
fn unwritable_state_file_is_reported_once() {
    state_fault("unwritable_state_file_is_reported_once", StateFault::ReadOnly);
}

#[test]
fn state_file_on_a_full_filesystem_is_reported_once_and_recovers() {
    state_fault("state_file_on_a_full_filesystem_is_reported_once_and_recovers", StateFault::FullFilesystem);
}

// ------------------------------------------------------------------ 3. runtime dir

#[test]
fn missing_socket_directory_is_created() {
    let sb = Sandbox::new(vec![tree("r", |s| s)]);
    let dir = sb.dir().path();
    let cfg = config(dir, 60, "");
    let sockdir = dir.join("run/does/not/exist");
    let socket = sockdir.join("control.sock");
    let how = Launch { umask: Some("022"), ..Launch::default() };
    let mut d = Daemon::spawn(sb.scope_pid(), &cfg, &socket, &dir.join("state.json"), &dir.join("daemon.log"), &how);
    d.wait_answering();
    let mode = std::fs::metadata(&sockdir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755, "others must be able to reach the socket");
    assert!(d.running());
    drop(d);
    assert!(!socket.exists(), "the socket is removed on exit");
    assert!(!socket.with_extension("lock").exists(), "the lock file is removed on exit");

    // A directory that cannot be made: a precise message and exit 73.
    let file = sb.dir().write("plain-file", "x");
    let out = Command::new(REAPERD)
        .args(["--config", &s(cfg.display()), "--scope", &s(sb.scope_pid()), "--log-target", "stderr", "--socket"])
        .arg(file.join("sub/control.sock"))
        .arg("--state-file")
        .arg(dir.join("state.json"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(73), "{err}");
    assert!(err.contains(&format!("cannot create the socket's directory {}", file.join("sub").display())), "{err}");
    assert!(err.contains("Not a directory"), "{err}");
}

// ------------------------------------------------------------------ 4. journald

/// Why the journald tests cannot run here, if they cannot.
fn journald_namespace_unavailable() -> Option<&'static str> {
    if !is_root() {
        return Some("needs root (to hide /run in a private mount namespace)");
    }
    if find_tool("unshare").is_none() {
        return Some("unshare (util-linux) is not installed");
    }
    None
}

#[test]
fn journald_absent_is_said_once_and_logs_go_to_stderr() {
    const TEST: &str = "journald_absent_is_said_once_and_logs_go_to_stderr";
    if let Some(why) = journald_namespace_unavailable() {
        return skip(TEST, why);
    }
    let sb = Sandbox::new(vec![tree("j", |s| s), Spec::new(&["sleep", "600"])]);
    let dir = sb.dir().path();
    let cfg = config(dir, 0, "");
    // No journal socket at all in the daemon's view; `auto` with
    // JOURNAL_STREAM set, as under systemd, wants journald.
    let how = Launch {
        in_namespace: Some("mount -t tmpfs tmpfs /run".into()),
        log_target: Some("auto"),
        env: vec![("JOURNAL_STREAM", "8:12345".into())],
        ..Launch::default()
    };
    let d = Daemon::start(
        sb.scope_pid(),
        &cfg,
        &dir.join("control.sock"),
        &dir.join("state.json"),
        &dir.join("daemon.log"),
        &how,
    );
    orphan_and_wait_reaped(&sb, &d, "j");
    let ok = wait_until(Duration::from_secs(60), || d.count("reaped orphan tree") == 1);
    assert!(ok, "the reap is logged on stderr:\n{}", d.log_text());
    assert_eq!(d.count("journald is not reachable"), 1, "{}", d.log_text());
    assert!(d.log_text().contains("mcp-reaperd 0"), "the start line is on stderr:\n{}", d.log_text());
    sb.assert_alive(&[sb.pid_of("sleep"), sb.scope_pid()]);
}

/// What the test queues into its "journald" to fill it.
const FILLER: &[u8] = b"MESSAGE=filler from the test\n";

#[test]
fn journald_refusing_entries_is_said_once_per_outage_and_logs_go_to_stderr() {
    const TEST: &str = "journald_refusing_entries_is_said_once_per_outage_and_logs_go_to_stderr";
    if let Some(why) = journald_namespace_unavailable() {
        return skip(TEST, why);
    }
    let sb = Sandbox::new(vec![tree("j", |s| s), Spec::new(&["sleep", "600"])]);
    let dir = sb.dir().path();
    let cfg = config(dir, 0, "");
    // A "journald" that takes entries into its queue and never reads them:
    // our socket, where the daemon looks for journald's.
    let jdir = dir.join("journal");
    std::fs::create_dir(&jdir).unwrap();
    let journal = UnixDatagram::bind(jdir.join("socket")).unwrap();
    journal.set_nonblocking(true).unwrap();
    let how = Launch {
        in_namespace: Some(format!(
            "mount -t tmpfs tmpfs /run && mkdir /run/systemd && ln -s {} /run/systemd/journal",
            sh_quote(&jdir)
        )),
        log_target: Some("journald"),
        ..Launch::default()
    };
    let d = Daemon::start(
        sb.scope_pid(),
        &cfg,
        &dir.join("control.sock"),
        &dir.join("state.json"),
        &dir.join("daemon.log"),
        &how,
    );
    let down = "journald stopped accepting log entries";
    // The test fills the journal's queue to `net.unix.max_dgram_qlen`. A
    // sender's own buffer holds only a few hundred unread datagrams (the
    // kernel charges them to it), so senders are added until a fresh one
    // cannot queue even one: the receiving queue itself is full, and the
    // daemon's next entry is refused at once, however busy the machine.
    let mut fillers = Vec::new();
    let mut queued = 0;
    loop {
        let filler = UnixDatagram::unbound().unwrap();
        filler.set_nonblocking(true).unwrap();
        let mut took = 0;
        loop {
            match filler.send_to(FILLER, jdir.join("socket")) {
                Ok(_) => took += 1,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("filling the journal's queue: {e}"),
            }
            assert!(queued + took < 1_000_000, "the journal's queue never filled");
        }
        queued += took;
        fillers.push(filler);
        if took == 0 {
            break;
        }
        assert!(fillers.len() < 10_000, "the journal's queue never filled ({queued} queued)");
    }
    // SIGHUPs make the daemon log (one debug entry each) faster than one
    // `reaperctl reload` per entry.
    let mut last = None;
    let daemon = rustix::process::Pid::from_raw(d.pid()).expect("the daemon's pid");
    let filled = wait_until(Duration::from_secs(300), || {
        // Spaced so that the daemon's signal stream does not fold them
        // into one (a slow daemon still folds some).
        for _ in 0..25 {
            let _ = rustix::process::kill_process(daemon, Signal::HUP);
            std::thread::sleep(Duration::from_millis(20));
        }
        last = Some(d.ctl(&["reload"]));
        d.count(down) >= 1
    });
    let last = last.map(|o| format!("{:?}: {}{}", o.status, text(&o.stdout), text(&o.stderr)));
    assert!(
        filled,
        "the full journal queue ({queued} entries queued by the test) was never noticed; \
         the last reload: {last:?}; daemon log:\n{}",
        d.log_text()
    );
    for _ in 0..5 {
        assert!(d.ctl(&["reload"]).status.success());
    }
    orphan_and_wait_reaped(&sb, &d, "j");
    let ok = wait_until(Duration::from_secs(60), || d.count("reaped orphan tree") == 1);
    assert!(ok, "the reap is logged on stderr:\n{}", d.log_text());
    assert_eq!(d.count(down), 1, "{}", d.log_text());
    assert!(d.count("config reloaded (control socket)") >= 5, "{}", d.log_text());

    // What the journal did get: native-protocol entries with our fields.
    let mut buf = vec![0u8; 1 << 16];
    let mut entries = Vec::new();
    while let Ok(n) = journal.recv(&mut buf) {
        if &buf[..n] != FILLER {
            entries.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }
    // Those sent before the test filled the queue: the start line among them.
    assert!(entries.iter().any(|e| e.contains("SYSLOG_IDENTIFIER") && e.contains("mcp-reaperd 0")), "{entries:?}");

    // Read again: the next line goes to the journal, after a notice.
    assert!(d.ctl(&["reload"]).status.success());
    let ok = wait_until(Duration::from_secs(60), || d.count("journald accepts log entries again") == 1);
    assert!(ok, "{}", d.log_text());
    let got = wait_until(Duration::from_secs(60), || {
        journal.recv(&mut buf).is_ok_and(|n| String::from_utf8_lossy(&buf[..n]).contains("config reloaded"))
    });
    assert!(got, "the reload's entry reached the journal");

    // Gone altogether (the socket closed): a second outage, said once.
    drop(journal);
    for _ in 0..5 {
        assert!(d.ctl(&["reload"]).status.success());
    }
    let ok = wait_until(Duration::from_secs(60), || d.count(down) == 2);
    assert!(ok, "{}", d.log_text());
    assert!(d.log_text().contains("Connection refused"), "{}", d.log_text());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(d.count(down), 2, "{}", d.log_text());
    assert!(d.status()["last_reload"]["ok"] == true);
    sb.assert_alive(&[sb.pid_of("sleep"), sb.scope_pid()]);
}

// ------------------------------------------------------------------ 5. hidepid

#[test]
fn hidepid_proc_is_noted_once_and_own_orphans_are_still_reaped() {
    const TEST: &str = "hidepid_proc_is_noted_once_and_own_orphans_are_still_reaped";
    if !is_root() {
        return skip(TEST, "needs root (to mount a hidepid=2 /proc in a private mount namespace)");
    }
    if find_tool("unshare").is_none() || find_tool("setpriv").is_none() {
        return skip(TEST, "unshare and setpriv (util-linux) are needed");
    }
    if !world_executable(Path::new(REAPERD)) || !world_executable(Path::new(env!("CARGO_BIN_EXE_reaperctl"))) {
        return skip(TEST, "the binaries are not reachable by uid 65534");
    }
    // The scope and the tree run as uid 65534, like the reaper; the test's
    // own sandbox scope (root) is hidden from it.
    let userscope = "mcp-reaper-test-userscope";
    let sb = Sandbox::new(vec![
        Spec::new(&[userscope]).uid(65534).subreaper().child(tree("h", |s| s)).child(Spec::new(&["sleep", "600"])),
    ]);
    let scope = sb.pid_of(userscope);
    let (host, npm, node) = pids(&sb, "h");
    let bystander = sb.pid_of("sleep");
    let work = TempDir::new("hidepid");
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let state = work.path().join("state.json");
    let cfg = config(work.path(), 0, &format!("state_file = {:?}", state.display().to_string()));
    let hide = "mount -t proc -o hidepid=2 proc /proc";
    let note = "hides other users' processes";

    // A one-off scan as that user: the note on stderr, and the tree found.
    let out = Command::new("unshare")
        .args(["--mount", "--", "sh", "-c"])
        .arg(format!("{hide} && exec setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups -- \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_reaperctl"))
        .args(["scan", "--json", "--scope", &s(scope), "--config"])
        .arg(&cfg)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches(note).count(), 1, "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = common::tree_rooted_at(&v, npm);
    assert_eq!(t["verdict"], "live", "{t:#}");

    // The daemon as that user: noted once, and its own orphan reaped.
    let how = Launch { in_namespace: Some(hide.into()), as_nobody: true, ..Launch::default() };
    let d =
        Daemon::start(scope, &cfg, &work.path().join("control.sock"), &state, &work.path().join("daemon.log"), &how);
    d.status_until(Duration::from_secs(60), "the live tree is seen", |st| {
        tree_in(st, npm).is_some_and(|t| t["verdict"] == "live")
    });
    sb.signal(host, Signal::KILL);
    assert!(wait_until(Duration::from_secs(60), || ppid_of(npm) == Some(scope)), "not re-parented to {scope}");
    let gone = wait_until(Duration::from_secs(60), || !alive(npm) && !alive(node));
    assert!(gone, "the orphan was not reaped:\n{}", d.log_text());
    assert_eq!(d.count(note), 1, "{}", d.log_text());
    assert!(d.log_text().contains("uid 65534"), "{}", d.log_text());
    let st = d.status();
    assert_eq!(st["totals"]["trees_reaped"], 1, "{st:#}");
    sb.assert_alive(&[bystander, scope, sb.scope_pid()]);
}

/// Unscoped, in a PID namespace of its own (nothing outside exists for it),
/// as uid 65534 under hidepid=2: the namespace's PID 1 (root's) is hidden,
/// and an orphan it adopted is still reaped.
#[test]
fn hidepid_orphan_of_a_hidden_pid_1_is_reaped() {
    const TEST: &str = "hidepid_orphan_of_a_hidden_pid_1_is_reaped";
    if !is_root() {
        return skip(TEST, "needs root (a PID namespace and a hidepid=2 /proc)");
    }
    if find_tool("unshare").is_none() || find_tool("setpriv").is_none() {
        return skip(TEST, "unshare and setpriv (util-linux) are needed");
    }
    if !world_executable(Path::new(REAPERD)) {
        return skip(TEST, "the daemon binary is not reachable by uid 65534");
    }
    let work = TempDir::new("hidepid-ns");
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let state = work.path().join("state.json");
    let cfg = config(work.path(), 0, &format!("state_file = {:?}", state.display().to_string()));
    let nobody = format!("setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups --");
    // PID 1 of the namespace is this shell (root). The server's parent exits
    // at once, so PID 1 adopts it; then the reaper runs once, unscoped.
    let script = format!(
        "mount -t proc -o hidepid=2 proc /proc && \
         {nobody} bash -c '(exec -a \"node /x/.bin/playwright-mcp\" sleep 600 &) ; exit' && sleep 0.3 && \
         {nobody} {REAPERD} --once --json --log-target stderr --config {cfg}",
        cfg = cfg.display()
    );
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(v["summary"]["trees_reaped"], 1, "{v:#}\n{stderr}");
    assert!(stdout.contains("hidepid"), "the reason names the hidden PID 1: {v:#}");
}

// ------------------------------------------------------------------ 6. connections

/// Hundreds of silent connections from one process of the daemon's own
/// user (root, under sudo): that process gets its share, and `reaperctl
/// status` (another process, same uid) still answers at once.
#[test]
fn status_answers_while_one_process_of_the_same_user_holds_hundreds_of_connections() {
    let sb = Sandbox::new(vec![tree("c", |s| s)]);
    let dir = sb.dir().path();
    let cfg = config(dir, 60, "");
    let mut d = Daemon::start(
        sb.scope_pid(),
        &cfg,
        &dir.join("control.sock"),
        &dir.join("state.json"),
        &dir.join("daemon.log"),
        &Launch::default(),
    );
    let mut flood: Vec<UnixStream> = (0..300).map(|_| UnixStream::connect(&d.socket).expect("connect")).collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut took = Duration::ZERO;
    for _ in 0..3 {
        let t = Instant::now();
        let out = d.ctl(&["status"]);
        took = took.max(t.elapsed());
        assert!(out.status.success(), "status refused while one process floods: {}", text(&out.stderr));
    }
    eprintln!("status during 300 silent connections from one process: slowest of 3 in {} ms", took.as_millis());
    // Waiting behind the flood would take the silent clients' 5 s timeout.
    assert!(took < Duration::from_secs(5), "status took {took:?}");
    // The flood's own extra connections were told to go away.
    let last = flood.last_mut().unwrap();
    last.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reply = Vec::new();
    let _ = last.read_to_end(&mut reply);
    assert!(String::from_utf8_lossy(&reply).contains("busy"), "{:?}", String::from_utf8_lossy(&reply));
    assert!(String::from_utf8_lossy(&reply).contains(r#""kind":"busy""#), "{:?}", String::from_utf8_lossy(&reply));
    drop(flood);
    assert!(d.running());
}
