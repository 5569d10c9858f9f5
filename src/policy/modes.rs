//! How a host is used, read from its own command line in its own grammar:
//! through a terminal UI, driven over its stdin by another program, as a
//! one-shot run, or through windows. The `stale` rules act only on the two
//! interfaces whose loss is conclusive: a terminal UI whose controlling
//! terminal died, and a stdin-driven host nobody can write to any more.
//!
//! A host not in the table, or a command line the grammar cannot place, is
//! [`Interface::Unknown`]: never stale, at most suspect. A mistake can only
//! go one way: a one-shot run taken for an interactive one would be killed,
//! so every parser answers `Terminal` only when it has read the whole
//! command line and found no sign of anything else.

use crate::scan::Process;

/// What a host's user interface is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Interface {
    /// An interactive terminal UI: its terminal is how a person uses it.
    Terminal,
    /// Driven over its stdin by another program (an SDK, an editor, ACP):
    /// the text says which mode.
    Stdin(&'static str),
    /// A one-shot run: reads its task, works, exits by itself. The text is
    /// the words that say so.
    OneShot(String),
    /// A windowed app (an Electron editor, Zed, an IDEA-family IDE): its windows are its
    /// interface, whatever terminal it was started from.
    Window,
    /// A background or service mode, or a command line the table cannot
    /// place.
    Unknown,
}

impl Interface {
    /// Whether losing this interface is conclusive evidence nobody uses the
    /// host: a terminal UI, or a host driven over its stdin.
    pub(super) fn is_conclusive(&self) -> bool {
        matches!(self, Interface::Terminal | Interface::Stdin(_))
    }

    /// Why losing a terminal or stdin says nothing about this host's use.
    pub(super) fn why_not(&self, host: &str) -> String {
        match self {
            Interface::OneShot(w) => format!("{host} is a one-shot run ({w}) that finishes by itself"),
            Interface::Window => {
                format!("{host} is a windowed app: its windows, not that terminal, are how it is used")
            }
            Interface::Unknown => format!("{host} is not in a mode known to be used through its terminal or stdin"),
            Interface::Terminal => format!("{host} is a terminal UI"),
            Interface::Stdin(m) => format!("{host} is driven over its stdin ({m})"),
        }
    }
}

/// One host family: the program names it runs under, and its grammar.
struct Grammar {
    names: &'static [&'static str],
    parse: fn(&[&str]) -> Interface,
}

/// Every host the reaper knows the modes of. Names are programs as
/// `program::Program` identifies them (a node script's package, a native
/// binary's file name).
const TABLE: &[Grammar] = &[
    // Claude Code: `-p`/`--print` is print mode (one-shot), anywhere on the
    // line; `--input-format stream-json` (the Agent SDK, the VS Code
    // extension) is driven over stdin; `daemon` and `--bg-pty-host` are its
    // background sessions; anything else is the terminal UI.
    Grammar { names: &["claude", "claude.exe", "@anthropic-ai/claude-code"], parse: claude },
    // The Agent SDK's bundled CLI: always driven by the SDK over stdin.
    Grammar { names: &["@anthropic-ai/claude-agent-sdk"], parse: |_| Interface::Stdin("the Agent SDK") },
    // Codex: global options first (`-c k=v`, `-p PROFILE`, …), then a
    // subcommand: `exec` (alias `e`) and `review` are one-shot,
    // `app-server`/`proto` are driven over stdin; no subcommand, `resume`
    // or a prompt is the terminal UI.
    Grammar { names: &["codex", "codex.js", "@openai/codex"], parse: codex },
    // Gemini CLI and its fork Qwen Code: `-p`/`--prompt` and a positional
    // query are one-shot (the query runs non-interactively unless `-i`);
    // `--experimental-acp`/`--acp` is driven over stdin.
    Grammar { names: &["gemini", "gemini.js", "@google/gemini-cli", "qwen", "@qwen-code/qwen-code"], parse: gemini },
    // opencode and its fork Kilo: `run` is one-shot, `acp` is driven over
    // stdin, `serve`/`web` and the other subcommands are no terminal UI; no
    // subcommand (or a project path) is the TUI.
    Grammar { names: &["opencode", "opencode.exe", "kilo", "@kilocode/cli"], parse: opencode },
    // Continue CLI: `-p`/`--print` is headless; `serve` a server.
    Grammar { names: &["cn", "@continuedev/cli"], parse: continue_cli },
    // GitHub Copilot CLI: `-p`/`--prompt` is one-shot, `--acp` over stdin.
    Grammar { names: &["copilot", "@github/copilot"], parse: copilot },
    // Cursor CLI: `-p`/`--print` is one-shot.
    Grammar { names: &["cursor-agent"], parse: print_flag },
    // Crush: `run` is one-shot.
    Grammar { names: &["crush", "@charmland/crush"], parse: crush },
    // Goose CLI: `session` (or nothing) is the TUI, `run` one-shot, `acp`
    // over stdin; `goosed` is the desktop app's backend.
    Grammar { names: &["goose"], parse: goose },
    // Amazon Q and Kiro CLI: `chat` is the TUI unless `--no-interactive`.
    Grammar { names: &["q", "qchat", "kiro-cli", "kiro-cli-chat"], parse: q_chat },
    // Cline CLI: only a bare `cline` is known to be its TUI; its hub daemon
    // and task modes are not.
    Grammar { names: &["cline", ".cline"], parse: cline },
    // Windowed hosts: editors, desktop apps and their helper processes.
    Grammar {
        names: &[
            "code",
            "code-insiders",
            "codium",
            "vscodium",
            "cursor",
            "windsurf",
            "kiro",
            "trae",
            "zed",
            "zeditor",
            "zed-editor",
            "claude-desktop",
            "chatgpt",
            "com.intellij.idea.Main",
            "continue-binary",
            "warp",
            "warp-terminal",
            "lm-studio",
        ],
        parse: |_| Interface::Window,
    },
];

/// How `host` is used, from its program and arguments.
pub(super) fn interface(host: &Process) -> Interface {
    let name = host.program.name(&host.cmdline);
    let args: Vec<&str> = host.program.args(&host.cmdline).split(' ').filter(|w| !w.is_empty()).collect();
    if let Some(g) = TABLE.iter().find(|g| g.names.contains(&name)) {
        return (g.parse)(&args);
    }
    // The native claude whose argv shows only its version.
    if host.exe().is_some_and(|e| e.contains("/claude/versions/")) {
        return claude(&args);
    }
    Interface::Unknown
}

/// The first word equal to, or of the form `WORD=…`, one of `flags`.
fn flag<'a>(args: &[&'a str], flags: &[&str]) -> Option<&'a str> {
    args.iter().copied().find(|w| flags.iter().any(|f| w == f || w.strip_prefix(f).is_some_and(|r| r.starts_with('='))))
}

/// The positional words, skipping options and the values of `valued`
/// options (`--opt VALUE`; `--opt=VALUE` is one word). Stops at `--`.
fn positionals<'a>(args: &[&'a str], valued: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut it = args.iter().copied();
    while let Some(w) = it.next() {
        if w == "--" {
            out.extend(it);
            break;
        }
        if w.starts_with('-') && w.len() > 1 {
            if valued.contains(&w) {
                it.next();
            }
            continue;
        }
        out.push(w);
    }
    out
}

fn one_shot(w: &str) -> Interface {
    Interface::OneShot(w.to_string())
}

fn claude(args: &[&str]) -> Interface {
    if let Some(w) = flag(args, &["-p", "--print"]) {
        return one_shot(w);
    }
    if args.first() == Some(&"daemon") || flag(args, &["--bg-pty-host"]).is_some() {
        return Interface::Unknown;
    }
    if args.windows(2).any(|p| p[0] == "--input-format" && p[1] == "stream-json")
        || flag(args, &["--input-format"]).is_some_and(|w| w.ends_with("=stream-json"))
        || flag(args, &["--sdk-url"]).is_some()
    {
        return Interface::Stdin("--input-format stream-json");
    }
    // `claude mcp …`, `claude doctor`, `claude update`: no session at all.
    match positionals(args, CLAUDE_VALUED).first() {
        Some(
            &("mcp" | "doctor" | "update" | "install" | "setup-token" | "config" | "plugin" | "migrate-installer"),
        ) => Interface::Unknown,
        _ => Interface::Terminal,
    }
}

/// Claude Code options that take a value (a prompt positional is the TUI's
/// first message, so a wrong skip here only ever reads a value as a prompt).
const CLAUDE_VALUED: &[&str] = &[
    "--model",
    "--agent",
    "--agents",
    "--settings",
    "--setting-sources",
    "--mcp-config",
    "--permission-mode",
    "--allowedTools",
    "--allowed-tools",
    "--disallowedTools",
    "--disallowed-tools",
    "--add-dir",
    "--append-system-prompt",
    "--system-prompt",
    "--fallback-model",
    "--session-id",
    "--output-format",
    "-r",
    "--resume",
];

/// Codex's global options that take a value.
const CODEX_VALUED: &[&str] = &[
    "-c",
    "--config",
    "-m",
    "--model",
    "-p",
    "--profile",
    "-s",
    "--sandbox",
    "-a",
    "--ask-for-approval",
    "-C",
    "--cd",
    "-i",
    "--image",
    "--enable",
    "--disable",
    "--local-provider",
    "--oss-provider",
    "--add-dir",
];

fn codex(args: &[&str]) -> Interface {
    match positionals(args, CODEX_VALUED).first() {
        None | Some(&("resume" | "fork")) => Interface::Terminal,
        Some(&("exec" | "e")) => one_shot("codex exec"),
        Some(&"review") => one_shot("codex review"),
        Some(&("app-server" | "proto")) => Interface::Stdin("codex app-server"),
        Some(&sub) if CODEX_OTHER.contains(&sub) => Interface::Unknown,
        // Anything else is the TUI's first prompt.
        Some(_) => Interface::Terminal,
    }
}

/// Codex subcommands that are no interactive session.
const CODEX_OTHER: &[&str] = &[
    "login",
    "logout",
    "mcp",
    "mcp-server",
    "completion",
    "sandbox",
    "debug",
    "apply",
    "a",
    "cloud",
    "features",
    "generate-ts",
    "help",
];

/// Gemini CLI / Qwen Code options that take a value.
const GEMINI_VALUED: &[&str] = &[
    "-m",
    "--model",
    "--approval-mode",
    "-e",
    "--extensions",
    "--allowed-mcp-server-names",
    "--allowed-tools",
    "--include-directories",
    "-o",
    "--output-format",
    "--telemetry-target",
    "--telemetry-otlp-endpoint",
    "--telemetry-outfile",
    "--proxy",
    "-r",
    "--resume",
    "--max-old-space-size",
];

fn gemini(args: &[&str]) -> Interface {
    if let Some(w) = flag(args, &["-p", "--prompt"]) {
        return one_shot(w);
    }
    if flag(args, &["--experimental-acp", "--acp"]).is_some() {
        return Interface::Stdin("ACP");
    }
    if flag(args, &["-i", "--prompt-interactive"]).is_some() {
        return Interface::Terminal;
    }
    match positionals(args, GEMINI_VALUED).first() {
        None => Interface::Terminal,
        Some(&("mcp" | "extensions")) => Interface::Unknown,
        // A positional query runs non-interactively.
        Some(q) => one_shot(&format!("a query ({q} …)")),
    }
}

const OPENCODE_VALUED: &[&str] =
    &["-m", "--model", "-s", "--session", "--agent", "--port", "--hostname", "--prompt", "--log-level"];

fn opencode(args: &[&str]) -> Interface {
    match positionals(args, OPENCODE_VALUED).first() {
        None => Interface::Terminal,
        Some(&"run") => one_shot("run"),
        Some(&"acp") => Interface::Stdin("acp"),
        // A project directory: the TUI on it. Any other word may be a
        // subcommand this table does not know.
        Some(p) if p.starts_with(['/', '.', '~']) || p.contains('/') => Interface::Terminal,
        Some(_) => Interface::Unknown,
    }
}

fn continue_cli(args: &[&str]) -> Interface {
    if let Some(w) = flag(args, &["-p", "--print"]) {
        return one_shot(w);
    }
    match positionals(args, &["--config", "--model", "--rule", "--mcp", "--org"]).first() {
        None => Interface::Terminal,
        Some(_) => Interface::Unknown,
    }
}

fn copilot(args: &[&str]) -> Interface {
    if let Some(w) = flag(args, &["-p", "--prompt"]) {
        return one_shot(w);
    }
    if flag(args, &["--acp"]).is_some() {
        return Interface::Stdin("ACP");
    }
    match positionals(args, &["--model", "--add-dir", "--log-level", "--log-dir", "--resume"]).first() {
        None => Interface::Terminal,
        Some(_) => Interface::Unknown,
    }
}

fn print_flag(args: &[&str]) -> Interface {
    match flag(args, &["-p", "--print"]) {
        Some(w) => one_shot(w),
        None => Interface::Terminal,
    }
}

fn crush(args: &[&str]) -> Interface {
    match positionals(args, &["-c", "--cwd", "-D", "--data-dir"]).first() {
        None => Interface::Terminal,
        Some(&"run") => one_shot("run"),
        Some(_) => Interface::Unknown,
    }
}

fn goose(args: &[&str]) -> Interface {
    match positionals(args, &["-n", "--name", "-r", "--resume", "--with-extension", "--with-builtin"]).first() {
        None | Some(&"session") => Interface::Terminal,
        Some(&"run") => one_shot("run"),
        Some(&"acp") => Interface::Stdin("acp"),
        Some(_) => Interface::Unknown,
    }
}

fn q_chat(args: &[&str]) -> Interface {
    if let Some(w) = flag(args, &["--no-interactive", "--non-interactive"]) {
        return one_shot(w);
    }
    match positionals(args, &["--model", "--agent", "--profile"]).first() {
        Some(&"chat") => Interface::Terminal,
        _ => Interface::Unknown,
    }
}

fn cline(args: &[&str]) -> Interface {
    if args.is_empty() { Interface::Terminal } else { Interface::Unknown }
}

#[cfg(test)]
#[path = "modes_tests.rs"]
mod tests;
