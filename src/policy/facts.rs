//! The facts a host's own process state shows about how it can be reached:
//! the only input the `stale` rules may conclude from (issue 32). Text — a
//! host's argv read by its grammar (`modes.rs`) — names a mode; it can
//! narrow a rule or keep a tree, never show that nobody uses one.

use super::modes::{self, Interface};
use super::terminal::{Term, keys_terminal_dead, terminal};
use crate::scan::{FdKind, Listening, Process, Snapshot, StdinEnd};

/// What one process's state shows about how it can be reached.
pub(super) struct Reach<'a> {
    /// Its fds on a terminal: a live one, a dead one, or none.
    pub terminal: Term,
    /// fd 0 on a dead pseudo-terminal it read its keys from.
    pub keys_dead: Option<&'a str>,
    /// What fd 0 is.
    pub fd0: FdKind,
    /// Whether anyone can still write to its stdin, when asked.
    pub stdin: Option<&'a StdinEnd>,
    /// Whether it listens on a socket, when asked.
    pub listening: Option<&'a Listening>,
    /// The systemd service unit it is the main process of: its service
    /// manager, not a terminal or a pipe, decides when it ends.
    pub unit: Option<&'a str>,
}

impl<'a> Reach<'a> {
    pub fn of(p: &'a Process) -> Reach<'a> {
        let d = p.details.as_deref();
        Reach {
            terminal: terminal(p),
            keys_dead: keys_terminal_dead(p),
            fd0: d.map_or(FdKind::Unknown, |d| d.fd_kind(0)),
            stdin: d.and_then(|d| d.stdin.as_ref()),
            listening: d.and_then(|d| d.listening.as_ref()),
            unit: service_unit(p),
        }
    }
}

/// How `p` is used: its grammar's mode, where its state allows that mode.
/// A terminal UI needs a terminal on fd 0: `git diff | gemini`, `cat
/// spec.md | qwen` and `claude … < prompt.txt` read a pipe or a file, which
/// their CLIs take as a prompt to run without a terminal.
pub(super) fn mode(p: &Process, r: &Reach<'_>) -> Interface {
    match modes::interface(p) {
        Interface::Terminal if r.fd0 != FdKind::Tty => Interface::NoTerminal(match r.fd0 {
            FdKind::Pipe => "a pipe",
            FdKind::Socket => "a socket",
            FdKind::Null => "/dev/null",
            FdKind::File => "a file",
            FdKind::Unknown => "unreadable",
            FdKind::Other | FdKind::Tty => "no terminal",
        }),
        m => m,
    }
}

/// The systemd service unit `p` is the main process of, if any.
pub(super) fn service_unit(p: &Process) -> Option<&str> {
    let unit = p.details.as_ref()?.unit.as_ref()?;
    (unit.is_service() && unit.main != Some(false)).then_some(unit.name.as_str())
}

/// Whether `a` and `b` read the same pipe or socket on fd 0: one passed its
/// stdin on to the other (a launcher, a relaunch), so neither made a link.
pub(super) fn same_stdin(snap: &Snapshot, a: usize, b: usize) -> bool {
    let fd0 = |i: usize| snap.procs[i].details.as_ref().and_then(|d| d.fds[0].as_ref()).filter(|t| t.kind().is_link());
    fd0(a).is_some() && fd0(a) == fd0(b)
}
