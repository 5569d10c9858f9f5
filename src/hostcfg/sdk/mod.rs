//! Program evidence: a process is an MCP server when its own program says
//! so, for the servers no name pattern and no host config knows (issue 23):
//! the quickstart's `python weather.py` started by a host built on the SDK's
//! `stdio_client`, which has no config file at all.
//!
//! What counts:
//! - its entry — the script an interpreter runs, or the `-m` module's file
//!   in its working directory — imports the server half of an MCP SDK
//!   (Python `mcp.server…`, `from fastmcp import FastMCP`, `fastmcp.…`;
//!   TypeScript `@modelcontextprotocol/sdk/server…`,
//!   `@modelcontextprotocol/server`, npm `fastmcp`). Only import statements
//!   count ([`script`]), never a word in a string or a comment: a program
//!   that sends a `fastmcp` notebook cell to its kernel is no server, and
//!   `McpServer` or `FastMCP(` is no evidence unless imported from the SDK;
//! - or that entry is its project's declared entry (`package.json` `main` or
//!   `bin`; a `[project.scripts]` console script, or a `-m` module in the
//!   project directory) and the project's manifest depends on the SDK;
//! - or, run by a venv that has the SDK, a module its entry imports imports
//!   the server half ([`venv`]);
//! - a native program's binary is built with a Go SDK and links its server
//!   ([`go`]); a `java` program's jar holds the Java SDK's server ([`java`]).
//!
//! A script importing the client half (`mcp.client…`, `stdio_client`,
//! `ClientSession`, the `Client` of `fastmcp` or of the SDK 2.x,
//! `fastmcp.client…`, `@modelcontextprotocol/sdk/client…`) is a host's,
//! never a server by its program, whatever else it imports: a proxy
//! importing both halves is a client here, and only other evidence (a
//! host's config naming it, the name patterns) can make it a server. Only
//! candidates are read:
//! processes in scope with a stdio transport — fds 0 and 1 both a pipe or a
//! socket, or the Python SDK 2.x's pipes kept above fd 2
//! ([`crate::scan::Details::transport_fds`]); one on `/dev/null` or a
//! terminal without those was started to run on its own — and whose tree
//! would hang below an adopter or a live host.
//! Scripts and manifests are read as their owner ([`crate::userfile`]:
//! owned by the process's user, regular, capped), binaries and jars as the
//! process's user in bounded pieces ([`binary`]). Every path is resolved as
//! that user before anything looks at it ([`crate::access`]), and what was
//! read is cached per (that user's uid, the version of the file opened):
//! what one user may read, or may not, never decides for another (issue 34).
//! A process's verdict is decided once per identity.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::access::{self, Cred};
use crate::config::{Config, Role, RoleMatch};
use crate::ids::Identity;
use crate::program::Via;
use crate::scan::{ProcFs, Process, Snapshot};
use crate::tree::Forest;
use crate::userfile::FileId;

mod binary;
mod candidate;
mod go;
mod java;
mod js;
mod manifest;
mod programs;
mod python;
mod script;
#[cfg(test)]
mod tests;
mod venv;

use candidate::{lang_of, module_flag, stdio_linked, word_at, would_hang_below_adopter_or_host};
use manifest::{Manifest, is_entry, manifest};
use script::analyse;

/// At most this much of an entry script is read: imports are at the top,
/// and a larger file (a bundle) is not read at all.
pub const MAX_SCRIPT: u64 = 32 << 10;
/// One manifest (`package.json`, `pyproject.toml`).
pub const MAX_MANIFEST: u64 = 256 << 10;
/// Directories walked up from an entry to its manifest.
const MANIFEST_DEPTH: usize = 6;
/// New processes looked at per cycle: a burst of candidates costs a bounded
/// number of reads; the rest are looked at in the next cycles.
const PER_CYCLE: usize = 64;

/// Kept beside the roles it explains, so `tree` needs nothing of this stage.
pub use crate::role::SdkEvidence as Evidence;

/// What a file's text says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Says {
    Server(String),
    Client,
    Nothing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Lang {
    Python,
    Js,
}

/// Who read which version of a file: a cache key. A reader is known by
/// uid alone because its rights are [`Cred::of_user`]'s, a function of it.
type Read = (u32, FileId);

/// The reads of earlier cycles.
#[derive(Default)]
pub struct SdkCache {
    scripts: HashMap<(Read, Lang), Says>,
    manifests: HashMap<Read, Option<Manifest>>,
    /// Per process, with the command line it was decided for (an exec keeps
    /// the identity, not the program). The line is the snapshot's own (an
    /// `Arc` taken over from scan to scan): unchanged, it is the same
    /// allocation, and `Arc`'s equality (of an `Eq` type) compares the
    /// pointers before the text.
    decided: HashMap<Identity, (Arc<str>, Option<Arc<Evidence>>)>,
    /// Processes found without a stdio transport, and when: looked at again
    /// after [`RELOOK`].
    unlinked: HashMap<Identity, Instant>,
    /// Binaries and jars, with the main class looked for ([`programs`]).
    programs: HashMap<(Read, String), Option<Evidence>>,
    /// When the decisions about processes gone were last dropped.
    pruned: Option<Instant>,
}

/// How often the decisions about processes gone are dropped.
const PRUNE_EVERY: Duration = Duration::from_secs(5);

/// How long a process found without a stdio transport is not looked at again.
const RELOOK: Duration = Duration::from_secs(30);

impl SdkCache {
    /// Makes servers of the candidates whose program declares a server SDK.
    pub fn apply(
        &mut self,
        procfs: &ProcFs,
        cfg: &Config,
        snap: &Snapshot,
        forest: &mut Forest,
        eligible: &dyn Fn(u32) -> bool,
    ) {
        // Cheapest first: the hash lookup last (issue 37: it ran for each of
        // 10,000 processes at every round of every scan).
        let candidate = |i: usize, p: &Process| {
            forest.role(i) == Role::Other
                && matches!(p.program.via, Via::Script | Via::Runner | Via::Exec)
                && !(p.kernel_thread || p.cmdline.is_empty() || p.state.is_zombie() || !forest.in_scope(i))
                && !forest.origins.contains_key(&i)
        };
        // What earlier cycles decided, for the same process and command line
        // (an exec keeps the identity, not the program): found from the
        // decisions, not by a lookup for every process (issue 37: at 10,000
        // processes two hash lookups each were half a judgement's time).
        let mut found = Vec::new();
        for (id, (line, known)) in &self.decided {
            // Most decisions are that there is none (a user's other programs).
            let Some(e) = known else { continue };
            let Some(i) = snap.index_of(id.pid) else { continue };
            let p = &snap.procs[i];
            if p.id == *id && p.cmdline == *line && candidate(i, p) {
                found.push((i, Arc::clone(e)));
            }
        }
        let mut fresh = 0;
        // Siblings share the walk up from their parent: one answer each.
        let mut hangs: Option<(Option<usize>, bool)> = None;
        let mut would_hang = |i: usize| match hangs {
            Some((parent, answer)) if parent == forest.parent[i] => answer,
            _ => {
                let answer = would_hang_below_adopter_or_host(snap, forest, i);
                hangs = Some((forest.parent[i], answer));
                answer
            }
        };
        for (i, p) in snap.procs.iter().enumerate() {
            // Cheapest first: the role and program, a walk up, lookups, the patterns.
            if fresh >= PER_CYCLE
                || !candidate(i, p)
                || !would_hang(i)
                || self.decided.get(&p.id).is_some_and(|(line, _)| *line == p.cmdline)
                || self.unlinked.get(&p.id).is_some_and(|t| t.elapsed() < RELOOK)
                || cfg.matcher.is_bystander(crate::tree::subject(p))
            {
                continue;
            }
            let dir = procfs.root().join(p.pid().get().to_string());
            let Some(uid) = p.uid().map(|u| u.0).or_else(|| std::fs::metadata(&dir).ok().map(|m| m.uid())) else {
                continue;
            };
            if !eligible(uid) {
                self.decided.insert(p.id, (Arc::clone(&p.cmdline), None));
                continue;
            }
            if !stdio_linked(procfs, p, &dir) {
                // Its stdio may still move (an SDK dups its pipes once serving).
                self.unlinked.insert(p.id, Instant::now());
                continue;
            }
            fresh += 1;
            let e = self.evidence(p, &dir, uid).map(Arc::new);
            self.decided.insert(p.id, (Arc::clone(&p.cmdline), e.clone()));
            if let Some(e) = e {
                found.push((i, e));
            }
        }
        for (i, e) in found {
            let protect = forest.roles[i].protect;
            forest.roles[i] = RoleMatch { role: Role::Server, pattern: None, protect };
            forest.sdk.insert(i, e);
        }
        // The decisions about processes gone are dropped now and then, not
        // at every round: a stale one is never looked up (an identity is
        // never reused), only kept in memory a while.
        if self.pruned.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
            self.pruned = Some(Instant::now());
            let pids = snap.pids();
            let present = |id: &Identity| pids.binary_search(&id.pid).is_ok_and(|i| snap.procs[i].id == *id);
            self.decided.retain(|id, _| present(id));
            self.unlinked.retain(|id, _| present(id));
        }
        if self.scripts.len() > 4096 {
            self.scripts.clear();
        }
        if self.manifests.len() > 4096 {
            self.manifests.clear();
        }
        if self.programs.len() > 4096 {
            self.programs.clear();
        }
    }

    /// The evidence of one candidate.
    fn evidence(&mut self, p: &Process, dir: &Path, uid: u32) -> Option<Evidence> {
        let cred = Cred::of_user(uid);
        if p.program.via == Via::Exec {
            return self.of_binary(dir, &cred);
        }
        let words: Vec<&str> = p.cmdline.split(' ').collect();
        let cwd = std::fs::read_link(dir.join("cwd")).ok().filter(|c| c.is_absolute())?;
        let (word, _) = word_at(&p.cmdline, p.program.name_span());
        if words.first()?.rsplit('/').next() == Some("java") {
            return self.of_java(&words, word, &cwd, &cred);
        }
        let lang = lang_of(words.first()?)?;
        let interp = crate::hostcfg::matching::normalize(&cwd.join(words[0]));
        if module_flag(&words, word) && lang == Lang::Python {
            // `python -m weather`: the module's file in the working directory.
            let rel: PathBuf = word.split('.').collect();
            let file = [rel.with_extension("py"), rel.join("__main__.py")]
                .into_iter()
                .map(|r| cwd.join(r))
                .find(|f| is_file_as(f, &cred))?;
            return match self.says(&file, lang, &cred) {
                Says::Server(m) => Some(imports(m, &file)),
                Says::Client => None,
                Says::Nothing => {
                    let declared = self.manifest_from(&cwd, lang, &cred).and_then(|(path, m)| {
                        let sdk = m.sdk.filter(|_| path.parent() == Some(cwd.as_path()))?;
                        Some(declares(sdk, &path))
                    });
                    declared.or_else(|| self.through_venv(&interp, &file, &cred))
                }
            };
        }
        let script = crate::hostcfg::matching::normalize(&cwd.join(word));
        match self.says(&script, lang, &cred) {
            Says::Server(m) => Some(imports(m, &script)),
            Says::Client => None,
            Says::Nothing => {
                let declared = self.manifest_from(script.parent()?, lang, &cred).and_then(|(path, m)| {
                    let root = path.parent()?;
                    let sdk = m.sdk.clone().filter(|_| is_entry(&m, root, &script))?;
                    Some(declares(sdk, &path))
                });
                declared
                    .or_else(|| (lang == Lang::Python).then(|| self.through_venv(&interp, &script, &cred)).flatten())
            }
        }
    }

    /// What the script at `file` says, read as `cred`'s user: the cached
    /// word of this user on this version of it, or a fresh read.
    fn says(&mut self, file: &Path, lang: Lang, cred: &Cred) -> Says {
        let Ok(Some(r)) = access::lookup(file, cred) else { return Says::Nothing };
        if let Some(says) = self.scripts.get(&((cred.uid, FileId::of(&r.stat)), lang)) {
            return says.clone();
        }
        let (says, id) = match crate::userfile::read_resolved(&r, cred, MAX_SCRIPT) {
            Ok((b, id)) => (analyse(&String::from_utf8_lossy(&b), lang), id),
            Err(_) => (Says::Nothing, FileId::of(&r.stat)),
        };
        self.scripts.insert(((cred.uid, id), lang), says.clone());
        says
    }

    /// The nearest manifest at or above `from` that `cred`'s user can see,
    /// if it declares the SDK.
    fn manifest_from(&mut self, from: &Path, lang: Lang, cred: &Cred) -> Option<(PathBuf, Manifest)> {
        let name = match lang {
            Lang::Python => "pyproject.toml",
            Lang::Js => "package.json",
        };
        for d in from.ancestors().take(MANIFEST_DEPTH) {
            let path = d.join(name);
            // Refused (a symlink loop): there for the user, and it says nothing.
            let Some(r) = access::lookup(&path, cred).ok()? else { continue };
            let seen = (cred.uid, FileId::of(&r.stat));
            let m = if let Some(m) = self.manifests.get(&seen) {
                m.clone()
            } else {
                let (m, read) = match crate::userfile::read_resolved(&r, cred, MAX_MANIFEST) {
                    Ok((b, id)) => (manifest(&String::from_utf8_lossy(&b), lang), (cred.uid, id)),
                    Err(_) => (None, seen),
                };
                self.manifests.insert(read, m.clone());
                m
            };
            // The nearest one decides, whether or not it declares the SDK.
            return m.filter(|m| m.sdk.is_some()).map(|m| (path, m));
        }
        None
    }
}

/// Whether `path` is a regular file as `cred`'s user finds it.
fn is_file_as(path: &Path, cred: &Cred) -> bool {
    kind_as(path, cred) == Some(rustix::fs::FileType::RegularFile)
}

/// What `path` is as `cred`'s user finds it (symlinks followed as theirs).
fn kind_as(path: &Path, cred: &Cred) -> Option<rustix::fs::FileType> {
    let r = access::lookup(path, cred).ok()??;
    Some(rustix::fs::FileType::from_raw_mode(r.stat.st_mode))
}

fn imports(found: String, file: &Path) -> Evidence {
    Evidence { kind: "imports", found, file: file.display().to_string(), via: None }
}

fn declares(found: String, file: &Path) -> Evidence {
    Evidence { kind: "declares", found, file: file.display().to_string(), via: None }
}
