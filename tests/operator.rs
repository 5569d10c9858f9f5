//! An operator's view over days: a dry run that says each thing once, the
//! grace a user's `scan` takes from the running daemon, the ledger of what
//! was reaped (`reaperctl history`) and the totals that outlive restarts.
//!
//! Safety: every daemon and `--once` is `--scope`d to its test's sandbox (a
//! child subreaper holding all the test's processes) with its own config,
//! socket and state; a [`common::Daemon`] is stopped when its test ends.

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Daemon, Launch, Sandbox, Spec, TempDir, s, scan_json, text, tree_rooted_at, wait_until};
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

fn recent_for(st: &Value, root: i32) -> Option<&Value> {
    st["recent"].as_array()?.iter().find(|e| e["root_pid"] == root)
}

fn unix_ms_now() -> u64 {
    u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

// ------------------------------------------------------------------ a quiet dry run

#[test]
fn a_dry_run_says_would_reap_once_per_tree_and_status_counts_the_repeats() {
    let sb = playwright_sandbox();
    let (host, npm) = (sb.pid_of("claude"), sb.pid_of("npm exec"));
    sb.kill_host(host);
    let cfg = sb.dir().config_with(0, "interval_secs = 1", "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(&["--dry-run"]));
    // Every tick finds the orphan due again: four ticks at least, spanning
    // more than one second (scans after the host's exit can come faster
    // than the interval, so four alone may all land in one second).
    let st = d.status_until(Duration::from_secs(30), "the orphan is planned four times over a second", |st| {
        recent_for(st, npm).is_some_and(|e| {
            e["repeats"].as_u64().unwrap_or(0) >= 3
                && e["first_at_unix"].as_u64().unwrap_or(u64::MAX) < e["at_unix"].as_u64().unwrap_or(0)
        })
    });
    let ev = recent_for(&st, npm).unwrap();
    assert_eq!(ev["dry_run"], true, "{ev:#}");
    assert!(ev["first_at_unix"].as_u64().unwrap() < ev["at_unix"].as_u64().unwrap(), "{ev:#}");
    let mine: Vec<&Value> = st["recent"].as_array().unwrap().iter().filter(|e| e["root_pid"] == npm).collect();
    assert_eq!(mine.len(), 1, "one entry per tree in the recent list: {st:#}");

    let log = d.log_text();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(&format!("would reap orphan tree root={npm} "))).collect();
    assert_eq!(lines.len(), 1, "said once, not at every tick:\n{log}");
    assert!(lines[0].contains("; reason: "), "the reason is on the line: {}", lines[0]);
    assert_eq!(log.matches("cycle (dry-run)").count(), 1, "one cycle line for it:\n{log}");

    let out = d.ctl(&["status"]);
    let shown = text(&out.stdout);
    let line =
        shown.lines().find(|l| l.contains(&format!("would reap orphan tree root={npm} "))).unwrap_or_else(|| {
            panic!("no recent line for {npm}:\n{shown}");
        });
    assert!(line.contains(" times over "), "{line}");

    // The metrics count the tree once, and say the mode.
    let metrics = text(&d.ctl(&["metrics"]).stdout);
    for want in [
        "mcp_reaper_would_reap_trees_total 1\n",
        "mcp_reaper_would_reap_trees 1\n",
        "mcp_reaper_mode{mode=\"dry-run\"} 1\n",
        "mcp_reaper_mode{mode=\"enforce\"} 0\n",
        "mcp_reaper_reaped_trees_total 0\n",
    ] {
        assert!(metrics.contains(want), "no {want:?} in\n{metrics}");
    }
    assert!(metrics.contains(&format!("mcp_reaper_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"))));
    sb.assert_alive(&[npm, sb.pid_of("node "), sb.pid_of("sleep")]);
}

// ------------------------------------------------------------------ scan asks the daemon

#[test]
fn a_scan_takes_the_grace_the_daemon_tracks_or_says_why_it_cannot() {
    let sb = playwright_sandbox();
    let (host, npm) = (sb.pid_of("claude"), sb.pid_of("npm exec"));
    let cfg = sb.dir().config(60, "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    sb.kill_host(host);
    let st = d.status_until(Duration::from_secs(20), "the orphan's grace starts", |st| {
        st["trees"].as_array().unwrap().iter().any(|t| t["root_pid"] == npm && t["first_seen_unix_ms"].is_u64())
    });
    let first_seen =
        st["trees"].as_array().unwrap().iter().find(|t| t["root_pid"] == npm).unwrap()["first_seen_unix_ms"]
            .as_u64()
            .unwrap();
    assert!(wait_until(Duration::from_secs(10), || unix_ms_now() >= first_seen + 3000));

    // A scan whose own state file says nothing (as a user's, who cannot read
    // root's): the daemon's clock, not a grace starting now.
    let own = TempDir::new("operator-scan");
    let user_cfg = own.config(60, "");
    let scope = s(sb.scope_pid());
    let v = scan_json(&user_cfg, &["--scope", &scope, "--socket", &s(d.socket.display())]);
    let t = tree_rooted_at(&v, npm);
    let left = t["grace_left_secs"].as_f64().unwrap_or_else(|| panic!("no grace left: {t:#}"));
    assert!(left <= 57.5, "the daemon's first sight, 3 s and more ago, counts: {t:#}");
    let alone = scan_json(&user_cfg, &["--scope", &scope, "--socket", "/nonexistent/control.sock"]);
    // Without a daemon the scan's own first sight is no clock (issue 36):
    // the orphan is what its evidence says, the grace said in words.
    let alone = tree_rooted_at(&alone, npm);
    assert_eq!(
        (&alone["verdict"], &alone["reap"], &alone["grace_left_secs"]),
        (&"orphan".into(), &true.into(), &Value::Null),
        "{alone:#}"
    );
    assert!(alone["reason"].as_str().unwrap().contains("a daemon reaps it after the 60s grace"), "{alone:#}");

    // A daemon that does not answer, and a state file that cannot be read: said.
    let mute_socket = own.path().join("mute.sock");
    let _mute = std::os::unix::net::UnixListener::bind(&mute_socket).unwrap();
    let broken = own.path().join("state-dir");
    std::fs::create_dir(&broken).unwrap();
    let broken_cfg = own.write(
        "broken.toml",
        format!(
            "[reaper]\ngrace_secs = 60\nmin_uid = 0\n\n[daemon]\nstate_file = {:?}\n",
            broken.display().to_string()
        ),
    );
    let out = common::reaperctl([
        "scan",
        "--json",
        "--config",
        &s(broken_cfg.display()),
        "--scope",
        &scope,
        "--socket",
        &s(mute_socket.display()),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("no grace clock could be read") && err.contains("did not answer"), "{err}");
    assert!(err.contains(&broken.display().to_string()) && err.contains(&mute_socket.display().to_string()), "{err}");
}

// ------------------------------------------------------------------ history

fn history(cfg: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec![s("history"), s("--json"), s("--config"), s(cfg.display())];
    args.extend(extra.iter().map(s));
    let out = common::reaperctl(&args);
    assert!(out.status.success(), "reaperctl {args:?}: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("history JSON ({e}): {}", text(&out.stdout)))
}

fn roots(h: &Value) -> Vec<i64> {
    h["entries"].as_array().unwrap().iter().map(|e| e["root_pid"].as_i64().unwrap()).collect()
}

#[test]
fn what_once_and_the_daemon_reap_is_in_the_history_and_outlives_a_restart() {
    // 1. `--once` reaps an orphan: the ledger has it, with its programs.
    let first = playwright_sandbox();
    let (host, npm_1) = (first.pid_of("claude"), first.pid_of("npm exec"));
    first.kill_host(host);
    let cfg = first.dir().config(0, "");
    let once = common::once_json(first.scope_pid(), &cfg);
    assert_eq!(once["outcomes"].as_array().map(Vec::len), Some(1), "{once:#}");
    let h = history(&cfg, &[]);
    assert_eq!(roots(&h), [i64::from(npm_1)], "{h:#}");
    let e = &h["entries"][0];
    assert_eq!(e["verdict"], "orphan", "{e:#}");
    assert_eq!(e["reaped"], true, "{e:#}");
    assert_eq!(e["processes"], 2, "{e:#}");
    assert!(e["reason"].as_str().is_some_and(|r| !r.is_empty()), "{e:#}");
    assert_eq!(e["programs"].as_array().map(Vec::len), Some(2), "npm's and node's: {e:#}");
    assert_eq!(h["lifetime"]["totals"]["trees_reaped"], 1, "{h:#}");
    let state_dir = first.dir().path().to_path_buf();

    // 2. A daemon on the same state directory reaps another: both are there,
    // and the status counts both in its lifetime.
    let second = playwright_sandbox();
    let (host, npm_2) = (second.pid_of("claude"), second.pid_of("npm exec"));
    let (socket, state, log) = (state_dir.join("control.sock"), state_dir.join("state.json"), state_dir.join("d.log"));
    let launch = Launch::default;
    let d = Daemon::start(second.scope_pid(), &cfg, &socket, &state, &log, &launch());
    second.kill_host(host);
    // The session counts it at once, the lifetime once the history is written.
    let st = d.status_until(Duration::from_secs(20), "the second orphan is reaped and in the history", |st| {
        st["totals"]["trees_reaped"].as_u64() == Some(1) && st["lifetime"]["totals"]["trees_reaped"].as_u64() == Some(2)
    });
    assert_eq!(st["lifetime"]["totals"]["processes_reaped"], 4, "{st:#}");
    let shown = text(&d.ctl(&["status"]).stdout);
    assert!(shown.contains("lifetime: 2 tree(s)"), "{shown}");
    let metrics = text(&d.ctl(&["metrics"]).stdout);
    assert!(metrics.contains("mcp_reaper_reaped_trees_by_verdict_total{verdict=\"orphan\"} 1\n"), "{metrics}");
    assert!(metrics.contains("mcp_reaper_mode{mode=\"enforce\"} 1\n"), "{metrics}");
    assert!(metrics.contains("mcp_reaper_would_reap_trees_total 0\n"), "{metrics}");
    let asked = history(&cfg, &["--socket", &s(socket.display())]);
    assert_eq!(roots(&asked), [i64::from(npm_1), i64::from(npm_2)], "the daemon's answer: {asked:#}");

    // 3. Restarted, it starts its session's totals at zero and its lifetime's where they were.
    drop(d);
    let d = Daemon::start(second.scope_pid(), &cfg, &socket, &state, &log, &launch());
    let st = d.status();
    assert_eq!(st["totals"]["trees_reaped"], 0, "{st:#}");
    assert_eq!(st["lifetime"]["totals"]["trees_reaped"], 2, "{st:#}");
    assert!(st["lifetime"]["since_unix"].as_u64().unwrap() <= h["entries"][0]["at_unix"].as_u64().unwrap());

    // A user asks the daemon: the lifetime counts, root's trees are not shown.
    let setpriv = common::find_tool("setpriv");
    if common::is_root()
        && let Some(setpriv) = setpriv
        && common::world_executable(Path::new(env!("CARGO_BIN_EXE_reaperctl")))
    {
        let out = std::process::Command::new(setpriv)
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups", env!("CARGO_BIN_EXE_reaperctl")])
            .args(["history", "--json", "--config", "-", "--socket"])
            .arg(&socket)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let theirs: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(theirs["filtered_for_uid"], 65534, "{theirs:#}");
        assert_eq!(roots(&theirs), Vec::<i64>::new(), "root's trees are not a user's to see: {theirs:#}");
        assert_eq!(theirs["lifetime"]["totals"]["trees_reaped"], 2, "{theirs:#}");
    } else {
        common::skip("history as a user", "needs root, setpriv and a reaperctl others can run");
    }

    // 4. The human view, and a window that leaves them out.
    let out = common::reaperctl(["history", "--config", &s(cfg.display()), "--since", "1h"]);
    let words = text(&out.stdout);
    assert!(words.contains(&format!("reaped orphan root={npm_1} ")), "{words}");
    assert!(words.contains(&format!("reaped orphan root={npm_2} ")), "{words}");
    assert!(words.contains("in the last 1h: 2 tree(s), 4 process(es)"), "{words}");
    let bad = common::reaperctl(["history", "--config", &s(cfg.display()), "--since", "3y"]);
    assert!(!bad.status.success() && text(&bad.stderr).contains("unknown unit"), "{}", text(&bad.stderr));
}

/// Issue 36: the README's quickstart names the state file on the daemon's
/// command line (`--state-file`), not in a config; `history --state-file`
/// reads the ledger beside it.
#[test]
fn history_reads_the_ledger_beside_a_state_file_named_on_the_command_line() {
    let sb = playwright_sandbox();
    let (host, npm) = (sb.pid_of("claude"), sb.pid_of("npm exec"));
    sb.kill_host(host);
    let cfg = sb.dir().config(0, "");
    let elsewhere = TempDir::new("operator-state-file");
    let state = elsewhere.path().join("state.json");
    let (once, _) = common::once_output(Some(sb.scope_pid()), &cfg, &["--state-file", &s(state.display())]);
    assert_eq!(once["outcomes"].as_array().map(Vec::len), Some(1), "{once:#}");
    // A reap is appended to the ledger's journal; both live beside the state file.
    assert!(elsewhere.path().join("history.jsonl").exists(), "the ledger is beside the state file");
    let h = history(&cfg, &["--state-file", &s(state.display())]);
    assert_eq!(roots(&h), [i64::from(npm)], "{h:#}");
    assert_eq!(h["path"], s(elsewhere.path().join("history.json").display()), "{h:#}");
}

/// Issue 34: a user names each process of an orphaned tree with a distinct
/// 3 KB `argv[0]` (120 members); reaped again and again, each entry of the
/// ledger stays a few names long, the rest counted.
#[test]
fn a_tree_of_long_distinct_names_adds_a_bounded_entry_each_time_it_is_reaped() {
    let dir = TempDir::new("operator-ledger");
    let cfg = dir.config(0, "");
    // The ledger and its journal, as written.
    let ledger = || {
        ["history.json", "history.jsonl"]
            .iter()
            .map(|n| std::fs::metadata(dir.path().join(n)).map_or(0, |m| m.len()))
            .sum::<u64>()
    };
    let mut sizes = Vec::new();
    for round in 0..3 {
        // The names are made below the server (the harness passes its specs
        // in one environment variable, which holds at most 128 KiB).
        let spawn = format!(
            "n=$(head -c 3000 /dev/zero | tr '\\0' n); for i in $(seq 118); do (exec -a \"w{round}-$i-$n\" sleep 600) & done; \
             until [ \"$(ls /proc/$$/task/$$/children >/dev/null && wc -w < /proc/$$/task/$$/children)\" -ge 118 ]; do \
             sleep 0.05; done; echo spawned > {}; wait",
            dir.path().join(format!("spawned-{round}")).display()
        );
        let server = Spec::new(NPM_PLAYWRIGHT).child(Spec::new(&["bash", "-c", &spawn]).real());
        let sb = Sandbox::new(vec![Spec::new(CLAUDE).child(server)]);
        let marker = dir.path().join(format!("spawned-{round}"));
        assert!(wait_until(Duration::from_secs(120), || marker.exists()), "the 118 names were not spawned");
        sb.kill_host(sb.pid_of("claude"));
        let once = common::once_json(sb.scope_pid(), &cfg);
        assert_eq!(once["outcomes"][0]["members"], 120, "{once:#}");
        sizes.push(ledger());
        assert!(sizes[round] > 0, "nothing written: {once:#}");
    }
    let grown: Vec<u64> = sizes.windows(2).map(|w| w[1] - w[0]).collect();
    // Before the bound each of these grew the ledger by about 360 KB.
    assert!(grown.iter().all(|&g| g < 2048), "bytes per reaped tree: {sizes:?}");
    let h = history(&cfg, &[]);
    let e = &h["entries"][2];
    assert_eq!(e["members"], 120, "{e:#}");
    assert_eq!(e["programs"].as_array().map(Vec::len), Some(8), "{e:#}");
    assert!(e["programs_more"].as_u64().is_some_and(|n| n > 100), "{e:#}");
}

// ------------------------------------------------------------------ config

/// `key = value` lines without their comments.
fn values(toml: &str) -> Vec<String> {
    toml.lines()
        .filter(|l| l.contains(" = "))
        .map(|l| l.rsplit_once("  # ").map_or(l, |(v, _)| v).to_string())
        .collect()
}

#[test]
fn config_prints_the_merged_values_and_where_each_comes_from() {
    let dir = TempDir::new("operator-config");
    let main = dir.write("config.toml", "[reaper]\n\n# why\ngrace_secs = 5\n");
    std::fs::create_dir(dir.path().join("config.d")).unwrap();
    let dropin = dir.write("config.d/10-mode.toml", "[reaper]\nmode = \"enforce\"\n");
    let out = common::reaperctl(["config", "--config", &s(main.display())]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains(&format!("grace_secs = 5  # {}:4\n", main.display())), "{shown}");
    assert!(shown.contains(&format!("mode = \"enforce\"  # {}:2\n", dropin.display())), "{shown}");
    assert!(shown.contains("interval_secs = 10  # <embedded default config>:"), "{shown}");
    assert!(shown.contains("# metrics_textfile is not set"), "{shown}");
    // Issue 36: an unset key whose absence means off says "off".
    assert!(shown.contains("# listen is not set: off"), "{shown}");
    assert!(!shown.contains("its built-in default"), "each unset key says what its absence means: {shown}");

    // What it prints is a config: the same values, read back alone.
    let copy = TempDir::new("operator-config-copy");
    let printed = copy.write("printed.toml", &shown);
    let again = common::reaperctl(["config", "--config", &s(printed.display())]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(values(&text(&again.stdout)), values(&shown));
    assert!(values(&shown).len() > 20);

    let json = common::reaperctl(["config", "--json", "--config", &s(main.display())]);
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let mode =
        v["settings"].as_array().unwrap().iter().find(|s| s["section"] == "reaper" && s["key"] == "mode").unwrap();
    assert_eq!(mode["value"], "enforce", "{mode:#}");
    assert_eq!(mode["from"], s(dropin.display()), "{mode:#}");
    assert_eq!(mode["line"], 2, "{mode:#}");

    // A broken layer: every problem, exit 78, as validate.
    dir.write("config.d/20-bad.toml", "[reaper]\ngrace_secs = -1\n");
    let bad = common::reaperctl(["config", "--config", &s(main.display())]);
    assert_eq!(bad.status.code(), Some(78), "{}", text(&bad.stderr));
    assert!(text(&bad.stderr).contains("20-bad.toml:2"), "{}", text(&bad.stderr));
}

// ------------------------------------------------------------------ doctor

fn doctor(args: &[String]) -> (Vec<Value>, std::process::Output) {
    let mut a = vec![s("doctor"), s("--json")];
    a.extend(args.iter().cloned());
    let out = common::reaperctl(&a);
    let checks: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor JSON ({e}): {}\n{}", text(&out.stdout), text(&out.stderr)));
    (checks.as_array().unwrap().clone(), out)
}

fn check<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no check {name}: {checks:#?}"))
}

#[test]
fn doctor_checks_each_part_and_says_what_a_missing_one_costs() {
    let sb = playwright_sandbox();
    let cfg = sb.dir().config(60, "");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::default());
    let (checks, out) = doctor(&[s("--config"), s(cfg.display()), s("--socket"), s(d.socket.display())]);
    assert_eq!(out.status.code(), Some(0), "{checks:#?}");
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    for want in [
        "config",
        "privileges",
        "/proc",
        "pidfds",
        "process events",
        "cgroups",
        "journald",
        "memory pressure",
        "engine sockets",
        "daemon",
    ] {
        assert!(names.contains(&want), "{want} not checked: {names:?}");
    }
    for c in &checks {
        assert!(["ok", "warn", "missing"].contains(&c["health"].as_str().unwrap()), "{c:#}");
        // What is not there always says what that costs.
        assert_eq!(c["health"] != "ok", c["cost"].is_string(), "{c:#}");
    }
    assert_eq!(check(&checks, "pidfds")["health"], "ok");
    let daemon = check(&checks, "daemon");
    assert_eq!(daemon["health"], "ok", "{daemon:#}");
    assert!(daemon["found"].as_str().unwrap().contains(&format!("pid {}", d.child.id())), "{daemon:#}");
    assert!(check(&checks, "memory pressure")["found"].as_str().unwrap().contains("off by configuration"));
    if common::is_root() {
        assert_eq!(check(&checks, "privileges")["health"], "ok");
    }

    // No daemon: a warning, with its cost; the words as well.
    let (checks, out) = doctor(&[s("--config"), s(cfg.display()), s("--socket"), s("/nonexistent/control.sock")]);
    assert_eq!(out.status.code(), Some(0));
    let daemon = check(&checks, "daemon");
    assert_eq!(daemon["health"], "warn", "{daemon:#}");
    assert!(daemon["cost"].as_str().unwrap().contains("nothing is reaped"), "{daemon:#}");
    let words = common::reaperctl(["doctor", "--config", &s(cfg.display()), "--socket", "/nonexistent/control.sock"]);
    let words = text(&words.stdout);
    assert!(words.lines().any(|l| l.starts_with("WARN     daemon")), "{words}");
    assert!(words.contains("without it: nothing is reaped"), "{words}");

    // A config the daemon would refuse: missing, exit 69.
    let bad = sb.dir().write("bad.toml", "[reaper]\ngrace_secs = -1\n");
    let (checks, out) = doctor(&[s("--config"), s(bad.display()), s("--socket"), s(d.socket.display())]);
    assert_eq!(out.status.code(), Some(69), "{checks:#?}");
    assert_eq!(check(&checks, "config")["health"], "missing");
}
