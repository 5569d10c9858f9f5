//! How a host is used, read from its own command line in its own grammar:
//! through a terminal UI, driven over its stdin by another program, as a
//! one-shot run, or through windows. The `stale` rules act only on the two
//! interfaces whose loss is conclusive: a terminal UI whose controlling
//! terminal died, and a stdin-driven host nobody can write to any more.
//!
//! A host not in the table, or a command line the grammar cannot place, is
//! [`Interface::Unknown`]: never stale, at most suspect. A mistake can only
//! go one way: a one-shot run taken for an interactive one would be killed,
//! so every parser answers `Terminal` or `Stdin` only when it has read the
//! whole command line ([`super::argv`]: every option known, short-flag
//! clusters resolved as the host's CLI library resolves them) and found no
//! sign of anything else, and answers `OneShot` on any sign of one.
//!
//! This is text: it names how a host is meant to be used, never that
//! nobody uses it. The `stale` rules (`stale.rs`) take the process's own
//! state for that; a mode read here can only narrow them (a one-shot run,
//! a windowed app, an unknown mode are never stale) or keep a tree.

use super::argv::{self, Options};
use super::cli_options::{
    CLAUDE, CLAUDE_ELSEWHERE, CODEX, CONTINUE, COPILOT, CRUSH, CURSOR_AGENT, GEMINI, GOOSE, OPENCODE, Q_CHAT,
};
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
    /// Its command line reads as a terminal UI, but its own stdin is no
    /// terminal (the text says what it is instead): a pipeline or a
    /// script feeds it (`git diff | gemini`), and with no terminal to read
    /// keys from it is no terminal UI, whatever its argv says. Set from
    /// the process's state by `facts.rs`, never by a grammar.
    NoTerminal(&'static str),
}

impl Interface {
    /// Why losing a terminal or stdin says nothing about this host's use.
    pub(super) fn why_not(&self, host: &str) -> String {
        match self {
            Interface::OneShot(w) => format!("{host} is a one-shot run ({w}) that finishes by itself"),
            Interface::Window => {
                format!("{host} is a windowed app: its windows, not that terminal, are how it is used")
            }
            Interface::Unknown => format!("{host} is not in a mode known to be used through its terminal or stdin"),
            Interface::Terminal => format!("{host} is a terminal UI"),
            Interface::NoTerminal(fd0) => format!(
                "{host}'s command line reads as a terminal UI, but its stdin is {fd0}, not a terminal: something \
                 else feeds it (a pipeline, a script), so it is not used through a terminal"
            ),
            Interface::Stdin(m) => format!("{host} is driven over its stdin ({m})"),
        }
    }
}

/// One host family: the program names it runs under, and its grammar.
pub(super) struct Grammar {
    pub(super) names: &'static [&'static str],
    parse: fn(&[&str]) -> Interface,
}

/// Every host the reaper knows the modes of. Names are programs as
/// `program::Program` identifies them (a node script's package, a native
/// binary's file name).
pub(super) const TABLE: &[Grammar] = &[
    // Claude Code: `-p`/`--print` is print mode (one-shot), anywhere on the
    // line, alone or in a cluster (`-cp`); `--input-format stream-json`
    // (the VS Code extension) is driven over stdin; Remote Control, cloud,
    // background and SDK-URL sessions are used from elsewhere; with no
    // prompt or subcommand and every option known, the terminal UI.
    Grammar { names: &["claude", "claude.exe", "@anthropic-ai/claude-code"], parse: claude },
    // The Agent SDK's bundled CLI: the same grammar (the SDK passes
    // `--input-format stream-json`).
    Grammar { names: &["@anthropic-ai/claude-agent-sdk"], parse: claude },
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
    Grammar { names: &["cursor-agent"], parse: cursor_agent },
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
    // ACP adapters: driven over their stdin by an editor, they drive a host
    // over its own.
    Grammar { names: ADAPTERS, parse: |_| Interface::Stdin("an ACP adapter") },
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
    if host.program.is_cut() {
        // Its last arguments are unknown: they could say anything.
        return Interface::Unknown;
    }
    if let Some(g) = TABLE.iter().find(|g| g.names.contains(&name)) {
        return (g.parse)(&args);
    }
    // The native claude whose argv shows only its version.
    if host.exe().is_some_and(|e| e.contains("/claude/versions/")) {
        return claude(&args);
    }
    Interface::Unknown
}

/// Whether `p` is an adapter that drives a host over the host's stdin on
/// behalf of a client that drives it over its own (an ACP adapter): the
/// host below it is reached through it alone.
pub(super) fn is_adapter(p: &Process) -> bool {
    ADAPTERS.contains(&p.program.name(&p.cmdline))
}

/// ACP adapters: Zed's for Claude Code (the Agent SDK's `claude` below it)
/// and for Codex (`codex app-server` or `codex mcp-server` below it).
const ADAPTERS: &[&str] = &[
    "@zed-industries/claude-code-acp",
    "claude-code-acp",
    "@zed-industries/claude-agent-acp",
    "claude-agent-acp",
    "@zed-industries/codex-acp",
    "codex-acp",
];

fn one_shot(w: &str) -> Interface {
    Interface::OneShot(w.to_string())
}

fn claude(args: &[&str]) -> Interface {
    if let Some(w) = argv::mentions(args, &["-p", "--print"]) {
        return one_shot(&w);
    }
    let Ok(p) = argv::parse(args, &CLAUDE) else { return Interface::Unknown };
    if p.has(CLAUDE_ELSEWHERE) {
        return Interface::Unknown;
    }
    if p.value(&["--input-format"]) == Some("stream-json") {
        return Interface::Stdin("--input-format stream-json");
    }
    // A subcommand (`claude mcp …`, `claude remote-control`, one this table
    // does not know yet) or a first prompt: the joined command line cannot
    // tell them apart.
    if p.positionals.is_empty() { Interface::Terminal } else { Interface::Unknown }
}

fn codex(args: &[&str]) -> Interface {
    // `exec` (`e`) and `review` anywhere: what follows them is theirs.
    if let Some(w) = args.iter().find(|w| matches!(**w, "exec" | "e" | "review")) {
        return one_shot(&format!("codex {w}"));
    }
    let Ok(p) = argv::parse(args, &CODEX) else { return Interface::Unknown };
    match p.positionals.first() {
        None => Interface::Terminal,
        // `resume`/`fork` take a session id and a first prompt.
        Some(&("resume" | "fork")) if p.positionals.len() <= 3 => Interface::Terminal,
        Some(&("app-server" | "proto")) if p.positionals.len() == 1 => match p.value(&["--listen"]) {
            None | Some("stdio" | "stdio://") => Interface::Stdin("codex app-server"),
            // Its clients come over the network: its stdin is not how it is used.
            Some(_) => Interface::Unknown,
        },
        // A subcommand (`app-server daemon`, `remote-control`, a new one)
        // or the TUI's first prompt.
        Some(_) => Interface::Unknown,
    }
}

fn gemini(args: &[&str]) -> Interface {
    if let Some(w) = argv::mentions(args, &["-p", "--prompt"]) {
        return one_shot(&w);
    }
    let Ok(p) = argv::parse(args, &GEMINI) else { return Interface::Unknown };
    if p.has(&["--experimental-acp", "--acp"]) {
        return Interface::Stdin("ACP");
    }
    if p.value(&["--input-format"]) == Some("stream-json") {
        return Interface::Stdin("--input-format stream-json");
    }
    if p.has(&["-i", "--prompt-interactive"]) {
        return Interface::Terminal;
    }
    match p.positionals.first() {
        None => Interface::Terminal,
        // A query: Gemini CLI before 0.6x and Qwen Code run it once; Gemini
        // CLI now starts its terminal UI with it. Or a subcommand.
        Some(_) => Interface::Unknown,
    }
}

fn opencode(args: &[&str]) -> Interface {
    if args.first() == Some(&"run") || args.contains(&"run") {
        return one_shot("run");
    }
    let Ok(p) = argv::parse(args, &OPENCODE) else { return Interface::Unknown };
    match p.positionals.as_slice() {
        [] => Interface::Terminal,
        ["acp"] => Interface::Stdin("acp"),
        // A project directory: the TUI on it. Any other word may be a
        // subcommand this table does not know.
        [dir] if dir.starts_with(['/', '.', '~']) || dir.contains('/') => Interface::Terminal,
        _ => Interface::Unknown,
    }
}

fn continue_cli(args: &[&str]) -> Interface {
    if let Some(w) = argv::mentions(args, &["-p", "--print"]) {
        return one_shot(&w);
    }
    terminal_if_bare(args, &CONTINUE)
}

fn copilot(args: &[&str]) -> Interface {
    if let Some(w) = argv::mentions(args, &["-p", "--prompt"]) {
        return one_shot(&w);
    }
    let Ok(p) = argv::parse(args, &COPILOT) else { return Interface::Unknown };
    if p.has(&["--acp"]) {
        return Interface::Stdin("ACP");
    }
    if p.positionals.is_empty() { Interface::Terminal } else { Interface::Unknown }
}

fn cursor_agent(args: &[&str]) -> Interface {
    if let Some(w) = argv::mentions(args, &["-p", "--print"]) {
        return one_shot(&w);
    }
    terminal_if_bare(args, &CURSOR_AGENT)
}

fn crush(args: &[&str]) -> Interface {
    if args.contains(&"run") {
        return one_shot("run");
    }
    terminal_if_bare(args, &CRUSH)
}

fn goose(args: &[&str]) -> Interface {
    if args.first() == Some(&"run") {
        return one_shot("run");
    }
    let Ok(p) = argv::parse(args, &GOOSE) else { return Interface::Unknown };
    match p.positionals.as_slice() {
        [] | ["session"] => Interface::Terminal,
        ["acp"] => Interface::Stdin("acp"),
        _ => Interface::Unknown,
    }
}

fn q_chat(args: &[&str]) -> Interface {
    if let Some(w) = argv::mentions(args, &["--no-interactive", "--non-interactive"]) {
        return one_shot(&w);
    }
    let Ok(p) = argv::parse(args, &Q_CHAT) else { return Interface::Unknown };
    match p.positionals.as_slice() {
        ["chat"] => Interface::Terminal,
        _ => Interface::Unknown,
    }
}

fn cline(args: &[&str]) -> Interface {
    if args.is_empty() { Interface::Terminal } else { Interface::Unknown }
}

/// The terminal UI when every option is known and nothing else is given.
fn terminal_if_bare(args: &[&str], opts: &Options) -> Interface {
    match argv::parse(args, opts) {
        Ok(p) if p.positionals.is_empty() => Interface::Terminal,
        _ => Interface::Unknown,
    }
}

#[cfg(test)]
#[path = "modes_tests.rs"]
mod tests;
