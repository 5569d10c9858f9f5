//! Servers known from the hosts' own MCP configs (issue 12), against real
//! trees and the real `mcp-reaperd --once`: the official quickstart's
//! `uv --directory D run weather.py` → `python weather.py`, named in a
//! project's `.mcp.json` or in `~/.claude.json`, is reaped once its host is
//! `SIGKILL`ed; an identical `python weather.py` that no config names is left
//! alone.
//!
//! Safety: as in tests/reap.rs, every tree lives below its own sandbox scope
//! process and every reaper run is `--scope`d to it. The reaper's `$HOME` is
//! a fixture home of the test's own.

mod common;

use std::path::{Path, PathBuf};

use std::time::Duration;

use common::{Daemon, Launch, Sandbox, Spec, TempDir, alive, in_any_tree, s, wait_until};
use serde_json::{Value, json};

/// A fixture home, a project and two directories each holding a weather.py.
struct Fixture {
    dir: TempDir,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir = TempDir::new(tag);
        for d in ["home", "project", "weather", "other"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        for d in ["weather", "other"] {
            std::fs::write(dir.path().join(d).join("weather.py"), "# the quickstart server\n").unwrap();
        }
        Fixture { dir }
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    fn path_str(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }
    /// `{"mcpServers": {"weather": uv --directory <weather> run weather.py}}`
    fn quickstart(&self) -> String {
        json!({"mcpServers": {"weather": {"command": "uv",
            "args": ["--directory", self.path_str("weather"), "run", "weather.py"], "env": {"API_KEY": "x"}}}})
        .to_string()
    }
    fn config(&self) -> PathBuf {
        self.dir.config(0, "")
    }
}

/// The host in `cwd`, below it the quickstart chain (uv staying the parent
/// of python, started in the weather directory) and an identical python in
/// another directory; each holds pipes to its parent.
fn host_with_quickstart(f: &Fixture, host: &[&str]) -> Spec {
    Spec::new(host)
        .cwd(&f.path("project"))
        .child(
            Spec::new(&["uv", "--directory", &f.path_str("weather"), "run", "weather.py"])
                .child(Spec::new(&["python3", "weather.py"]).cwd(&f.path("weather"))),
        )
        .child(Spec::new(&["python3", "weather.py"]).cwd(&f.path("other")))
}

/// `mcp-reaperd --once --json --scope S` with `$HOME` the fixture's home.
fn once(f: &Fixture, sb: &Sandbox) -> Value {
    run(
        f,
        env!("CARGO_BIN_EXE_mcp-reaperd"),
        &["--once", "--json", "--log-target", "stderr", "--scope", &s(sb.scope_pid())],
    )
}

/// `reaperctl scan --json --scope S`, the same way.
fn scan(f: &Fixture, sb: &Sandbox) -> Value {
    run(f, env!("CARGO_BIN_EXE_reaperctl"), &["scan", "--json", "--scope", &s(sb.scope_pid())])
}

fn run(f: &Fixture, bin: &str, args: &[&str]) -> Value {
    common::json_with_home(bin, args, &f.config(), &f.path("home"))
}

fn outcomes(v: &Value) -> Vec<&Value> {
    v["outcomes"].as_array().map(|a| a.iter().collect()).unwrap_or_default()
}

fn pid_where(sb: &Sandbox, argv: &str, cwd: &Path) -> i32 {
    sb.ready()
        .iter()
        .find(|r| r.cmd == argv && std::fs::read_link(format!("/proc/{}/cwd", r.pid)).is_ok_and(|c| c == cwd))
        .map_or_else(|| panic!("no {argv:?} in {}: {:#?}", cwd.display(), sb.ready()), |r| r.pid)
}

#[test]
fn quickstart_in_a_projects_mcp_json_is_reaped_after_its_host_dies() {
    let f = Fixture::new("hostcfg-project");
    std::fs::write(f.path("project/.mcp.json"), f.quickstart()).unwrap();
    std::fs::create_dir_all(f.path("project/.vscode")).unwrap();
    std::fs::write(f.path("project/.vscode/mcp.json"), "{\"servers\": {").unwrap();
    let sb = Sandbox::new(vec![host_with_quickstart(&f, &["claude"])]);
    let host = sb.pid_of("claude");
    let uv = sb.pid_of("uv --directory");
    let server = pid_where(&sb, "python3 weather.py", &f.path("weather"));
    let other = pid_where(&sb, "python3 weather.py", &f.path("other"));

    // While the host lives the tree is live, and the reaper learns from the
    // host's project what its servers are.
    let v = once(&f, &sb);
    assert!(outcomes(&v).is_empty(), "nothing is reaped below a live host: {v:#}");
    let v = scan(&f, &sb);
    let m = in_any_tree(&v, server).unwrap_or_else(|| panic!("the configured python is no tree member: {v:#}"));
    assert_eq!(m["role"], "server", "{m:#}");
    let file = f.path_str("project/.mcp.json");
    assert_eq!(
        m["role_rule"],
        format!("configured in {file} (mcpServers.weather); seen as a child of host claude [{host}]")
    );
    assert_eq!(m["configured"]["key"], "mcpServers.weather", "{m:#}");
    assert!(in_any_tree(&v, other).is_none(), "the unconfigured python is no server: {v:#}");
    assert!(v["hosts"]["servers"].as_array().is_some_and(|s| s.iter().any(|x| x["file"] == file.as_str())), "{v:#}");
    // `reaperctl hosts` lists the host, the file and the server.
    let h = run(&f, env!("CARGO_BIN_EXE_reaperctl"), &["hosts", "--json", "--scope", &s(sb.scope_pid())]);
    assert!(
        h["hosts"].as_array().unwrap().iter().any(|x| x["pid"] == host && x["cwd"] == f.path_str("project")),
        "{h:#}"
    );
    let srv =
        h["servers"].as_array().unwrap().iter().find(|x| x["file"] == file.as_str()).unwrap_or_else(|| panic!("{h:#}"));
    assert_eq!(srv["key"], "mcpServers.weather", "{h:#}");
    assert_eq!(srv["program"], "weather.py", "{h:#}");
    assert!(!h.to_string().contains("API_KEY"), "no env of a config is shown: {h:#}");
    let bad = f.path_str("project/.vscode/mcp.json");
    let bad =
        h["files"].as_array().unwrap().iter().find(|x| x["path"] == bad.as_str()).unwrap_or_else(|| panic!("{h:#}"));
    assert!(bad["error"].as_str().is_some_and(|e| e.starts_with("invalid JSON")), "{bad:#}");
    let state = std::fs::read_to_string(f.path("state.json")).unwrap();
    assert!(state.contains("\"lineage\"") && state.contains("mcpServers.weather"), "{state}");
    assert!(!state.contains("API_KEY"), "no env of a config is kept: {state}");

    // The host dies: no live host points at the project any more, the state
    // file remembers what was seen.
    sb.kill_host(host);
    let v = once(&f, &sb);
    let o = outcomes(&v);
    assert_eq!(o.len(), 1, "one tree reaped: {v:#}");
    assert_eq!(o[0]["root"]["pid"], uv, "{v:#}");
    assert_eq!(o[0]["verdict"], "orphan", "{v:#}");
    assert!(wait_until(Duration::from_secs(60), || !alive(uv) && !alive(server)));
    sb.assert_alive(&[other]);
}

#[test]
fn without_what_was_seen_a_dead_hosts_project_server_is_left_alone() {
    // The same tree, but the reaper never saw the host alive: nothing tells
    // it what the dead host's project configured, so it keeps the tree.
    let f = Fixture::new("hostcfg-unseen");
    std::fs::write(f.path("project/.mcp.json"), f.quickstart()).unwrap();
    let sb = Sandbox::new(vec![host_with_quickstart(&f, &["claude"])]);
    let (host, uv) = (sb.pid_of("claude"), sb.pid_of("uv --directory"));
    let server = pid_where(&sb, "python3 weather.py", &f.path("weather"));
    sb.kill_host(host);
    let v = once(&f, &sb);
    assert!(outcomes(&v).is_empty(), "{v:#}");
    sb.assert_alive(&[uv, server]);
}

#[test]
fn quickstart_in_claude_json_is_reaped_without_a_live_host() {
    // User-level configs are read whether or not a host lives.
    let f = Fixture::new("hostcfg-user");
    std::fs::write(f.path("home/.claude.json"), f.quickstart()).unwrap();
    let sb = Sandbox::new(vec![host_with_quickstart(&f, &["claude"])]);
    let (host, uv) = (sb.pid_of("claude"), sb.pid_of("uv --directory"));
    let server = pid_where(&sb, "python3 weather.py", &f.path("weather"));
    let other = pid_where(&sb, "python3 weather.py", &f.path("other"));
    sb.kill_host(host);
    let v = once(&f, &sb);
    let o = outcomes(&v);
    assert_eq!(o.len(), 1, "{v:#}");
    assert_eq!(o[0]["root"]["pid"], uv, "{v:#}");
    assert!(wait_until(Duration::from_secs(60), || !alive(uv) && !alive(server)));
    sb.assert_alive(&[other]);
}

#[test]
fn a_bare_script_name_counts_only_for_a_child_carrying_its_hosts_marker() {
    // `python server.py` in ~/.claude.json names no directory: only a child
    // of a live Claude Code that carries CLAUDECODE=1 is that server.
    let f = Fixture::new("hostcfg-marker");
    let cfg = json!({"mcpServers": {"srv": {"command": "python3", "args": ["server.py"]}}});
    std::fs::write(f.path("home/.claude.json"), cfg.to_string()).unwrap();
    let sb = Sandbox::new(vec![
        Spec::new(&["claude"])
            .child(
                Spec::new(&["python3", "server.py"])
                    .cwd(&f.path("weather"))
                    .env("CLAUDECODE", "1")
                    .env("CLAUDE_CODE_SESSION_ID", "0b9e6c1a-5d2f-4c3e-9f00-1234abcd5678"),
            )
            .child(Spec::new(&["python3", "server.py"]).cwd(&f.path("other"))),
    ]);
    let host = sb.pid_of("claude");
    let marked = pid_where(&sb, "python3 server.py", &f.path("weather"));
    let unmarked = pid_where(&sb, "python3 server.py", &f.path("other"));
    assert!(outcomes(&once(&f, &sb)).is_empty());
    let v = scan(&f, &sb);
    let m = in_any_tree(&v, marked).unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(m["configured"]["session"], "0b9e6c1a-5d2f-4c3e-9f00-1234abcd5678", "{m:#}");
    assert!(in_any_tree(&v, unmarked).is_none(), "{v:#}");
    sb.kill_host(host);
    let v = once(&f, &sb);
    let o = outcomes(&v);
    assert_eq!(o.len(), 1, "{v:#}");
    assert_eq!(o[0]["root"]["pid"], marked, "{v:#}");
    assert!(wait_until(Duration::from_secs(60), || !alive(marked)));
    sb.assert_alive(&[unmarked]);
}

#[test]
fn the_daemon_remembers_what_it_saw_across_a_restart_and_logs_a_bad_file_once() {
    let f = Fixture::new("hostcfg-daemon");
    std::fs::write(f.path("project/.mcp.json"), f.quickstart()).unwrap();
    std::fs::create_dir_all(f.path("project/.cursor")).unwrap();
    std::fs::write(f.path("project/.cursor/mcp.json"), "{\"mcpServers\": {").unwrap();
    let sb = Sandbox::new(vec![host_with_quickstart(&f, &["claude"])]);
    let (host, uv) = (sb.pid_of("claude"), sb.pid_of("uv --directory"));
    let server = pid_where(&sb, "python3 weather.py", &f.path("weather"));
    let other = pid_where(&sb, "python3 weather.py", &f.path("other"));
    let cfg = f.dir.config_with(0, "interval_secs = 1", "");
    let how = Launch { env: vec![("HOME", f.path_str("home"))], ..Launch::default() };
    let mut d = Daemon::start_in(sb.scope_pid(), &cfg, f.dir.path(), &how);
    let live = |st: &serde_json::Value| {
        st["trees"].as_array().is_some_and(|t| t.iter().any(|t| t["root"] == uv && t["verdict"] == "live"))
    };
    d.status_until(Duration::from_secs(60), "the live quickstart tree is seen", live);
    // Several cycles with the bad file unchanged: one line.
    let scans = |st: &serde_json::Value| st["scans"]["count"].as_u64().unwrap_or(0);
    let first = scans(&d.status());
    d.status_until(Duration::from_secs(60), "three more scans", |st| scans(st) >= first + 3);
    assert_eq!(d.count("skipping MCP config"), 1, "{}", d.log_text());
    // What it saw is in its state file although no grace clock changed.
    let state = f.path("state.json");
    let saved = || std::fs::read_to_string(&state).is_ok_and(|t| t.contains(&format!("\"pid\": {server}")));
    assert!(wait_until(Duration::from_secs(60), saved), "{}", d.log_text());

    // The daemon dies, then the host; a new daemon judges by what was seen.
    d.sigkill();
    sb.kill_host(host);
    let d = Daemon::start_in(sb.scope_pid(), &cfg, f.dir.path(), &how);
    assert!(wait_until(Duration::from_secs(60), || !alive(uv) && !alive(server)), "{}", d.log_text());
    sb.assert_alive(&[other]);
}

#[test]
fn a_hosts_own_home_is_read_where_it_differs_from_the_reapers() {
    // The host runs with HOME elsewhere (a container, `sudo -u` keeping HOME,
    // a CI runner): its ~/.claude.json is there, not in the home the reaper
    // knows. Its server is learnt from the host's own environment and reaped
    // once the host is killed.
    let f = Fixture::new("hostcfg-hosthome");
    std::fs::create_dir_all(f.path("hosthome")).unwrap();
    let cfg = json!({"mcpServers": {"weather": {"command": "python3", "args": ["weather.py"],
        "cwd": f.path_str("weather")}}});
    std::fs::write(f.path("hosthome/.claude.json"), cfg.to_string()).unwrap();
    let sb = Sandbox::new(vec![
        Spec::new(&["claude"])
            .cwd(&f.path("project"))
            .env("HOME", &f.path_str("hosthome"))
            .child(Spec::new(&["python3", "weather.py"]).cwd(&f.path("weather")))
            .child(Spec::new(&["python3", "weather.py"]).cwd(&f.path("other"))),
    ]);
    let host = sb.pid_of("claude");
    let server = pid_where(&sb, "python3 weather.py", &f.path("weather"));
    let other = pid_where(&sb, "python3 weather.py", &f.path("other"));
    assert!(outcomes(&once(&f, &sb)).is_empty());
    let v = scan(&f, &sb);
    let m = in_any_tree(&v, server).unwrap_or_else(|| panic!("the configured python is no tree member: {v:#}"));
    let file = f.path_str("hosthome/.claude.json");
    assert_eq!(m["configured"]["file"], file.as_str(), "{m:#}");
    assert!(in_any_tree(&v, other).is_none(), "{v:#}");
    sb.kill_host(host);
    let v = once(&f, &sb);
    let o = outcomes(&v);
    assert_eq!(o.len(), 1, "{v:#}");
    assert_eq!(
        (o[0]["root"]["pid"].as_i64(), o[0]["verdict"].as_str()),
        (Some(server.into()), Some("orphan")),
        "{v:#}"
    );
    assert!(wait_until(Duration::from_secs(10), || !alive(server)));
    sb.assert_alive(&[other]);
}

#[test]
fn qwen_continue_and_kilo_configs_are_read_where_each_host_reads_them() {
    // Qwen Code: ~/.qwen/settings.json of its HOME; Continue's `cn --config
    // F` (relative to its cwd); Kilo: kilo.json below its XDG_CONFIG_HOME.
    let f = Fixture::new("hostcfg-newhosts");
    for d in ["qhome/.qwen", "xdg/kilo"] {
        std::fs::create_dir_all(f.path(d)).unwrap();
    }
    let q = json!({"mcpServers": {"weather": {"command": ".venv/bin/python", "args": ["-m", "weather"],
        "cwd": f.path_str("weather")}}});
    std::fs::write(f.path("qhome/.qwen/settings.json"), q.to_string()).unwrap();
    let cn = format!(
        "name: local\nversion: 0.0.1\nschema: v1\nmcpServers:\n  - name: forecast\n    command: uv\n    args:\n      - --directory\n      - {}\n      - run\n      - forecast.py\n",
        f.path_str("weather")
    );
    std::fs::write(f.path("project/cn.yaml"), cn).unwrap();
    let k = json!({"mcp": {"tides": {"type": "local", "command": ["uv", "run", "--directory", f.path_str("weather"), "tides.py"]}}});
    std::fs::write(f.path("xdg/kilo/kilo.json"), k.to_string()).unwrap();
    let sb = Sandbox::new(vec![
        Spec::new(&["qwen"]).env("HOME", &f.path_str("qhome")),
        Spec::new(&["cn", "-p", "hi", "--config", "cn.yaml"]).cwd(&f.path("project")),
        Spec::new(&["kilo", "run", "hi"]).env("XDG_CONFIG_HOME", &f.path_str("xdg")),
    ]);
    let h = run(&f, env!("CARGO_BIN_EXE_reaperctl"), &["hosts", "--json", "--scope", &s(sb.scope_pid())]);
    let hosts: Vec<&str> = h["hosts"].as_array().unwrap().iter().filter_map(|x| x["program"].as_str()).collect();
    for want in ["qwen", "cn", "kilo"] {
        assert!(hosts.contains(&want), "{want} is a known host: {h:#}");
    }
    let servers = h["servers"].as_array().unwrap();
    let find =
        |file: &str| servers.iter().find(|x| x["file"] == file).unwrap_or_else(|| panic!("nothing from {file}: {h:#}"));
    let qs = find(&f.path_str("qhome/.qwen/settings.json"));
    assert_eq!((qs["host"].as_str(), qs["program"].as_str()), (Some("qwen-code"), Some("weather")), "{h:#}");
    let cs = find(&f.path_str("project/cn.yaml"));
    assert_eq!((cs["host"].as_str(), cs["key"].as_str()), (Some("continue"), Some("mcpServers.forecast")), "{h:#}");
    assert_eq!(cs["program"], "forecast.py", "{h:#}");
    let ks = find(&f.path_str("xdg/kilo/kilo.json"));
    assert_eq!((ks["host"].as_str(), ks["program"].as_str()), (Some("kilo"), Some("tides.py")), "{h:#}");
}

#[test]
fn an_interpreter_running_pipx_is_pipx_and_its_orphan_tree_is_reaped() {
    // Debian's pipx is a Python script: `/usr/bin/python3 /usr/bin/pipx run
    // mcp-server-time` stays the parent of the server. It is that launcher,
    // so once the host dies the tree is an orphan, not `foreign`.
    let f = Fixture::new("hostcfg-pipx");
    let sb = Sandbox::new(vec![Spec::new(&["claude"]).child(
        Spec::new(&["/usr/bin/python3", "/usr/bin/pipx", "run", "mcp-server-time"]).child(Spec::new(&[
            "/home/u/.local/share/pipx/.cache/0a1b/bin/python",
            "/home/u/.local/share/pipx/.cache/0a1b/bin/mcp-server-time",
        ])),
    )]);
    let (host, pipx) = (sb.pid_of("claude"), sb.pid_of("/usr/bin/python3 /usr/bin/pipx"));
    let server = sb.pid_of("/home/u/.local/share/pipx/.cache/0a1b/bin/python");
    sb.kill_host(host);
    let v = once(&f, &sb);
    let o = outcomes(&v);
    assert_eq!(o.len(), 1, "{v:#}");
    assert_eq!((o[0]["root"]["pid"].as_i64(), o[0]["verdict"].as_str()), (Some(pipx.into()), Some("orphan")), "{v:#}");
    assert!(wait_until(Duration::from_secs(10), || !alive(pipx) && !alive(server)));
}

#[test]
fn qwens_python_dash_m_server_in_its_directory_is_reaped_and_its_namesake_elsewhere_kept() {
    // Qwen Code's documented shape: `.venv/bin/python -m weather` with `cwd`,
    // in ~/.qwen/settings.json of the HOME Qwen runs with. The module is the
    // one in that directory: a `python -m weather` elsewhere is another program.
    let f = Fixture::new("hostcfg-qwen");
    std::fs::create_dir_all(f.path("qhome/.qwen")).unwrap();
    let q = serde_json::json!({"mcpServers": {"weather": {"command": ".venv/bin/python", "args": ["-m", "weather"],
        "cwd": f.path_str("weather")}}});
    std::fs::write(f.path("qhome/.qwen/settings.json"), q.to_string()).unwrap();
    let venv = |d: &str| format!("{}/.venv/bin/python", f.path_str(d));
    let sb = Sandbox::new(vec![
        Spec::new(&["node", "/usr/local/bin/qwen"])
            .env("HOME", &f.path_str("qhome"))
            .child(
                Spec::new(&[&venv("weather"), "-m", "weather"])
                    .cwd(&f.path("weather"))
                    .env("QWEN_CODE_SESSION_ID", "5e0c-77"),
            )
            .child(Spec::new(&[&venv("other"), "-m", "weather"]).cwd(&f.path("other"))),
    ]);
    let host = sb.pid_of("node /usr/local/bin/qwen");
    let server = sb.pid_of(&venv("weather"));
    let other = sb.pid_of(&venv("other"));
    assert!(outcomes(&once(&f, &sb)).is_empty());
    let v = scan(&f, &sb);
    let m = in_any_tree(&v, server).unwrap_or_else(|| panic!("Qwen's server is in no tree: {v:#}"));
    assert_eq!(m["configured"]["file"], f.path_str("qhome/.qwen/settings.json"), "{m:#}");
    assert_eq!(m["configured"]["session"], "5e0c-77", "{m:#}");
    assert!(in_any_tree(&v, other).is_none(), "{v:#}");
    sb.kill_host(host);
    let v = once(&f, &sb);
    let o = outcomes(&v);
    assert_eq!(o.len(), 1, "{v:#}");
    assert_eq!(o[0]["root"]["pid"], server, "{v:#}");
    assert!(wait_until(Duration::from_secs(10), || !alive(server)));
    sb.assert_alive(&[other]);
}

#[test]
fn clines_hub_daemon_outlives_the_cli_and_is_kept_with_its_servers() {
    // `cline` starts a shared `cline --cline-hub-daemon` in a session of its
    // own (stdio on /dev/null) that outlives the CLI: a host by its own
    // pattern, kept with what runs below it once the CLI is gone.
    let f = Fixture::new("hostcfg-cline-hub");
    let sb = Sandbox::new(vec![
        Spec::new(&["node", "/usr/bin/cline"]).child(
            Spec::new(&["/usr/lib/node_modules/cline/bin/.cline", "--cline-hub-daemon"])
                .setsid()
                .stdio_null()
                .child(Spec::new(&["npm", "exec", "@modelcontextprotocol/server-memory"])),
        ),
    ]);
    let cli = sb.pid_of("node /usr/bin/cline");
    let hub = sb.pid_of("/usr/lib/node_modules/cline/bin/.cline");
    let server = sb.pid_of("npm exec @modelcontextprotocol/server-memory");
    sb.kill_host(cli);
    let v = once(&f, &sb);
    assert!(outcomes(&v).is_empty(), "{v:#}");
    let v = scan(&f, &sb);
    let t = v["trees"].as_array().unwrap().iter().find(|t| t["root"] == server).unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(t["verdict"], "live", "{t:#}");
    assert!(t["reason"].as_str().is_some_and(|r| r.contains(".cline")), "{t:#}");
    sb.assert_alive(&[hub, server]);
}
