//! Secrets in command lines never reach an output: `reaperctl scan` (text and
//! JSON), `mcp-reaperd --once` (stdout, stderr log lines, journald fields),
//! and a running daemon's log, status, reap-now reply, metrics and metrics
//! textfile — while matching still sees the real command line.
//!
//! Safety: every run is `--dry-run` and `--scope`d to its test's sandbox; a
//! daemon this file starts is stopped through its `Child` handle on drop.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{
    Daemon, Launch, Sandbox, Spec, find_tool, is_root, reaperctl, reaperd, s, skip, text, tree_rooted_at, wait_until,
};
use serde_json::Value;

/// Every secret below starts with this; no output may contain it.
const SECRET: &str = "SEKRET";

/// `claude → npm exec … --token SEKRET5 → node mcp-server-github (secrets) → helper (secret URL)`.
/// Its host is killed: an orphan.
const DOOMED_HOST: &[&str] = &["claude", "--resume"];
const NPM: &[&str] = &["npm", "exec", "@modelcontextprotocol/server-github", "--", "--token", "SEKRET5"];
const SERVER: &[&str] = &[
    "node",
    "/x/mcp-server-github",
    "--api-key=SEKRET1",
    "--header",
    "Authorization: Bearer SEKRET2",
    "token=SEKRET3",
    "--password",
    "SEKRET4",
];
const HELPER: &[&str] = &["node", "helper.js", "https://bot:SEKRET6@git.example.invalid/x?sig=SEKRET7&ref=main"];
/// A live tree whose host holds a secret: live reasons name the host.
const LIVE_HOST: &[&str] = &["claude", "--api-key=SEKRET8"];
const LIVE_SERVER: &[&str] = &["node", "/x/playwright-mcp", "--team=TEAMX1", "--header", "X-API-Key: SEKRET9"];

struct World {
    sb: Sandbox,
    orphan_root: i32,
    live_root: i32,
}

fn world() -> World {
    let sb = Sandbox::new(vec![
        Spec::new(DOOMED_HOST).child(Spec::new(NPM).child(Spec::new(SERVER).child(Spec::new(HELPER)))),
        Spec::new(LIVE_HOST).child(Spec::new(LIVE_SERVER)),
    ]);
    sb.kill_host(sb.pid_of("claude --resume"));
    let (orphan_root, live_root) = (sb.pid_of("npm exec"), sb.pid_of("node /x/playwright-mcp"));
    World { sb, orphan_root, live_root }
}

/// A dry-run config for the sandbox; `extra` goes into `[daemon]` and after.
fn config(w: &World, extra: &str) -> PathBuf {
    w.sb.dir().config_with(0, "mode = \"dry-run\"\ninterval_secs = 1", extra)
}

/// Asserts that `out` holds no secret, and that it holds `masked` (so the
/// check is not vacuous: the secret-bearing text was there to be masked).
fn assert_masked(what: &str, out: &str, masked: &[&str]) {
    if let Some(at) = out.find(SECRET) {
        let line = out[..at].rsplit('\n').next().unwrap_or("").to_string() + out[at..].lines().next().unwrap_or("");
        panic!("{what} shows a secret: {line:?}\n--- full output ---\n{out}");
    }
    for m in masked {
        assert!(out.contains(m), "{what} lacks {m:?}:\n{out}");
    }
}

fn ok(what: &str, out: &Output) -> String {
    assert!(out.status.success(), "{what} failed ({}):\n{}\n{}", out.status, text(&out.stdout), text(&out.stderr));
    text(&out.stdout) + &text(&out.stderr)
}

fn scope_args(w: &World) -> [String; 2] {
    [s("--scope"), s(w.sb.scope_pid())]
}

// ------------------------------------------------------------------ reaperctl scan

#[test]
fn scan_text_and_json_mask_secrets_and_still_find_the_orphan() {
    let w = world();
    let cfg = config(&w, "");
    let json_out =
        reaperctl(["scan", "--json", "--config"].map(s).into_iter().chain([s(cfg.display())]).chain(scope_args(&w)));
    let json_text = ok("scan --json", &json_out);
    assert_masked(
        "scan --json",
        &json_text,
        &["--api-key=***", "Authorization: Bearer ***", "token=***", "--password ***", "--token ***", "bot:***@git"],
    );
    let v: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    // Matching saw the real command lines: the tree is found and judged.
    let t = tree_rooted_at(&v, w.orphan_root);
    assert_eq!((t["verdict"].as_str(), t["reap"].as_bool()), (Some("orphan"), Some(true)), "{t:#}");
    assert_eq!(t["members"].as_array().map(Vec::len), Some(3), "{t:#}");
    let server = &t["members"][1]["cmdline"];
    assert_eq!(
        server, "node /x/mcp-server-github --api-key=*** --header Authorization: Bearer *** token=*** --password ***",
        "{t:#}"
    );
    assert_eq!(t["members"][2]["cmdline"], "node helper.js https://bot:***@git.example.invalid/x?sig=***&ref=main");
    let live = tree_rooted_at(&v, w.live_root);
    assert_eq!(live["verdict"], "live", "{live:#}");
    assert_eq!(live["host"]["cmdline"], "claude --api-key=***", "{live:#}");
    assert!(live["reason"].as_str().is_some_and(|r| r.contains("host claude --api-key=*** (pid")), "{live:#}");

    let human = reaperctl(["scan", "--config"].map(s).into_iter().chain([s(cfg.display())]).chain(scope_args(&w)));
    let human = ok("scan", &human);
    assert_masked("scan", &human, &["--api-key=***", "Bearer ***", "X-API-Key: ***", "host claude --api-key=***"]);
    assert!(human.contains("ORPHAN") && human.contains("mcp-server-github"), "{human}");
}

#[test]
fn user_patterns_apply_and_disabling_shows_everything() {
    let w = world();
    let scan = |extra: &str| {
        let cfg = config(&w, extra);
        ok(
            "scan --json",
            &reaperctl(
                ["scan", "--json", "--config"].map(s).into_iter().chain([s(cfg.display())]).chain(scope_args(&w)),
            ),
        )
    };
    // Defaults leave --team alone; an extra pattern masks it, defaults still apply.
    assert!(scan("").contains("--team=TEAMX1"));
    let out = scan("[redact]\nextra_patterns = ['--team=(\\S+)']\n");
    assert_masked("scan with extra_patterns", &out, &["--team=***", "--api-key=***"]);
    // A replaced list is all there is.
    let out = scan("[redact]\npatterns = ['--team=(\\S+)']\n");
    assert!(out.contains("--team=***") && out.contains("--api-key=SEKRET1"), "{out}");
    // Off: the real command lines, which is what the other tests would catch.
    let out = scan("[redact]\nenabled = false\n");
    assert!(out.contains("--api-key=SEKRET1") && out.contains("Bearer SEKRET2"), "{out}");
    // A bad pattern is refused with file:line:col.
    let cfg = config(&w, "[redact]\nextra_patterns = [\n  '(x',\n]\n");
    let out = reaperctl(["scan", "--config"].map(s).into_iter().chain([s(cfg.display())]).chain(scope_args(&w)));
    assert_eq!(out.status.code(), Some(78), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let line = std::fs::read_to_string(&cfg).unwrap().lines().position(|l| l == "  '(x',").unwrap() + 1;
    let want = format!("{}:{line}:3: redact.extra_patterns[0]: invalid regex", cfg.display());
    assert!(err.contains(&want), "{err}\nwant {want}");
}

// ------------------------------------------------------------------ mcp-reaperd --once

#[test]
fn once_dry_run_output_and_log_lines_mask_secrets() {
    let w = world();
    let cfg = config(&w, "");
    let out = reaperd(
        ["--once", "--dry-run", "--json", "--log-level", "debug", "--log-target", "stderr", "--config"]
            .map(s)
            .into_iter()
            .chain([s(cfg.display())])
            .chain(scope_args(&w)),
    );
    let all = ok("mcp-reaperd --once", &out);
    assert_masked("mcp-reaperd --once", &all, &["would reap orphan tree", "--token ***", "host claude --api-key=***"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("--json ({e}): {all}"));
    let o = &v["outcomes"][0];
    assert_eq!(
        (o["root"]["pid"].as_i64(), o["dry_run"].as_bool()),
        (Some(i64::from(w.orphan_root)), Some(true)),
        "{v:#}"
    );
    assert!(o["root_cmd"].as_str().is_some_and(|c| c.contains("--token ***")), "{v:#}");
    w.sb.assert_alive(&[w.orphan_root]);
}

const JOURNALD: &str = "/lib/systemd/systemd-journald";

fn journald_listening() -> bool {
    std::os::unix::net::UnixDatagram::unbound().is_ok_and(|s| s.connect("/run/systemd/journal/socket").is_ok())
}

/// A child this file started: SIGTERM on drop, SIGKILL after 5 s.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(p) = rustix::process::Pid::from_raw(self.0.id().cast_signed()) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
        }
        if !wait_until(Duration::from_secs(5), || !matches!(self.0.try_wait(), Ok(None))) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// The journald fields (`REAPER_REASON`, `MESSAGE`, …) of `--once`.
#[test]
fn once_journald_fields_mask_secrets() {
    const TEST: &str = "once_journald_fields_mask_secrets";
    if !is_root() {
        return skip(TEST, "needs root (to read the system journal)");
    }
    let Some(journalctl) = find_tool("journalctl") else {
        return skip(TEST, "journalctl is not installed");
    };
    // One journald test at a time, across test binaries (see tests/daemon.rs).
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
        let g = Stopped(child);
        assert!(wait_until(Duration::from_secs(60), journald_listening), "journald did not listen");
        Some(g)
    } else {
        return skip(TEST, &format!("no journald is running and {JOURNALD} is missing"));
    };
    let w = world();
    let cfg = config(&w, "");
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() - 1;
    let child = Command::new(env!("CARGO_BIN_EXE_mcp-reaperd"))
        .args(["--once", "--dry-run", "--log-level", "debug", "--log-target", "journald", "--config"])
        .arg(&cfg)
        .args(scope_args(&w))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning mcp-reaperd");
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert_masked("--once stdout+stderr", &ok("mcp-reaperd --once", &out), &[]);
    let mut entries = String::new();
    let found = wait_until(Duration::from_secs(60), || {
        let out = Command::new(&journalctl)
            .args(["-o", "json", "--no-pager", "--since", &format!("@{since}"), "-t", "mcp-reaperd"])
            .arg(format!("_PID={pid}"))
            .stdin(Stdio::null())
            .output()
            .expect("running journalctl");
        entries = text(&out.stdout);
        entries.contains("would-reap") && entries.contains("\"keep\"")
    });
    assert!(found, "no would-reap and keep entries from pid {pid} in the journal:\n{entries}");
    assert_masked("journal entries", &entries, &["--token ***", "host claude --api-key=***"]);
    drop(lock);
}

// ------------------------------------------------------------------ the daemon

/// A dry-run `mcp-reaperd` scoped to the sandbox, its files in the
/// sandbox's directory; stopped on drop.
fn dry_run_daemon(w: &World, config: &Path) -> Daemon {
    Daemon::start_in(w.sb.scope_pid(), config, w.sb.dir().path(), &Launch::with_args(&["--dry-run"]))
}

/// Polls `reaperctl status --json` until `cond` holds (30 s at most); the last one.
fn status_until(d: &Daemon, what: &str, mut cond: impl FnMut(&str) -> bool) -> String {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let st = ok("status --json", &d.ctl(&["status", "--json"]));
        if cond(&st) {
            return st;
        }
        assert!(Instant::now() < end, "{what}: not within 60 s; last status:\n{st}\nlog:\n{}", d.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn daemon_log_status_reap_now_and_metrics_mask_secrets() {
    let w = world();
    let prom = w.sb.dir().path().join("metrics.prom");
    let cfg = config(&w, &format!("metrics_textfile = {:?}\n", prom.display().to_string()));
    let d = dry_run_daemon(&w, &cfg);
    let (orphan, live) = (w.orphan_root, w.live_root);
    let st = status_until(&d, "both trees are judged and a dry-run reap is recorded", |st| {
        let v: Value = serde_json::from_str(st).unwrap();
        let trees = v["trees"].as_array().cloned().unwrap_or_default();
        trees.iter().any(|t| t["root"] == orphan && t["verdict"] == "orphan")
            && trees.iter().any(|t| t["root"] == live && t["verdict"] == "live")
            && v["recent"].as_array().is_some_and(|r| r.iter().any(|e| e["root"] == orphan))
    });
    assert_masked("status --json", &st, &["--token ***", "host claude --api-key=***"]);
    let human = ok("status", &d.ctl(&["status"]));
    assert_masked("status", &human, &["--token ***"]);

    let reap = ok("reap-now --dry-run --json", &d.ctl(&["reap-now", "--dry-run", "--json"]));
    assert_masked("reap-now --dry-run --json", &reap, &["would reap orphan tree", "--token ***"]);

    // No command line is a label or value of any metric; nothing to leak.
    let metrics = ok("metrics", &d.ctl(&["metrics"]));
    assert_masked("metrics", &metrics, &["mcp_reaper_trees{verdict=\"orphan\"} 1"]);
    assert!(wait_until(Duration::from_secs(60), || prom.is_file()), "no metrics textfile:\n{}", d.log_text());
    assert_masked("metrics textfile", &std::fs::read_to_string(&prom).unwrap(), &["mcp_reaper_trees"]);

    // Patterns take effect on reload: --team is masked from then on.
    assert!(st.contains("--team=TEAMX1"), "{st}");
    std::fs::write(&cfg, std::fs::read_to_string(&cfg).unwrap() + "\n[redact]\nextra_patterns = ['--team=(\\S+)']\n")
        .unwrap();
    ok("reload", &d.ctl(&["reload"]));
    let st = status_until(&d, "the reloaded patterns apply", |st| st.contains("--team=***"));
    assert!(!st.contains("TEAMX1"), "{st}");

    assert_masked("daemon log", &d.log_text(), &["would reap orphan tree", "--token ***", "host claude --api-key=***"]);
    w.sb.assert_alive(&[orphan, live]);
}
