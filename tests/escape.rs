//! Hostile names through every human output (issue 22, item 3): a real host
//! whose argv holds an OSC title sequence, a C1 CSI, DEL and a bidi override,
//! started in a directory named `p\e]0;TITLE\aq` that holds a `.mcp.json`
//! with hostile keys, commands and arguments; its server's argv carries OSC 52
//! (clipboard) and a bidi isolate, its comm an escape. `reaperctl scan`,
//! `hosts`, `status` (a scoped dry-run daemon), the daemon's log on stderr,
//! `mcp-reaperd --once`'s messages, `reaperctl run`'s messages and an error
//! message naming a hostile path: no raw control character (newlines
//! between lines excepted) and no bidi character reaches stdout or stderr,
//! and the hostile text is there, escaped.
//!
//! Safety: every tree lives below the sandbox's scope process; the reapers
//! are `--scope`d to it and in dry-run; `reaperctl run` ends only what its
//! own host leaves below it.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{Daemon, Launch, Sandbox, Spec, TempDir, s, text};
use serde_json::json;

const TITLE: &str = "\x1b]0;TITLE\x07";
const CLIPBOARD: &str = "\x1b]52;c;ZXZpbA==\x07";

/// Whether a character must not reach a terminal raw (the test's own copy
/// of the rule, so a change to the sanitizer cannot weaken it unseen).
fn unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\n') || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

fn assert_clean(what: &str, out: &Output) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let t = String::from_utf8_lossy(bytes);
        let bad: Vec<char> = t.chars().filter(|&c| unsafe_char(c)).collect();
        assert!(bad.is_empty(), "{what}: raw {bad:?} on {stream}:\n{t}");
    }
}

fn both(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// `bin ARGS --config CFG` with `$HOME` the fixture's home.
fn run(bin: &str, home: &Path, cfg: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .arg("--config")
        .arg(cfg)
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"))
}

#[test]
fn hostile_names_reach_no_terminal_raw() {
    let f = TempDir::new("escape");
    let home = f.path().join("home");
    let project = f.path().join(format!("p{TITLE}q"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let mcp = json!({"mcpServers": {
        format!("k\x1b[31mRED\u{202e}{CLIPBOARD}"): {
            "command": format!("node{TITLE}"),
            "args": ["a\u{2066}b", "x\ny", "\u{9b}2J\x7f"],
        },
    }});
    std::fs::write(project.join(".mcp.json"), mcp.to_string()).unwrap();
    // The server's comm is its executable link's name (see examples/fakeproc.rs).
    let link = f.path().join("s\x1b]0;C\x07\u{202e}");
    std::os::unix::fs::symlink(common::fakeproc_path(), &link).unwrap();
    let sb =
        Sandbox::new(vec![Spec::new(&["claude", "--resume", TITLE, "\u{202e}live\u{9b}31m\x7f"]).cwd(&project).child(
            Spec::new(&["node", "/x/.bin/playwright-mcp", CLIPBOARD, "\u{2066}isolated\rforged line"]).exe(&link),
        )]);
    let scope = s(sb.scope_pid());
    let keep = f.config(3600, "");
    let ctl = env!("CARGO_BIN_EXE_reaperctl");
    let reaperd = env!("CARGO_BIN_EXE_mcp-reaperd");

    // `reaperctl hosts`: the host's cwd, the file's path, keys, commands.
    let out = run(ctl, &home, &keep, &["hosts", "--scope", &scope]);
    assert!(out.status.success(), "{}", both(&out));
    assert_clean("reaperctl hosts", &out);
    let hosts = text(&out.stdout);
    assert!(hosts.contains("p\\u{1b}]0;TITLE\\u{7}q"), "the cwd is shown, escaped:\n{hosts}");
    assert!(hosts.contains("\\u{202e}") && hosts.contains("x\\ny"), "keys and args escaped:\n{hosts}");
    // JSON stays JSON, with the same values.
    let out = run(ctl, &home, &keep, &["hosts", "--json", "--scope", &scope]);
    assert_clean("reaperctl hosts --json", &out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.to_string().contains('\u{202e}'), "the JSON value is unchanged: {v}");

    // `reaperctl scan`, human: the live tree with its hostile argv and comm.
    let out = run(ctl, &home, &keep, &["scan", "--scope", &scope]);
    assert!(out.status.success(), "{}", both(&out));
    assert_clean("reaperctl scan", &out);
    assert!(text(&out.stdout).contains("\\u{1b}]52;c;"), "{}", text(&out.stdout));

    // The host dies: an orphan, reaped in dry-run only.
    let host = sb.pid_of("claude");
    sb.kill_host(host);
    let reap = f.path().join("reap.toml");
    std::fs::write(&reap, f.config_text(0, "", "")).unwrap();
    let out = run(
        reaperd,
        &home,
        &reap,
        &["--once", "--dry-run", "--log-target", "stderr", "--log-level", "debug", "--scope", &scope],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_clean("mcp-reaperd --once", &out);
    assert!(text(&out.stderr).contains("would"), "a would-reap line: {}", text(&out.stderr));

    // A scoped dry-run daemon: `reaperctl status` and its log.
    let dir = TempDir::new("escape-daemon");
    let daemon = Daemon::start_in(sb.scope_pid(), &keep, dir.path(), &Launch::with_args(&["--dry-run"]));
    daemon.status_until(Duration::from_secs(30), "the orphan is listed", |st| {
        st["trees"].as_array().is_some_and(|t| !t.is_empty())
    });
    let out = daemon.ctl(&["status"]);
    assert!(out.status.success(), "{}", both(&out));
    assert_clean("reaperctl status", &out);
    assert!(text(&out.stdout).contains("playwright-mcp"), "{}", text(&out.stdout));
    let log = Output { status: out.status, stdout: Vec::new(), stderr: daemon.log_text().into_bytes() };
    assert_clean("the daemon's log on stderr", &log);
    drop(daemon);

    // `reaperctl run`: its host is named by a hostile path, and leaves a
    // process behind, which run ends and reports.
    let sh = f.path().join(format!("sh{TITLE}\u{202e}"));
    std::os::unix::fs::symlink("/bin/sh", &sh).unwrap();
    let out = run(
        ctl,
        &home,
        &keep,
        &["run", "--no-cgroup", "--grace", "0", "--", &s(sh.display()), "-c", "sleep 300 & exit 0"],
    );
    assert_clean("reaperctl run", &out);
    assert!(text(&out.stderr).contains(" behind; ended it"), "{}", both(&out));

    // An error naming a hostile path.
    let missing = f.path().join(format!("c{TITLE}.toml"));
    let out = common::reaperctl(["--config", &s(missing.display()), "scan"]);
    assert!(!out.status.success());
    assert_clean("an error message", &out);
    assert!(text(&out.stderr).contains("\\u{1b}]0;TITLE"), "{}", both(&out));
}
