use super::*;

fn id(cmd: &str) -> (String, Via, String) {
    let p = Program::of_joined(cmd);
    (p.name(cmd).to_string(), p.via, p.args(cmd).to_string())
}

fn argv(args: &[&str]) -> (String, Program) {
    let text = args.join(" ");
    let mut words = Vec::new();
    let mut at = 0;
    for a in args {
        words.push(Span::new(at, at + a.len()));
        at += a.len() + 1;
    }
    let p = Program::from_argv(&text, &words);
    (text, p)
}

#[test]
fn programs_of_common_shapes() {
    for (cmd, name, via) in [
        ("tmux new -s foo-mcp", "tmux", Via::Exec),
        ("/usr/bin/tmux -L x new -d -s foo-mcp -c /tmp sleep 300", "tmux", Via::Exec),
        ("ssh -fN -L 8931:localhost:8931 gpu-mcp", "ssh", Via::Exec),
        (
            "node /home/u/.npm/_npx/a3/node_modules/.bin/mcp-server-filesystem /home/u/code",
            "mcp-server-filesystem",
            Via::Script,
        ),
        (
            "npm exec @modelcontextprotocol/server-filesystem /tmp",
            "@modelcontextprotocol/server-filesystem",
            Via::Package,
        ),
        ("npx -y @playwright/mcp@latest --headless", "@playwright/mcp", Via::Package),
        ("sh -c 'mcp-server-filesystem' /tmp", "mcp-server-filesystem", Via::Shell),
        ("sh -c mcp-atlassian", "mcp-atlassian", Via::Shell),
        ("node /home/u/.local/share/pnpm/pnpm dlx gitnexus mcp", "gitnexus", Via::Package),
        ("node ./node_modules/.bin/../gitnexus/dist/cli/index.js mcp", "gitnexus", Via::Script),
        ("uv --directory /home/u/src/weather run weather.py", "weather.py", Via::Runner),
        ("/home/u/.local/bin/uv tool uvx mcp-server-fetch", "mcp-server-fetch", Via::Package),
        ("uvx --from mcp-atlassian==1.0 mcp-atlassian --read-only", "mcp-atlassian", Via::Package),
        ("uvx mcp-atlassian", "mcp-atlassian", Via::Package),
        ("python -m mcp_server_git --repository .", "mcp_server_git", Via::Script),
        ("/usr/bin/python3.11 -u -m my_pkg.server", "my_pkg.server", Via::Script),
        ("docker run -i --rm -e TOKEN isokoliuk/mcp-searxng:latest", "isokoliuk/mcp-searxng", Via::Image),
        ("podman run -it --name x mcp/fetch", "mcp/fetch", Via::Image),
        ("docker run -d -p 8080:80 nginx", "nginx", Via::Image),
        (
            "/opt/idea/jbr/bin/java -classpath a.jar:b.jar com.intellij.mcpserver.stdio.McpStdioRunnerKt",
            "com.intellij.mcpserver.stdio.McpStdioRunnerKt",
            Via::Script,
        ),
        ("java -Xmx1g -jar /opt/x/mcp-server.jar", "mcp-server.jar", Via::Script),
        ("/home/u/.local/share/claude/versions/2.1.197 --claude-in-chrome-mcp", "claude", Via::Exec),
        ("/usr/bin/node --max-old-space-size=8192 /usr/local/bin/gemini", "gemini", Via::Script),
        ("bun run --cwd /x/telegram/0.0.6 --shell=bun --silent start", "start", Via::Runner),
        ("bun server.ts", "server.ts", Via::Script),
        ("bunx foo-mcp", "foo-mcp", Via::Package),
        ("deno run -A npm:@x/foo-mcp@1.2", "@x/foo-mcp", Via::Package),
        ("go run github.com/x/mcp-foo@latest", "mcp-foo", Via::Runner),
        ("npm run start", "start", Via::Runner),
        ("npm --prefix /x run start", "start", Via::Runner),
        ("poetry run python server.py", "server.py", Via::Runner),
        ("timeout 600 mcp-server-time", "mcp-server-time", Via::Runner),
        ("/bin/bash /home/u/bin/start.sh", "start.sh", Via::Shell),
        ("-bash", "bash", Via::Exec),
        ("bash", "bash", Via::Exec),
        ("node -e console.log(1)", "node", Via::Inline),
        (
            "/usr/bin/node --require /x/tsx/dist/preflight.cjs --import file:///x/tsx/dist/loader.mjs weather-mcp.ts",
            "weather-mcp.ts",
            Via::Script,
        ),
        ("node /x/node_modules/.bin/tsx weather-mcp.ts", "weather-mcp.ts", Via::Runner),
        ("sh -c 'exec FOO=1 npx -y foo-mcp'", "foo-mcp", Via::Package),
        ("/usr/lib/firefox/firefox http://localhost:8000/mcp", "firefox", Via::Exec),
        ("node /home/u/src/mcp-server-weather/node_modules/.bin/tsc --watch", "tsc", Via::Script),
        ("mcp-proxy --port 8096 -- uvx mcp-server-fetch", "mcp-proxy", Via::Exec),
    ] {
        let (n, v, _) = id(cmd);
        assert_eq!((n.as_str(), v), (name, via), "{cmd}");
    }
}

#[test]
fn args_follow_the_program() {
    assert_eq!(id("codex mcp-server").2, "mcp-server");
    assert_eq!(id("node /x/node_modules/.bin/gitnexus mcp").2, "mcp");
    assert_eq!(id("npx -y @playwright/mcp@latest --port 8931").2, "--port 8931");
    let p = Program::of_joined("claude mcp serve");
    assert_eq!(p.line("claude mcp serve"), "claude mcp serve");
}

#[test]
fn argv_boundaries_keep_paths_with_spaces_whole() {
    let (t, p) = argv(&["node", "/home/u/My Projects/weather-mcp.js", "--x"]);
    assert_eq!(p.name(&t), "weather-mcp.js");
    assert_eq!(p.args(&t), "--x");
    // A rewritten title (one argv element with spaces) is split into words.
    let (t, p) = argv(&["npm exec @playwright/mcp@latest   "]);
    assert_eq!(p.name(&t), "@playwright/mcp");
    assert_eq!(p.via, Via::Package);
    // A title set with `exec -a` before other arguments.
    let (t, p) = argv(&["npm exec @playwright/mcp@latest", "-c", "sleep 600"]);
    assert_eq!((p.name(&t), p.via), ("@playwright/mcp", Via::Package));
}

#[test]
fn interactive_images() {
    for (cmd, open) in [
        ("docker run -i --rm mcp/github", true),
        ("docker run -it --rm mcp/github", false), // a terminal: a person's session
        ("docker run -ti ubuntu bash", false),
        ("podman run -i --tty x/y", false),
        ("docker run --interactive mcp/github", true),
        ("docker run --rm -e X=1 mcp/github", false),
        ("docker -H unix:///x.sock run -i x/y", true),
        ("docker run -d mcp/github", false),
    ] {
        assert_eq!(Program::of_joined(cmd).stdin_open(), open, "{cmd}");
    }
}

#[test]
fn uv_global_options_in_any_order_and_interpreters_running_launchers() {
    for (cmd, name, via) in [
        ("uv run --directory /w weather.py", "weather.py", Via::Runner),
        ("uv run --directory=/w weather.py", "weather.py", Via::Runner),
        ("uv --no-cache run --directory /w weather.py", "weather.py", Via::Runner),
        ("uv --directory /w --no-cache -q run weather.py", "weather.py", Via::Runner),
        ("uv run --with mcp --directory /w --python 3.12 --no-sync weather.py", "weather.py", Via::Runner),
        ("uv --project /w run --frozen python -m weather", "weather", Via::Runner),
        ("uv run --directory /w -- python weather.py", "weather.py", Via::Runner),
        ("uv run -w httpx --only-group dev --directory /w weather.py", "weather.py", Via::Runner),
        ("uv --color never run -C k=v --fork-strategy fewest --directory /w weather.py", "weather.py", Via::Runner),
        ("/usr/bin/python3 /usr/bin/pipx run mcp-server-time", "mcp-server-time", Via::Package),
        ("python3 /home/u/.local/bin/pipx run --spec mcp-server-time mcp-server-time", "mcp-server-time", Via::Package),
        ("/usr/bin/python3 /usr/bin/uvx mcp-server-fetch", "mcp-server-fetch", Via::Package),
        ("python3 /usr/bin/poetry run python server.py", "server.py", Via::Runner),
        ("node /usr/lib/node_modules/pnpm/bin/pnpm.cjs dlx @x/foo", "@x/foo", Via::Package),
        ("python3 /usr/bin/mcp-server-time", "mcp-server-time", Via::Script),
    ] {
        let (n, v, _) = id(cmd);
        assert_eq!((n.as_str(), v), (name, via), "{cmd}");
    }
}
