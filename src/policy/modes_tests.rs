//! Each host's grammar: one-shot, terminal UI, stdin-driven, windowed.

use super::*;

fn of(cmd: &str) -> Interface {
    let words: Vec<&str> = cmd.split(' ').collect();
    let g = TABLE.iter().find(|g| g.names.contains(&words[0])).unwrap();
    (g.parse)(&words[1..])
}

#[test]
fn one_shot_modes_in_each_hosts_grammar() {
    for cmd in [
        "claude -p migrate the tests",
        "claude --print=hi",
        "claude -cp fix it",
        "claude -pc",
        "claude --new-flag -p hi",
        "claude --model opus -p hi",
        "codex exec fix it",
        "codex e -",
        "codex review -",
        "codex -c model=\"o3\" exec -",
        "codex -p work exec go",
        "codex --profile=work -m o3 exec go",
        "gemini -p hi",
        "gemini --prompt=hi",
        "qwen -p hi",
        "opencode run review",
        "opencode -m x/y run review",
        "kilo run go",
        "cn -p hi",
        "copilot -p hi",
        "cursor-agent --print hi",
        "crush run hi",
        "goose run -t hi",
        "q chat --no-interactive hi",
    ] {
        assert!(matches!(of(cmd), Interface::OneShot(_)), "{cmd}: {:?}", of(cmd));
    }
}

#[test]
fn interactive_terminal_uis() {
    for cmd in [
        "claude",
        "claude --resume",
        "claude --model opus",
        "claude -c",
        "claude -cd",
        "claude --continue --model=opus --dangerously-skip-permissions",
        "claude -r 7f3a --add-dir /a /b --verbose",
        "codex",
        "codex -p work",
        "codex -c model=o3",
        "codex -mo3",
        "codex --remote ws://127.0.0.1:4500",
        "codex resume --last",
        "gemini",
        "gemini -m flash",
        "gemini -i hi",
        "qwen",
        "opencode",
        "opencode /home/u/src/app",
        "cn",
        "copilot",
        "cursor-agent",
        "crush",
        "goose",
        "goose session",
        "q chat",
        "cline",
    ] {
        assert_eq!(of(cmd), Interface::Terminal, "{cmd}");
    }
}

#[test]
fn stdin_driven_windowed_and_unknown_modes() {
    assert_eq!(
        of("claude --input-format stream-json --output-format stream-json"),
        Interface::Stdin("--input-format stream-json")
    );
    assert_eq!(of("codex app-server"), Interface::Stdin("codex app-server"));
    assert_eq!(of("gemini --experimental-acp"), Interface::Stdin("ACP"));
    assert_eq!(of("opencode acp"), Interface::Stdin("acp"));
    assert_eq!(of("code --type=utility"), Interface::Window);
    assert_eq!(of("claude-desktop"), Interface::Window);
    for cmd in [
        "claude daemon",
        "claude --bg-pty-host x",
        "claude mcp serve",
        "claude --model opus fix the bug",
        "claude remote-control --spawn=same-dir",
        "claude --remote-control nas",
        "claude --sdk-url wss://x --input-format stream-json",
        "claude --some-new-flag",
        "claude -cx",
        "codex -c model=o3 fix the bug",
        "codex app-server --listen ws://127.0.0.1:4500",
        "codex remote-control",
        "codex --new-flag value",
        "gemini -m flash summarise this",
        "gemini --new=1",
        "codex mcp-server",
        "opencode serve",
        "cline --cline-hub-daemon",
        "gemini mcp list",
    ] {
        assert_eq!(of(cmd), Interface::Unknown, "{cmd}");
    }
}
