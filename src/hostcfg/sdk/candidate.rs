//! Which processes are looked at — those with a stdio transport whose tree
//! would hang below an adopter or a live host — and what their argv names:
//! the interpreter's language, the entry word, a `-m` module.

use std::path::Path;

use crate::config::Role;
use crate::ids::Pid;
use crate::scan::{FdKind, FdTarget, ProcFs, Process, Snapshot};
use crate::tree::Forest;

use super::Lang;

/// Whether it has a stdio transport ([`crate::scan::Details::transport_fds`]):
/// fds 0 and 1 both a pipe or a socket, or the host's pipes kept above 2
/// with fd 0 on `/dev/null` (the Python SDK 2.x), from the details when
/// loaded, else read for it (the fd table only where fd 0 is `/dev/null`).
pub fn stdio_linked(procfs: &ProcFs, p: &Process, dir: &Path) -> bool {
    if let Some(d) = &p.details {
        return d.transport_fds().is_some();
    }
    let kind = |fd: usize| {
        std::fs::read_link(dir.join("fd").join(fd.to_string()))
            .map_or(FdKind::Unknown, |t| FdTarget(t.to_string_lossy().into_owned()).kind())
    };
    match kind(0) {
        k if k.is_link() => kind(1).is_link(),
        FdKind::Null => procfs.details(p.id).is_some_and(|d| d.transport_fds().is_some()),
        _ => false,
    }
}

/// Whether the tree `i` would root is below an adopter (orphaned) or a live
/// host (to be orphaned when it dies): the first ancestor that is no
/// launcher is a host, PID 1, the scope, or an adopter.
pub fn would_hang_below_adopter_or_host(snap: &Snapshot, forest: &Forest, i: usize) -> bool {
    let mut cur = forest.parent[i];
    let mut steps = 0;
    while let Some(a) = cur {
        if Some(a) == forest.scope || snap.procs[a].pid() == Pid::INIT {
            return true;
        }
        match forest.role(a) {
            Role::Launcher | Role::Server if steps < 64 => {
                cur = forest.parent[a];
                steps += 1;
            }
            Role::Host | Role::Adopter => return true,
            _ => return crate::session::is_run_wrapper(&snap.procs[a].cmdline),
        }
    }
    // Its parent is outside what this reaper sees (another namespace).
    true
}

/// The language of an interpreter by argv\[0\].
pub fn lang_of(argv0: &str) -> Option<Lang> {
    let base = argv0.rsplit('/').next()?;
    if base.starts_with("python") || base.starts_with("pypy") {
        Some(Lang::Python)
    } else if ["node", "nodejs", "bun", "deno", "tsx", "ts-node"].iter().any(|n| base.starts_with(n)) {
        Some(Lang::Js)
    } else {
        None
    }
}

/// Whether `word` follows `-m` among `words`.
pub fn module_flag(words: &[&str], word: &str) -> bool {
    words.windows(2).any(|w| w[0] == "-m" && w[1] == word)
}

/// The whitespace-delimited word around `name`, and the text before it.
pub fn word_at(text: &str, name: crate::program::Span) -> (&str, &str) {
    let (s, e) = (name.start as usize, name.end as usize);
    let start = text[..s.min(text.len())].rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let end = text[e.min(text.len())..].find(char::is_whitespace).map_or(text.len(), |i| e + i);
    (&text[start..end], &text[..start])
}
