//! Issue 32, generated: every host of the modes table, its argv mutated the
//! ways a grammar table cannot know (a new subcommand, a short-flag
//! cluster, an unknown `--flag=value`, no arguments on a piped stdin, a
//! listening socket), in every place that once made a host stale (a dead
//! terminal under a live parent or adopted, adopted with a stdin nobody
//! writes to): never `stale`. What the text says may keep a tree; only the
//! process's state may end one, and here it never shows a terminal UI
//! whose own terminal died with nothing else to reach it.

use super::corpus::{Mode, adopter};
use super::modes::TABLE;
use super::tests::{World, playwright_under, stdio, tty};
use super::*;
use crate::scan::{Listening, StdinEnd};

/// A command line whose program is `name` (as `program::Program` names it).
fn command_of(name: &str) -> String {
    if name.starts_with('@') {
        format!("node /usr/lib/node_modules/{name}/dist/index.js")
    } else if name.contains(".idea.") {
        format!("/opt/idea/jbr/bin/java -cp x {name}")
    } else if std::path::Path::new(name).extension().is_some_and(|e| e == "js") {
        format!("node /opt/{name}/bin/{name}")
    } else {
        format!("/usr/bin/{name}")
    }
}

/// The mutants of `base`: what the host's table cannot positively know.
fn mutants(base: &str) -> Vec<(String, &'static str)> {
    let mut out = vec![
        (format!("{base} frobnicate"), "an unknown subcommand"),
        (format!("{base} remote-control --name nas"), "a remote-driven subcommand"),
        (format!("{base} -Zq"), "a short-flag cluster it cannot resolve"),
        (format!("{base} -Zc"), "a cluster with one known letter"),
        (format!("{base} --frob=1"), "an unknown --flag=value"),
        (format!("{base} --frob 1"), "an unknown flag and a word"),
        (format!("{base} --model=x --frob"), "a known --flag=value and an unknown flag"),
    ];
    // The one-shot flags, alone and in clusters, in each host's spelling.
    for w in ["-cp", "-pc", "-yp", "-dp", "--print=yes", "--prompt=review"] {
        out.push((format!("{base} {w} hi"), "a one-shot flag, clustered or with ="));
    }
    out
}

/// Where the mutant runs, and what its state shows.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// Its terminal died; its terminal emulator lives.
    DeadTerminalLiveParent,
    /// Its terminal died and it was adopted.
    DeadTerminalAdopted(Mode),
    /// Adopted, fd 0 a pipe nobody writes to any more (a script, cron).
    PipedAdopted(Mode),
}

const PLACES: [Place; 5] = [
    Place::DeadTerminalLiveParent,
    Place::DeadTerminalAdopted(Mode::Pid1),
    Place::DeadTerminalAdopted(Mode::UserManager),
    Place::PipedAdopted(Mode::Pid1),
    Place::PipedAdopted(Mode::UserManager),
];

/// The verdicts on `cmd` at `place` (listening on a socket if `listens`):
/// what went wrong, if anything.
fn judged(cmd: &str, place: Place, listens: bool) -> Option<String> {
    let mut w = World::new();
    let parent = match place {
        Place::DeadTerminalLiveParent => w.add(50, 1, "xterm").pid().get(),
        Place::DeadTerminalAdopted(m) | Place::PipedAdopted(m) => adopter(&mut w, m),
    };
    let host = w.add(100, parent, cmd);
    if let Place::PipedAdopted(_) = place {
        stdio(host, "pipe:[77]", "/home/u/review.md");
        host.details.as_mut().unwrap().stdin = Some(StdinEnd::Gone("no process holds the write end of its stdin pipe"));
    } else {
        tty(host, "/dev/pts/3 (deleted)");
        host.tty_nr = 0;
    }
    if listens {
        host.details.as_mut().unwrap().listening = Some(Listening::Yes("TCP port 4500".into()));
    }
    playwright_under(&mut w, 100);
    let (snap, js) = w.judge();
    js.iter().find(|j| j.verdict == Verdict::Stale || j.candidate).map(|j| {
        format!("{cmd} ({place:?}, listening {listens}): {} {}: {}", snap.procs[j.root].pid(), j.verdict, j.reason)
    })
}

#[test]
fn no_mutant_of_any_hosts_argv_is_ever_stale() {
    let mut wrong = Vec::new();
    let mut tried = 0;
    for name in TABLE.iter().flat_map(|g| g.names.iter()) {
        let base = command_of(name);
        let p = crate::program::Program::of_joined(&base);
        assert_eq!(p.name(&base), *name, "the corpus must reach the table's entry {name}");
        let mut cases = mutants(&base);
        // No arguments at all, fed by a pipe (its own place says so).
        cases.push((base.clone(), "no arguments"));
        for (cmd, what) in &cases {
            for place in PLACES {
                if what == &"no arguments" && !matches!(place, Place::PipedAdopted(_)) {
                    continue;
                }
                tried += 1;
                if let Some(w) = judged(cmd, place, false) {
                    wrong.push(format!("{what}: {w}"));
                }
            }
        }
        // A bare terminal UI that listens on a socket: another way in.
        for place in PLACES {
            tried += 1;
            if let Some(w) = judged(&base, place, true) {
                wrong.push(format!("a listening socket: {w}"));
            }
        }
    }
    assert!(tried > 1000, "only {tried} cases");
    assert!(wrong.is_empty(), "{} of {tried} mutants reaped as stale:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn the_unmutated_terminal_uis_on_their_dead_terminal_still_are() {
    // The control: the same corpus finds the true case, so the test above
    // can fail.
    let mut found = 0;
    for name in ["claude", "codex", "gemini", "qwen", "opencode", "cn", "copilot", "cursor-agent", "crush", "cline"] {
        let cmd = command_of(name);
        for place in [Place::DeadTerminalLiveParent, Place::DeadTerminalAdopted(Mode::Pid1)] {
            assert!(judged(&cmd, place, false).is_some(), "{cmd} ({place:?}) is not stale");
            found += 1;
        }
    }
    assert_eq!(found, 20);
}
