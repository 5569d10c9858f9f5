//! `reaperctl scan` and `reaperctl validate` against real process trees.
//!
//! Every tree lives below its own sandbox scope process (a child subreaper)
//! and every scan is `--scope`d to it, so tests can run in parallel and never
//! see, let alone touch, anything else on the machine. `scan` is read-only.

mod common;

use std::path::Path;

use common::{Sandbox, Spec, TempDir, alive, member, ppid_of, reaperctl, scan_json, tree_rooted_at, wait_until};
use serde_json::Value;

const CLAUDE: &[&str] = &["claude", "--resume"];
const CLAUDE_NODE: &[&str] = &["node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"];
const NPM_PLAYWRIGHT: &[&str] = &["npm", "exec", "@playwright/mcp@latest"];
const NODE_PLAYWRIGHT: &[&str] = &["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"];
const CHROME: &[&str] = &["/opt/google/chrome/chrome", "--headless", "--user-data-dir=/tmp/mcp-chrome-x"];
const CHROME_RENDERER: &[&str] = &["/opt/google/chrome/chrome", "--type=renderer", "--user-data-dir=/tmp/mcp-chrome-x"];

/// `npm exec @playwright/mcp@latest → node playwright-mcp → chrome (setsid) → renderer`.
fn playwright_tree() -> Spec {
    Spec::new(NPM_PLAYWRIGHT)
        .child(Spec::new(NODE_PLAYWRIGHT).child(Spec::new(CHROME).setsid().child(Spec::new(CHROME_RENDERER))))
}

fn scan(sb: &Sandbox, config: &Path) -> Value {
    let v = scan_json(config, &["--scope", &sb.scope_pid().to_string()]);
    assert_eq!(v["summary"]["scope"], sb.scope_pid(), "{v:#}");
    v
}

fn trees(v: &Value) -> &Vec<Value> {
    v["trees"].as_array().expect("trees is an array")
}

/// The one tree in the report, asserting there is exactly one.
fn only_tree(v: &Value) -> &Value {
    let t = trees(v);
    assert_eq!(t.len(), 1, "expected exactly one tree: {v:#}");
    &t[0]
}

fn member_pids(t: &Value) -> Vec<i32> {
    t["members"].as_array().unwrap().iter().map(|m| i32::try_from(m["pid"].as_i64().unwrap()).unwrap()).collect()
}

fn reason(t: &Value) -> &str {
    t["reason"].as_str().unwrap()
}

fn pids(v: &Value, key: &str) -> Vec<i32> {
    v[key].as_array().unwrap().iter().map(|p| i32::try_from(p.as_i64().unwrap()).unwrap()).collect()
}

// ------------------------------------------------------------------ verdicts

#[test]
fn playwright_tree_is_live_while_its_host_runs() {
    let sb = Sandbox::new(vec![Spec::new(CLAUDE).child(playwright_tree())]);
    let (host, npm, node, chrome, renderer) = (
        sb.pid_of("claude"),
        sb.pid_of("npm exec"),
        sb.pid_of("node "),
        sb.pid_of("/opt/google/chrome/chrome --headless"),
        sb.pid_of("/opt/google/chrome/chrome --type=renderer"),
    );
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let t = only_tree(&v);
    assert_eq!(t["verdict"], "live", "{t:#}");
    assert_eq!(t["reap"], false);
    assert_eq!(t["host"]["pid"], host);
    assert_eq!(t["host"]["cmdline"], "claude --resume");
    assert_eq!(t["owner"]["pid"], host);
    assert_eq!(t["root"], npm, "the root is the topmost launcher, not the server below it");
    assert_eq!(member_pids(t), vec![npm, node, chrome, renderer]);
    assert!(pids(t, "servers").contains(&node), "{t:#}");
    assert!(reason(t).contains(&format!("host claude --resume (pid {host}) is alive")), "{}", reason(t));
    assert_eq!(member(t, node)["cmdline"], NODE_PLAYWRIGHT.join(" "));
    assert_eq!(member(t, npm)["depth"], 0);
    assert_eq!(member(t, renderer)["depth"], 3);
    assert_eq!(v["summary"]["reap_trees"], 0);
    assert_eq!(v["summary"]["by_verdict"]["live"], 1);
    sb.assert_alive(&sb.all_pids());
}

#[test]
fn node_claude_host_counts_as_host() {
    let sb = Sandbox::new(vec![Spec::new(CLAUDE_NODE).child(playwright_tree())]);
    let host = sb.pid_of("node /usr/lib/node_modules/@anthropic-ai");
    let v = scan(&sb, &sb.dir().config(0, ""));
    let t = only_tree(&v);
    assert_eq!(t["verdict"], "live", "{t:#}");
    assert_eq!(t["host"]["pid"], host);
    assert_eq!(t["root"], sb.pid_of("npm exec"));
    sb.assert_alive(&sb.all_pids());
}

#[test]
fn playwright_tree_is_orphan_after_its_host_is_killed() {
    let sb = Sandbox::new(vec![Spec::new(CLAUDE).child(playwright_tree())]);
    let (host, npm, node, chrome, renderer) = (
        sb.pid_of("claude"),
        sb.pid_of("npm exec"),
        sb.pid_of("node "),
        sb.pid_of("/opt/google/chrome/chrome --headless"),
        sb.pid_of("/opt/google/chrome/chrome --type=renderer"),
    );
    sb.kill_host(host);
    assert_eq!(ppid_of(npm), Some(sb.scope_pid()));
    let v = scan(&sb, &sb.dir().config(0, ""));
    let t = only_tree(&v);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    assert_eq!(t["reap"], true);
    assert_eq!(t["root"], npm, "root must be the adopted npm exec, not the node below it");
    assert_eq!(t["host"], Value::Null);
    assert_eq!(t["owner"]["pid"], sb.scope_pid());
    assert!(reason(t).contains("scope process"), "{}", reason(t));
    assert!(reason(t).contains(&format!("(pid {})", sb.scope_pid())), "{}", reason(t));
    // The setsid'd browser left the server's session and group but is a member.
    assert_eq!(member_pids(t), vec![npm, node, chrome, renderer]);
    let c = member(t, chrome);
    assert_eq!(c["sid"], chrome, "chrome called setsid: {c:#}");
    assert_eq!(c["pgid"], chrome);
    assert_ne!(member(t, npm)["sid"], c["sid"]);
    assert_eq!(member(t, renderer)["sid"], chrome);
    for m in t["members"].as_array().unwrap() {
        assert!(m["state"] == "S" || m["state"] == "R", "{m:#}");
        assert_eq!(m["uid"].as_u64(), Some(u64::from(rustix::process::getuid().as_raw())), "{m:#}");
    }
    assert_eq!(t["grace_left_secs"], Value::Null);
    assert_eq!(v["summary"]["reap_trees"], 1);
    assert_eq!(v["summary"]["reap_processes"], 4);
    assert!(!alive(host));
    sb.assert_alive(&[npm, node, chrome, renderer]);
}

#[test]
fn headless_host_that_exits_leaves_an_orphan() {
    // `claude -p …` ends on its own; its servers stay behind.
    let sb = Sandbox::new(vec![
        Spec::new(&["claude", "-p", "summarize the diff"]).exit_after_spawn().child(playwright_tree()),
    ]);
    let (host, npm) = (sb.pid_of("claude"), sb.pid_of("npm exec"));
    assert!(wait_until(std::time::Duration::from_secs(10), || !alive(host) && ppid_of(npm) == Some(sb.scope_pid())));
    let v = scan(&sb, &sb.dir().config(0, ""));
    let t = only_tree(&v);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    assert_eq!(t["root"], npm);
    assert_eq!(t["members"].as_array().unwrap().len(), 4);
    sb.assert_alive(&member_pids(t));
}

#[test]
fn orphan_within_grace_is_young() {
    let sb = Sandbox::new(vec![Spec::new(CLAUDE).child(playwright_tree())]);
    let (host, npm) = (sb.pid_of("claude"), sb.pid_of("npm exec"));
    sb.kill_host(host);
    let cfg = sb.dir().config(60, "");
    // Nothing has seen it yet: a scan's first sight is no clock (issue 36).
    let v = scan(&sb, &cfg);
    let t = only_tree(&v);
    assert_eq!((&t["verdict"], &t["reap"], &t["first_seen_unix"]), (&"orphan".into(), &true.into(), &Value::Null));
    assert!(reason(t).contains("a daemon reaps it after the 60s grace, counted from when it first sees"), "{t:#}");
    assert_eq!(v["summary"]["reap_trees"], 1);
    // A reaper run from a timer saw it (its state file): its grace counts.
    let once = common::once_json(sb.scope_pid(), &cfg);
    assert_eq!(once["outcomes"].as_array().map(Vec::len), Some(0), "{once:#}");
    let v = scan(&sb, &cfg);
    let t = only_tree(&v);
    assert_eq!(t["verdict"], "young", "{t:#}");
    assert_eq!(t["reap"], false);
    assert_eq!(t["root"], npm);
    let left = t["grace_left_secs"].as_f64().expect("grace_left_secs is set for a young tree");
    assert!((55.0..=60.0).contains(&left), "grace_left_secs = {left}");
    assert!(t["first_seen_unix"].is_u64(), "{t:#}");
    assert!(reason(t).contains("scope process"), "{}", reason(t));
    assert!(reason(t).contains("60s grace"), "{}", reason(t));
    assert_eq!(v["summary"]["reap_trees"], 0);
    assert_eq!(v["summary"]["by_verdict"]["young"], 1);
    sb.assert_alive(&member_pids(t));
}

#[test]
fn tree_owned_by_a_login_shell_is_foreign() {
    let sb = Sandbox::new(vec![Spec::new(&["-bash"]).child(playwright_tree())]);
    let (bash, npm) = (sb.pid_of("-bash"), sb.pid_of("npm exec"));
    let v = scan(&sb, &sb.dir().config(0, ""));
    let t = only_tree(&v);
    assert_eq!(t["verdict"], "foreign", "{t:#}");
    assert_eq!(t["reap"], false);
    assert_eq!(t["root"], npm);
    assert_eq!(t["owner"]["pid"], bash);
    assert_eq!(t["owner"]["cmdline"], "-bash");
    assert_eq!(t["host"], Value::Null);
    assert!(reason(t).contains(&format!("-bash (pid {bash})")), "{}", reason(t));
    assert!(reason(t).contains("not a known host"), "{}", reason(t));
    sb.assert_alive(&sb.all_pids());
}

#[test]
fn host_above_a_shell_still_makes_the_tree_live() {
    // claude → bash (an interactive shell, not a launcher) → npm exec …
    let sb = Sandbox::new(vec![Spec::new(CLAUDE).child(Spec::new(&["/bin/bash"]).child(playwright_tree()))]);
    let (host, bash) = (sb.pid_of("claude"), sb.pid_of("/bin/bash"));
    let v = scan(&sb, &sb.dir().config(0, ""));
    let t = only_tree(&v);
    assert_eq!(t["verdict"], "live", "{t:#}");
    assert_eq!(t["host"]["pid"], host);
    assert_eq!(t["owner"]["pid"], bash);
    sb.assert_alive(&sb.all_pids());
}

#[test]
fn protect_pattern_keeps_a_detached_http_server() {
    let shared =
        ["node", "/home/u/.npm/_npx/77aa/node_modules/.bin/mcp-server-shared", "--transport", "http", "--port", "8931"];
    let ctx7 = ["node", "/home/u/.npm/_npx/1a2b/node_modules/.bin/context7-mcp"];
    // Both detached below the scope (as if their hosts were long gone).
    let sb = Sandbox::new(vec![Spec::new(&shared), Spec::new(&ctx7)]);
    let (shared_pid, ctx7_pid) = (sb.pid_of("node /home/u/.npm/_npx/77aa"), sb.pid_of("node /home/u/.npm/_npx/1a2b"));
    let cfg = sb.dir().config(0, "[patterns]\nprotect = ['--transport http']\n");
    let v = scan(&sb, &cfg);
    assert_eq!(trees(&v).len(), 2, "{v:#}");
    let p = tree_rooted_at(&v, shared_pid);
    assert_eq!(p["verdict"], "protected", "{p:#}");
    assert_eq!(p["reap"], false);
    assert!(reason(p).contains("protect pattern '--transport http'"), "{}", reason(p));
    assert!(reason(p).contains(&format!("(pid {shared_pid})")), "{}", reason(p));
    // The protect rule is per tree: the other orphan is still reaped.
    let o = tree_rooted_at(&v, ctx7_pid);
    assert_eq!(o["verdict"], "orphan", "{o:#}");
    assert_eq!(o["reap"], true);
    assert_eq!(v["summary"]["by_verdict"]["protected"], 1);
    assert_eq!(v["summary"]["reap_trees"], 1);
    sb.assert_alive(&sb.all_pids());
}

#[test]
fn uvx_server_under_sh_c_is_one_tree_rooted_at_the_shell() {
    const PY: &str = "/home/u/.cache/uv/archive-v0/Xy12/bin/python";
    const FETCH: &str = "/home/u/.cache/uv/archive-v0/Xy12/bin/mcp-server-fetch";
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(
            Spec::new(&["sh", "-c", "uvx mcp-server-fetch"])
                .child(Spec::new(&["uvx", "mcp-server-fetch"]).child(Spec::new(&[PY, FETCH]))),
        ),
    ]);
    let (host, sh, uvx, py) = (sb.pid_of("claude"), sb.pid_of("sh -c"), sb.pid_of("uvx "), sb.pid_of(PY));
    let cfg = sb.dir().config(0, "");

    let v = scan(&sb, &cfg);
    let t = only_tree(&v);
    assert_eq!(t["verdict"], "live", "{t:#}");
    assert_eq!(t["root"], sh);
    assert_eq!(t["host"]["pid"], host);
    assert_eq!(member_pids(t), vec![sh, uvx, py]);
    assert!(pids(t, "servers").contains(&py), "{t:#}");

    sb.kill_host(host);
    let v = scan(&sb, &cfg);
    let t = only_tree(&v);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    assert_eq!(t["root"], sh, "one tree, rooted at the sh -c launcher");
    assert_eq!(member_pids(t), vec![sh, uvx, py]);
    assert_eq!(member(t, py)["cmdline"], format!("{PY} {FETCH}"));
    sb.assert_alive(&[sh, uvx, py]);
}

#[test]
fn processes_that_are_not_mcp_servers_make_no_tree() {
    // Orphaned launchers and look-alikes without a server below them.
    let sb = Sandbox::new(vec![
        Spec::new(&["npm", "exec", "cowsay"])
            .child(Spec::new(&["node", "/home/u/.npm/_npx/c0/node_modules/.bin/cowsay"])),
        Spec::new(&["sh", "-c", "make -j4"]),
        Spec::new(&["node", "server.js"]),
        Spec::new(&["vim", "notes-mcp.md"]),
        Spec::new(&["bash"]),
    ]);
    let v = scan(&sb, &sb.dir().config(0, ""));
    assert_eq!(trees(&v).len(), 0, "{v:#}");
    assert_eq!(v["summary"]["trees"], 0);
    sb.assert_alive(&sb.all_pids());
}

#[test]
fn non_utf8_argv_is_shown_lossily() {
    let sb = Sandbox::new(vec![Spec::raw(&[
        b"node",
        b"/home/u/.npm/_npx/ab/node_modules/.bin/mcp-server-caf\xe9",
        b"--root=/srv/\xff\xfe",
    ])]);
    let server = sb.pid_of("node /home/u/.npm/_npx/ab/");
    let raw = std::fs::read(format!("/proc/{server}/cmdline")).unwrap();
    assert!(raw.windows(2).any(|w| w == b"\xff\xfe"), "the fixture really has non-UTF-8 argv: {raw:?}");
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let t = only_tree(&v);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    assert_eq!(t["root"], server);
    let cmd = member(t, server)["cmdline"].as_str().unwrap();
    assert_eq!(cmd, "node /home/u/.npm/_npx/ab/node_modules/.bin/mcp-server-caf\u{fffd} --root=/srv/\u{fffd}\u{fffd}");
    // The human view copes too.
    let out = reaperctl(["scan", "--scope", &sb.scope_pid().to_string(), "--config", cfg.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("mcp-server-caf\u{fffd}"));
    sb.assert_alive(&[server]);
}

// ------------------------------------------------------------------ human output

#[test]
fn human_output_shows_heading_reason_and_pids() {
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(playwright_tree()),
        Spec::new(&["-bash"]).child(Spec::new(&["node", "/home/u/.npm/_npx/1a2b/node_modules/.bin/context7-mcp"])),
    ]);
    let (host, npm, node, chrome) = (
        sb.pid_of("claude"),
        sb.pid_of("npm exec"),
        sb.pid_of("node /home/u/.npm/_npx/9833c18b"),
        sb.pid_of("/opt/google/chrome/chrome --headless"),
    );
    let ctx7 = sb.pid_of("node /home/u/.npm/_npx/1a2b");
    sb.kill_host(host);
    let cfg = sb.dir().config(0, "");
    let out = reaperctl(["scan", "--scope", &sb.scope_pid().to_string(), "--config", cfg.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("ORPHAN · 1 tree · 4 processes"), "{text}");
    assert!(text.contains("FOREIGN · 1 tree · 1 process"), "{text}");
    assert!(text.contains(&format!("tree {npm} [reap]: adopted by the scope process")), "{text}");
    assert!(text.contains(&format!("tree {ctx7} [keep]: owned by live process -bash")), "{text}");
    for pid in [npm, node, chrome, ctx7] {
        assert!(
            text.lines().any(|l| l.split_whitespace().next() == Some(&pid.to_string())),
            "pid {pid} missing:\n{text}"
        );
    }
    assert!(text.contains("└─ "), "forest drawing:\n{text}");
    assert!(text.contains("2 trees among"), "{text}");
    assert!(text.contains("(1 orphan, 1 foreign)"), "{text}");
    assert!(text.contains("reaping now would end 4 processes in 1 tree"), "{text}");
    sb.assert_alive(&[npm, node, chrome, ctx7]);
}

// ------------------------------------------------------------------ errors

#[test]
fn scan_of_a_nonexistent_scope_fails_clearly() {
    let dir = TempDir::new("noscope");
    let cfg = dir.config(0, "");
    let out = reaperctl(["scan", "--json", "--scope", "999999999", "--config", cfg.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("scope process 999999999 does not exist"), "{err}");
    assert!(out.stdout.is_empty(), "no report on failure: {}", String::from_utf8_lossy(&out.stdout));

    let out = reaperctl(["scan", "--scope", "0", "--config", cfg.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a process id"));
}

/// Runs `reaperctl validate` on `text` and returns (exit code, what it said,
/// file path): "ok" on stdout, problems on stderr (issue 36) and nothing then
/// on stdout.
fn validate(text: &str) -> (Option<i32>, String, String) {
    let dir = TempDir::new("validate");
    let path = dir.write("bad.toml", text);
    let out = reaperctl(["validate", "--config", path.to_str().unwrap()]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let said = if out.status.success() {
        stdout.into_owned()
    } else {
        assert_eq!(stdout, "", "problems go to stderr, not stdout; stderr:\n{stderr}");
        stderr.into_owned()
    };
    (out.status.code(), said, path.display().to_string())
}

/// Issue 36: problems are listed in the file's order (line, then column),
/// however the loader found them (parse errors, unknown keys, values).
#[test]
fn validate_lists_problems_on_stderr_in_line_order() {
    let text = "[patterns]\nprotect = [\"(\"]\nhosts = 3\n\n[reaper]\ngrace_secs = \"x\"\nbogus = 1\nmin_uid = -5\n\n\
                [daemon]\nnope = 2\n";
    let (code, out, file) = validate(text);
    assert_eq!(code, Some(78), "{out}");
    let positions: Vec<(usize, usize)> = out
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{file}:")))
        .map(|rest| {
            let mut it = rest.splitn(3, ':').map(|n| n.parse::<usize>().unwrap());
            (it.next().unwrap(), it.next().unwrap())
        })
        .collect();
    assert_eq!(positions.len(), 6, "{out}");
    let mut sorted = positions.clone();
    sorted.sort_unstable();
    assert_eq!(positions, sorted, "in line order:\n{out}");
    assert_eq!(out.lines().last(), Some("6 problems found"), "{out}");
}

#[test]
fn validate_accepts_a_good_file() {
    let (code, out, file) = validate("[reaper]\ngrace_secs = 5\n[patterns]\nprotect = ['--http']\n");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("ok ("), "{out}");
    assert!(out.contains(&file), "{out}");
}

#[test]
fn validate_reports_invalid_toml_with_position() {
    let (code, out, file) = validate("[reaper]\ngrace_secs = 5\n[patterns\n");
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains(&format!("{file}:3:")), "{out}");
    assert!(out.contains("1 problem found"), "{out}");
}

#[test]
fn validate_reports_unknown_key_with_position() {
    let (code, out, file) = validate("[reaper]\ngrace_secs = 5\ngrace = 3\n");
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains(&format!("{file}:3:1: ")), "{out}");
    assert!(out.contains("unknown field `grace`"), "{out}");
}

#[test]
fn validate_reports_wrong_type_with_position() {
    let (code, out, file) = validate("[reaper]\ngrace_secs = \"ten\"\n");
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains(&format!("{file}:2:14: ")), "{out}");
}

#[test]
fn validate_reports_every_semantic_problem_of_a_file() {
    let text = "[reaper]\ninterval_secs = 0\ngrace_secs = 700000\nmin_uid = -1\n\
                [patterns]\nservers = ['ok', '(unclosed', '[z-a]']\n\
                [daemon]\nsocket = \"relative.sock\"\n";
    let (code, out, file) = validate(text);
    assert_eq!(code, Some(78), "{out}");
    for want in [
        format!("{file}:2:17: reaper.interval_secs: must be between 1 and 86400 (got 0)"),
        format!("{file}:3:14: reaper.grace_secs: must be between 0 and 604800 (got 700000)"),
        format!("{file}:4:11: reaper.min_uid: must be between 0 and"),
        format!("{file}:6:18: patterns.servers[1]: invalid regex"),
        format!("{file}:6:31: patterns.servers[2]: invalid regex"),
        format!("{file}:8:10: daemon.socket: must be an absolute path"),
    ] {
        assert!(out.lines().any(|l| l.starts_with(&want)), "missing {want:?} in:\n{out}");
    }
    assert!(out.contains("6 problems found"), "{out}");
}
