//! Servers known by their own program (issue 23): a host built on the MCP
//! SDK's `stdio_client` has no config file, and its quickstart `python
//! weather.py` names nothing MCP-like; the script itself imports the SDK's
//! server half. Real process trees, the real `reaperctl scan` and an
//! enforcing `mcp-reaperd --once`: the orphaned servers whose entry imports
//! (or whose project declares) the server SDK are reaped with that evidence
//! in their explanation; a script importing only the client half, a program
//! depending on `mcp` started on `/dev/null`, and a bystander corpus
//! (`python -m http.server`, a Jupyter kernel on sockets, language servers
//! speaking LSP on stdio) stay.
//!
//! The fixture scripts are never executed (stand-ins run with their argv
//! and working directory); the reaper only reads their text.
//!
//! Safety: as in tests/reap.rs, every tree lives below its own sandbox
//! scope process and every reaper run is `--scope`d to it; the reaper's
//! `$HOME` is the fixture's.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Sandbox, Spec, TempDir, alive, in_any_tree, reaped_roots, s, wait_until};
use serde_json::Value;

const WEATHER_PY: &str = "\"\"\"The quickstart's weather server.\"\"\"\nimport sys\ntry:\n    from mcp.server.fastmcp import FastMCP\nexcept ImportError:\n    FastMCP = None\n\nmcp = FastMCP(\"weather\") if FastMCP else None\nfor line in sys.stdin:\n    pass\n";
const CLIENT_PY: &str = "import sys\ntry:\n    from mcp import ClientSession, StdioServerParameters\n    from mcp.client.stdio import stdio_client\nexcept ImportError:\n    pass\nfor line in sys.stdin:\n    pass\n";
const INDEX_JS: &str = "#!/usr/bin/env node\nimport { McpServer } from \"@modelcontextprotocol/sdk/server/mcp.js\";\nimport { StdioServerTransport } from \"@modelcontextprotocol/sdk/server/stdio.js\";\nconst server = new McpServer({ name: \"weather\", version: \"1.0.0\" });\n";
const MAIN_JS: &str = "import { start } from \"./tools.js\";\nstart();\n";
const SEED_JS: &str = "import { readFileSync } from \"node:fs\";\nconsole.log(readFileSync(0));\n";

struct Fixture {
    dir: TempDir,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir = TempDir::new(tag);
        let f = Fixture { dir };
        f.write("home/.keep", "");
        f.write("agent/agent.py", CLIENT_PY);
        f.write("weather/weather.py", WEATHER_PY);
        f.write(
            "weather/pyproject.toml",
            "[project]\nname = \"weather\"\ndependencies = [\"mcp[cli]>=1.2.0\", \"httpx\"]\n",
        );
        f.write("tools/client_tool.py", CLIENT_PY);
        f.write("forecast/forecast.py", WEATHER_PY);
        f.write(
            "node-weather/package.json",
            r#"{"name": "weather", "type": "module", "bin": {"weather": "./build/index.js"}, "dependencies": {"@modelcontextprotocol/sdk": "^1.20.0"}}"#,
        );
        f.write("node-weather/build/index.js", INDEX_JS);
        f.write(
            "node-tides/package.json",
            r#"{"name": "tides", "main": "build/main.js", "dependencies": {"@modelcontextprotocol/sdk": "^1.20.0"}}"#,
        );
        f.write("node-tides/build/main.js", MAIN_JS);
        f.write("node-tides/scripts/seed.js", SEED_JS);
        f.write("pyright/package.json", r#"{"name": "pyright", "bin": {"pyright-langserver": "langserver.index.js"}}"#);
        f.write("pyright/langserver.index.js", "require('./dist/pyright-langserver');\n");
        f
    }
    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    fn path_str(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }
}

fn run(f: &Fixture, bin: &str, args: &[&str]) -> Value {
    run_with(f, &f.dir.config(0, ""), bin, args)
}

fn run_with(f: &Fixture, cfg: &Path, bin: &str, args: &[&str]) -> Value {
    common::json_with_home(bin, args, cfg, &f.path("home"))
}

fn once(f: &Fixture, sb: &Sandbox) -> Value {
    run(
        f,
        env!("CARGO_BIN_EXE_mcp-reaperd"),
        &["--once", "--json", "--log-target", "stderr", "--scope", &s(sb.scope_pid())],
    )
}

fn scan(f: &Fixture, sb: &Sandbox) -> Value {
    run(f, env!("CARGO_BIN_EXE_reaperctl"), &["scan", "--json", "--scope", &s(sb.scope_pid())])
}

fn pid_in(sb: &Sandbox, argv: &str, cwd: &Path) -> i32 {
    sb.ready()
        .iter()
        .find(|r| r.cmd == argv && std::fs::read_link(format!("/proc/{}/cwd", r.pid)).is_ok_and(|c| c == cwd))
        .map_or_else(|| panic!("no {argv:?} in {}: {:#?}", cwd.display(), sb.ready()), |r| r.pid)
}

#[test]
fn an_sdk_client_hosts_orphans_are_reaped_by_what_their_programs_import() {
    let f = Fixture::new("sdk-orphans");
    let index = f.path_str("node-weather/build/index.js");
    let sb = Sandbox::new(vec![
        Spec::new(&["python3", "agent.py"])
            .cwd(&f.path("agent"))
            // The quickstart server, as the SDK's stdio_client starts it.
            .child(Spec::new(&["python3", "weather.py"]).cwd(&f.path("weather")))
            // The TypeScript quickstart, through `npm start`'s shell.
            .child(Spec::new(&["sh", "-c", &format!("node {index}")]).child(Spec::new(&["node", &index])))
            // A package's declared entry whose project depends on the SDK.
            .child(Spec::new(&["node", "build/main.js"]).cwd(&f.path("node-tides")))
            // Same project, a helper script that is no entry of it.
            .child(Spec::new(&["node", "scripts/seed.js"]).cwd(&f.path("node-tides")))
            // Only the client half: another host, never a server.
            .child(Spec::new(&["python3", "client_tool.py"]).cwd(&f.path("tools")))
            // Imports the server SDK, but started on /dev/null: detached.
            .child(Spec::new(&["python3", "-m", "forecast"]).cwd(&f.path("forecast")).stdio_null()),
    ]);
    let host = sb.pid_of("python3 agent.py");
    let weather = pid_in(&sb, "python3 weather.py", &f.path("weather"));
    let (npm_sh, node) = (sb.pid_of("sh -c node"), sb.pid_of(&format!("node {index}")));
    let tides = sb.pid_of("node build/main.js");
    let seed = sb.pid_of("node scripts/seed.js");
    let client = sb.pid_of("python3 client_tool.py");
    let detached = sb.pid_of("python3 -m forecast");

    // While the host lives nothing is reaped.
    assert!(reaped_roots(&once(&f, &sb)).is_empty());
    sb.kill_host(host);

    // `[hosts] read_programs = false`: no program is read, none is known.
    let off = f.dir.write("off.toml", f.dir.config_text(0, "", "[hosts]\nread_programs = false"));
    let v = run_with(&f, &off, env!("CARGO_BIN_EXE_reaperctl"), &["scan", "--json", "--scope", &s(sb.scope_pid())]);
    assert!(in_any_tree(&v, weather).is_none() && in_any_tree(&v, node).is_none(), "{v:#}");

    let v = scan(&f, &sb);
    let m = in_any_tree(&v, weather).unwrap_or_else(|| panic!("the weather server is in no tree: {v:#}"));
    assert_eq!(m["role"], "server", "{m:#}");
    let file = f.path_str("weather/weather.py");
    assert_eq!(m["role_rule"], format!("its script imports mcp.server.fastmcp ({file})"), "{m:#}");
    assert_eq!(m["sdk"]["kind"], "imports", "{m:#}");
    assert_eq!(m["sdk"]["found"], "mcp.server.fastmcp", "{m:#}");
    let n = in_any_tree(&v, node).unwrap_or_else(|| panic!("the node server is in no tree: {v:#}"));
    assert_eq!(n["sdk"]["found"], "@modelcontextprotocol/sdk/server/mcp.js", "{n:#}");
    let t = in_any_tree(&v, tides).unwrap_or_else(|| panic!("the declared entry is in no tree: {v:#}"));
    assert_eq!(
        (t["sdk"]["kind"].as_str(), t["sdk"]["found"].as_str()),
        (Some("declares"), Some("@modelcontextprotocol/sdk"))
    );
    for p in [seed, client, detached] {
        assert!(in_any_tree(&v, p).is_none(), "{p} is no server: {v:#}");
    }

    let v = once(&f, &sb);
    let mut want = vec![i64::from(weather), i64::from(npm_sh), i64::from(tides)];
    want.sort_unstable();
    assert_eq!(reaped_roots(&v), want, "{v:#}");
    assert!(v["outcomes"].as_array().unwrap().iter().all(|o| o["verdict"] == "orphan"), "{v:#}");
    assert!(wait_until(Duration::from_secs(10), || [weather, npm_sh, node, tides].iter().all(|&p| !alive(p))));
    sb.assert_alive(&[seed, client, detached]);
}

#[test]
fn bystanders_with_stdio_links_in_an_mcp_project_stay() {
    // Orphaned with a pipe or a socket on stdio, in a directory whose
    // pyproject.toml depends on mcp: none of them is that project's server
    // (an http.server, a Jupyter kernel, language servers, gopls, git's
    // credential helpers, an ssh-agent).
    let f = Fixture::new("sdk-bystanders");
    let ls = f.path_str("pyright/langserver.index.js");
    let sb = Sandbox::new(vec![
        Spec::new(&["python3", "agent.py"])
            .cwd(&f.path("agent"))
            .child(Spec::new(&["python3", "-m", "http.server", "8000"]).cwd(&f.path("weather")))
            .child(
                Spec::new(&["python3", "-m", "ipykernel_launcher", "-f", "/tmp/kernel-1.json"])
                    .cwd(&f.path("weather"))
                    .stdio_socket(),
            )
            .child(Spec::new(&["node", &ls, "--stdio"]).cwd(&f.path("weather")))
            .child(Spec::new(&["typescript-language-server", "--stdio"]).cwd(&f.path("node-weather")))
            .child(Spec::new(&["rust-analyzer"]).cwd(&f.path("weather")).stdio_socket())
            .child(Spec::new(&["/home/u/go/bin/gopls", "serve"]).cwd(&f.path("weather")))
            .child(Spec::new(&["git", "credential-cache--daemon", "/home/u/.cache/git/credential/socket"]))
            .child(Spec::new(&["git-credential-libsecret", "get"]).cwd(&f.path("weather")))
            .child(Spec::new(&["ssh-agent", "-D", "-a", "/tmp/ssh-x/agent.sock"]).stdio_socket()),
    ]);
    let host = sb.pid_of("python3 agent.py");
    let all: Vec<i32> = sb.ready().iter().filter(|r| r.ppid == host).map(|r| r.pid).collect();
    assert_eq!(all.len(), 9, "{:#?}", sb.ready());
    sb.kill_host(host);
    let v = once(&f, &sb);
    assert!(reaped_roots(&v).is_empty(), "{v:#}");
    sb.assert_alive(&all);
}

/// The MCP Python SDK 2.x while serving: the host's pipes kept on fds 3 and
/// 4, fd 0 on /dev/null, fd 1 onto stderr; then busy (a blocking tool call).
const V2_PY: &str = "import os, time\ntry:\n    from mcp.server.fastmcp import FastMCP\nexcept ImportError:\n    FastMCP = None\nrd, wr = os.dup(0), os.dup(1)\nnull = os.open(os.devnull, os.O_RDONLY)\nos.dup2(null, 0)\nos.close(null)\nos.dup2(2, 1)\nwhile True:\n    time.sleep(3600)\n";

use common::python3;

#[test]
fn an_sdk_2_server_keeps_its_transport_above_fd_2_and_is_still_known() {
    let Some(python) = python3("an_sdk_2_server_keeps_its_transport_above_fd_2_and_is_still_known") else { return };
    let f = Fixture::new("sdk-v2");
    f.write("v2/server.py", V2_PY);
    let py = python.display().to_string();
    let sb = Sandbox::new(vec![
        Spec::new(&["python3", "agent.py"])
            .cwd(&f.path("agent"))
            .child(Spec::new(&[&py, "server.py"]).cwd(&f.path("v2")).real()),
    ]);
    let host = sb.pid_of("python3 agent.py");
    let server = sb.pid_of(&format!("{py} server.py"));
    let moved = || std::fs::read_link(format!("/proc/{server}/fd/0")).is_ok_and(|t| t == Path::new("/dev/null"));
    assert!(wait_until(Duration::from_secs(20), moved), "the server never moved its stdin to /dev/null");
    sb.kill_host(host);
    let v = scan(&f, &sb);
    let m = in_any_tree(&v, server).unwrap_or_else(|| panic!("the SDK 2.x server is in no tree: {v:#}"));
    assert_eq!(m["sdk"]["found"], "mcp.server.fastmcp", "{m:#}");
    assert_eq!(m["evidence"]["fd0"], "/dev/null", "{m:#}");
    assert_eq!(m["evidence"]["transport"], serde_json::json!({"input": 3, "output": 4}), "{m:#}");
    // Its transport is its stdio evidence: an orphan, not a detached job.
    let t = v["trees"].as_array().unwrap().iter().find(|t| t["root"] == server).unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    let reason = t["reason"].as_str().unwrap();
    assert!(
        reason.contains("pipe on fds 3 and 4") && reason.contains("its script imports mcp.server.fastmcp"),
        "{reason}"
    );
    assert_eq!(reaped_roots(&once(&f, &sb)), [i64::from(server)]);
    assert!(wait_until(Duration::from_secs(10), || !common::alive(server)), "the SDK 2.x orphan survived");
}

#[test]
fn an_sdk_2_server_whose_live_host_closed_its_moved_transport_is_abandoned() {
    let Some(python) = python3("an_sdk_2_server_whose_live_host_closed_its_moved_transport_is_abandoned") else {
        return;
    };
    let f = Fixture::new("sdk-v2-abandoned");
    f.write("v2/server.py", V2_PY);
    let py = python.display().to_string();
    // A host in a terminal-less headless run that ends the server's stdin
    // (fd 0, which the server has moved to fd 3) and keeps running.
    let sb = Sandbox::new(vec![
        Spec::new(&["claude", "--resume"])
            .stdio_null()
            .child(Spec::new(&[&py, "server.py"]).cwd(&f.path("v2")).real().close_stdin_after(300)),
    ]);
    let host = sb.pid_of("claude");
    let server = sb.pid_of(&format!("{py} server.py"));
    let moved = || std::fs::read_link(format!("/proc/{server}/fd/0")).is_ok_and(|t| t == Path::new("/dev/null"));
    assert!(wait_until(Duration::from_secs(20), moved), "the server never moved its stdin to /dev/null");
    let mut v = Value::Null;
    let seen = wait_until(Duration::from_secs(20), || {
        v = scan(&f, &sb);
        v["trees"].as_array().unwrap().iter().any(|t| t["root"] == server && t["verdict"] == "abandoned")
    });
    assert!(seen, "never abandoned: {v:#}");
    assert_eq!(reaped_roots(&once(&f, &sb)), [i64::from(server)]);
    assert!(wait_until(Duration::from_secs(10), || !common::alive(server)), "the abandoned server survived");
    sb.assert_alive(&[host]);
}
