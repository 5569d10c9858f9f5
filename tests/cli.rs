//! Command-line conventions of both binaries, run for real: a reader that
//! goes away ends a command quietly (status 0), argument errors exit 64,
//! `scan --exit-code` says whether something would be reaped, the daemon's
//! terminal log follows `--color` and `NO_COLOR`, and nothing a person
//! reads carries Rust's debug text.
//!
//! Safety: every tree lives in a [`Sandbox`]; the daemon and `scan` are
//! scoped to it (`--scope`), the daemon in dry-run; `reaperctl run` only
//! ends what its own host left.

mod common;

use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{Daemon, Launch, Sandbox, Spec, find_tool, s, text};

const REAPERCTL: &str = env!("CARGO_BIN_EXE_reaperctl");
const REAPERD: &str = env!("CARGO_BIN_EXE_mcp-reaperd");
const CLAUDE: &[&str] = &["claude", "--resume"];
const NPM: &[&str] = &["npm", "exec", "@playwright/mcp@latest"];
const NODE: &[&str] = &["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"];

/// A live tree and an orphaned one (its host killed), in one sandbox.
fn live_and_orphan() -> Sandbox {
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(NPM).child(Spec::new(NODE))),
        Spec::new(&["claude", "-p", "gone"]).child(
            Spec::new(&["npm", "exec", "@upstash/context7-mcp"])
                .child(Spec::new(&["node", "/home/u/.npm/_npx/1a2b/node_modules/.bin/context7-mcp"])),
        ),
    ]);
    sb.kill_host(sb.pid_of("claude -p gone"));
    sb
}

/// `bin args`, its stdout a pipe whose reader is already gone.
fn with_stdout_closed(bin: &str, args: &[String]) -> Output {
    let (read, write): (OwnedFd, OwnedFd) = rustix::pipe::pipe().expect("pipe");
    drop(read);
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"))
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| (*a).to_string()).collect()
}

/// The arguments that reach the sandbox's daemon, or judge the sandbox.
struct Ctx {
    cfg: String,
    socket: String,
    scope: String,
}

impl Ctx {
    fn new(sb: &Sandbox, d: &Daemon) -> Ctx {
        Ctx {
            cfg: sb.dir().path().join("config.toml").display().to_string(),
            socket: d.socket.display().to_string(),
            scope: s(sb.scope_pid()),
        }
    }

    /// Every `reaperctl` command that prints, with what it needs.
    fn printing_commands(&self) -> Vec<Vec<String>> {
        let (c, k, p) = (self.cfg.as_str(), self.socket.as_str(), self.scope.as_str());
        [
            vec!["--config", c, "scan", "--scope", p],
            vec!["--config", c, "scan", "--json", "--scope", p],
            vec!["--config", c, "hosts", "--scope", p],
            vec!["--config", c, "hosts", "--json", "--scope", p],
            vec!["--config", c, "validate"],
            vec!["--socket", k, "status"],
            vec!["--socket", k, "status", "--json"],
            vec!["--socket", k, "metrics"],
            vec!["--socket", k, "reap-now", "--dry-run"],
            vec!["--socket", k, "reap-now", "--dry-run", "--json"],
            vec!["--help"],
        ]
        .iter()
        .map(|a| args(a))
        .collect()
    }
}

fn dry_run_daemon(sb: &Sandbox) -> Daemon {
    let cfg = sb.dir().config(0, "");
    Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(&["--dry-run"]))
}

#[test]
fn every_printing_command_ends_quietly_when_its_reader_goes_away() {
    let sb = live_and_orphan();
    let d = dry_run_daemon(&sb);
    let ctx = Ctx::new(&sb, &d);
    for a in ctx.printing_commands() {
        let out = with_stdout_closed(REAPERCTL, &a);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "reaperctl {a:?} with its reader gone: {err}");
        assert!(!err.contains("panicked"), "reaperctl {a:?}: {err}");
    }
    let once = args(&["--once", "--json", "--dry-run", "--log-target", "stderr", "--config", &ctx.cfg, "--scope"]);
    let mut once = once;
    once.push(ctx.scope.clone());
    let out = with_stdout_closed(REAPERD, &once);
    assert_eq!(out.status.code(), Some(0), "mcp-reaperd {once:?}: {}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("panicked"), "{}", text(&out.stderr));
}

#[test]
fn argument_errors_exit_64_and_help_exits_0() {
    for (bin, a) in [
        (REAPERCTL, vec!["--bogus"]),
        (REAPERCTL, vec!["scan", "--scope", "not-a-pid"]),
        (REAPERCTL, vec!["status", "extra"]),
        (REAPERCTL, vec![]),
        (REAPERD, vec!["--bogus"]),
        (REAPERD, vec!["--color", "sometimes"]),
    ] {
        let out = Command::new(bin).args(&a).stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{bin} {a:?}: {}", text(&out.stderr));
        assert!(!text(&out.stderr).is_empty(), "{bin} {a:?} says why");
    }
    for (bin, a) in [(REAPERCTL, "--help"), (REAPERCTL, "--version"), (REAPERD, "--help"), (REAPERD, "--version")] {
        let out = Command::new(bin).arg(a).stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{bin} {a}: {}", text(&out.stderr));
        assert!(!text(&out.stdout).is_empty(), "{bin} {a} prints on stdout");
    }
}

#[test]
fn completions_and_help_do_not_offer_the_test_only_proc_root() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let body = std::fs::read_to_string(e.path()).unwrap_or_default();
        assert!(!body.contains("proc-root"), "{} offers --proc-root", e.path().display());
    }
    for a in [["scan", "--help"], ["hosts", "--help"]] {
        let out = Command::new(REAPERCTL).args(a).output().unwrap();
        assert!(!text(&out.stdout).contains("proc-root"), "{a:?}: {}", text(&out.stdout));
    }
}

#[test]
fn scan_exit_code_says_whether_something_would_be_reaped() {
    let sb = Sandbox::new(vec![Spec::new(CLAUDE).child(Spec::new(NPM).child(Spec::new(NODE)))]);
    let cfg = sb.dir().config(0, "");
    let scan = |extra: &[&str]| {
        let mut a = vec!["--config".to_string(), cfg.display().to_string(), "scan".into(), "--scope".into()];
        a.push(s(sb.scope_pid()));
        a.extend(extra.iter().map(|x| (*x).to_string()));
        Command::new(REAPERCTL).args(&a).stdin(Stdio::null()).output().unwrap()
    };
    let out = scan(&["--exit-code"]);
    assert_eq!(out.status.code(), Some(0), "a live tree only: {}{}", text(&out.stdout), text(&out.stderr));
    sb.kill_host(sb.pid_of("claude"));
    let out = scan(&["--exit-code"]);
    assert_eq!(out.status.code(), Some(1), "an orphan: {}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("[reap]"), "{}", text(&out.stdout));
    let out = scan(&["--exit-code", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let out = scan(&[]);
    assert_eq!(out.status.code(), Some(0), "without --exit-code: {}", text(&out.stderr));
    // The default grace, no daemon (issue 36): the scan's first sight is no
    // clock, so the orphan is an orphan, not `young` for the next 60 s.
    let graced = sb.dir().write("graced.toml", sb.dir().config_text(60, "", ""));
    let out = Command::new(REAPERCTL)
        .args(["--config", &s(graced.display()), "scan", "--exit-code", "--socket", "/nonexistent/control.sock"])
        .args(["--scope", &s(sb.scope_pid())])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "an orphan, whatever the grace: {shown}{}", text(&out.stderr));
    assert!(shown.contains("ORPHAN") && shown.contains("[reap]") && !shown.contains("YOUNG"), "{shown}");
    assert!(
        shown.contains("a daemon reaps it after the 60s grace, counted from when it first sees the tree"),
        "{shown}"
    );
}

/// `mcp-reaperd --once` in dry-run on the sandbox, its stderr log.
fn once_log(sb: &Sandbox, color: &str, env: &[(&str, &str)], pty: bool) -> Option<String> {
    let cfg = sb.dir().config(0, "");
    let argv = [
        REAPERD.to_string(),
        "--once".into(),
        "--dry-run".into(),
        "--log-target".into(),
        "stderr".into(),
        "--color".into(),
        color.into(),
        "--config".into(),
        cfg.display().to_string(),
        "--scope".into(),
        s(sb.scope_pid()),
    ];
    let mut c = if pty {
        // util-linux `script` gives the daemon a terminal as stderr.
        let script = find_tool("script")?;
        let mut c = Command::new(script);
        let line: Vec<String> = argv.iter().map(|a| format!("'{a}'")).collect();
        c.args(["-qec", &line.join(" "), "/dev/null"]);
        c
    } else {
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]);
        c
    };
    c.env_remove("NO_COLOR").envs(env.iter().copied()).stdin(Stdio::null());
    let out = c.output().unwrap();
    Some(text(&out.stderr) + &text(&out.stdout))
}

#[test]
fn the_daemon_log_colours_follow_color_and_no_color() {
    let sb = live_and_orphan();
    let esc = '\u{1b}';
    let log = once_log(&sb, "always", &[], false).unwrap();
    assert!(log.contains(esc) && log.contains("would reap"), "--color always: {log:?}");
    let log = once_log(&sb, "never", &[], false).unwrap();
    assert!(!log.contains(esc) && log.contains("would reap"), "--color never: {log:?}");
    let log = once_log(&sb, "auto", &[], false).unwrap();
    assert!(!log.contains(esc), "auto, not a terminal: {log:?}");
    let Some(log) = once_log(&sb, "auto", &[], true) else {
        return common::skip("the_daemon_log_colours_follow_color_and_no_color", "no `script` (util-linux) for a pty");
    };
    assert!(log.contains(esc), "auto on a terminal: {log:?}");
    let log = once_log(&sb, "auto", &[("NO_COLOR", "1")], true).unwrap();
    assert!(!log.contains(esc), "NO_COLOR=1 on a terminal: {log:?}");
    let log = once_log(&sb, "always", &[("NO_COLOR", "1")], true).unwrap();
    assert!(log.contains(esc), "--color always wins over NO_COLOR: {log:?}");
}

/// What Rust's `{:?}` leaves in text: `Some(19412)`, `ReapNow { dry_run:
/// false }`, and the empty clause of `"; ".join` over an empty part.
fn debug_text(out: &str) -> Option<&'static str> {
    ["Some(", "None)", "{ ", ";;", "; ;"].into_iter().find(|n| out.contains(n))
}

#[test]
fn no_rust_debug_text_in_what_people_read() {
    let sb = live_and_orphan();
    let d = dry_run_daemon(&sb);
    let ctx = Ctx::new(&sb, &d);
    // The dry-run daemon has scanned (`reap-now --dry-run` below prints its
    // `would reap` line either way).
    d.status_until(std::time::Duration::from_secs(60), "the first scan", |st| st["scans"]["count"].as_u64() >= Some(1));
    let mut seen = Vec::new();
    for a in ctx.printing_commands() {
        let out = Command::new(REAPERCTL).args(&a).stdin(Stdio::null()).output().unwrap();
        let all = text(&out.stdout) + &text(&out.stderr);
        if let Some(n) = debug_text(&all) {
            panic!("reaperctl {a:?} prints {n:?}:\n{all}");
        }
        seen.push(all);
    }
    assert!(seen.iter().any(|o| o.contains("would reap")), "reap-now --dry-run names the orphan: {seen:#?}");
    // `run`: its host leaves a child behind, which it ends.
    let out = Command::new(REAPERCTL)
        .args(["--config", &ctx.cfg, "run", "--grace", "0", "--", "sh", "-c", "sleep 60 & exit 0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let all = text(&out.stdout) + &text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(debug_text(&all).is_none(), "reaperctl run prints debug text:\n{all}");
    // The daemon's own log.
    let log = d.log_text();
    if let Some(n) = debug_text(&log) {
        panic!("the daemon's log has {n:?}:\n{log}");
    }
}
