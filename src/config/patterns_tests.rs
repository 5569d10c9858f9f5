//! Unit tests of the role patterns: what text each target sees, the caps,
//! and classification with the embedded default.

use super::*;
use crate::config::{Config, Subject};

fn role(cmd: &str) -> Role {
    Config::embedded().matcher.classify(cmd, None).role
}

#[test]
fn roles_see_the_head_of_a_huge_argv_and_protect_sees_all_of_it() {
    let cfg = Config::from_str_with_default("t", "[patterns]\nprotect = ['keep-me-alive']").unwrap();
    let pad = "é".repeat(ROLE_TEXT / 2 + 1); // a multi-byte char straddles the cut
    let early = format!("node /x/.bin/playwright-mcp {pad}");
    assert_eq!(cfg.matcher.classify(&early, None).role, Role::Server);
    let late = format!("python3 {pad} /x/.bin/playwright-mcp keep-me-alive");
    let m = cfg.matcher.classify(&late, None);
    assert_eq!(m.role, Role::Other, "a server name past the first 64 KiB is not looked for");
    assert!(m.protect.is_some(), "protect is matched over the whole command line");
}

#[test]
fn cached_roles_are_reused_by_their_matcher_only() {
    let a = Config::embedded();
    let mut cache = None;
    let cmd = "node /x/.bin/playwright-mcp";
    assert_eq!(a.matcher.classify_cached(Subject::joined(cmd, None), &mut cache).role, Role::Server);
    // The same matcher trusts the cache, whatever the text now says.
    assert_eq!(a.matcher.classify_cached(Subject::joined("bash", None), &mut cache).role, Role::Server);
    assert_eq!(a.matcher.cached(cache).map(|m| m.role), Some(Role::Server));
    // A reloaded config (a new matcher) matches again.
    let b = Config::from_str_with_default("t", "[patterns]\nservers = ['^bash$']").unwrap();
    assert_eq!(b.matcher.cached(cache), None);
    assert_eq!(b.matcher.classify_cached(Subject::joined("bash", None), &mut cache).role, Role::Server);
    assert_eq!(
        b.matcher.classify_cached(Subject::joined("bash", None), &mut cache).pattern,
        b.matcher.classify("bash", None).pattern
    );
}

#[test]
fn default_hosts() {
    for cmd in [
        "node /home/u/.npm-global/lib/node_modules/@anthropic-ai/claude-code/cli.js --resume",
        "claude",
        "claude -p summarize",
        "/home/u/.vscode/extensions/anthropic.claude-code-2.0.1/resources/native-binary/claude --output-format stream-json",
        "/usr/share/cursor/cursor --type=utility --utility-sub-type=node.mojom.NodeService",
        "/usr/share/code/code --type=utility",
        "node /usr/lib/node_modules/@openai/codex/bin/codex.js",
        "codex",
        "node /usr/local/lib/node_modules/@google/gemini-cli/dist/index.js",
        "goose session",
        "/usr/bin/goosed agent",
        "opencode",
        "python3 -m hermes_cli.main",
        "/opt/zed/zed",
        "/home/u/.vscode-server/bin/abc/node /home/u/.vscode-server/bin/abc/out/bootstrap-fork --type=extensionHost",
        "node /usr/lib/node_modules/@github/copilot/npm-loader.js",
        "codex app-server --analytics-default-enabled",
    ] {
        assert_eq!(role(cmd), Role::Host, "{cmd}");
    }
}

#[test]
fn default_servers() {
    for cmd in [
        "node /home/u/.npm/_npx/9833c18b2d85bc59/node_modules/.bin/playwright-mcp",
        "node /home/u/.npm/_npx/1a2b/node_modules/.bin/context7-mcp",
        "node /home/u/.npm/_npx/1a2b/node_modules/.bin/chrome-devtools-mcp --headless",
        "node /home/u/.npm/_npx/1a2b/node_modules/.bin/mcp-server-filesystem /home/u",
        "node /usr/lib/node_modules/@modelcontextprotocol/server-github/dist/index.js",
        "/home/u/.cache/uv/archive-v0/Xy12/bin/python /home/u/.cache/uv/archive-v0/Xy12/bin/mcp-server-fetch",
        "python -m mcp_server_git --repository .",
        "mcp-remote https://example.invalid/sse",
        "docker run -i --rm mcp/github",
        "docker run -i --rm isokoliuk/mcp-searxng:latest",
        "podman run -i --rm docker.io/library/whatever",
        "/home/u/.local/share/claude/versions/2.1.197 --claude-in-chrome-mcp",
        "/usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe --computer-use-mcp",
        "claude mcp serve",
        "codex mcp-server",
        "/usr/local/bin/goose mcp developer",
        "node /home/u/.npm/_npx/a3/node_modules/.bin/mcp-server-filesystem /home/u/code",
        "uvx mcp-atlassian",
        "node /opt/homebrew/bin/gitnexus mcp",
    ] {
        assert_eq!(role(cmd), Role::Server, "{cmd}");
    }
}

#[test]
fn default_launchers() {
    for cmd in [
        "npm exec @scope/some-pkg",
        "npx -y something",
        "pnpm dlx foo",
        "bunx foo",
        "uvx foo",
        "uv tool uvx foo",
        "uv run server.py",
        "uv --directory /home/u/weather run weather.py",
        "pipx run foo",
        "docker run --rm ghcr.io/x/y",
        "npm run start",
        "bun run start",
        "go run ./cmd/x",
        "sh -c foo",
        "/bin/bash -lc foo",
        "bash -e -c foo",
    ] {
        assert_eq!(role(cmd), Role::Launcher, "{cmd}");
    }
}

#[test]
fn default_others_and_adopters() {
    for cmd in [
        "-bash",
        "bash",
        "/bin/zsh -l",
        "vim notes-mcp.md",
        "node server.js",
        "tmux",
        "chromium --type=renderer",
        "npm install",
        "claudette",
        "tmux new -s foo-mcp",
        "tmux -L x new -d -s foo-mcp -c /tmp sleep 300",
        "SCREEN -dmS weather-mcp",
        "ssh -fN -L 8931:localhost:8931 gpu-mcp",
        "/usr/lib/firefox/firefox http://localhost:8000/mcp",
        "vim /home/u/code",
        "deno run -A main.ts",
        "mcp-reaperd --once",
    ] {
        assert_eq!(role(cmd), Role::Other, "{cmd}");
    }
    assert_eq!(role("/usr/lib/systemd/systemd --user"), Role::Adopter);
    assert_eq!(role("/lib/systemd/systemd --system"), Role::Other);
}

#[test]
fn protect_is_independent_of_role() {
    let c = Config::from_str_with_default("t", "[patterns]\nprotect = ['--http']\n").unwrap();
    let m = c.matcher.classify("node x/mcp-server-shared --http", None);
    assert_eq!((m.role, m.protect), (Role::Server, Some(0)));
}

#[test]
fn exe_patterns_see_the_exe() {
    let c = Config::embedded();
    let m = c.matcher.classify("2.0.14", Some("/home/u/.local/share/claude/versions/2.0.14"));
    assert_eq!(m.role, Role::Host);
}

#[test]
fn a_cut_command_line_counts_as_protected() {
    // What was cut (see `scan::CMDLINE_KEEP`) could hold `--port 8931`.
    let a = Config::embedded();
    let cmd = "node /x/.bin/playwright-mcp …";
    let mut program = crate::program::Program::of_joined(cmd);
    assert_eq!(a.matcher.classify_subject(Subject { cmdline: cmd, program, exe: None }).protect, None);
    program.set_cut();
    let m = a.matcher.classify_subject(Subject { cmdline: cmd, program, exe: None });
    assert_eq!(m.role, Role::Server, "the role is decided on what was read");
    let pi = m.protect.expect("protected");
    assert!(a.matcher.protect_text(pi).contains("was cut"), "{}", a.matcher.protect_text(pi));
    // No protect patterns: nothing could have matched.
    let b = Config::from_str_with_default("t", "[patterns]\nprotect = []").unwrap();
    assert_eq!(b.matcher.classify_subject(Subject { cmdline: cmd, program, exe: None }).protect, None);
}

/// Command lines as /proc shows them (the fixture tree's) and as the host
/// docs name them (each code span and each line of docs/hosts.md).
fn real_command_lines() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts = Vec::new();
    for e in std::fs::read_dir(root.join("tests/data/proc-basic")).into_iter().flatten().flatten() {
        if let Ok(b) = std::fs::read(e.path().join("cmdline")) {
            texts.push(crate::scan::parse::join_argv(&b, &mut Vec::new()));
        }
    }
    let docs = std::fs::read_to_string(root.join("docs/hosts.md")).unwrap_or_default();
    texts.extend(docs.split('`').skip(1).step_by(2).map(ToString::to_string));
    texts.extend(docs.lines().map(ToString::to_string));
    assert!(texts.len() > 100, "the fixture's and the docs' command lines were read");
    texts
}

/// The embedded lists' DFAs (build.rs) find what their patterns compiled as
/// `RegexSet`s find, on command lines that match and that nearly do.
#[test]
fn built_dfas_match_as_the_compiled_sets_do() {
    let d = crate::config::Config::embedded();
    let p = &d.patterns;
    let lists = [
        (&p.hosts, Target::Program),
        (&p.servers, Target::Program),
        (&p.launchers, Target::Program),
        (&p.adopters, Target::Program),
        (&p.protect, Target::Cmdline),
        (&p.bystanders, Target::Program),
    ];
    // Texts near every pattern: its literal characters, cut and changed.
    let mut texts: Vec<String> = [
        "",
        "node",
        "claude",
        "claude.exe",
        "CLAUDE",
        "node /usr/lib/node_modules/@anthropic-ai/claude-code/cli.js --resume",
        "npx -y @modelcontextprotocol/server-filesystem /tmp",
        "uvx mcp-server-fetch",
        "github-mcp-server stdio",
        "python -m mcp_server_git --repository .",
        "Playwright-MCP.mjs",
        "kagimcp",
        "fastmcp run x.py",
        "codex mcp-server",
        "claude --claude-in-chrome-mcp",
        "goose mcp developer",
        "gitnexus mcp",
        "gitnexus mcp --verbose",
        "supergateway --sse https://x/sse",
        "uvx --with mcp python /tmp/.tmpX/ext.py",
        "uv tool run --with=mcp python x.py",
        "docker mcp gateway run",
        "systemd --user",
        "tmux new -s foo-mcp",
        "srv --transport sse --port 3000",
        "srv --transport=streamable-http",
        "srv --sse-port=8080 x",
        "/home/u/.local/share/claude/versions/1.0.3",
        "zed-remote-server-stable-0.150",
        "cline --cline-hub-daemon",
        "kilo serve --port 1",
        "q chat",
        "\u{e9}mcp-\u{fc}",
        "mcp-reaper",
        "x".repeat(300).as_str(),
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    for (list, _) in &lists {
        for pat in *list {
            let lit: String =
                split_target(pat, Target::Program).1.chars().filter(|c| !"^$()?|[]*+\\{}".contains(*c)).collect();
            texts.push(lit.clone());
            texts.push(format!("/usr/bin/{lit}"));
            texts.push(format!("{lit} --flag"));
            texts.push(lit.to_uppercase());
            texts.push(lit.chars().skip(1).collect());
        }
    }
    texts.extend(real_command_lines());
    // The lowest index matching per target, over all of a list's sets.
    let first = |l: &List, text: &str| -> Vec<Option<usize>> {
        TARGETS
            .iter()
            .map(|&(_, t)| {
                l.sets
                    .iter()
                    .filter(|(st, _, _)| *st == t)
                    .filter_map(|(_, set, idx)| set.first_match(text).map(|k| idx[k]))
                    .min()
            })
            .collect()
    };
    let mut anchored_groups = 0;
    for (list, default) in lists {
        let built = List::built(list).expect("the embedded list has its DFAs");
        let compiled = List::compile(list, default).unwrap();
        assert!(built.sets.iter().all(|(_, b, _)| matches!(b, Set::Built { .. })));
        assert!(compiled.sets.iter().all(|(_, c, _)| matches!(c, Set::Compiled(_))));
        anchored_groups += built.sets.iter().filter(|(_, b, _)| matches!(b, Set::Built { anchored: true, .. })).count();
        let mut covered: Vec<usize> = built.sets.iter().flat_map(|(_, _, i)| i.iter().copied()).collect();
        covered.sort_unstable();
        assert_eq!(covered, (0..list.len()).collect::<Vec<_>>(), "every pattern of {list:?} in one DFA");
        for t in &texts {
            assert_eq!(first(&built, t), first(&compiled, t), "patterns of {list:?} on {t:?}");
            for cut in [1, 2, 7] {
                let end = (0..=t.len().saturating_sub(cut)).rev().find(|&i| t.is_char_boundary(i)).unwrap_or(0);
                assert_eq!(first(&built, &t[..end]), first(&compiled, &t[..end]), "{list:?} on {:?}", &t[..end]);
            }
        }
    }
    assert!(anchored_groups > 0, "the `^…` patterns are searched anchored");
    // A list that differs in one pattern is compiled.
    let mut changed = p.hosts.clone();
    changed[0].push('x');
    assert!(List::built(&changed).is_none());
    assert!(List::new(&changed, Target::Program).unwrap().sets.iter().all(|(_, s, _)| matches!(s, Set::Compiled(_))));
}
