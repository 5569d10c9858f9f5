//! Compiled role patterns: each list checked and compiled as a set, and a
//! process classified by the text its patterns target.

use regex::{Regex, RegexSet};
use regex_automata::dfa::Automaton as _;
use regex_automata::dfa::sparse::DFA;
use regex_automata::{Anchored, Input, PatternSet};

use super::PatternLists;
use crate::program::Program;
pub use crate::role::{CachedRole, Role, RoleMatch};

/// Compiled-program cap per pattern: keeps a hostile config from costing memory.
const SIZE_LIMIT: usize = 1 << 20;
/// Cap for one list compiled as a set: thousands of ordinary patterns (0.5 to
/// 5 KB each) fit, while as many patterns near [`SIZE_LIMIT`] would take gigabytes.
const LIST_SIZE_LIMIT: usize = 16 << 20;

/// What a pattern is matched against, chosen by a prefix on the pattern.
/// Role lists default to the program; `protect` to the whole command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `program:` the program's name (see [`crate::program`]).
    Program,
    /// `args:` the program's name followed by its own arguments.
    Args,
    /// `cmdline:` the whole command line, argv joined by spaces.
    Cmdline,
    /// `exe:` the executable's path (`/proc/PID/exe`), where it was read.
    Exe,
}

const TARGETS: [(&str, Target); 4] =
    [("program:", Target::Program), ("args:", Target::Args), ("cmdline:", Target::Cmdline), ("exe:", Target::Exe)];

/// A pattern's target and its regex text.
pub fn split_target(pattern: &str, default: Target) -> (Target, &str) {
    for (prefix, t) in TARGETS {
        if let Some(rest) = pattern.strip_prefix(prefix) {
            return (t, rest);
        }
    }
    (default, pattern)
}

/// What one process shows to the patterns.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    pub cmdline: &'a str,
    pub program: Program,
    pub exe: Option<&'a str>,
}

impl<'a> Subject<'a> {
    /// A command line known only joined (tests, fuzzing, quick checks).
    pub fn joined(cmdline: &'a str, exe: Option<&'a str>) -> Subject<'a> {
        Subject { cmdline, program: Program::of_joined(cmdline), exe }
    }
}

/// One list, compiled as one set per target in use (built by build.rs:
/// two per target, see [`BuiltList`]).
#[derive(Debug)]
struct List {
    /// (target, set, index in the list of each pattern of the set)
    sets: Vec<(Target, Set, Vec<usize>)>,
}

/// The patterns of one list and target, as a `RegexSet` or, for the
/// embedded default's lists, as the DFA build.rs made of them.
#[derive(Debug)]
enum Set {
    Compiled(RegexSet),
    Built {
        dfa: Box<DFA<&'static [u8]>>,
        /// Its patterns match only at the start of the text: searched
        /// anchored, the search ends at the first byte none can take.
        anchored: bool,
        /// The patterns' texts, compiled only should the DFA fail a search
        /// (it cannot: it has no quit bytes, no Unicode word boundary).
        patterns: Vec<String>,
        fallback: std::sync::OnceLock<Option<RegexSet>>,
    },
}

/// The embedded default's lists (texts as written, prefixes included), in
/// [`Matcher::new`]'s order, each with its DFAs: (target, searched
/// anchored, indexes in the list, DFA bytes). A target's patterns are in two
/// DFAs: those anchored at the start (`^…`) and the rest (see build.rs).
type BuiltList = (&'static [&'static str], &'static [(Target, bool, &'static [usize], &'static [u8])]);
const BUILT: &[BuiltList] = include!(concat!(env!("OUT_DIR"), "/role_dfas.rs"));

impl Set {
    /// The lowest-numbered pattern that matches `text`.
    fn first_match(&self, text: &str) -> Option<usize> {
        match self {
            Set::Compiled(set) => set.matches(text).into_iter().next(),
            Set::Built { dfa, anchored, patterns, fallback } => {
                let mut hits = PatternSet::new(dfa.pattern_len());
                let input = Input::new(text).anchored(if *anchored { Anchored::Yes } else { Anchored::No });
                match dfa.try_which_overlapping_matches(&input, &mut hits) {
                    Ok(()) => hits.iter().next().map(|p| p.as_usize()),
                    Err(_) => fallback
                        .get_or_init(|| set(&patterns.iter().map(String::as_str).collect::<Vec<_>>()).ok())
                        .as_ref()
                        .and_then(|s| s.matches(text).into_iter().next()),
                }
            }
        }
    }
}

/// The texts of one subject, cut to [`ROLE_TEXT`] where roles look.
struct Texts<'a> {
    program: &'a str,
    args: String,
    cmdline_head: &'a str,
    cmdline: &'a str,
    exe: Option<&'a str>,
}

impl<'a> Texts<'a> {
    fn of(s: &Subject<'a>) -> Texts<'a> {
        let mut args = s.program.line(s.cmdline);
        args.truncate(head(&args).len());
        Texts {
            program: s.program.name(s.cmdline),
            args,
            cmdline_head: head(s.cmdline),
            cmdline: s.cmdline,
            exe: s.exe,
        }
    }
}

impl List {
    fn new(list: &[String], default: Target) -> Result<List, String> {
        match List::built(list) {
            Some(l) => Ok(l),
            None => List::compile(list, default),
        }
    }

    /// Each target's patterns compiled as a `RegexSet`.
    fn compile(list: &[String], default: Target) -> Result<List, String> {
        let mut sets = Vec::new();
        for (_, t) in TARGETS {
            let (idx, pats): (Vec<usize>, Vec<&str>) = list
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let (tt, re) = split_target(p, default);
                    (tt == t).then_some((i, re))
                })
                .unzip();
            if !idx.is_empty() {
                sets.push((t, Set::Compiled(set(&pats)?), idx));
            }
        }
        Ok(List { sets })
    }

    /// The list as build.rs built it, when it is one of the embedded
    /// default's, word for word (the same texts make the same automata).
    fn built(list: &[String]) -> Option<List> {
        let (_, groups) = BUILT.iter().find(|(texts, _)| texts.iter().copied().eq(list.iter().map(String::as_str)))?;
        let mut sets = Vec::new();
        for &(t, anchored, idx, bytes) in *groups {
            // Checked as it is read; a DFA of another build would be refused.
            let (dfa, _) = DFA::from_bytes(bytes).ok()?;
            let patterns = idx.iter().map(|&i| split_target(&list[i], t).1.to_string()).collect();
            sets.push((
                t,
                Set::Built { dfa: Box::new(dfa), anchored, patterns, fallback: std::sync::OnceLock::new() },
                idx.to_vec(),
            ));
        }
        Some(List { sets })
    }

    /// The lowest index among the patterns that match.
    fn first(&self, x: &Texts<'_>, whole: bool) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (t, set, idx) in &self.sets {
            let text = match t {
                Target::Program => x.program,
                Target::Args => x.args.as_str(),
                Target::Cmdline if whole => x.cmdline,
                Target::Cmdline => x.cmdline_head,
                Target::Exe => match x.exe {
                    Some(e) => e,
                    None => continue,
                },
            };
            if let Some(k) = set.first_match(text) {
                best = Some(best.map_or(idx[k], |b| b.min(idx[k])));
            }
        }
        best
    }
}

#[derive(Debug)]
pub struct Matcher {
    /// Unique per compiled config: roles cached under another are stale.
    generation: u32,
    hosts: List,
    servers: List,
    launchers: List,
    adopters: List,
    protect: List,
    bystanders: List,
    lists: PatternLists,
}

/// Checks one pattern; the message is one line.
pub fn check(pattern: &str) -> Result<(), String> {
    let (_, re) = split_target(pattern, Target::Program);
    if re.is_empty() {
        return Err("empty pattern: it would match every command line".into());
    }
    crate::compiled::regex(re, SIZE_LIMIT, crate::redact::DFA_CACHE)
        .map(|_: Regex| ())
        .map_err(|e| format!("invalid regex: {}", one_line(&e.to_string())))
}

/// The checks of [`check`] that compile nothing: a list whose set compiles
/// (see [`check_list`]) and that passes these is valid.
pub fn check_uncompiled(pattern: &str) -> Result<(), String> {
    let (_, re) = split_target(pattern, Target::Program);
    if re.is_empty() {
        return Err("empty pattern: it would match every command line".into());
    }
    Ok(())
}

fn one_line(s: &str) -> String {
    s.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Checks a list of patterns, each valid alone, compiled together as the
/// [`Matcher`] will.
pub fn check_list(list: &[String]) -> Result<(), String> {
    List::new(list, Target::Program).map(drop)
}

fn set(list: &[&str]) -> Result<RegexSet, String> {
    // Compiled once per config load: the check and the matcher share it.
    crate::compiled::set(list, LIST_SIZE_LIMIT, crate::redact::DFA_CACHE).map_err(|e| match e {
        regex::Error::CompiledTooBig(limit) => {
            format!("the patterns together compile to more than the limit of {limit} bytes for one list")
        }
        e => format!("invalid regex: {}", one_line(&e.to_string())),
    })
}

/// What a cut command line "matches" in `protect`, for reasons.
const CUT_PROTECT: &str = "(any: its command line is over 4 KiB and was cut, and protect could match what was cut)";

/// How much of a command line role patterns see (see [`Matcher::classify`]).
pub const ROLE_TEXT: usize = 64 * 1024;

fn head(s: &str) -> &str {
    let mut end = s.len().min(ROLE_TEXT);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Matches nothing: the placeholder of an unfilled [`super::Config`].
impl Default for Matcher {
    fn default() -> Matcher {
        Matcher::new(&PatternLists::default()).expect("empty lists compile")
    }
}

impl Matcher {
    pub fn new(lists: &PatternLists) -> Result<Matcher, String> {
        static GENERATION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        Ok(Matcher {
            generation: GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            hosts: List::new(&lists.hosts, Target::Program)?,
            servers: List::new(&lists.servers, Target::Program)?,
            launchers: List::new(&lists.launchers, Target::Program)?,
            adopters: List::new(&lists.adopters, Target::Program)?,
            protect: List::new(&lists.protect, Target::Cmdline)?,
            bystanders: List::new(&lists.bystanders, Target::Program)?,
            lists: lists.clone(),
        })
    }

    /// The role of a process from its command line alone, taken from `cache`
    /// when this matcher made it; `cache` is updated. A process's command
    /// line is read once and kept across scans, so is its role: a tick
    /// matches only what is new.
    pub fn classify_cached(&self, subject: Subject<'_>, cache: &mut Option<CachedRole>) -> RoleMatch {
        match *cache {
            Some(c) if c.generation == self.generation => c.get(),
            _ => {
                let m = self.classify_subject(Subject { exe: None, ..subject });
                *cache = Some(CachedRole::new(self.generation, m));
                m
            }
        }
    }

    /// The role in `cache`, if this matcher made it.
    pub fn cached(&self, cache: Option<CachedRole>) -> Option<RoleMatch> {
        cache.filter(|c| c.generation == self.generation).map(CachedRole::get)
    }

    /// [`Matcher::classify_subject`] for a command line known only joined.
    pub fn classify(&self, cmdline: &str, exe: Option<&str>) -> RoleMatch {
        self.classify_subject(Subject::joined(cmdline, exe))
    }

    /// Classifies a process by its program (see [`crate::program`]).
    ///
    /// In this order: a bystander (a multiplexer, ssh, a browser, an editor)
    /// is never a server or launcher; then server, host, launcher, adopter.
    /// Servers come before hosts so that a host program's server mode
    /// (`claude --claude-in-chrome-mcp`, `codex mcp-server`) is a server: the
    /// patterns see programs, so a host's name cannot swallow a server's.
    /// Launchers are, besides their patterns, every process whose program was
    /// reached through a package runner, a container engine, a runner or a
    /// shell. `docker|podman run -i` without `-t` is a server: the container
    /// is (with `-t` it is a person's terminal session).
    ///
    /// Command lines are matched on their first [`ROLE_TEXT`] bytes only: any
    /// user can start a process with a huge argv, and a large counted
    /// repetition in a pattern makes matching cost grow with the text.
    /// Missing a role only ever keeps a tree. `protect` sees the whole
    /// command line, since missing it could not.
    pub fn classify_subject(&self, s: Subject<'_>) -> RoleMatch {
        let x = Texts::of(&s);
        // A command line cut short (see `scan::CMDLINE_KEEP`) may hold a
        // protect match in what was cut: it counts as one.
        let protect = self
            .protect
            .first(&x, true)
            .or_else(|| (s.program.is_cut() && !self.lists.protect.is_empty()).then_some(self.lists.protect.len()));
        let bystander = self.bystanders.first(&x, false).is_some();
        let via = s.program.via;
        let found = |role, l: &List| l.first(&x, false).map(|i| RoleMatch { role, pattern: Some(i), protect });
        let server = if bystander {
            None
        } else {
            found(Role::Server, &self.servers).or_else(|| {
                (via == crate::program::Via::Image && s.program.stdin_open()).then_some(RoleMatch {
                    role: Role::Server,
                    pattern: None,
                    protect,
                })
            })
        };
        let launcher = || {
            if bystander {
                return None;
            }
            found(Role::Launcher, &self.launchers)
                .or_else(|| via.is_launcher().then_some(RoleMatch { role: Role::Launcher, pattern: None, protect }))
        };
        server
            .or_else(|| found(Role::Host, &self.hosts))
            .or_else(launcher)
            .or_else(|| found(Role::Adopter, &self.adopters))
            .unwrap_or(RoleMatch { role: Role::Other, pattern: None, protect })
    }

    /// The `protect` match of a whole command line, read again for a process
    /// whose kept line was cut (see [`Matcher::is_cut_protect`]).
    pub fn protect_in(&self, s: Subject<'_>) -> Option<usize> {
        self.protect.first(&Texts::of(&s), true)
    }

    /// Whether `index` is the stand-in a cut command line gets in `protect`
    /// until its whole line is read.
    pub fn is_cut_protect(&self, index: usize) -> bool {
        index == self.lists.protect.len()
    }

    /// Whether a process is a bystander (never a server, whatever else says so).
    pub fn is_bystander(&self, s: Subject<'_>) -> bool {
        self.bystanders.first(&Texts::of(&s), false).is_some()
    }

    /// The pattern text behind a match, for explanations.
    pub fn pattern_text(&self, role: Role, index: usize) -> &str {
        let list = match role {
            Role::Host => &self.lists.hosts,
            Role::Server => &self.lists.servers,
            Role::Launcher => &self.lists.launchers,
            Role::Adopter => &self.lists.adopters,
            Role::Other => return "",
        };
        list.get(index).map_or("", String::as_str)
    }

    pub fn protect_text(&self, index: usize) -> &str {
        let cut = if index == self.lists.protect.len() { CUT_PROTECT } else { "" };
        self.lists.protect.get(index).map_or(cut, String::as_str)
    }
}

#[cfg(test)]
#[path = "patterns_tests.rs"]
mod tests;
