//! Compiled role patterns.

use regex::{Regex, RegexSet, RegexSetBuilder};
use serde::Serialize;

use super::PatternLists;
use crate::program::Program;

/// Compiled-program cap per pattern: keeps a hostile config from costing memory.
const SIZE_LIMIT: usize = 1 << 20;
/// Cap for one list compiled as a set: thousands of ordinary patterns (0.5 to
/// 5 KB each) fit, while as many patterns near [`SIZE_LIMIT`] would take gigabytes.
const LIST_SIZE_LIMIT: usize = 16 << 20;

/// What a process is to the reaper (see [`Matcher::classify_subject`] for the order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Host,
    Server,
    Launcher,
    Adopter,
    Other,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Host => "host",
            Role::Server => "server",
            Role::Launcher => "launcher",
            Role::Adopter => "adopter",
            Role::Other => "other",
        }
    }

    /// Links of a server tree: walked through when looking for the root.
    pub fn is_tree_link(self) -> bool {
        matches!(self, Role::Server | Role::Launcher)
    }
}

/// The role of one process and the pattern that gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleMatch {
    pub role: Role,
    /// Index into the list of that role.
    pub pattern: Option<usize>,
    /// Index into `protect` when the process matches one (independent of role,
    /// so protected trees are still found and explained).
    pub protect: Option<usize>,
}

/// A [`RoleMatch`] from a command line alone, as kept on a process between
/// scans (16 bytes), with the generation of the [`Matcher`] that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedRole {
    generation: u32,
    role: Role,
    pattern: u32,
    protect: u32,
}

impl CachedRole {
    const NONE: u32 = u32::MAX;

    fn new(generation: u32, m: RoleMatch) -> CachedRole {
        let pack = |i: Option<usize>| i.and_then(|i| u32::try_from(i).ok()).unwrap_or(Self::NONE);
        CachedRole { generation, role: m.role, pattern: pack(m.pattern), protect: pack(m.protect) }
    }

    fn get(self) -> RoleMatch {
        let unpack = |i: u32| (i != Self::NONE).then_some(i as usize);
        RoleMatch { role: self.role, pattern: unpack(self.pattern), protect: unpack(self.protect) }
    }
}

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

/// One list, compiled as one set per target in use.
#[derive(Debug)]
struct List {
    /// (target, set, index in the list of each pattern of the set)
    sets: Vec<(Target, RegexSet, Vec<usize>)>,
}

/// The texts of one subject, cut to [`ROLE_TEXT`] where roles look.
struct Texts<'a> {
    program: &'a str,
    args: String,
    cmdline_head: &'a str,
    cmdline: &'a str,
    exe: Option<&'a str>,
}

impl List {
    fn new(list: &[String], default: Target) -> Result<List, String> {
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
                sets.push((t, set(&pats)?, idx));
            }
        }
        Ok(List { sets })
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
            if let Some(k) = set.matches(text).into_iter().next() {
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
    regex::RegexBuilder::new(re)
        .size_limit(SIZE_LIMIT)
        .build()
        .map(|_: Regex| ())
        .map_err(|e| format!("invalid regex: {}", one_line(&e.to_string())))
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
    RegexSetBuilder::new(list).size_limit(LIST_SIZE_LIMIT).dfa_size_limit(super::DFA_CACHE).build().map_err(|e| match e
    {
        regex::Error::CompiledTooBig(limit) => {
            format!("the patterns together compile to more than the limit of {limit} bytes for one list")
        }
        e => format!("invalid regex: {}", one_line(&e.to_string())),
    })
}

/// How much of a command line role patterns see (see [`Matcher::classify`]).
pub const ROLE_TEXT: usize = 64 * 1024;

fn head(s: &str) -> &str {
    let mut end = s.len().min(ROLE_TEXT);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
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
        let program = s.program.name(s.cmdline);
        let x = Texts {
            program,
            args: head(&s.program.line(s.cmdline)).to_string(),
            cmdline_head: head(s.cmdline),
            cmdline: s.cmdline,
            exe: s.exe,
        };
        let protect = self.protect.first(&x, true);
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
        self.lists.protect.get(index).map_or("", String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Subject};

    fn role(cmd: &str) -> Role {
        Config::embedded().matcher.classify(cmd, None).role
    }

    #[test]
    fn roles_see_the_head_of_a_huge_argv_and_protect_sees_all_of_it() {
        let cfg = Config::from_str_with_default("t", "[patterns]\nprotect = ['keep-me-alive']").unwrap();
        let pad = "é".repeat(ROLE_TEXT / 2 + 1); // a multi-byte char straddles the cut
        let early = format!("node /x/.bin/playwright-mcp {pad}");
        assert_eq!(cfg.matcher.classify(&early, None).role, Role::Server);
        let late = format!("python3 {pad} /x/.bin/playwright-mcp keep-me-alive");
        let m = cfg.matcher.classify(&late, None);
        assert_eq!(m.role, Role::Other, "a server name past the first 64 KiB is not looked for");
        assert!(m.protect.is_some(), "protect is matched over the whole command line");
    }

    #[test]
    fn cached_roles_are_reused_by_their_matcher_only() {
        let a = Config::embedded();
        let mut cache = None;
        let cmd = "node /x/.bin/playwright-mcp";
        assert_eq!(a.matcher.classify_cached(Subject::joined(cmd, None), &mut cache).role, Role::Server);
        // The same matcher trusts the cache, whatever the text now says.
        assert_eq!(a.matcher.classify_cached(Subject::joined("bash", None), &mut cache).role, Role::Server);
        assert_eq!(a.matcher.cached(cache).map(|m| m.role), Some(Role::Server));
        // A reloaded config (a new matcher) matches again.
        let b = Config::from_str_with_default("t", "[patterns]\nservers = ['^bash$']").unwrap();
        assert_eq!(b.matcher.cached(cache), None);
        assert_eq!(b.matcher.classify_cached(Subject::joined("bash", None), &mut cache).role, Role::Server);
        assert_eq!(
            b.matcher.classify_cached(Subject::joined("bash", None), &mut cache).pattern,
            b.matcher.classify("bash", None).pattern
        );
    }

    #[test]
    fn default_hosts() {
        for cmd in [
            "node /home/u/.npm-global/lib/node_modules/@anthropic-ai/claude-code/cli.js --resume",
            "claude",
            "claude -p summarize",
            "/home/u/.vscode/extensions/anthropic.claude-code-2.0.1/resources/native-binary/claude --output-format stream-json",
            "/usr/share/cursor/cursor --type=utility --utility-sub-type=node.mojom.NodeService",
            "/usr/share/code/code --type=utility",
            "node /usr/lib/node_modules/@openai/codex/bin/codex.js",
            "codex",
            "node /usr/local/lib/node_modules/@google/gemini-cli/dist/index.js",
            "goose session",
            "/usr/bin/goosed agent",
            "opencode",
            "python3 -m hermes_cli.main",
            "/opt/zed/zed",
            "/home/u/.vscode-server/bin/abc/node /home/u/.vscode-server/bin/abc/out/bootstrap-fork --type=extensionHost",
            "node /usr/lib/node_modules/@github/copilot/npm-loader.js",
            "codex app-server --analytics-default-enabled",
        ] {
            assert_eq!(role(cmd), Role::Host, "{cmd}");
        }
    }

    #[test]
    fn default_servers() {
        for cmd in [
            "node /home/u/.npm/_npx/9833c18b2d85bc59/node_modules/.bin/playwright-mcp",
            "node /home/u/.npm/_npx/1a2b/node_modules/.bin/context7-mcp",
            "node /home/u/.npm/_npx/1a2b/node_modules/.bin/chrome-devtools-mcp --headless",
            "node /home/u/.npm/_npx/1a2b/node_modules/.bin/mcp-server-filesystem /home/u",
            "node /usr/lib/node_modules/@modelcontextprotocol/server-github/dist/index.js",
            "/home/u/.cache/uv/archive-v0/Xy12/bin/python /home/u/.cache/uv/archive-v0/Xy12/bin/mcp-server-fetch",
            "python -m mcp_server_git --repository .",
            "mcp-remote https://example.invalid/sse",
            "docker run -i --rm mcp/github",
            "docker run -i --rm isokoliuk/mcp-searxng:latest",
            "podman run -i --rm docker.io/library/whatever",
            "/home/u/.local/share/claude/versions/2.1.197 --claude-in-chrome-mcp",
            "/usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe --computer-use-mcp",
            "claude mcp serve",
            "codex mcp-server",
            "/usr/local/bin/goose mcp developer",
            "node /home/u/.npm/_npx/a3/node_modules/.bin/mcp-server-filesystem /home/u/code",
            "uvx mcp-atlassian",
            "node /opt/homebrew/bin/gitnexus mcp",
        ] {
            assert_eq!(role(cmd), Role::Server, "{cmd}");
        }
    }

    #[test]
    fn default_launchers() {
        for cmd in [
            "npm exec @scope/some-pkg",
            "npx -y something",
            "pnpm dlx foo",
            "bunx foo",
            "uvx foo",
            "uv tool uvx foo",
            "uv run server.py",
            "uv --directory /home/u/weather run weather.py",
            "pipx run foo",
            "docker run --rm ghcr.io/x/y",
            "npm run start",
            "bun run start",
            "go run ./cmd/x",
            "sh -c foo",
            "/bin/bash -lc foo",
            "bash -e -c foo",
        ] {
            assert_eq!(role(cmd), Role::Launcher, "{cmd}");
        }
    }

    #[test]
    fn default_others_and_adopters() {
        for cmd in [
            "-bash",
            "bash",
            "/bin/zsh -l",
            "vim notes-mcp.md",
            "node server.js",
            "tmux",
            "chromium --type=renderer",
            "npm install",
            "claudette",
            "tmux new -s foo-mcp",
            "tmux -L x new -d -s foo-mcp -c /tmp sleep 300",
            "SCREEN -dmS weather-mcp",
            "ssh -fN -L 8931:localhost:8931 gpu-mcp",
            "/usr/lib/firefox/firefox http://localhost:8000/mcp",
            "vim /home/u/code",
            "deno run -A main.ts",
            "mcp-reaperd --once",
        ] {
            assert_eq!(role(cmd), Role::Other, "{cmd}");
        }
        assert_eq!(role("/usr/lib/systemd/systemd --user"), Role::Adopter);
        assert_eq!(role("/lib/systemd/systemd --system"), Role::Other);
    }

    #[test]
    fn protect_is_independent_of_role() {
        let c = Config::from_str_with_default("t", "[patterns]\nprotect = ['--http']\n").unwrap();
        let m = c.matcher.classify("node x/mcp-server-shared --http", None);
        assert_eq!((m.role, m.protect), (Role::Server, Some(0)));
    }

    #[test]
    fn exe_patterns_see_the_exe() {
        let c = Config::embedded();
        let m = c.matcher.classify("2.0.14", Some("/home/u/.local/share/claude/versions/2.0.14"));
        assert_eq!(m.role, Role::Host);
    }
}
