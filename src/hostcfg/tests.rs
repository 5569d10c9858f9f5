//! Fixture homes with each format, bad input, the cache, and the matcher
//! against the process chains configured commands expand into.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::files::{FileCache, MAX_BYTES, PROJECT, USER};
use super::formats::{Declared, Format, parse};
use super::matching::{Pattern, compile, running};
use super::*;

fn v(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| (*s).to_string()).collect()
}

fn decl(key: &str, argv: &[&str], cwd: Option<&str>) -> Declared {
    Declared { key: key.into(), argv: v(argv), cwd: cwd.map(str::to_string) }
}

struct Home(PathBuf);

impl Home {
    fn new(tag: &str) -> Home {
        let d = std::env::temp_dir().join(format!("mcp-reaper-hostcfg-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Home(d)
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn format_of(rel: &str, list: &[files::Source]) -> Format {
    list.iter().find(|s| s.rel == rel).unwrap().format
}

#[test]
fn every_host_format_yields_command_and_args_only() {
    let claude = r#"{"numStartups": 3, "mcpServers": {"weather": {"type": "stdio", "command": "uv",
        "args": ["--directory", "/home/u/weather", "run", "weather.py"], "env": {"API_KEY": "secret"}}},
      "projects": {"/home/u/p": {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
                                              "remote": {"type": "http", "url": "https://x/mcp", "headers": {"Authorization": "Bearer s"}}}}}}"#;
    assert_eq!(
        parse(Format::ClaudeJson, claude).unwrap(),
        vec![
            decl("mcpServers.weather", &["uv", "--directory", "/home/u/weather", "run", "weather.py"], None),
            decl(
                "projects[\"/home/u/p\"].mcpServers.fs",
                &["npx", "-y", "@modelcontextprotocol/server-filesystem", "."],
                Some("/home/u/p")
            ),
        ]
    );
    let gemini = "{\n // comments are allowed\n \"mcpServers\": {\"w\": {\"command\": \".venv/bin/python\", \"args\": [\"weather.py\"], \"cwd\": \"/srv/w\",},},\n}";
    assert_eq!(
        parse(Format::McpServers, gemini).unwrap(),
        vec![decl("mcpServers.w", &[".venv/bin/python", "weather.py"], Some("/srv/w"))]
    );
    let vscode =
        r#"{"servers": {"time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}}, "inputs": []}"#;
    assert_eq!(parse(Format::VsCode, vscode).unwrap(), vec![decl("servers.time", &["uvx", "mcp-server-time"], None)]);
    let zed = r#"{"theme": "One", "context_servers": {"new": {"command": "node", "args": ["/a/b.js"]},
        "old": {"command": {"path": "/usr/bin/x-server", "args": ["--stdio"], "env": {}}}, "ext": {"source": "extension"}}}"#;
    assert_eq!(
        parse(Format::Zed, zed).unwrap(),
        vec![
            decl("context_servers.new", &["node", "/a/b.js"], None),
            decl("context_servers.old", &["/usr/bin/x-server", "--stdio"], None),
        ]
    );
    let opencode = r#"{"$schema": "https://opencode.ai/config.json", "mcp": {"w": {"type": "local", "command": ["bun", "x", "my-mcp"], "environment": {"K": "v"}},
        "r": {"type": "remote", "url": "https://x"}}}"#;
    assert_eq!(parse(Format::OpenCode, opencode).unwrap(), vec![decl("mcp.w", &["bun", "x", "my-mcp"], None)]);
    let codex = "model = \"o3\"\n[mcp_servers.weather]\ncommand = \"uv\"\nargs = [\"--directory\", \"/w\", \"run\", \"weather.py\"]\nenv = { \"K\" = \"v\" }\n[mcp_servers.remote]\nurl = \"https://x\"\n";
    assert_eq!(
        parse(Format::CodexToml, codex).unwrap(),
        vec![decl("mcp_servers.weather", &["uv", "--directory", "/w", "run", "weather.py"], None)]
    );
    let goose = "GOOSE_PROVIDER: openai\nextensions:\n  developer:\n    bundled: true\n    enabled: true\n    name: developer\n    type: builtin\n  weather:\n    args:\n    - --directory\n    - '/home/u/my weather'\n    - run\n    - \"weather.py\"\n    cmd: uv\n    enabled: true\n    envs:\n      KEY: secret\n    type: stdio\n  flow:\n    cmd: npx   # a comment\n    args: [-y, \"@x/y-mcp\"]\n    type: stdio\nGOOSE_MODEL: gpt\n";
    assert_eq!(
        parse(Format::GooseYaml, goose).unwrap(),
        vec![
            decl("extensions.weather", &["uv", "--directory", "/home/u/my weather", "run", "weather.py"], None),
            decl("extensions.flow", &["npx", "-y", "@x/y-mcp"], None),
        ]
    );
    // Continue: a list of `{name, command, args, cwd}`; hub blocks and remote
    // servers have no command; the list may sit at the key's indent.
    let cont = "name: Local\nversion: 0.0.1\nschema: v1\nmodels:\n  - name: m\n    provider: openai\nmcpServers:\n  - name: weather\n    command: uv\n    args:\n      - run\n      - --directory\n      - /home/u/weather\n      - weather.py\n    env:\n      KEY: ${{ secrets.KEY }}\n  - uses: anthropic/memory-mcp\n  - name: remote\n    type: sse\n    url: https://x/mcp\n  - command: python3\n    args: [\"-m\", weather]\n    cwd: /home/u/w\nrules: []\n";
    assert_eq!(
        parse(Format::ContinueYaml, cont).unwrap(),
        vec![
            decl("mcpServers.weather", &["uv", "run", "--directory", "/home/u/weather", "weather.py"], None),
            decl("mcpServers[3]", &["python3", "-m", "weather"], Some("/home/u/w")),
        ]
    );
    assert_eq!(
        parse(Format::ContinueYaml, "mcpServers:\n- name: t\n  command: uvx\n  args: [mcp-server-time]\n").unwrap(),
        vec![decl("mcpServers.t", &["uvx", "mcp-server-time"], None)]
    );
    // Kilo's kilo.json is opencode's format; Qwen's settings.json Gemini's.
    let kilo = r#"{"mcp": {"w": {"type": "local", "command": ["uv", "run", "--directory", "/w", "weather.py"]}}}"#;
    assert_eq!(
        parse(Format::OpenCode, kilo).unwrap(),
        vec![decl("mcp.w", &["uv", "run", "--directory", "/w", "weather.py"], None)]
    );
    // Malformed input of each kind is an error, not a panic or a guess.
    for (f, t) in [
        (Format::McpServers, "{\"mcpServers\": {"),
        (Format::CodexToml, "[mcp_servers.x\ncommand = 1"),
        (Format::GooseYaml, "extensions:\n\tweather:\n"),
        (Format::GooseYaml, "extensions:\n  w:\n    cmd: \"unterminated\n"),
        (Format::ContinueYaml, "mcpServers:\n  - name: w\n    command: \"unterminated\n"),
        (Format::ContinueYaml, "mcpServers:\n  name: w\n"),
    ] {
        assert!(parse(f, t).is_err(), "{f:?} {t:?}");
    }
}

#[test]
fn files_are_cached_by_stamp_and_bad_ones_skipped() {
    let h = Home::new("files");
    let uid = std::fs::metadata(&h.0).unwrap().uid();
    let mut cache = FileCache::default();
    let good = h.write(".mcp.json", r#"{"mcpServers": {"w": {"command": "python", "args": ["weather.py"]}}}"#);
    let fmt = format_of(".mcp.json", PROJECT);
    let first = cache.get(&good, fmt, uid).unwrap().unwrap();
    assert_eq!(first.len(), 1);
    let again = cache.get(&good, fmt, uid).unwrap().unwrap();
    assert!(Arc::ptr_eq(&first, &again), "an unchanged file is not read again");
    std::fs::write(&good, r#"{"mcpServers": {}}"#).unwrap();
    assert!(cache.get(&good, fmt, uid).unwrap().unwrap().is_empty(), "a changed file (size) is read again");

    assert!(cache.get(&h.0.join("missing.json"), fmt, uid).is_none());
    let bad = h.write("bad.json", "{not json");
    assert!(cache.get(&bad, fmt, uid).unwrap().unwrap_err().contains("invalid JSON"));
    let huge = h.0.join("huge.json");
    std::fs::File::create(&huge).unwrap().set_len(MAX_BYTES + 1).unwrap();
    assert!(cache.get(&huge, fmt, uid).unwrap().unwrap_err().contains("larger than"));
    let a = h.0.join("loop-a");
    std::os::unix::fs::symlink(h.0.join("loop-b"), &a).unwrap();
    std::os::unix::fs::symlink(&a, h.0.join("loop-b")).unwrap();
    assert_eq!(cache.get(&a, fmt, uid).unwrap().unwrap_err(), "a symlink loop");
    // A symlink to a good file of the same owner is followed.
    let link = h.0.join("link.json");
    let target = h.write("dotfiles/mcp.json", r#"{"mcpServers": {"x": {"command": "x-server"}}}"#);
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_eq!(cache.get(&link, fmt, uid).unwrap().unwrap().len(), 1);
    let dir = h.0.join("adir");
    std::fs::create_dir(&dir).unwrap();
    assert_eq!(cache.get(&dir, fmt, uid).unwrap().unwrap_err(), "not a regular file");
    // Owned by someone else than the home's owner (as root: chown it).
    let other = uid.wrapping_add(4242);
    let err = cache.get(&target, fmt, other).unwrap().unwrap_err();
    assert!(err.contains(&format!("owned by uid {uid}")), "{err}");
    if uid == 0 {
        let theirs = h.write("theirs.json", r#"{"mcpServers": {"x": {"command": "x"}}}"#);
        std::os::unix::fs::chown(&theirs, Some(4242), None).unwrap();
        assert!(cache.get(&theirs, fmt, 0).unwrap().is_err());
    }
    // A FIFO in a config's place does not hang the reader.
    let fifo = h.0.join("fifo.json");
    if rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600)).is_ok() {
        assert_eq!(cache.get(&fifo, fmt, uid).unwrap().unwrap_err(), "not a regular file");
    }
}

#[test]
fn every_listed_file_parses_as_its_format() {
    // The lists name formats that exist; a relative path each, no duplicates.
    for list in [USER, PROJECT] {
        let mut seen = std::collections::HashSet::new();
        for s in list {
            assert!(Path::new(s.rel).is_relative() && seen.insert((s.base, s.rel)), "{}", s.rel);
            assert!(
                parse(s.format, if s.format == Format::CodexToml { "" } else { "{}" }).is_ok()
                    || matches!(s.format, Format::GooseYaml | Format::ContinueYaml)
            );
        }
    }
}

/// Whether a process with this argv and working directory runs `pattern`.
fn runs(pattern: &Pattern, argv: &[&str], cwd: &str) -> bool {
    let (text, program) = running(&v(argv));
    pattern.matches(&matching::Running { cmdline: &text, program }, || Some(PathBuf::from(cwd)))
}

#[test]
fn configured_commands_match_the_chains_they_expand_into() {
    // The official Python quickstart: uv stays the parent of the venv's python.
    let uv = compile(&v(&["uv", "--directory", "/home/u/weather", "run", "weather.py"]), None).unwrap();
    assert_eq!((uv.name.as_str(), uv.weak), ("weather.py", false));
    assert!(runs(&uv, &["uv", "--directory", "/home/u/weather", "run", "weather.py"], "/home/u/project"));
    assert!(runs(&uv, &["/home/u/weather/.venv/bin/python", "weather.py"], "/home/u/weather"));
    assert!(runs(&uv, &["python3", "/home/u/weather/weather.py"], "/"));
    assert!(!runs(&uv, &["python3", "weather.py"], "/home/u/other"), "another weather.py");
    assert!(!runs(&uv, &["python3", "forecast.py"], "/home/u/weather"));

    // Kilo's shape: the directory after `run`, and every order of uv's options.
    let kilo = compile(&v(&["uv", "run", "--directory", "/home/u/weather", "weather.py"]), None).unwrap();
    assert_eq!((kilo.name.as_str(), kilo.weak), ("weather.py", false));
    assert!(runs(&kilo, &["uv", "--no-cache", "run", "--directory", "/home/u/weather", "weather.py"], "/"));
    assert!(runs(&kilo, &["/home/u/weather/.venv/bin/python3", "weather.py"], "/home/u/weather"));
    assert!(!runs(&kilo, &["python3", "weather.py"], "/home/u/other"));
    // Qwen's shape: `python -m weather` in a project directory is the module there.
    let qwen = compile(&v(&[".venv/bin/python", "-m", "weather"]), Some(Path::new("/home/u/weather"))).unwrap();
    assert_eq!(qwen.name, "weather");
    assert!(runs(&qwen, &["/home/u/weather/.venv/bin/python", "-m", "weather"], "/home/u/weather"));
    assert!(!runs(&qwen, &["/home/u/other/.venv/bin/python", "-m", "weather"], "/home/u/other"));
    let installed = compile(&v(&["python3", "-m", "mcp_server_git"]), None).unwrap();
    assert!(runs(&installed, &["python3", "-m", "mcp_server_git"], "/anywhere"));

    // npx: npm exec, the shell it may run, and node running the bin.
    let npx = compile(&v(&["npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/u/code"]), None).unwrap();
    assert_eq!(npx.name, "@modelcontextprotocol/server-filesystem");
    assert!(runs(&npx, &["npm", "exec", "@modelcontextprotocol/server-filesystem", "/home/u/code"], "/"));
    assert!(runs(
        &npx,
        &[
            "node",
            "/home/u/.npm/_npx/1/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
            "/home/u/code"
        ],
        "/"
    ));
    assert!(!runs(&npx, &["npm", "exec", "@modelcontextprotocol/server-filesystem", "/etc"], "/"), "other arguments");

    // uvx: uv tool uvx, then the entry point's python.
    let uvx = compile(&v(&["uvx", "mcp-server-time"]), None).unwrap();
    assert!(runs(&uvx, &["/usr/bin/uv", "tool", "uvx", "mcp-server-time"], "/"));
    assert!(runs(
        &uvx,
        &["/home/u/.cache/uv/archive-v0/x/bin/python", "/home/u/.cache/uv/archive-v0/x/bin/mcp-server-time"],
        "/"
    ));

    // python and node with a path: the file must be the same.
    let py = compile(&v(&["python", "weather.py"]), Some(Path::new("/home/u/p"))).unwrap();
    assert!(!py.weak);
    assert!(runs(&py, &["/usr/bin/python3.12", "weather.py"], "/home/u/p"));
    assert!(!runs(&py, &["/usr/bin/python3.12", "weather.py"], "/tmp"));
    let node = compile(&v(&["node", "/home/u/weather/build/index.js"]), None).unwrap();
    assert!(runs(&node, &["/usr/bin/node", "/home/u/weather/build/index.js"], "/"));
    assert!(runs(&node, &["node", "./weather/build/index.js"], "/home/u"));
    assert!(!runs(&node, &["node", "/home/u/other/build/index.js"], "/"));

    // Gemini CLI's documented shape: the venv's python, with a cwd.
    let venv = compile(&v(&[".venv/bin/python", "weather.py"]), Some(Path::new("/home/u/weather"))).unwrap();
    assert!(runs(&venv, &["/home/u/weather/.venv/bin/python", "weather.py"], "/home/u/weather"));
    assert!(!runs(&venv, &["/home/u/other/.venv/bin/python", "weather.py"], "/home/u/other"));

    // A script whose directory is unknown matches by name, but weakly.
    let bare = compile(&v(&["python", "server.py"]), None).unwrap();
    assert!(bare.weak);
    assert!(runs(&bare, &["python3", "server.py"], "/anywhere"));
    // Inline code names nothing.
    assert!(compile(&v(&["node", "-e", "require('x')"]), None).is_none());
}

#[test]
fn markers_keep_only_the_session_id() {
    let m = markers::parse(b"PATH=/bin\0CLAUDECODE=1\0CLAUDE_CODE_SESSION_ID=3f2a-11\0API_KEY=secret\0");
    assert!(m.claude_code && !m.gemini_cli);
    assert_eq!(m.session.as_deref(), Some("3f2a-11"));
    assert!(m.fit(markers::family("claude")) && !m.fit(markers::family("gemini")));
    let g = markers::parse(b"GEMINI_CLI=1\0CLAUDE_CODE_SESSION_ID=$(rm -rf)\0");
    assert!(g.gemini_cli && g.session.is_none());
    assert!(markers::Markers::default().fit(markers::family("codex")));
    // Issue 23's hosts: opencode, Qwen Code, Kilo, Cline.
    let o = markers::parse(b"OPENCODE=1\0OPENCODE_PID=4242\0");
    assert!(o.fit(markers::family("opencode")) && !o.fit(markers::family("qwen")));
    let q = markers::parse(b"QWEN_CODE_SESSION_ID=5e0c-77\0QWEN_CODE_LAUNCHER_PID=17\0");
    assert!(q.fit(markers::family("qwen")) && q.session.as_deref() == Some("5e0c-77"));
    let k = markers::parse(b"KILO_PID=x\0KILO_RUN_ID=r1\0");
    assert!(k.fit(markers::family("kilo")) && !k.fit(markers::family("cline")));
    assert!(!markers::parse(b"KILO_PID=12ab\0OPENCODE=0\0").fit(markers::family("kilo")));
    assert!(markers::parse(b"CLINE_CONNECTOR_CLI_LAUNCH=1\0").fit(markers::family(".cline")));
}

#[test]
fn lineage_round_trips_and_skips_bad_entries() {
    let s = lineage::Seen {
        pid: 42,
        start_time: 7,
        uid: 1000,
        host_pid: 40,
        host_start_time: 5,
        host: "claude".into(),
        session: Some("abc".into()),
        file: "~/.claude.json".into(),
        key: "mcpServers.w".into(),
    };
    let mut l = lineage::Lineage::default();
    l.seen.insert(s.id().unwrap(), s);
    let mut j = l.to_json();
    j.as_array_mut().unwrap().push(serde_json::json!({"pid": "x"}));
    assert_eq!(lineage::Lineage::from_json(&j), l);
    assert!(lineage::Lineage::from_json(&serde_json::Value::Null).seen.is_empty());
}

#[test]
fn a_fixture_home_with_every_host_is_read_and_bad_files_are_listed_as_skipped() {
    let h = Home::new("home");
    let uid = std::fs::metadata(&h.0).unwrap().uid();
    let srv = |cmd: &str| format!(r#"{{"mcpServers": {{"s": {{"command": "{cmd}", "args": ["--stdio"]}}}}}}"#);
    h.write(".claude.json", &srv("claude-srv"));
    h.write(".cursor/mcp.json", &srv("cursor-srv"));
    h.write(".codex/config.toml", "[mcp_servers.s]\ncommand = \"codex-srv\"\nargs = [\"--stdio\"]\n");
    h.write(".gemini/settings.json", &format!("// settings\n{}", srv("gemini-srv")));
    h.write(".config/Code/User/mcp.json", r#"{"servers": {"s": {"command": "vscode-srv", "args": ["--stdio"],}}}"#);
    h.write(".config/Claude/claude_desktop_config.json", &srv("desktop-srv"));
    h.write(".config/zed/settings.json", r#"{"context_servers": {"s": {"command": "zed-srv", "args": ["--stdio"]}}}"#);
    h.write(
        ".config/goose/config.yaml",
        "extensions:\n  s:\n    cmd: goose-srv\n    args: [--stdio]\n    type: stdio\n",
    );
    h.write(
        ".config/opencode/opencode.jsonc",
        r#"{"mcp": {"s": {"type": "local", "command": ["opencode-srv", "--stdio"]}}}"#,
    );
    h.write(".codeium/windsurf/mcp_config.json", &srv("windsurf-srv"));
    // Amazon Q's file is a symlink loop, opencode.json malformed, VSCodium's huge.
    std::fs::create_dir_all(h.0.join(".aws/amazonq")).unwrap();
    std::os::unix::fs::symlink(h.0.join(".aws/amazonq/mcp.json"), h.0.join(".aws/amazonq/mcp.json")).unwrap();
    h.write(".config/opencode/opencode.json", "{\"mcp\": ");
    let huge = h.write(".config/VSCodium/User/mcp.json", "");
    std::fs::File::create(&huge).unwrap().set_len(MAX_BYTES + 1).unwrap();

    let mut reg = Registry::default();
    reg.homes.insert(uid, Some(h.0.clone()));
    reg.read(&[uid], uid, &[]);
    let mut programs: Vec<&str> = reg.configured.iter().map(|c| c.program.as_str()).collect();
    programs.sort_unstable();
    let want = ["claude-srv", "codex-srv", "cursor-srv", "desktop-srv", "gemini-srv"];
    let more = ["goose-srv", "opencode-srv", "vscode-srv", "windsurf-srv", "zed-srv"];
    assert_eq!(programs, want.iter().chain(&more).copied().collect::<Vec<_>>());
    assert!(reg.configured.iter().all(|c| c.command.last().map(String::as_str) == Some("--stdio")));
    let claude = reg.configured.iter().find(|c| c.program == "claude-srv").unwrap();
    assert_eq!(
        (claude.file.as_str(), claude.key.as_str(), claude.host),
        ("~/.claude.json", "mcpServers.s", "claude-code")
    );
    let skipped: Vec<(&str, &str)> =
        reg.report.iter().filter_map(|f| Some((f.path.as_str(), f.error.as_deref()?))).collect();
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    assert!(skipped.contains(&("~/.aws/amazonq/mcp.json", "a symlink loop")), "{skipped:?}");
    assert!(skipped.iter().any(|(p, e)| *p == "~/.config/opencode/opencode.json" && e.starts_with("invalid JSON")));
    assert!(skipped.iter().any(|(p, e)| *p == "~/.config/VSCodium/User/mcp.json" && e.starts_with("larger than")));

    // Another user's file in this home is not this user's config.
    if uid == 0 {
        std::os::unix::fs::chown(h.0.join(".claude.json"), Some(4242), None).unwrap();
        reg.last = None;
        reg.read(&[uid], uid, &[]);
        assert!(!reg.configured.iter().any(|c| c.program == "claude-srv"));
        let f = reg.report.iter().find(|f| f.path == "~/.claude.json").unwrap();
        assert_eq!(f.error.as_deref(), Some("owned by uid 4242, not by the home's owner 0"));
    }
}
