//! Issue 21's shapes for every host grammar: live work that only looks left
//! behind (windowed hosts from a closed terminal, one-shot runs, a person's
//! pipeline in an IDE terminal, a host run as a unit) is never a candidate;
//! terminal UIs whose terminal died and trees a host let go still are.

use super::corpus::{Mode, adopter};
use super::tests::{World, tty};
use super::*;
use crate::scan::Unit;

/// Hosts whose loss of a terminal or of their stdin's writer says nothing
/// about their use (issue 21): windowed apps started from a terminal, and
/// one-shot runs in each host's grammar.
const NOT_STALE_HOSTS: &[(&str, &str)] = &[
    ("Cursor from a terminal", "/opt/cursor/cursor --no-sandbox"),
    ("VS Code from a terminal", "/usr/share/code/code ."),
    ("Claude Desktop from a shell", "/usr/lib/claude-desktop/claude-desktop"),
    ("IntelliJ IDEA (idea.sh & disown)", "/opt/idea/jbr/bin/java -cp x com.intellij.idea.Main"),
    ("Zed", "/usr/bin/zed"),
    ("claude -p", "claude -p migrate the tests"),
    ("claude --print=", "/home/u/.local/share/claude/versions/2.1.197 --print=hi"),
    ("codex exec", "/home/u/.npm/codex/vendor/x86_64-unknown-linux-musl/bin/codex exec fix"),
    ("codex e -", "codex e -"),
    ("codex review -", "codex review -"),
    ("codex with a global option before exec", "codex -c model=\"o3\" exec -"),
    ("gemini -p", "node /usr/lib/node_modules/@google/gemini-cli/bundle/gemini.js -p hi"),
    ("gemini --prompt=", "gemini --prompt=review"),
    ("qwen -p", "qwen -p hi"),
    ("opencode run", "opencode run review"),
    ("kilo run", "kilo run review"),
    ("cn -p", "cn -p hi"),
    ("copilot -p", "copilot -p hi"),
    ("cursor-agent -p", "cursor-agent -p hi"),
];

/// Terminal UIs in an interactive mode: their dead terminal is conclusive.
const TERMINAL_UIS: &[&str] = &[
    "claude --resume",
    "/home/u/.local/share/claude/versions/2.1.197",
    "codex",
    "codex -p work",
    "node /usr/lib/node_modules/@google/gemini-cli/bundle/gemini.js -m flash",
    "qwen",
    "opencode",
    "crush",
    "copilot",
    "cursor-agent",
    "goose session",
];

#[test]
fn live_work_that_looks_left_behind_is_never_reaped() {
    use crate::scan::StdinEnd;
    let gone = || Some(StdinEnd::Gone("no process holds the write end of its stdin pipe"));
    let mut wrong = Vec::new();
    for (what, cmd) in NOT_STALE_HOSTS {
        for place in ["dead terminal, live parent", "dead terminal, adopted", "adopted, stdin without writer"] {
            for mode in [Mode::Pid1, Mode::UserManager] {
                let mut w = World::new();
                let parent = if place.ends_with("live parent") {
                    w.add(50, 1, "xterm").pid().get()
                } else {
                    adopter(&mut w, mode)
                };
                let host = w.add(100, parent, cmd);
                if place.starts_with("dead terminal") {
                    tty(host, "/dev/pts/3 (deleted)");
                    host.tty_nr = 0; // cleared by the hangup
                } else {
                    host.details.as_mut().unwrap().stdin = gone();
                }
                super::tests::playwright_under(&mut w, 100);
                let (snap, js) = w.judge();
                for j in &js {
                    if j.candidate || matches!(j.verdict, Verdict::Stale | Verdict::Abandoned) {
                        wrong.push(format!(
                            "{what} ({place}, {mode:?}): {} {}: {}",
                            snap.procs[j.root].pid(),
                            j.verdict,
                            j.reason
                        ));
                    } else if place.starts_with("dead terminal") && j.host.is_some() && j.suspect.is_none() {
                        wrong.push(format!("{what} ({place}): kept but not named a suspect: {}", j.reason));
                    }
                }
            }
        }
    }
    // A host that is a systemd unit's main process (`systemd-run --user
    // --pipe claude`): its service manager, not its pipe, ends it.
    let mut w = World::new();
    let m = adopter(&mut w, Mode::UserManager);
    let host = w.add(100, m, "claude --resume");
    let d = host.details.as_mut().unwrap();
    d.stdin = gone();
    d.unit = Some(Unit { name: "run-u7.service".into(), main: Some(true) });
    super::tests::playwright_under(&mut w, 100);
    let (_, js) = w.judge();
    if js.iter().any(|j| j.candidate) {
        wrong.push(format!("a host run as a unit: {}", js[0].reason));
    }
    assert!(wrong.is_empty(), "live work that would be reaped:\n{}", wrong.join("\n"));
}

#[test]
fn a_persons_pipeline_in_an_ide_terminal_is_never_abandoned() {
    use crate::scan::StdinEnd;
    let mut wrong = Vec::new();
    for pty_host in [
        "/usr/share/code/code --type=utility --utility-sub-type=node.mojom.NodeService",
        "/opt/cursor/cursor --type=utility",
        "/usr/share/windsurf/windsurf --type=utility",
        "/opt/idea/jbr/bin/java -cp x com.intellij.idea.Main",
        "/usr/bin/zed",
    ] {
        for shell in ["-bash", "/usr/bin/zsh -i", "/usr/bin/fish", "bash --login"] {
            for server in ["npx @modelcontextprotocol/server-everything", "uvx mcp-server-fetch"] {
                let mut w = World::new();
                tty(w.add(50, 1, "/usr/bin/gnome-shell"), "/dev/null");
                w.add(100, 50, pty_host);
                tty(w.add(300, 100, shell), "/dev/pts/4");
                let s = w.add(400, 300, server);
                s.sid = Pid::new(300);
                s.tty_nr = super::tests::tty_nr_of_pts(4);
                s.details.as_mut().unwrap().stdin =
                    Some(StdinEnd::Gone("no process holds the write end of its stdin pipe"));
                let (snap, js) = w.judge();
                for j in js.iter().filter(|j| j.candidate || j.verdict != Verdict::Foreign) {
                    wrong.push(format!(
                        "{pty_host} › {shell} › {server}: {} {}: {}",
                        snap.procs[j.root].pid(),
                        j.verdict,
                        j.reason
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "a person's jobs judged as a host's:\n{}", wrong.join("\n"));
}

#[test]
fn true_stale_and_abandoned_trees_are_still_reaped() {
    use crate::scan::StdinEnd;
    let mut wrong = Vec::new();
    for cmd in TERMINAL_UIS {
        let mut w = World::new();
        let term = w.add(50, 1, "xterm").pid().get();
        let host = w.add(100, term, cmd);
        tty(host, "/dev/pts/3 (deleted)");
        host.tty_nr = 0;
        super::tests::playwright_under(&mut w, 100);
        let (_, js) = w.judge();
        if js.len() != 1 || js[0].verdict != Verdict::Stale || !js[0].reap {
            wrong.push(format!(
                "{cmd} on a dead terminal: {:?}",
                js.iter().map(|j| (j.verdict, &j.reason)).collect::<Vec<_>>()
            ));
        }
        // Its host closed the server's stdin (the host made that pipe).
        let mut w = World::new();
        tty(w.add(100, 1, cmd), "/dev/pts/3");
        super::tests::playwright_under(&mut w, 100);
        w.procs.iter_mut().find(|p| p.pid().get() == 200).unwrap().details.as_mut().unwrap().stdin =
            Some(StdinEnd::Gone("no process holds the write end of its stdin pipe"));
        let (_, js) = w.judge();
        if js.len() != 1 || js[0].verdict != Verdict::Abandoned || !js[0].reap {
            wrong.push(format!(
                "{cmd} closed a stdin: {:?}",
                js.iter().map(|j| (j.verdict, &j.reason)).collect::<Vec<_>>()
            ));
        }
    }
    assert!(wrong.is_empty(), "true cases missed:\n{}", wrong.join("\n"));
}
