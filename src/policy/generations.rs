//! Generations: copies of one server command a live host started again and
//! again (one set per reconnect, thread, tab or probe) and still holds, the
//! largest leak users report (issue 35). Seen and explained here, never
//! reaped: which copy a host still uses needs the daemon's samples of their
//! I/O, and a host restarts a server it loses.
//!
//! Pure: the sessions the servers' environments name come in from the scan
//! (`ctl/generations.rs` reads them), memory and CPU are read by the caller.

use std::collections::BTreeMap;

use super::{Judgement, Verdict};
use crate::scan::{Holder, Snapshot, StdinEnd};

/// A generation is the copies of one command under one host (and of one
/// session, where the environment names it) that started within this many
/// seconds of the generation's first copy. A host starts a set of servers
/// within a second or two (a reconnect, a new thread); the next set comes
/// later. Measured from the first copy, not from the previous one, so a
/// steady respawn every second cannot chain into one endless generation.
pub const WINDOW_SECS: u64 = 3;

/// The variable Claude Code names its session in, in its stdio servers'
/// environment (2.1.154 and later).
pub const SESSION_VAR: &str = "CLAUDE_CODE_SESSION_ID";

/// Environments are read this far at most for [`SESSION_VAR`]: a server
/// whose environment is bigger and puts it past that shows no session;
/// nothing else is concluded from it.
pub const ENVIRON_MAX: usize = 256 * 1024;

/// Session ids longer than this are not believed (a uuid is 36).
pub const MAX_SESSION: usize = 64;

/// One copy: the server tree a host started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Copy {
    pub root: usize,
    pub members: Vec<usize>,
    pub session: Option<String>,
    /// Whether the host itself still holds the far end of the copy's
    /// transport; `None` when that was not asked or could not be told.
    pub held: Option<bool>,
    /// The tree's verdict: `live` mostly; `abandoned` once the host let go.
    pub verdict: Verdict,
}

/// Copies started together, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generation {
    pub session: Option<String>,
    pub copies: Vec<Copy>,
}

/// Every copy of one command under one host, its generations oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub host: usize,
    /// The program and its arguments, normalised and masked as
    /// [`super::duplicates`] does, so the two views name a server alike.
    pub command: String,
    pub generations: Vec<Generation>,
}

impl Group {
    pub fn copies(&self) -> impl Iterator<Item = &Copy> {
        self.generations.iter().flat_map(|g| g.copies.iter())
    }

    pub fn count(&self) -> usize {
        self.generations.iter().map(|g| g.copies.len()).sum()
    }
}

/// The copies of every live host, grouped by command, cut into generations.
/// The trees [`super::duplicates`] counts: those of a host that is alive
/// (a stale host's trees go with it). `session` gives the session a tree's
/// root names (index into the snapshot), already validated.
pub fn generations(
    snap: &Snapshot,
    judgements: &[Judgement],
    mut session: impl FnMut(usize) -> Option<String>,
) -> Vec<Group> {
    let mut by_command: BTreeMap<(usize, String), Vec<Copy>> = BTreeMap::new();
    for j in judgements.iter().filter(|j| j.verdict != Verdict::Stale) {
        let Some(h) = j.host else { continue };
        let p = &snap.procs[j.root];
        let copy = Copy {
            root: j.root,
            members: j.members.iter().map(|&(m, _)| m).collect(),
            session: session(j.root),
            held: held(snap, j),
            verdict: j.verdict,
        };
        by_command.entry((h, p.program.line(&p.cmdline))).or_default().push(copy);
    }
    let tck = snap.ctx.clk_tck.max(1);
    let start = |c: &Copy| snap.procs[c.root].id.start_time.0;
    let mut groups: Vec<Group> = by_command
        .into_iter()
        .map(|((host, line), mut copies)| {
            copies.sort_unstable_by_key(|c| (c.session.clone(), start(c), snap.procs[c.root].pid()));
            let mut gens: Vec<Generation> = Vec::new();
            let mut first = 0u64;
            for c in copies {
                let t = start(&c);
                match gens.last_mut() {
                    Some(g) if g.session == c.session && t.saturating_sub(first) <= WINDOW_SECS * tck => {
                        g.copies.push(c);
                    }
                    _ => {
                        first = t;
                        gens.push(Generation { session: c.session.clone(), copies: vec![c] });
                    }
                }
            }
            gens.sort_by_key(|g| g.copies.first().map(start));
            Group { host, command: crate::redact::redact(&line).into_owned(), generations: gens }
        })
        .collect();
    // The biggest piles first under each host: what a reader looks for.
    groups.sort_by(|a, b| snap.procs[a.host].pid().cmp(&snap.procs[b.host].pid()).then(b.count().cmp(&a.count())));
    groups
}

/// How many generations sorted start times (clock ticks) make, sessions
/// aside: the rule [`generations`] cuts by.
pub fn count(starts: &[u64], tck: u64) -> usize {
    let mut n = 0;
    let mut first = None;
    for &t in starts {
        if first.is_none_or(|f: u64| t.saturating_sub(f) > WINDOW_SECS * tck) {
            first = Some(t);
            n += 1;
        }
    }
    n
}

/// Whether the host holds the far end of the tree's transport: the
/// stdin-holder evidence the `abandoned` rule reads (`scan/link.rs`),
/// asked for every live tree's root with its owner as the expected holder.
/// A holder other than the host (an owner between them, a leaked write
/// end) is not the host holding it.
fn held(snap: &Snapshot, j: &Judgement) -> Option<bool> {
    let stdin = snap.procs[j.root].details.as_ref()?.stdin.as_ref()?;
    match stdin {
        StdinEnd::Open(Holder::Expected) => (j.owner == j.host).then_some(true),
        StdinEnd::Open(Holder::Other(_)) | StdinEnd::Gone(_) => Some(false),
        StdinEnd::Open(Holder::NotAsked | Holder::Unknown) | StdinEnd::Unknown(_) => None,
    }
}

/// A session id as a server's environment gives it, when it looks like
/// one: 1 to [`MAX_SESSION`] ASCII letters, digits, `-` or `_` (a uuid).
/// Anything else a user put there is not shown nor grouped on.
pub fn session_token(raw: &[u8]) -> Option<String> {
    let ok = !raw.is_empty()
        && raw.len() <= MAX_SESSION
        && raw.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_');
    ok.then(|| String::from_utf8_lossy(raw).into_owned())
}

/// The last `name=value` of a raw `/proc/PID/environ` (the one `getenv`
/// returns), validated by [`session_token`]. Only entries ended by their
/// NUL count: a read cut at its bound ends mid-entry, and a uuid cut short
/// would still look like a session.
pub fn session_in_environ(environ: &[u8], name: &str) -> Option<String> {
    let whole = environ.iter().rposition(|&b| b == 0).map_or(0, |i| i + 1);
    let raw = environ[..whole]
        .split(|&b| b == 0)
        .filter_map(|v| v.strip_prefix(name.as_bytes())?.strip_prefix(b"="))
        .next_back()?;
    session_token(raw)
}

#[cfg(test)]
#[path = "generations_tests.rs"]
mod tests;
