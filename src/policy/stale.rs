//! `stale`: a live host nobody can use any more, reaped with its tree.
//! Both rules conclude only from process state ([`Reach`]); the host's mode
//! read from its argv (`modes.rs`) can only narrow them.
//!
//! - **Dead terminal**: fd 0 on the `/dev/pts/N (deleted)` it read its keys
//!   from, a terminal UI by its grammar, listening on no socket.
//! - **Unreachable**: no terminal anywhere on it, adopted by an init or a
//!   service manager, and nobody can write to its stdin, which is its only
//!   channel: driven over its stdin by its grammar (ACP, stream-json,
//!   `codex app-server` without `--listen`), listening on no socket and
//!   holding no established TCP connection. The
//!   stdin may reach it through a chain that only passes it on — a
//!   launcher, Gemini CLI's relaunch parent, an ACP adapter that drives the
//!   host over a pipe it alone writes — and then the evidence sits on the
//!   top of that chain (the *front*), which is reaped with it.
//!
//! Whatever started the host (cron, `nohup`, `setsid`, `& disown`, a unit, a
//! script) changes only who adopted it, never the evidence about its use.

use super::facts::{Reach, mode, same_stdin};
use super::modes::{self, Interface};
use super::terminal::Term;
use super::{adopter, manager_adopter};
use crate::config::Role;
use crate::names::name;
use crate::scan::{Holder, Listening, Process, Question, Snapshot, StdinEnd};
use crate::tree::Forest;

/// What a stale rule says about a host.
pub(super) enum Ruling {
    /// Stale: the reason, and the root of the tree to reap (the host, or
    /// the front of the chain its stdin came through).
    Stale(String, usize),
    /// Looks left behind, but the evidence is not conclusive: kept.
    Suspect(String),
    /// A fact the rule needs was not asked yet.
    Pending,
    /// The rule does not apply.
    Not,
}

/// Processes a chain of stdin pass-throughs above a host may have, at most.
const MAX_CHAIN: usize = 4;

/// The dead-terminal rule for host `h`.
pub(super) fn by_terminal(snap: &Snapshot, h: usize) -> Ruling {
    let host = &snap.procs[h];
    let r = Reach::of(host);
    let Term::Dead(path) = &r.terminal else { return Ruling::Not };
    let why = format!("host {} is alive but its terminal {path} is gone", name(host));
    if let Some(u) = r.unit {
        return Ruling::Suspect(format!("{why}, but it runs as systemd unit {u}"));
    }
    let m = mode(host, &r);
    if r.keys_dead.is_none() {
        return Ruling::Suspect(if m == Interface::Terminal {
            format!("{why}, but it does not read its keys from that terminal")
        } else {
            format!("{why}, but {}", m.why_not(&name(host)))
        });
    }
    if m != Interface::Terminal {
        return Ruling::Suspect(format!("{why}, but {}", m.why_not(&name(host))));
    }
    match other_channel(host, &r, false) {
        Some(Ok(())) => Ruling::Stale(format!("{why}: it is a terminal UI, and that terminal was its stdin"), h),
        Some(Err(but)) => Ruling::Suspect(format!("{why}, but {but}")),
        None => Ruling::Pending,
    }
}

/// The unreachable rule for host `h` (which has no terminal).
pub(super) fn unreachable(snap: &Snapshot, forest: &Forest, h: usize) -> Ruling {
    let chain = chain(snap, forest, h);
    let front = chain[0];
    let f = &snap.procs[front];
    let Some(how) = forest.parent[front].and_then(|p| manager_adopter(snap, forest, p)) else { return Ruling::Not };
    if chain.iter().any(|&m| !matches!(Reach::of(&snap.procs[m]).terminal, Term::None)) {
        return Ruling::Not;
    }
    let why = match Reach::of(f).stdin {
        Some(StdinEnd::Gone(why)) => *why,
        None if unanswered_link(f) => return Ruling::Pending,
        _ => return Ruling::Not,
    };
    // A one-shot run reads its prompt to the end by design; background
    // modes run without anyone on purpose: their stdin is never evidence.
    let procs = || chain.iter().map(|&m| &snap.procs[m]);
    if procs().any(|p| background_mode(snap, p) || matches!(modes::interface(p), Interface::OneShot(_))) {
        return Ruling::Not;
    }
    let host = &snap.procs[h];
    let base = if front == h {
        format!("host {} is alive, but it has no terminal, was adopted by {how}, and {why}", name(host))
    } else {
        format!(
            "host {} is alive, but it has no terminal, its stdin reaches it only through {}, which was adopted by \
             {how}, and {why}",
            name(host),
            name(f)
        )
    };
    if let Some(u) = procs().find_map(|p| Reach::of(p).unit) {
        return Ruling::Suspect(format!("{base}; but it runs as systemd unit {u}"));
    }
    // The deepest process still reading the front's own stdin says how it
    // is used: it must be driven over it.
    let at = chain.iter().rposition(|&m| m == front || same_stdin(snap, m, front)).unwrap_or(0);
    let reader = &snap.procs[chain[at]];
    let m = mode(reader, &Reach::of(reader));
    let Interface::Stdin(how_driven) = m else {
        return Ruling::Suspect(format!("{base}; but {}", m.why_not(&name(reader))));
    };
    // Below the reader, each link must be its parent's alone.
    for pair in chain[at..].windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if same_stdin(snap, a, b) {
            continue;
        }
        match Reach::of(&snap.procs[b]).stdin {
            Some(StdinEnd::Open(Holder::Expected) | StdinEnd::Gone(_)) => {}
            None => return Ruling::Pending,
            Some(_) => {
                return Ruling::Suspect(format!(
                    "{base}; but the stdin of {} may be written by another process than {}",
                    name(&snap.procs[b]),
                    name(&snap.procs[a])
                ));
            }
        }
    }
    for p in procs() {
        match other_channel(p, &Reach::of(p), true) {
            Some(Ok(())) => {}
            Some(Err(but)) => return Ruling::Suspect(format!("{base}; but {but}")),
            None => return Ruling::Pending,
        }
    }
    Ruling::Stale(
        format!(
            "{base}: nothing can reach it ({} is driven over its stdin: {how_driven}, and listens on no socket and \
             holds no TCP connection)",
            name(reader)
        ),
        front,
    )
}

/// `Ok` when `p` listens on no socket (its stdin or terminal is its only
/// way in) and, for the stdin rule (`connections`), holds no established
/// TCP connection either: a host driven over its stdin may be driven over
/// a connection too (Remote Control), or be busy with its model's API. `Err`
/// says what else may reach it; `None`: not asked yet.
fn other_channel(p: &Process, r: &Reach<'_>, connections: bool) -> Option<Result<(), String>> {
    Some(match r.listening? {
        Listening::No => Ok(()),
        Listening::Connected(_) if !connections => Ok(()),
        Listening::Connected(what) => Err(format!("{} holds {what}: it may be used through that", name(p))),
        Listening::Yes(what) => Err(format!("{} listens on {what}: it may be used through that", name(p))),
        Listening::Unknown(why) => Err(format!("whether {} listens on a socket is unknown ({why})", name(p))),
    })
}

/// `h` and the processes above it that only pass its stdin on, top first:
/// a launcher or host with the same stdin (npx, Gemini CLI's relaunch
/// parent), or an ACP adapter driving it. Each has `h`'s branch as its only
/// child, so that reaping the front takes nothing else.
pub(super) fn chain(snap: &Snapshot, forest: &Forest, h: usize) -> Vec<usize> {
    let mut chain = vec![h];
    let mut cur = h;
    while chain.len() <= MAX_CHAIN {
        let Some(p) = forest.parent[cur] else { break };
        if adopter(snap, forest, p).is_some() || forest.children[p] != [cur] {
            break;
        }
        let drives = modes::is_adapter(&snap.procs[p]);
        let passes = matches!(forest.role(p), Role::Host | Role::Launcher) && same_stdin(snap, p, cur);
        if !(drives || passes) {
            break;
        }
        chain.insert(0, p);
        cur = p;
    }
    chain
}

/// What the stale rules need asked about host `h`: whether the processes
/// they weigh listen on a socket, and the stdins of the chain above it.
pub(super) fn questions(snap: &Snapshot, forest: &Forest, h: usize, out: &mut Vec<Question>) {
    let mut ask = |proc: usize, expected: Option<usize>, stdin: bool, channels: bool| {
        let d = snap.procs[proc].details.as_deref();
        let channels = channels && d.is_some_and(|d| d.listening.is_none());
        let stdin = stdin && unanswered_link(&snap.procs[proc]);
        if (channels || stdin) && !out.iter().any(|q| q.proc == proc) {
            out.push(Question { proc, expected, search: Vec::new(), channels });
        }
    };
    if let Ruling::Pending = by_terminal(snap, h) {
        ask(h, None, false, true);
    }
    if !matches!(Reach::of(&snap.procs[h]).terminal, Term::None) {
        return;
    }
    let chain = chain(snap, forest, h);
    let adopted = forest.parent[chain[0]].is_some_and(|p| manager_adopter(snap, forest, p).is_some());
    if !adopted || !matches!(unreachable(snap, forest, h), Ruling::Pending) {
        return;
    }
    // The front's stdin first; the rest only once nobody writes to it (a
    // host fed by a live script is asked about its stdin alone, at each
    // scan, as before: its sockets' tables are read only when they decide).
    if !matches!(Reach::of(&snap.procs[chain[0]]).stdin, Some(StdinEnd::Gone(_))) {
        ask(chain[0], None, true, false);
        return;
    }
    ask(chain[0], None, false, true);
    for pair in chain.windows(2) {
        ask(pair[1], Some(pair[0]), !same_stdin(snap, pair[0], pair[1]), true);
    }
}

/// Whether `p`'s stdin is a pipe or socket not looked at yet.
fn unanswered_link(p: &Process) -> bool {
    p.details.as_ref().is_some_and(|d| d.stdin.is_none() && d.fd_kind(0).is_link())
}

/// `claude daemon`, and a `--bg-pty-host` while a `claude daemon` of its
/// user runs: hosts that run without anyone on purpose.
fn background_mode(snap: &Snapshot, host: &Process) -> bool {
    let daemon =
        |p: &Process| p.program.name(&p.cmdline) == "claude" && p.program.args(&p.cmdline).starts_with("daemon");
    // Cline's hub daemon: started by the CLI in a session of its own to
    // outlive it, and to serve every later CLI.
    if daemon(host) || host.cmdline.split(' ').any(|w| w == "--cline-hub-daemon") {
        return true;
    }
    host.cmdline.split(' ').any(|w| w == "--bg-pty-host")
        && snap.procs.iter().any(|p| daemon(p) && !p.state.is_zombie() && p.uid().is_none_or(|u| Some(u) == host.uid()))
}
