//! Role table: real command lines from `shared/docs/hosts.md` (hosts, servers,
//! every level of the launch chains L1–L18, bystanders, the misses of §5 and
//! the appendix), each with the program the classifier must name and the role
//! the default patterns must give it.
//!
//! argv is given as real argv elements and classified with its boundaries
//! (`Program::from_argv`), as the scanner does. npm rewrites its process
//! title, so `npm exec …` / `npm run …` rows are a single element with
//! spaces. HTTP-mode servers (`github-mcp-server http --port 8082`) are still
//! role `server`: the default `protect` patterns and the stdio evidence keep
//! them, not their role. Custom servers whose name says nothing
//! (`python weather.py`, `node /abs/build/index.js`) are "not fixable by
//! names" (hosts.md §5.3): they are `other` here, left to the later issue
//! that reads the hosts' MCP configs.

use mcp_reaper::config::{Config, Role, Subject};
use mcp_reaper::program::{Program, Span};

use Role::{Adopter, Host, Launcher, Other, Server};

struct Row {
    argv: &'static [&'static str],
    exe: Option<&'static str>,
    program: &'static str,
    role: Role,
}

/// A row without an exe path (the process was not a decision's subject).
const fn r(argv: &'static [&'static str], program: &'static str, role: Role) -> Row {
    Row { argv, exe: None, program, role }
}

/// A row with the exe path `/proc/PID/exe` shows.
const fn x(argv: &'static [&'static str], exe: &'static str, program: &'static str, role: Role) -> Row {
    Row { argv, exe: Some(exe), program, role }
}

const CLAUDE_NATIVE: &str = "/home/u/.local/share/claude/versions/2.1.197";
const CLAUDE_NPM: &str = "/usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe";
const PY: &str = "/usr/bin/python3.12";

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // ---- §1 Claude Code CLI: argv as invoked, native exe, npm's claude.exe,
    // background processes, the VS Code extension's binary, pre-2.1 cli.js,
    // the Bash tool's shell.
    r(&["claude"], "claude", Host),
    r(&["claude", "--resume"], "claude", Host),
    r(&["claude", "-p", "summarize the logs"], "claude", Host),
    x(&["claude"], CLAUDE_NATIVE, "claude", Host),
    x(&[CLAUDE_NATIVE], CLAUDE_NATIVE, "claude", Host),
    x(&["2.1.197"], CLAUDE_NATIVE, "2.1.197", Host),
    x(&[CLAUDE_NPM], CLAUDE_NPM, "claude.exe", Host),
    x(&[CLAUDE_NATIVE, "--bg-pty-host", "/tmp/cc-daemon-1000/a1/pty.sock", "120", "40", "--", CLAUDE_NATIVE, "--bg-spare"], CLAUDE_NATIVE, "claude", Host),
    x(&[CLAUDE_NPM, "--bg-pty-host", "/tmp/cc-daemon-501/a1/spare/pty.sock", "80", "24"], CLAUDE_NPM, "claude.exe", Host),
    r(&["claude", "daemon", "start"], "claude", Host),
    r(&["/home/u/.vscode/extensions/anthropic.claude-code-2.1.197-linux-x64/resources/native-binary/claude", "--output-format", "stream-json", "--verbose"], "claude", Host),
    r(&["node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", "--resume"], "@anthropic-ai/claude-code", Host),
    // The Bash tool (and receptron/mulmoterminal#1669): a shell running a
    // command string is a pass-through link.
    r(&["bash", "-c", "-l", "source /home/u/.claude/shell-snapshots/snapshot-bash-1.sh && eval 'npm test'"], "source", Launcher),
    r(&["/bin/zsh", "-c", "source /home/u/.claude/shell-snapshots/snapshot-zsh-1.sh && eval 'claude --resume abc'"], "source", Launcher),

    // ---- §1 Claude Agent SDK: TS native binary, old TS cli.js, Python bundle.
    r(&["/home/u/app/node_modules/@anthropic-ai/claude-agent-sdk-linux-x64/claude", "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"], "claude", Host),
    r(&["node", "/home/u/app/node_modules/@anthropic-ai/claude-agent-sdk/cli.js", "--output-format", "stream-json"], "@anthropic-ai/claude-agent-sdk", Host),
    r(&["/home/u/app/.venv/lib/python3.12/site-packages/claude_agent_sdk/_bundled/claude", "--output-format", "stream-json"], "claude", Host),

    // ---- §1 Claude Desktop (Linux): the resident launcher script, the
    // Electron main and its helpers. A built-in-node server is a
    // `--type=utility` helper with no script in argv: a host, "not fixable by
    // argv" (Chromium reaps it with the app).
    r(&["/bin/bash", "/usr/bin/claude-desktop-unofficial"], "claude-desktop-unofficial", Launcher),
    r(&["/usr/lib/claude-desktop/claude-desktop", "--class=Claude"], "claude-desktop", Host),
    r(&["/usr/lib/claude-desktop-unofficial/claude-desktop", "--type=zygote", "--no-zygote-sandbox"], "claude-desktop", Host),
    r(&["/usr/lib/claude-desktop/claude-desktop", "--type=utility", "--utility-sub-type=node.mojom.NodeService", "--lang=en-US"], "claude-desktop", Host),

    // ---- §1 VS Code + Copilot: local extension hosts (deb, snap, Insiders,
    // VSCodium), the Copilot SDK's agent-host binary, remote / Codespaces /
    // code-server extension hosts (§5.5).
    r(&["/usr/share/code/code", "--type=utility", "--utility-sub-type=node.mojom.NodeService", "--lang=en-US", "--service-sandbox-type=none", "--dns-result-order=ipv4first", "--inspect-port=0", "--user-data-dir=/home/u/.config/Code"], "code", Host),
    r(&["/snap/code/190/usr/share/code/code", "--type=utility", "--utility-sub-type=node.mojom.NodeService"], "code", Host),
    r(&["/usr/share/code-insiders/code-insiders", "--type=utility"], "code-insiders", Host),
    r(&["/usr/share/codium/codium", "--type=utility"], "codium", Host),
    r(&["/usr/share/code/resources/app/node_modules.asar.unpacked/@github/copilot-sdk-linux-x64/prebuilds/linux-x64/copilot"], "copilot", Host),
    r(&["/home/u/.vscode-server/bin/abc123/node", "/home/u/.vscode-server/bin/abc123/out/bootstrap-fork", "--type=extensionHost", "--transformURIs", "--useHostProxy=false"], "bootstrap-fork", Host),
    r(&["/home/u/.vscode-server/cli/servers/Stable-abc123/server/node", "/home/u/.vscode-server/cli/servers/Stable-abc123/server/out/bootstrap-fork", "--type=extensionHost"], "bootstrap-fork", Host),
    r(&["/vscode/bin/linux-x64/abc123/node", "/vscode/bin/linux-x64/abc123/out/bootstrap-fork", "--type=extensionHost"], "bootstrap-fork", Host),
    r(&["/usr/lib/code-server/lib/node", "/usr/lib/code-server/out/bootstrap-fork", "--type=agentHost"], "bootstrap-fork", Host),

    // ---- §1 Cursor, Windsurf, Kiro, Trae (VS Code forks), Cursor CLI.
    r(&["/usr/share/cursor/cursor", "--type=utility", "--utility-sub-type=node.mojom.NodeService"], "cursor", Host),
    r(&["/tmp/.mount_CursorAbC123/usr/share/cursor/cursor", "--type=utility"], "cursor", Host),
    r(&["/home/u/.cursor-server/bin/abc123/node", "/home/u/.cursor-server/bin/abc123/out/bootstrap-fork", "--type=extensionHost"], "bootstrap-fork", Host),
    r(&["cursor-agent"], "cursor-agent", Host),
    // `agent` alone is too generic to be a host (§5.5).
    r(&["agent"], "agent", Other),
    r(&["/usr/share/windsurf/windsurf", "--type=utility"], "windsurf", Host),
    r(&["/home/u/.windsurf-server/bin/abc123/node", "/home/u/.windsurf-server/bin/abc123/out/bootstrap-fork", "--type=extensionHost"], "bootstrap-fork", Host),
    // Windsurf's Go language server manages MCP (path unverified); the
    // ancestor walk reaches `windsurf` above it.
    r(&["/usr/share/windsurf/resources/app/extensions/windsurf/bin/language_server_linux_x64", "--stdin_initial_metadata"], "language_server_linux_x64", Other),
    r(&["/usr/share/kiro/kiro", "--type=utility"], "kiro", Host),
    r(&["/usr/share/trae/trae", "--type=utility"], "trae", Host),

    // ---- §1 Zed: app, CLI, remote server; extension servers under Zed's
    // node (§5.3, `*-context-server`); ACP agents.
    r(&["/home/u/.local/zed.app/libexec/zed-editor"], "zed-editor", Host),
    r(&["/usr/lib/zed/zed-editor", "--foreground"], "zed-editor", Host),
    r(&["/app/libexec/zed-editor"], "zed-editor", Host),
    r(&["zeditor", "/home/u/src/app"], "zeditor", Host),
    r(&["/home/u/.local/bin/zed", "/home/u/src/app"], "zed", Host),
    r(&["/home/u/.zed_server/zed-remote-server-stable-0.190.5", "run", "--log-file", "/home/u/.local/share/zed/logs/server.log"], "zed-remote-server-stable-0.190.5", Host),
    r(&["/home/u/.local/share/zed/node/node-v22.5.1-linux-x64/bin/node", "/home/u/.local/share/zed/extensions/work/postgres-context-server/node_modules/@zeddotdev/postgres-context-server/index.mjs", "postgresql://localhost/app"], "@zeddotdev/postgres-context-server", Server),
    r(&["gemini", "--experimental-acp"], "gemini", Host),

    // ---- §1 Codex CLI: the node wrapper, the exec'd native binary, the
    // VS Code extension's / ChatGPT desktop's app-server, ChatGPT desktop;
    // Codex as an MCP server (§5.2).
    r(&["node", "/usr/bin/codex"], "codex", Host),
    r(&["node", "/usr/lib/node_modules/@openai/codex/bin/codex.js"], "@openai/codex", Host),
    x(&["/usr/lib/node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"], "/usr/lib/node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex", "codex", Host),
    r(&["/home/u/.vscode/extensions/openai.chatgpt-0.4.0-linux-x64/bin/linux-x86_64/codex", "app-server", "--analytics-default-enabled"], "codex", Host),
    r(&["/usr/lib/chatgpt/chatgpt"], "chatgpt", Host),
    r(&["codex", "mcp-server"], "codex", Server),

    // ---- §1 Gemini CLI: the resident parent, the relaunched child, the
    // built-in browser agent's server (bundled inside the CLI's package).
    r(&["node", "/home/u/.nvm/versions/node/v22.12.0/bin/gemini"], "gemini", Host),
    r(&["/usr/bin/node", "--max-old-space-size=8192", "/home/u/.nvm/versions/node/v22.12.0/bin/gemini"], "gemini", Host),
    r(&["/usr/bin/node", "--max-old-space-size=8192", "/usr/local/bin/gemini"], "gemini", Host),
    r(&["node", "/home/u/.nvm/versions/node/v22.12.0/lib/node_modules/@google/gemini-cli/bundle/bundled/chrome-devtools-mcp.mjs"], "chrome-devtools-mcp.mjs", Server),

    // ---- §1 Qwen Code, Goose, opencode, Cline, Kilo, Continue, Amazon Q /
    // Kiro CLI, JetBrains, Warp, LM Studio, Crush, Copilot CLI (§1, §5.5).
    r(&["node", "/usr/local/bin/qwen"], "qwen", Host),
    r(&["goose", "session"], "goose", Host),
    r(&["goose", "run", "-t", "summarize"], "goose", Host),
    r(&["/usr/lib/goose/resources/bin/goosed", "agent"], "goosed", Host),
    r(&["/usr/local/bin/goose", "mcp", "developer"], "goose", Server),
    r(&["opencode"], "opencode", Host),
    r(&["/home/u/.opencode/bin/opencode"], "opencode", Host),
    r(&["opencode", "serve", "--service"], "opencode", Host),
    r(&["/usr/lib/node_modules/opencode-ai/bin/opencode.exe"], "opencode.exe", Host),
    r(&["node", "/usr/bin/cline"], "cline", Host),
    r(&["/usr/lib/node_modules/cline/bin/.cline", "--config", "/home/u/.cline"], ".cline", Host),
    r(&["kilo", "serve", "--port", "0"], "kilo", Host),
    r(&["/usr/lib/node_modules/cline/bin/.cline", "--cline-hub-daemon"], ".cline", Host),
    r(&["node", "/usr/bin/cline", "--cline-hub-daemon", "--port", "0"], "cline", Host),
    r(&["kilo", "run", "summarize"], "kilo", Host),
    r(&["kilo"], "kilo", Host),
    r(&["node", "/usr/lib/node_modules/@kilocode/cli/bin/kilo"], "@kilocode/cli", Host),
    r(&["cn", "-p", "summarize", "--config", "/home/u/cn.yaml"], "cn", Host),
    r(&["node", "/usr/lib/node_modules/@continuedev/cli/dist/index.js", "-p", "hi"], "@continuedev/cli", Host),
    r(&["/home/u/.local/share/JetBrains/IntelliJIdea2025.1/continue-intellij-extension/core/linux-x64/continue-binary"], "continue-binary", Host),
    r(&["q", "chat"], "q", Host),
    r(&["qchat", "chat", "--trust-all-tools"], "qchat", Host),
    r(&["kiro-cli", "chat"], "kiro-cli", Host),
    r(&["/opt/idea/jbr/bin/java", "-classpath", "/opt/idea/lib/platform-loader.jar:/opt/idea/lib/util-8.jar", "-Xms128m", "-Xmx2048m", "-XX:+UseG1GC", "--add-opens=java.base/java.io=ALL-UNNAMED", "-Djava.system.class.loader=com.intellij.util.lang.PathClassLoader", "com.intellij.idea.Main"], "com.intellij.idea.Main", Host),
    r(&["/opt/warpdotdev/warp-terminal/warp"], "warp", Host),
    r(&["/tmp/.mount_LM-StuXyZ/lm-studio"], "lm-studio", Host),
    r(&["crush"], "crush", Host),
    r(&["node", "/usr/lib/node_modules/@charmland/crush/run-crush.js"], "@charmland/crush", Host),
    r(&["node", "/usr/lib/node_modules/@github/copilot/npm-loader.js"], "@github/copilot", Host),
    r(&["/usr/lib/node_modules/@github/copilot/node_modules/@github/copilot-linux-x64/copilot"], "copilot", Host),
    // JetBrains Claude plugin (ACP): IDE → npm exec claude-agent-acp → node
    // claude-agent-acp → claude. The ACP adapter is neither host nor server:
    // `claude` below it is the host.
    r(&["npm exec @zed-industries/claude-agent-acp@0.22.2 --hide-claude-auth"], "@zed-industries/claude-agent-acp", Launcher),
    r(&["/home/u/.cache/JetBrains/acp-agents/.runtimes/node/24.13.0/bin/node", "/home/u/.npm/_npx/5e1f/node_modules/.bin/claude-agent-acp", "--hide-claude-auth"], "claude-agent-acp", Other),

    // ---- §2 L1 `npx -y <pkg>`: npx as spawned, npm's rewritten title,
    // `sh -c` (dash), the node server; a package with a server name.
    r(&["npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/u/code"], "@modelcontextprotocol/server-filesystem", Server),
    r(&["npm exec @modelcontextprotocol/server-filesystem /home/u/code"], "@modelcontextprotocol/server-filesystem", Server),
    r(&["sh", "-c", "'mcp-server-filesystem' /home/u/code"], "mcp-server-filesystem", Server),
    r(&["node", "/home/u/.npm/_npx/a3f1c2/node_modules/.bin/mcp-server-filesystem", "/home/u/code"], "mcp-server-filesystem", Server),
    // ihor-sokoliuk/mcp-searxng PR #60: claude → npx → npm exec → sh -c → node.
    r(&["npm exec mcp-searxng"], "mcp-searxng", Server),
    r(&["sh", "-c", "mcp-searxng"], "mcp-searxng", Server),
    r(&["node", "/home/u/.npm/_npx/77aa/node_modules/.bin/mcp-searxng"], "mcp-searxng", Server),
    // §3 issues: npm exec wrappers of real servers.
    r(&["npm exec mcp-postgres-full-access postgresql://app:secret@localhost/app"], "mcp-postgres-full-access", Server),
    r(&["npm exec @jetbrains/mcp-proxy"], "@jetbrains/mcp-proxy", Server),
    r(&["npx", "-y", "@upstash/context7-mcp@latest"], "@upstash/context7-mcp", Server),
    r(&["node", "/home/u/.npm/_npx/1a2b/node_modules/.bin/chrome-devtools-mcp", "--headless"], "chrome-devtools-mcp", Server),
    r(&["npx", "-y", "mcp-remote", "https://mcp.example.invalid/sse"], "mcp-remote", Server),
    // A package whose name says nothing: npm exec and sh are pass-through
    // links, the node is not fixable by names.
    r(&["npm exec some-tool --stdio"], "some-tool", Launcher),
    r(&["sh", "-c", "'some-tool' --stdio"], "some-tool", Launcher),
    r(&["node", "/home/u/.npm/_npx/9c0d/node_modules/.bin/some-tool", "--stdio"], "some-tool", Other),

    // ---- §2 L2 `npx -y tsx weather-mcp.ts`: npm exec tsx → sh -c → node
    // .bin/tsx → node --require preflight --import loader → esbuild.
    r(&["npm exec tsx weather-mcp.ts"], "tsx", Launcher),
    r(&["sh", "-c", "'tsx' weather-mcp.ts"], "weather-mcp.ts", Server),
    r(&["node", "/home/u/.npm/_npx/b7e1/node_modules/.bin/tsx", "weather-mcp.ts"], "weather-mcp.ts", Server),
    r(&["/usr/bin/node", "--require", "/home/u/.npm/_npx/b7e1/node_modules/tsx/dist/preflight.cjs", "--import", "file:///home/u/.npm/_npx/b7e1/node_modules/tsx/dist/loader.mjs", "weather-mcp.ts"], "weather-mcp.ts", Server),
    r(&["/home/u/.npm/_npx/b7e1/node_modules/@esbuild/linux-x64/bin/esbuild", "--service=0.25.0", "--ping"], "esbuild", Other),
    // tsx running a server whose name says nothing: tsx is a link; its node
    // child is not fixable by names.
    r(&["node", "/home/u/src/app/node_modules/.bin/tsx", "server.ts"], "server.ts", Launcher),
    r(&["/usr/bin/node", "--require", "/home/u/src/app/node_modules/tsx/dist/preflight.cjs", "--import", "file:///home/u/src/app/node_modules/tsx/dist/loader.mjs", "server.ts"], "server.ts", Other),

    // ---- §2 L3 `uvx <pkg>`: uvx as spawned, `uv tool uvx` after the exec,
    // the venv python running the entry point (exe: the system python).
    r(&["uvx", "mcp-server-fetch"], "mcp-server-fetch", Server),
    r(&["/home/u/.local/bin/uv", "tool", "uvx", "mcp-server-fetch"], "mcp-server-fetch", Server),
    x(&["/home/u/.cache/uv/archive-v0/Xy12/bin/python", "/home/u/.cache/uv/archive-v0/Xy12/bin/mcp-server-fetch"], PY, "mcp-server-fetch", Server),
    r(&["/home/u/.local/bin/uv", "tool", "uvx", "mcp-atlassian"], "mcp-atlassian", Server),
    x(&["/home/u/.cache/uv/archive-v0/Qw34/bin/python", "/home/u/.cache/uv/archive-v0/Qw34/bin/mcp-atlassian"], PY, "mcp-atlassian", Server),
    r(&["uvx", "kagimcp"], "kagimcp", Server),
    r(&["/home/u/.cache/uv/archive-v0/Er56/bin/python", "/home/u/.cache/uv/archive-v0/Er56/bin/kagimcp"], "kagimcp", Server),
    r(&["uvx", "basic-memory", "mcp"], "basic-memory", Server),
    r(&["/home/u/.cache/uv/archive-v0/Ty78/bin/python", "/home/u/.cache/uv/archive-v0/Ty78/bin/basic-memory", "mcp"], "basic-memory", Server),
    r(&["uvx", "some-tool"], "some-tool", Launcher),

    // ---- §2 L4 `uv run [--with x] script.py` and L4b `uv --directory DIR
    // run weather.py` (the official Python quickstart): uv stays the parent.
    r(&["uv", "run", "--with", "mcp", "mcp_server.py"], "mcp_server.py", Server),
    r(&["/home/u/src/app/.venv/bin/python", "mcp_server.py"], "mcp_server.py", Server),
    r(&["uv", "run", "--with", "mcp", "server.py"], "server.py", Server), // brings in the MCP SDK: a server (hosts.md §5.3)
    // Not fixable by names: `python server.py`.
    r(&["/home/u/.cache/uv/builds-v0/.tmpX1/bin/python", "server.py"], "server.py", Other),
    r(&["uv", "--directory", "/home/u/src/weather", "run", "weather.py"], "weather.py", Launcher),
    // Not fixable by names: `python weather.py` (§5.3).
    x(&["/home/u/src/weather/.venv/bin/python", "weather.py"], PY, "weather.py", Other),

    // ---- §2 L5 `pipx run <pkg>` (pipx execs into the cached venv's python).
    r(&["pipx", "run", "mcp-server-time"], "mcp-server-time", Server),
    // Debian's pipx is a Python script: the interpreter running it is pipx (issue 23).
    r(&["/usr/bin/python3", "/usr/bin/pipx", "run", "mcp-server-time"], "mcp-server-time", Server),
    r(&["/usr/bin/python3", "/usr/bin/pipx", "run", "weather-tool"], "weather-tool", Launcher),
    r(&["/usr/bin/python3", "/usr/bin/poetry", "run", "python", "server.py"], "server.py", Launcher),
    // Kilo's order: uv's options after `run`, and global options before it.
    r(&["uv", "run", "--directory", "/home/u/src/weather", "weather.py"], "weather.py", Launcher),
    r(&["uv", "--no-cache", "run", "--directory", "/home/u/src/weather", "weather.py"], "weather.py", Launcher),
    r(&["/home/u/.local/share/pipx/.cache/0a1b2c/bin/python", "/home/u/.local/share/pipx/.cache/0a1b2c/bin/mcp-server-time", "--local-timezone=UTC"], "mcp-server-time", Server),

    // ---- §2 L6 `pnpm dlx` / `pnpm exec` (pnpm installed through npm or
    // corepack: node runs pnpm's script; the bin shim execs the entry file).
    r(&["node", "/home/u/.local/share/pnpm/pnpm", "dlx", "gitnexus", "mcp"], "gitnexus", Server),
    r(&["node", "/home/u/.cache/pnpm/dlx/abc/def/node_modules/.bin/../gitnexus/dist/cli/index.js", "mcp"], "gitnexus", Server),
    r(&["node", "./node_modules/.bin/../gitnexus/dist/cli/index.js", "mcp"], "gitnexus", Server),
    r(&["pnpm", "exec", "gitnexus", "mcp"], "gitnexus", Server),
    r(&["node", "/home/u/.cache/node/corepack/v1/pnpm/9.15.9/bin/pnpm.cjs", "dlx", "some-tool"], "some-tool", Launcher),
    r(&["node", "/home/u/.local/share/pnpm/pnpm", "exec", "some-tool"], "some-tool", Launcher),

    // ---- §2 L7 `bunx <pkg>` → node on the bunx cache's bin.
    r(&["bunx", "@modelcontextprotocol/server-memory"], "@modelcontextprotocol/server-memory", Server),
    r(&["node", "/home/u/.bun/install/cache/.bunx-1000/@modelcontextprotocol/server-memory@latest/node_modules/.bin/mcp-server-memory"], "mcp-server-memory", Server),
    r(&["bunx", "some-tool"], "some-tool", Launcher),

    // ---- §2 L8 `bun run …` (Claude plugins, claude-code#76306) → `bun
    // server.ts` (not fixable by names).
    r(&["bun", "run", "--cwd", "/home/u/.claude/plugins/cache/claude-plugins-official/telegram/0.0.6", "--shell=bun", "--silent", "start"], "start", Launcher),
    r(&["bun", "server.ts"], "server.ts", Other),
    r(&["bun", "x", "some-tool"], "some-tool", Launcher),

    // ---- §2 L9 `yarn dlx <pkg>` (unverified chain: the package decides).
    r(&["yarn", "dlx", "@modelcontextprotocol/server-filesystem", "/tmp"], "@modelcontextprotocol/server-filesystem", Server),
    r(&["yarn", "exec", "some-tool"], "some-tool", Launcher),

    // ---- §2 L10/L10b `docker|podman run -i --rm IMAGE` (the container is
    // the server, the client its pipe); without -i a launcher; L10c the Docker
    // MCP Toolkit gateway and its CLI plugin.
    r(&["docker", "run", "-i", "--rm", "mcp/fetch"], "mcp/fetch", Server),
    r(&["docker", "run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"], "ghcr.io/github/github-mcp-server", Server),
    r(&["docker", "run", "-i", "--rm", "isokoliuk/mcp-searxng:latest"], "isokoliuk/mcp-searxng", Server),
    r(&["docker", "run", "-i", "--rm", "-e", "JIRA_URL", "ghcr.io/sooperset/mcp-atlassian:latest"], "ghcr.io/sooperset/mcp-atlassian", Server),
    r(&["docker", "run", "-i", "--rm", "--network=host", "some/image:1.2"], "some/image", Server),
    r(&["podman", "run", "-i", "--rm", "mcp/fetch"], "mcp/fetch", Server),
    r(&["docker", "run", "--rm", "ghcr.io/x/y"], "ghcr.io/x/y", Launcher),
    r(&["podman", "run", "--rm", "quay.io/x/y:latest"], "quay.io/x/y", Launcher),
    // `-it` is a user's interactive session, never a host's stdio server:
    // docker refuses `-t` when stdin is a pipe ("the input device is not a TTY").
    r(&["docker", "run", "-it", "--rm", "ubuntu", "bash"], "ubuntu", Launcher),
    r(&["docker", "mcp", "gateway", "run"], "docker", Server),
    r(&["/usr/libexec/docker/cli-plugins/docker-mcp", "mcp", "gateway", "run"], "docker-mcp", Server),

    // ---- §2 L11 `deno run -A npm:<pkg>` (one process: the package decides).
    r(&["deno", "run", "-A", "npm:@playwright/mcp@latest"], "@playwright/mcp", Server),
    r(&["deno", "run", "-A", "jsr:@std/http@1/file-server"], "@std/http", Launcher),

    // ---- §2 L12 `node /abs/path/build/index.js` (the official TS
    // quickstart): not fixable by names unless the directory says mcp.
    r(&["node", "/home/u/src/weather/build/index.js"], "weather", Other),
    r(&["node", "/abs/build/index.js"], "abs", Other),
    r(&["node", "/home/u/src/mcp-weather/build/index.js"], "mcp-weather", Server),

    // ---- §2 L13 `python -m <module>`.
    r(&["python", "-m", "mcp_server_git", "--repository", "/home/u/src/app"], "mcp_server_git", Server),
    // Not fixable by names.
    r(&["/usr/bin/python3.11", "-u", "-m", "my_pkg.server"], "my_pkg.server", Other),

    // ---- §2 L14 `go run <pkg>@latest` → the built binary (go stays the parent).
    r(&["go", "run", "github.com/github/github-mcp-server/cmd/github-mcp-server@latest", "stdio"], "github-mcp-server", Server),
    r(&["/tmp/go-build3141592/b001/exe/github-mcp-server", "stdio"], "github-mcp-server", Server),
    r(&["go", "run", "./cmd/weather"], "weather", Launcher),
    r(&["/tmp/go-build2718281/b001/exe/weather"], "weather", Other),

    // ---- §2 L15 `java -jar x.jar` (the jar's name decides).
    r(&["java", "-Xmx512m", "-jar", "/home/u/tools/spring-ai-mcp-server-0.1.0.jar"], "spring-ai-mcp-server-0.1.0.jar", Server),
    r(&["java", "-jar", "/home/u/tools/app.jar"], "app.jar", Other),

    // ---- §2 L16 wrapper script `/home/u/bin/start.sh` → its server.
    r(&["/bin/bash", "/home/u/bin/start.sh"], "start.sh", Launcher),
    r(&["sh", "/home/u/bin/run-server.sh", "--stdio"], "run-server.sh", Launcher),

    // ---- §2 L17 `npm run start`, `npm --prefix DIR start` → sh -c → node.
    r(&["npm run start"], "start", Launcher),
    r(&["npm", "--prefix", "/home/u/src/srv", "start"], "start", Launcher),
    r(&["npm", "run-script", "serve"], "serve", Launcher),
    r(&["sh", "-c", "node srv.js"], "srv.js", Launcher),
    // Not fixable by names.
    r(&["node", "srv.js"], "srv.js", Other),

    // ---- §2 L18 `bash -c "… uvx x"` (Warp workaround), `sh -c`.
    r(&["bash", "-c", "source ~/.profile && uvx mcp-server-time"], "source", Launcher),
    r(&["sh", "-c", "uvx mcp-server-time"], "mcp-server-time", Server),
    r(&["/bin/sh", "-c", "exec env FOO=1 npx -y @playwright/mcp@latest"], "@playwright/mcp", Server),

    // ---- §4 intentionally shared / HTTP servers: role server, kept by
    // `protect` (a port or an HTTP transport) and by stdio evidence. The
    // gateways themselves (mcpo, supergateway) are not servers: their child
    // command is an argument, not their program.
    x(&["/home/u/.local/share/uv/tools/mcp-proxy/bin/python", "/home/u/.local/bin/mcp-proxy", "--port", "8096", "--host", "127.0.0.1", "--", "uvx", "mcp-server-fetch"], PY, "mcp-proxy", Server),
    r(&["/usr/local/bin/github-mcp-server", "http", "--port", "8082"], "github-mcp-server", Server),
    r(&["/home/u/.local/share/uv/tools/fastmcp/bin/python", "/home/u/.local/bin/fastmcp", "run", "server.py", "--transport", "http"], "fastmcp", Server),
    r(&["npx", "@playwright/mcp", "--port", "8931"], "@playwright/mcp", Server),
    r(&["npm exec @playwright/mcp --port 8931"], "@playwright/mcp", Server),
    r(&["/home/u/.local/bin/mcpo", "--port", "8000", "--", "uvx", "mcp-server-time"], "mcpo", Other),
    r(&["node", "/home/u/.npm/_npx/4d4d/node_modules/.bin/supergateway", "--stdio", "npx -y @modelcontextprotocol/server-filesystem /data", "--port", "8000"], "supergateway", Other),

    // ---- §4 / §5.1 bystanders: multiplexers, tunnels, browsers, editors
    // and dev jobs whose arguments say "mcp" (all adopted, never servers).
    r(&["tmux", "new", "-s", "foo-mcp"], "tmux", Other),
    r(&["tmux", "-L", "x", "new", "-d", "-s", "foo-mcp", "-c", "/tmp", "sleep", "300"], "tmux", Other),
    r(&["tmux", "new", "-s", "work", "-c", "/home/u/src/mcp"], "tmux", Other),
    r(&["tmux", "new-session", "-d", "-s", "mcp-server-dev"], "tmux", Other),
    r(&["SCREEN", "-dmS", "weather-mcp"], "SCREEN", Other),
    r(&["ssh", "-fN", "-L", "8931:localhost:8931", "gpu-mcp"], "ssh", Other),
    r(&["emacs", "--daemon=mcp-server"], "emacs", Other),
    r(&["/usr/lib/firefox/firefox", "http://localhost:8000/mcp"], "firefox", Other),
    r(&["node", "/home/u/src/mcp-server-weather/node_modules/.bin/tsc", "--watch"], "tsc", Other),
    r(&["git", "clone", "https://github.com/x/foo-mcp"], "git", Other),
    r(&["tail", "-f", "/var/log/foo-mcp"], "tail", Other),
    r(&["nvim", "mcp-server.py"], "nvim", Other),
    r(&["python3", "-m", "http.server", "--directory", "/srv/mcp"], "http.server", Other),
    // Hubs and daemons.
    r(&["node", "/home/u/.npm-global/lib/node_modules/mcp-hub/dist/cli.js", "--port", "37373", "--config", "/home/u/.config/mcphub/servers.json"], "mcp-hub", Other),
    r(&["bun", "/home/u/.claude/plugins/marketplaces/thedotmack/plugin/scripts/worker-service.cjs", "--daemon"], "worker-service.cjs", Other),
    r(&["mcpd", "daemon"], "mcpd", Other),
    r(&["/usr/bin/mcp-reaperd"], "mcp-reaperd", Other),
    r(&["reaperctl", "scan"], "reaperctl", Other),
    // Minecraft's Mod Coder Pack.
    r(&["python", "/home/u/mcp/runtime/recompile.py", "--client"], "recompile.py", Other),
    // Language servers (other; part of the tree of an MCP server that spawns them).
    r(&["node", "/home/u/.npm-global/lib/node_modules/pyright/langserver.index.js", "--stdio"], "pyright", Other),
    r(&["node", "/usr/lib/node_modules/typescript/lib/tsserver.js"], "typescript", Other),
    r(&["/home/u/.cargo/bin/rust-analyzer"], "rust-analyzer", Other),
    r(&["java", "-Declipse.application=org.eclipse.jdt.ls.core.id1", "-jar", "/opt/jdtls/plugins/org.eclipse.equinox.launcher_1.6.900.jar", "-data", "/home/u/.cache/jdtls"], "org.eclipse.equinox.launcher_1.6.900.jar", Other),
    // Editors' own helpers.
    r(&["/usr/lib/chromium/chromium", "--type=renderer", "--user-data-dir=/tmp/mcp-chrome-x"], "chromium", Other),
    // claude-mem (§3): its MCP servers next to its daemon.
    r(&["node", "/home/u/.claude/plugins/marketplaces/thedotmack/plugin/scripts/mcp-server.cjs"], "mcp-server.cjs", Server),
    r(&["/home/u/.cache/uv/archive-v0/Cm90/bin/python", "/home/u/.cache/uv/archive-v0/Cm90/bin/chroma-mcp", "--client-type", "persistent"], "chroma-mcp", Server),
    r(&["/home/u/.cache/uv/archive-v0/Cp11/bin/python", "/home/u/.cache/uv/archive-v0/Cp11/bin/conport-mcp", "--mode", "stdio"], "conport-mcp", Server),

    // ---- §5.2 servers swallowed by host patterns: arguments ending in a
    // host's name, a host program's own server mode.
    r(&["node", "/home/u/.npm/_npx/a3/node_modules/.bin/mcp-server-filesystem", "/home/u/projects/claude"], "mcp-server-filesystem", Server),
    r(&["node", "/home/u/.npm/_npx/a3/node_modules/.bin/mcp-server-filesystem", "/srv/gemini"], "mcp-server-filesystem", Server),
    r(&["mcp-server-filesystem", "/home/u/code"], "mcp-server-filesystem", Server),
    x(&["/home/u/.cache/uv/archive-v0/Ab12/bin/python", "/home/u/.cache/uv/archive-v0/Ab12/bin/mcp-server-git", "--repository", "/home/u/src/zed"], PY, "mcp-server-git", Server),
    x(&[CLAUDE_NATIVE, "--claude-in-chrome-mcp"], CLAUDE_NATIVE, "claude", Server),
    x(&["claude", "--claude-in-chrome-mcp"], CLAUDE_NATIVE, "claude", Server),
    x(&[CLAUDE_NPM, "--computer-use-mcp"], CLAUDE_NPM, "claude.exe", Server),
    r(&["claude", "mcp", "serve"], "claude", Server),
    r(&["vim", "/home/u/code"], "vim", Other),
    r(&["/usr/bin/python3", "sync.py", "/home/u/claude"], "sync.py", Other),

    // ---- §5.3 servers not recognised by the old patterns.
    r(&["/home/u/go/bin/mcp-language-server", "--workspace", "/home/u/src/app", "--lsp", "gopls"], "mcp-language-server", Server),
    r(&["mcp-grafana"], "mcp-grafana", Server),
    r(&["/home/u/.local/bin/mcp-obsidian"], "mcp-obsidian", Server),
    r(&["node", "/opt/homebrew/bin/gitnexus", "mcp"], "gitnexus", Server),
    r(&["/home/u/.local/bin/basic-memory", "mcp"], "basic-memory", Server),
    r(&["vexp-core", "mcp"], "vexp-core", Server),
    r(&["/home/u/.local/bin/kagimcp"], "kagimcp", Server),
    r(&["/home/u/.azure/bin/azmcp", "server", "start"], "azmcp", Server),
    r(&["/opt/idea/jbr/bin/java", "-classpath", "/opt/idea/plugins/mcpserver/lib/mcpserver-frontend.jar:/opt/idea/lib/util-8.jar", "com.intellij.mcpserver.stdio.McpStdioRunnerKt"], "com.intellij.mcpserver.stdio.McpStdioRunnerKt", Server),
    r(&["node", "/home/u/src/weather-mcp.ts"], "weather-mcp.ts", Server),
    r(&["node", "/home/u/src/tools/notes-mcp.cjs"], "notes-mcp.cjs", Server),
    // Goose InlinePython: `uvx --with mcp python /tmp/.tmpX/foo.py` (after
    // uvx's exec): the uvx that brings in the MCP SDK is the server (a
    // cmdline: pattern); its python child is in its tree.
    r(&["/home/u/.local/bin/uv", "tool", "uvx", "--with", "mcp", "python", "/tmp/.tmpAbC/foo.py"], "python", Server),
    r(&["uvx", "--with", "requests", "python", "/tmp/x.py"], "python", Launcher),
    // supergateway as a host's stdio bridge to a remote SSE server.
    r(&["node", "/home/u/.npm/_npx/4d4d/node_modules/.bin/supergateway", "--sse", "https://example.invalid/sse"], "supergateway", Server),
    r(&["/home/u/.cache/uv/archive-v0/Gz01/bin/python", "/tmp/.tmpAbC/foo.py"], "foo.py", Other),
    // oh-my-codex (§3): `…/dist/mcp/*-server.js` inside a package with no
    // server name: not fixable by names.
    r(&["node", "/home/u/.npm-global/lib/node_modules/oh-my-codex/dist/mcp/state-server.js"], "oh-my-codex", Other),

    // ---- §5.4 launchers: runners that stay the parent of what they run.
    r(&["npm", "start"], "start", Launcher),
    r(&["npm", "--prefix", "/home/u/src/srv", "run", "start"], "start", Launcher),
    r(&["uv", "tool", "run", "some-tool"], "some-tool", Launcher),
    r(&["deno", "task", "start"], "start", Launcher),
    r(&["poetry", "run", "python", "server.py"], "server.py", Launcher),
    r(&["pipenv", "run", "python", "server.py"], "server.py", Launcher),
    r(&["conda", "run", "-n", "mcp", "python", "server.py"], "server.py", Launcher),
    r(&["pdm", "run", "server.py"], "server.py", Launcher),
    r(&["hatch", "run", "serve"], "serve", Launcher),
    r(&["mise", "x", "node@22", "--", "node", "server.js"], "server.js", Launcher),
    r(&["volta", "run", "--node", "22", "node", "server.js"], "server.js", Launcher),
    r(&["timeout", "600", "node", "server.js"], "server.js", Launcher),
    r(&["timeout", "600", "mcp-server-time"], "mcp-server-time", Server),
    r(&["dbus-run-session", "--", "node", "server.js"], "dbus-run-session", Launcher),
    r(&["xvfb-run", "-a", "node", "server.js"], "xvfb-run", Launcher),

    // ---- Adopters (§5.1: the parent of adopted daemons; container inits).
    r(&["/usr/lib/systemd/systemd", "--user"], "systemd", Adopter),
    r(&["/lib/systemd/systemd", "--system", "--deserialize=30"], "systemd", Other),
    r(&["tini", "--", "node", "server.js"], "tini", Adopter),
    r(&["/usr/bin/dumb-init", "--", "node", "server.js"], "dumb-init", Adopter),
    r(&["/usr/bin/catatonit", "-P"], "catatonit", Adopter),
    r(&["-bash"], "bash", Other),
    r(&["/bin/zsh", "-l"], "zsh", Other),
];

/// The words of `argv` joined by single spaces, with each element's span.
fn spans(argv: &[&str]) -> (String, Vec<Span>) {
    let text = argv.join(" ");
    let mut at = 0;
    let spans = argv
        .iter()
        .map(|a| {
            let s = Span::new(at, at + a.len());
            at += a.len() + 1;
            s
        })
        .collect();
    (text, spans)
}

#[test]
fn every_row_gets_its_program_and_role() {
    let cfg = Config::embedded();
    let mut bad = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for row in ROWS {
        if !seen.insert((row.argv, row.exe)) {
            bad.push(format!("duplicate row {:?}", row.argv));
        }
        let (text, spans) = spans(row.argv);
        let program = Program::from_argv(&text, &spans);
        let name = program.name(&text);
        let m = cfg.matcher.classify_subject(Subject { cmdline: &text, program, exe: row.exe });
        if name != row.program || m.role != row.role {
            let pattern = m.pattern.map_or("", |i| cfg.matcher.pattern_text(m.role, i));
            bad.push(format!(
                "{:?}{}\n    program {name:?} (want {:?}), role {} (want {}), via {}, pattern {pattern:?}",
                row.argv,
                row.exe.map_or(String::new(), |e| format!(" exe {e}")),
                row.program,
                m.role.as_str(),
                row.role.as_str(),
                program.via.as_str(),
            ));
        }
    }
    assert!(bad.is_empty(), "{} of {} rows wrong:\n{}", bad.len(), ROWS.len(), bad.join("\n"));
    assert!(ROWS.len() >= 100, "the table has {} rows, want at least 100", ROWS.len());
}
