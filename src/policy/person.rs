//! A person's terminal session: what runs as a job of an interactive shell
//! belongs to the person typing into it, not to whatever hosts the terminal.
//! VS Code's and Cursor's pty hosts (`code --type=utility`), the terminal
//! processes of IDEA-family IDEs and of Warp match the host patterns, but no host started
//! `cat log | npx server` in one of their terminals: a person did, and only
//! the person knows whether it is done.

use crate::names::name;
use crate::scan::{Process, Snapshot};

/// Shells a person types into (a login shell's argv[0] has a leading `-`).
const SHELLS: &[&str] =
    &["bash", "zsh", "fish", "sh", "dash", "ksh", "mksh", "tcsh", "csh", "nu", "xonsh", "elvish", "pwsh", "ash"];

/// Why `i` is a person's interactive shell: a shell with no command
/// (`-c`) or script to run, the leader of its session, whose controlling
/// terminal is live on its stdin.
pub(super) fn interactive_shell(snap: &Snapshot, i: usize) -> Option<String> {
    let p = &snap.procs[i];
    if !is_shell(p) || p.sid != Some(p.pid()) || p.tty_nr == 0 {
        return None;
    }
    let fd0 = p.details.as_ref()?.fds[0].as_ref()?;
    if !fd0.is_terminal() || fd0.is_dead_terminal() {
        return None;
    }
    let n = super::pts_number(p.tty_nr);
    if fd0.0.starts_with("/dev/pts/") && n.map(|n| format!("/dev/pts/{n}")).as_deref() != Some(fd0.0.as_str()) {
        return None;
    }
    Some(format!(
        "run from {}, the interactive shell of a person's terminal {}: a job of theirs, not of a host",
        name(p),
        fd0.0
    ))
}

fn is_shell(p: &Process) -> bool {
    let mut words = p.cmdline.split(' ');
    let argv0 = words.next().unwrap_or("");
    let base = argv0.rsplit('/').next().unwrap_or("").trim_start_matches('-');
    if !SHELLS.contains(&base) {
        return false;
    }
    // Options only (`bash --login`, `zsh -i`): no `-c STRING` and no script.
    words.all(|w| w.starts_with('-') && w != "-c" && !(w.len() > 1 && !w.starts_with("--") && w.contains('c')))
}
