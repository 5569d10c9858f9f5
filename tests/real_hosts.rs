//! Proof with real hosts (issue 23): the MCP quickstart's weather server,
//! configured in each real host's own config file the way its docs say,
//! with the host's `HOME` a temp dir that is not the passwd home (the
//! reaper's own `HOME` stays the passwd one), is reaped after the host is
//! killed (SIGKILL) mid tool call, with the evidence named in the reason.
//!
//! The hosts, Node >= 22, uv and the `mcp` SDK come from
//! `scripts/real-hosts-setup` (into `target/real-hosts/`); a host that is
//! not there is skipped with a printed reason. The model is
//! `scripts/real-hosts-mock.py` on loopback: it answers the host's first
//! model request with a call of the weather server's `get_forecast`, whose
//! NWS request (to the mock as well) never returns, so the server is busy
//! in a tool call, not reading its stdin, when its host dies.
//!
//! Safety: every host runs below its own sandbox scope process (a child
//! subreaper); the test signals only the host pid it found below that
//! scope, and every reaper run is `--scope`d to it.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Sandbox, Spec, TempDir, alive, descendants_of, ppid_of, s, sigkill, wait_until};
use serde_json::Value;

/// Where `scripts/real-hosts-setup` installs.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/real-hosts")
}

/// The mock model, stopped on drop.
struct Mock {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Mock {
    fn start(dir: &Path, retry_toolless: bool) -> Mock {
        let (port_file, log) = (dir.join("mock.port"), dir.join("mock.log"));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/real-hosts-mock.py");
        let child = Command::new(root().join("py/bin/python"))
            .arg(script)
            .arg(&port_file)
            .arg(&log)
            .env("MOCK_RETRY_TOOLLESS", if retry_toolless { "1" } else { "" })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("starting the mock model");
        let mut port = 0;
        let up = wait_until(Duration::from_secs(60), || {
            port = std::fs::read_to_string(&port_file).ok().and_then(|p| p.trim().parse().ok()).unwrap_or(0);
            port != 0
        });
        assert!(up, "the mock model did not start");
        Mock { child, port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One host at a time: each is a heavy Node or native program, and on a
/// busy machine several at once starve each other's start-up.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What one host's run needs.
struct Ctx {
    dir: TempDir,
    mock: Mock,
}

impl Ctx {
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }
    /// Writes `text` to `rel` below the host's HOME.
    fn home_file(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.home().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
    fn nws(&self) -> String {
        self.mock.url()
    }
}

fn weather() -> String {
    root().join("weather").display().to_string()
}
fn weather2() -> String {
    root().join("weather2").display().to_string()
}
fn bin(rel: &str) -> String {
    root().join(rel).display().to_string()
}

/// One host: how it is started and configured, and what the reason must name.
struct Case {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    /// Substring of the reaper's reason for the orphaned server tree.
    evidence: String,
    /// A helper of the host's that must be running before the kill and be
    /// kept by the reaper (a substring of its command line).
    keep: Option<&'static str>,
}

/// The host's own program (relative to `target/real-hosts/`), or the skip.
fn installed(test: &str, rel: &str) -> bool {
    let there = root().join(rel).exists() && root().join("py/bin/python").exists();
    if !there {
        common::skip(test, &format!("{} is not installed (run scripts/real-hosts-setup)", root().join(rel).display()));
    }
    there
}

/// Runs one host: starts it below a sandbox with the mock, waits until its
/// weather server is mid tool call, SIGKILLs the host, and has the reaper
/// judge and reap the orphan. Prints the reason and the time from kill to reap.
/// A host whose first model request left before its server was connected
/// never gets the tool (its retries resend the same tool list): it gets one
/// more run, its caches warm by then.
fn run_host(test: &str, needs: &str, retry_toolless: bool, make: impl Fn(&Ctx) -> Case) {
    if !installed(test, needs) || !installed(test, "weather/.venv/bin/python") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for run in 1..=2 {
        if attempt(test, retry_toolless, &make, run == 2) {
            return;
        }
    }
}

/// One run of [`run_host`]: false when the host never called the tool
/// (printed; a skip when `last`).
fn attempt(test: &str, retry_toolless: bool, make: &impl Fn(&Ctx) -> Case, last: bool) -> bool {
    let dir = TempDir::new("realhost");
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    std::fs::create_dir_all(dir.path().join("project")).unwrap();
    let mock = Mock::start(dir.path(), retry_toolless);
    let ctx = Ctx { dir, mock };
    let case = make(&ctx);
    let path = format!("{}:{}", root().join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let argv: Vec<&str> = case.argv.iter().map(String::as_str).collect();
    let mut host = Spec::new(&argv).real().stdio_null().cwd(&ctx.project()).env("PATH", &path);
    host = host.env("HOME", &ctx.home().display().to_string());
    for (k, v) in &case.env {
        host = host.env(k, v);
    }
    let sb = Sandbox::new(vec![host]);
    let scope = sb.scope_pid();
    let cfg = ctx.dir.config(0, "");

    // The weather server mid tool call: the mock saw its NWS request.
    let busy = wait_until(Duration::from_secs(120), || ctx.mock.requests().contains("GET /points/"));
    let tree = server_tree(scope);
    if !busy {
        // Not a failure of the reaper: this host never asked for the tool
        // against the mock (see the report in the file's table). Printed in full.
        let why = format!(
            "the host never called get_forecast in 120 s; server tree {tree:?}; mock log:\n{}\nhost stderr:\n{}",
            ctx.mock.requests(),
            std::fs::read_to_string(sb.dir().path().join("stderr.log")).unwrap_or_default()
        );
        if last {
            common::skip(test, &why);
        } else {
            eprintln!("RETRY {test}: {why}");
        }
        return last;
    }
    let (top, members) = tree.unwrap_or_else(|| panic!("{test}: no weather server below the scope"));
    let host_pid = ppid_of(top).expect("the server's parent");
    assert!(
        sb.is_descendant(host_pid) && host_pid != scope,
        "{test}: the server's parent {host_pid} is no host of ours"
    );
    let host_cmd = cmdline(host_pid);

    // While the host lives, nothing is reaped (and the reaper sees the host's
    // environment, where its config lives).
    let helper = case.keep.map(|k| {
        let mut found = None;
        let up = wait_until(Duration::from_secs(60), || {
            found = descendants_of(scope).into_iter().find(|&p| cmdline(p).contains(k));
            found.is_some()
        });
        assert!(up, "{test}: the host started no {k} of its own (is one of another run still up?)");
        found.unwrap_or_default()
    });
    let v = common::once_json(scope, &cfg);
    assert!(outcomes(&v).is_empty(), "{test}: reaped below a live host: {v:#}");
    let others: Vec<i32> =
        descendants_of(scope).into_iter().filter(|p| *p != host_pid && !members.contains(p)).collect();

    let killed = Instant::now();
    sigkill(host_pid);
    assert!(wait_until(Duration::from_secs(60), || !alive(host_pid)), "{test}: the host survived SIGKILL");
    let reparented = wait_until(Duration::from_secs(60), || ppid_of(top).is_none_or(|p| p == scope));
    assert!(reparented, "{test}: the server was not re-parented to the scope");
    assert!(alive(top), "{test}: the weather server exited by itself when its host died (it was mid tool call)");

    let scan = common::scan_json(&cfg, &["--scope", &s(scope)]);
    let t = scan["trees"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["root"] == top))
        .unwrap_or_else(|| panic!("{test}: the orphaned server {top} is in no tree: {scan:#}"));
    let reason = t["reason"].as_str().unwrap_or_default().to_string();
    assert_eq!(t["verdict"], "orphan", "{test}: {t:#}");
    // The evidence: in the tree's reason, or in its members' role rules.
    let rules: Vec<&str> =
        t["members"].as_array().into_iter().flatten().filter_map(|m| m["role_rule"].as_str()).collect();
    let said = format!("{reason} {}", rules.join(" "));
    assert!(said.contains(&case.evidence), "{test}: neither reason nor role rules name {:?}: {t:#}", case.evidence);

    let v = common::once_json(scope, &cfg);
    let o = outcomes(&v);
    let roots: Vec<i64> = o.iter().filter_map(|o| o["root"]["pid"].as_i64()).collect();
    assert_eq!(roots, [i64::from(top)], "{test}: {v:#}");
    assert_eq!(o[0]["verdict"], "orphan", "{test}: {v:#}");
    if let Some(h) = helper {
        assert!(alive(h), "{test}: the host's {} ({h}) was not kept", case.keep.unwrap_or_default());
    }
    let gone = wait_until(Duration::from_secs(30), || members.iter().all(|&p| !alive(p)));
    let took = killed.elapsed();
    assert!(gone, "{test}: the server tree {members:?} survived the reaper");
    // Nothing else it found was signalled: whatever lived beside the server
    // and is still there (a hub daemon, a host's helper) was judged keep.
    let kept: Vec<String> =
        others.iter().copied().filter(|&p| alive(p)).map(|p| format!("{p} {}", cmdline(p).trim_end())).collect();
    eprintln!(
        "REAL HOST {test}: host {host_pid} ({host_cmd}); server tree {members:?} reaped {took:?} after the kill; \
         others alive {kept:?} of {others:?}; reason: {reason}; role rules: {rules:?}"
    );
    true
}

fn outcomes(v: &Value) -> Vec<&Value> {
    v["outcomes"].as_array().map(|a| a.iter().collect()).unwrap_or_default()
}

fn cmdline(pid: i32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()).replace('\0', " ")
}

/// The topmost process below `scope` whose command line names the weather
/// server (`weather.py`, `-m weather`, or a launcher given its directory)
/// and every process below it.
fn server_tree(scope: i32) -> Option<(i32, Vec<i32>)> {
    let below = descendants_of(scope);
    let is_weather = |p: i32| {
        let c = cmdline(p);
        c.contains("weather.py") || c.contains("-m weather") || c.contains("/weather ")
    };
    let top = below.iter().copied().find(|&p| is_weather(p) && ppid_of(p).is_none_or(|pp| !is_weather(pp)))?;
    let mut members = vec![top];
    members.extend(descendants_of(top));
    Some((top, members))
}

fn kv(k: &str, v: &str) -> (String, String) {
    (k.to_string(), v.to_string())
}

// ---------------------------------------------------------------- the hosts
//
// Measured on 2026-11-26 (2 busy cores), `cargo test --test real_hosts --
// --nocapture`, from SIGKILL of the host to the server tree gone:
//
// | host (version)             | config, shape                                              | kill → reaped |
// |----------------------------|------------------------------------------------------------|---------------|
// | SDK client (mcp 2.3.0)     | none; `python weather.py` (SDK 2.x, transport on fds 6/7)  | 0.14–0.94 s   |
// | Claude Code 2.1.332        | ~/.claude.json, `uv --directory W run weather.py`          | 0.23–0.72 s   |
// | Codex 0.171.0              | ~/.codex/config.toml, `uv --directory W run weather.py`    | 0.22–0.85 s   |
// | Gemini CLI 0.61.0          | ~/.gemini/settings.json, `.venv/bin/python weather.py` cwd | 0.21–0.99 s   |
// | Qwen Code 0.24.4           | ~/.qwen/settings.json, `.venv/bin/python -m weather` cwd   | 0.18–1.94 s   |
// | Continue cn 1.5.47         | `--config` config.yaml, `uv --directory W run weather.py`  | 0.22–1.9 s    |
// | opencode 1.18.33           | ~/.config/opencode/opencode.json, `python W/weather.py`    | 0.42–0.77 s   |
// | Kilo 7.7.7                 | $XDG_CONFIG_HOME/kilo/kilo.json, `uv run --directory W …`  | 0.46–0.62 s   |
// | Cline 3.0.65               | ~/.cline/data/settings/cline_mcp_settings.json (hub kept)  | 0.16–0.36 s   |
//
// The time is mostly the test's own steps (waiting for the re-parenting,
// one `reaperctl scan`, one `mcp-reaperd --once`), not a daemon's interval.

#[test]
fn sdk_client() {
    // A host built on the SDK's stdio_client: no config file anywhere; the
    // server (SDK 2.x: its transport moves above fd 2) is known by its import.
    run_host("sdk_client", "weather2/client.py", false, |ctx| Case {
        argv: vec![bin("py/bin/python"), format!("{}/client.py", weather2())],
        env: vec![kv("NWS_API_BASE", &ctx.nws())],
        evidence: "its script imports mcp.server.mcpserver".into(),
        keep: None,
    });
}

#[test]
fn claude_code() {
    // ~/.claude.json `mcpServers`, the quickstart's `uv --directory W run weather.py`.
    // Its first model request may leave before the server is connected:
    // "overloaded" until the tool is there.
    run_host("claude_code", "npm/claude/node_modules/.bin/claude", true, |ctx| {
        let cfg = serde_json::json!({"mcpServers": {"weather": {"type": "stdio", "command": "uv",
            "args": ["--directory", weather(), "run", "weather.py"], "env": {"NWS_API_BASE": ctx.nws()}}}});
        ctx.home_file(".claude.json", &cfg.to_string());
        Case {
            argv: vec![
                bin("npm/claude/node_modules/.bin/claude"),
                "-p".into(),
                "What is the forecast?".into(),
                "--allowedTools".into(),
                "mcp__weather__get_forecast".into(),
            ],
            // Tool search defers MCP tools out of the first request.
            env: vec![
                kv("ANTHROPIC_BASE_URL", &ctx.mock.url()),
                kv("ANTHROPIC_API_KEY", "sk-mock"),
                kv("ENABLE_TOOL_SEARCH", "false"),
            ],
            evidence: ".claude.json".into(),
            keep: None,
        }
    });
}

#[test]
fn codex() {
    // $CODEX_HOME/config.toml (~/.codex) `[mcp_servers.weather]`, a
    // `model_provider` with the mock's base_url; the native binary the npm
    // wrapper starts. `required = true`: the first turn waits for the server
    // (else its tools may miss the request); MCP tool calls need approval,
    // which `exec` only bypasses with the flag.
    let rel = "npm/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
    run_host("codex", rel, true, |ctx| {
        ctx.home_file(
            ".codex/config.toml",
            &format!(
                "model = \"mock-model\"\nmodel_provider = \"mock\"\napproval_policy = \"never\"\n\n\
                 [model_providers.mock]\nname = \"mock\"\nbase_url = \"{}/v1\"\nenv_key = \"MOCK_API_KEY\"\n\
                 wire_api = \"responses\"\n\n[mcp_servers.weather]\ncommand = \"uv\"\n\
                 args = [\"--directory\", {:?}, \"run\", \"weather.py\"]\nenv = {{ NWS_API_BASE = {:?} }}\n\
                 required = true\n",
                ctx.mock.url(),
                weather(),
                ctx.nws()
            ),
        );
        Case {
            argv: vec![
                bin(rel),
                "exec".into(),
                "--dangerously-bypass-approvals-and-sandbox".into(),
                "--skip-git-repo-check".into(),
                "What is the forecast?".into(),
            ],
            env: vec![kv("MOCK_API_KEY", "sk-mock")],
            evidence: "config.toml".into(),
            keep: None,
        }
    });
}

#[test]
fn gemini_cli() {
    // ~/.gemini/settings.json `mcpServers`: `.venv/bin/python weather.py` with cwd.
    let rel = "npm/gemini/node_modules/@google/gemini-cli/bundle/gemini.js";
    run_host("gemini_cli", rel, true, |ctx| {
        let w = weather();
        let cfg = serde_json::json!({
            "mcpServers": {"weather": {"command": format!("{w}/.venv/bin/python"), "args": ["weather.py"],
                "cwd": w, "env": {"NWS_API_BASE": ctx.nws()}}},
            "security": {"auth": {"selectedType": "gemini-api-key"}}});
        ctx.home_file(".gemini/settings.json", &cfg.to_string());
        Case {
            argv: vec![bin("bin/node"), bin(rel), "--yolo".into(), "-p".into(), "What is the forecast?".into()],
            env: vec![
                kv("GEMINI_API_KEY", "mock"),
                kv("GOOGLE_GEMINI_BASE_URL", &ctx.mock.url()),
                kv("GEMINI_CLI_TRUST_WORKSPACE", "true"),
            ],
            evidence: "settings.json".into(),
            keep: None,
        }
    });
}

#[test]
fn qwen_code() {
    // ~/.qwen/settings.json `mcpServers`: Qwen's documented
    // `.venv/bin/python -m weather` with `cwd`; the OpenAI-compatible mock.
    let rel = "npm/qwen/node_modules/@qwen-code/qwen-code/cli-entry.js";
    run_host("qwen_code", rel, true, |ctx| {
        let w = weather();
        let cfg = serde_json::json!({
            "mcpServers": {"weather": {"command": format!("{w}/.venv/bin/python"), "args": ["-m", "weather"],
                "cwd": w, "env": {"NWS_API_BASE": ctx.nws()}}},
            "security": {"auth": {"selectedType": "openai"}},
            // Tool search would defer MCP tools behind `tool_search`.
            "tools": {"toolSearch": {"enabled": false}}});
        ctx.home_file(".qwen/settings.json", &cfg.to_string());
        Case {
            argv: vec![bin("bin/node"), bin(rel), "--yolo".into(), "-p".into(), "What is the forecast?".into()],
            env: vec![
                kv("OPENAI_API_KEY", "sk-mock"),
                kv("OPENAI_BASE_URL", &format!("{}/v1", ctx.mock.url())),
                kv("OPENAI_MODEL", "mock-model"),
            ],
            evidence: "settings.json".into(),
            keep: None,
        }
    });
}

#[test]
fn continue_cn() {
    // `cn -p … --config FILE`: config.yaml's `mcpServers` list and a model
    // with `apiBase`; cn gives its servers no marker.
    let rel = "npm/cn/node_modules/@continuedev/cli/dist/cn.js";
    run_host("continue_cn", rel, true, |ctx| {
        let file = ctx.home_file(
            ".continue/config.yaml",
            &format!(
                "name: Real hosts test\nversion: 0.0.1\nschema: v1\nmodels:\n  - name: Mock\n    provider: openai\n    \
                 model: mock-model\n    apiBase: {}/v1\n    apiKey: sk-mock\n    roles: [chat]\nmcpServers:\n  \
                 - name: weather\n    command: uv\n    args: [\"--directory\", \"{}\", \"run\", \"weather.py\"]\n    \
                 env:\n      NWS_API_BASE: {}\n",
                ctx.mock.url(),
                weather(),
                ctx.nws()
            ),
        );
        Case {
            argv: vec![
                bin("bin/node"),
                bin(rel),
                "-p".into(),
                "What is the forecast?".into(),
                "--auto".into(),
                "--config".into(),
                file.display().to_string(),
            ],
            env: vec![],
            evidence: "config.yaml".into(),
            keep: None,
        }
    });
}

#[test]
fn opencode() {
    // ~/.config/opencode/opencode.json `mcp` (type local, a command array)
    // and an @ai-sdk/openai-compatible provider with the mock's baseURL.
    let rel = "npm/opencode/node_modules/opencode-ai/bin/opencode.exe";
    run_host("opencode", rel, true, |ctx| {
        let w = weather();
        let cfg = opencode_config(ctx, &[&format!("{w}/.venv/bin/python"), &format!("{w}/weather.py")]);
        ctx.home_file(".config/opencode/opencode.json", &cfg);
        Case {
            argv: vec![bin(rel), "run".into(), "What is the forecast?".into()],
            env: vec![],
            evidence: "opencode.json".into(),
            keep: None,
        }
    });
}

#[test]
fn kilo() {
    // $XDG_CONFIG_HOME/kilo/kilo.json (opencode's format), Kilo's shape
    // `uv run --directory W weather.py`; the native binary its wrapper starts.
    let rel = "npm/kilo/node_modules/@kilocode/cli-linux-x64/bin/kilo";
    run_host("kilo", rel, true, |ctx| {
        let w = weather();
        let cfg = opencode_config(ctx, &["uv", "run", "--directory", &w, "weather.py"]);
        ctx.home_file("xdg/kilo/kilo.json", &cfg);
        Case {
            argv: vec![bin(rel), "run".into(), "--auto".into(), "What is the forecast?".into()],
            env: vec![kv("XDG_CONFIG_HOME", &ctx.home().join("xdg").display().to_string())],
            evidence: "kilo.json".into(),
            keep: None,
        }
    });
}

/// opencode's (and Kilo's) config: the mock as an OpenAI-compatible
/// provider, the weather server as a local MCP server running `command`.
fn opencode_config(ctx: &Ctx, command: &[&str]) -> String {
    serde_json::json!({
        "model": "mock/mock-model",
        "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
            "options": {"baseURL": format!("{}/v1", ctx.mock.url()), "apiKey": "sk-mock"},
            "models": {"mock-model": {"name": "Mock"}}}},
        "mcp": {"weather": {"type": "local", "command": command, "enabled": true,
            "environment": {"NWS_API_BASE": ctx.nws()}}}
    })
    .to_string()
}

#[test]
fn cline() {
    // Cline CLI 3.0: ~/.cline/data/settings/cline_mcp_settings.json (its data
    // dir `$CLINE_DATA_DIR`, else `$CLINE_DIR/data`, else ~/.cline/data: read
    // from its binary), `timeout` raised from its 3 s for a busy machine;
    // the model set by `cline auth` (OpenAI-compatible, the mock's base URL).
    // It starts a shared `cline --cline-hub-daemon` (a session of its own,
    // port 25463) that outlives the CLI and must be kept; a hub already up
    // from another run is reused instead, which this test reports.
    let rel = "npm/cline/node_modules/.bin/cline";
    run_host("cline", rel, true, |ctx| {
        let w = weather();
        let cfg = serde_json::json!({"mcpServers": {"weather": {"command": format!("{w}/.venv/bin/python"),
            "args": [format!("{w}/weather.py")], "env": {"NWS_API_BASE": ctx.nws()}, "disabled": false,
            "timeout": 60}}});
        ctx.home_file(".cline/data/settings/cline_mcp_settings.json", &cfg.to_string());
        let auth = Command::new(bin(rel))
            .args(["auth", "-p", "openai", "-k", "sk-mock", "-m", "mock-model", "-b"])
            .arg(format!("{}/v1", ctx.mock.url()))
            .env("HOME", ctx.home())
            .current_dir(ctx.project())
            .stdin(Stdio::null())
            .output()
            .expect("running cline auth");
        assert!(auth.status.success(), "cline auth: {}", common::text(&auth.stderr));
        Case {
            argv: vec![bin(rel), "What is the forecast?".into()],
            env: vec![],
            evidence: "cline_mcp_settings.json".into(),
            keep: Some("--cline-hub-daemon"),
        }
    });
}
