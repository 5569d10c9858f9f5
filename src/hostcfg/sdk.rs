//! Program evidence: a process is an MCP server when its own program says
//! so, for the servers no name pattern and no host config knows (issue 23):
//! the quickstart's `python weather.py` started by a host built on the SDK's
//! `stdio_client`, which has no config file at all.
//!
//! What counts:
//! - its entry — the script an interpreter runs, or the `-m` module's file
//!   in its working directory — imports the server half of an MCP SDK
//!   (Python `mcp.server…`, `fastmcp`, `FastMCP(`; TypeScript
//!   `@modelcontextprotocol/sdk/server…`, `McpServer`,
//!   `StdioServerTransport`, npm `fastmcp`);
//! - or that entry is its project's declared entry (`package.json` `main` or
//!   `bin`; a `[project.scripts]` console script, or a `-m` module in the
//!   project directory) and the project's manifest depends on the SDK.
//!
//! A client (`mcp.client`, `stdio_client`, `ClientSession`,
//! `@modelcontextprotocol/sdk/client`, `StdioClientTransport`) is a host's
//! half, never a server, whatever else it imports. Only candidates are read:
//! processes in scope with a stdio transport — fds 0 and 1 both a pipe or a
//! socket, or the Python SDK 2.x's pipes kept above fd 2
//! ([`crate::scan::Details::transport_fds`]); one on `/dev/null` or a
//! terminal without those was started to run on its own — and whose tree
//! would hang below an adopter or a live host.
//! Files are read as their owner ([`crate::userfile`]: owned by the
//! process's user, regular, capped), cached per (device, inode, mtime); a
//! process's verdict is decided once per identity.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{Config, Role, RoleMatch};
use crate::ids::{Identity, Pid};
use crate::program::Via;
use crate::scan::{FdKind, FdTarget, ProcFs, Process, Snapshot};
use crate::tree::Forest;

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lang {
    Python,
    Js,
}

type Stamp = (u64, u64, i64, i64);

fn stamp(m: &std::fs::Metadata) -> Stamp {
    (m.dev(), m.ino(), m.mtime(), m.mtime_nsec())
}

/// A manifest's facts: the SDK dependency, and the entries it declares.
#[derive(Clone, Debug, Default)]
struct Manifest {
    sdk: Option<String>,
    /// Entry files (package.json `main`, `bin`), relative to its directory.
    entries: Vec<PathBuf>,
    /// `[project.scripts]` names and their modules' first component.
    scripts: Vec<(String, String)>,
}

/// The reads of earlier cycles.
#[derive(Default)]
pub struct SdkCache {
    scripts: HashMap<PathBuf, (Stamp, Says)>,
    manifests: HashMap<PathBuf, (Stamp, Option<Manifest>)>,
    /// Per process, with a hash of the command line it was decided for (an
    /// exec keeps the identity, not the program).
    decided: HashMap<Identity, (u64, Option<Arc<Evidence>>)>,
    /// Processes found without a stdio transport, and when: looked at again
    /// after [`RELOOK`].
    unlinked: HashMap<Identity, Instant>,
}

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
        let mut fresh = 0;
        let mut found = Vec::new();
        for (i, p) in snap.procs.iter().enumerate() {
            if p.kernel_thread || p.cmdline.is_empty() || p.state.is_zombie() || !forest.in_scope(i) {
                continue;
            }
            if forest.role(i) != Role::Other || forest.origins.contains_key(&i) {
                continue;
            }
            if !matches!(p.program.via, Via::Script | Via::Runner) {
                continue;
            }
            let argv = hash(&p.cmdline);
            if let Some((h, known)) = self.decided.get(&p.id)
                && *h == argv
            {
                if let Some(e) = known {
                    found.push((i, Arc::clone(e)));
                }
                continue;
            }
            if fresh >= PER_CYCLE
                || !would_hang_below_adopter_or_host(snap, forest, i)
                || cfg.matcher.is_bystander(crate::tree::subject(p))
            {
                continue;
            }
            if self.unlinked.get(&p.id).is_some_and(|t| t.elapsed() < RELOOK) {
                continue;
            }
            let dir = procfs.root().join(p.pid().get().to_string());
            let Some(uid) = p.uid().map(|u| u.0).or_else(|| std::fs::metadata(&dir).ok().map(|m| m.uid())) else {
                continue;
            };
            if !eligible(uid) {
                self.decided.insert(p.id, (argv, None));
                continue;
            }
            if !stdio_linked(procfs, p, &dir) {
                // Its stdio may still move (an SDK dups its pipes once serving).
                self.unlinked.insert(p.id, Instant::now());
                continue;
            }
            fresh += 1;
            let e = self.evidence(p, &dir, uid).map(Arc::new);
            self.decided.insert(p.id, (argv, e.clone()));
            if let Some(e) = e {
                found.push((i, e));
            }
        }
        for (i, e) in found {
            let protect = forest.roles[i].protect;
            forest.roles[i] = RoleMatch { role: Role::Server, pattern: None, protect };
            forest.sdk.insert(i, e);
        }
        let present: std::collections::HashSet<Identity> = snap.procs.iter().map(|p| p.id).collect();
        self.decided.retain(|id, _| present.contains(id));
        self.unlinked.retain(|id, _| present.contains(id));
        if self.scripts.len() > 4096 {
            self.scripts.clear();
        }
        if self.manifests.len() > 4096 {
            self.manifests.clear();
        }
    }

    /// The evidence of one candidate.
    fn evidence(&mut self, p: &Process, dir: &Path, uid: u32) -> Option<Evidence> {
        let words: Vec<&str> = p.cmdline.split(' ').collect();
        let lang = lang_of(words.first()?)?;
        let cwd = std::fs::read_link(dir.join("cwd")).ok().filter(|c| c.is_absolute())?;
        let (word, _) = word_at(&p.cmdline, p.program.name_span());
        let module = module_flag(&words, word);
        if module && lang == Lang::Python {
            // `python -m weather`: the module's file in the working directory.
            let rel: PathBuf = word.split('.').collect();
            let file = [rel.with_extension("py"), rel.join("__main__.py")]
                .into_iter()
                .map(|r| cwd.join(r))
                .find(|f| f.is_file())?;
            return match self.says(&file, lang, uid) {
                Says::Server(m) => Some(imports(m, &file)),
                Says::Client => None,
                Says::Nothing => {
                    let (path, m) = self.manifest_from(&cwd, lang, uid)?;
                    let sdk = m.sdk.filter(|_| path.parent() == Some(cwd.as_path()))?;
                    Some(declares(sdk, &path))
                }
            };
        }
        let script = crate::hostcfg::matching::normalize(&cwd.join(word));
        match self.says(&script, lang, uid) {
            Says::Server(m) => Some(imports(m, &script)),
            Says::Client => None,
            Says::Nothing => {
                let (path, m) = self.manifest_from(script.parent()?, lang, uid)?;
                let root = path.parent()?;
                let sdk = m.sdk.clone().filter(|_| is_entry(&m, root, &script))?;
                Some(declares(sdk, &path))
            }
        }
    }

    fn says(&mut self, file: &Path, lang: Lang, uid: u32) -> Says {
        let Ok(meta) = std::fs::metadata(file) else { return Says::Nothing };
        let st = stamp(&meta);
        if let Some((s, says)) = self.scripts.get(file)
            && *s == st
        {
            return says.clone();
        }
        let says = crate::userfile::read(file, uid, MAX_SCRIPT)
            .map_or(Says::Nothing, |b| analyse(&String::from_utf8_lossy(&b), lang));
        self.scripts.insert(file.to_path_buf(), (st, says.clone()));
        says
    }

    /// The nearest manifest at or above `from`, if it declares the SDK.
    fn manifest_from(&mut self, from: &Path, lang: Lang, uid: u32) -> Option<(PathBuf, Manifest)> {
        let name = match lang {
            Lang::Python => "pyproject.toml",
            Lang::Js => "package.json",
        };
        for d in from.ancestors().take(MANIFEST_DEPTH) {
            let path = d.join(name);
            let Ok(meta) = std::fs::metadata(&path) else { continue };
            let st = stamp(&meta);
            let m = match self.manifests.get(&path) {
                Some((s, m)) if *s == st => m.clone(),
                _ => {
                    let m = crate::userfile::read(&path, uid, MAX_MANIFEST)
                        .ok()
                        .and_then(|b| manifest(&String::from_utf8_lossy(&b), lang));
                    self.manifests.insert(path.clone(), (st, m.clone()));
                    m
                }
            };
            // The nearest one decides, whether or not it declares the SDK.
            return m.filter(|m| m.sdk.is_some()).map(|m| (path, m));
        }
        None
    }
}

fn hash(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

fn imports(found: String, file: &Path) -> Evidence {
    Evidence { kind: "imports", found, file: file.display().to_string() }
}

fn declares(found: String, file: &Path) -> Evidence {
    Evidence { kind: "declares", found, file: file.display().to_string() }
}

/// Whether `script` is an entry its project declares.
fn is_entry(m: &Manifest, root: &Path, script: &Path) -> bool {
    use crate::hostcfg::matching::normalize;
    if m.entries.iter().any(|e| normalize(&root.join(e)) == script) {
        return true;
    }
    // A console script: `…/bin/NAME` in the project (its venv), or the
    // module file a script names (`forecast = "forecast:main"` → forecast.py).
    let name = script.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let stem = script.file_stem().and_then(|n| n.to_str()).unwrap_or_default();
    let in_bin = script.parent().and_then(Path::file_name).is_some_and(|b| b == "bin");
    m.scripts.iter().any(|(n, module)| in_bin && n == name || script.parent() == Some(root) && module == stem)
}

/// The language of an interpreter by argv\[0\].
fn lang_of(argv0: &str) -> Option<Lang> {
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
fn module_flag(words: &[&str], word: &str) -> bool {
    words.windows(2).any(|w| w[0] == "-m" && w[1] == word)
}

/// The whitespace-delimited word around `name`, and the text before it.
fn word_at(text: &str, name: crate::program::Span) -> (&str, &str) {
    let (s, e) = (name.start as usize, name.end as usize);
    let start = text[..s.min(text.len())].rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let end = text[e.min(text.len())..].find(char::is_whitespace).map_or(text.len(), |i| e + i);
    (&text[start..end], &text[..start])
}

/// Whether it has a stdio transport ([`crate::scan::Details::transport_fds`]):
/// fds 0 and 1 both a pipe or a socket, or the host's pipes kept above 2
/// with fd 0 on `/dev/null` (the Python SDK 2.x), from the details when
/// loaded, else read for it (the fd table only where fd 0 is `/dev/null`).
fn stdio_linked(procfs: &ProcFs, p: &Process, dir: &Path) -> bool {
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
fn would_hang_below_adopter_or_host(snap: &Snapshot, forest: &Forest, i: usize) -> bool {
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

const PY_CLIENT: &[&str] = &["mcp.client", "stdio_client", "ClientSession"];
const JS_CLIENT: &[&str] = &["@modelcontextprotocol/sdk/client", "StdioClientTransport"];

/// What a script's text says about the MCP SDK it uses.
fn analyse(text: &str, lang: Lang) -> Says {
    let code = || {
        text.lines().map(str::trim).filter(move |l| match lang {
            Lang::Python => !l.starts_with('#'),
            Lang::Js => !l.starts_with("//") && !l.starts_with('*') && !l.starts_with("/*"),
        })
    };
    let client = match lang {
        Lang::Python => PY_CLIENT,
        Lang::Js => JS_CLIENT,
    };
    if code().any(|l| client.iter().any(|c| l.contains(c)) || lang == Lang::Js && l.contains("new Client(")) {
        return Says::Client;
    }
    for l in code() {
        let found = match lang {
            Lang::Python => python_server(l),
            Lang::Js => js_server(l),
        };
        if let Some(f) = found {
            return Says::Server(f);
        }
    }
    Says::Nothing
}

/// `from mcp.server.fastmcp import FastMCP` → `mcp.server.fastmcp`.
fn python_server(l: &str) -> Option<String> {
    let module = if let Some(r) = l.strip_prefix("from ") {
        r.split_whitespace().next()?
    } else if let Some(r) = l.strip_prefix("import ") {
        r.split([',', ' ']).next()?
    } else if l.contains("FastMCP(") {
        return Some("FastMCP".into());
    } else {
        return None;
    };
    let server = module == "mcp.server"
        || module.starts_with("mcp.server.")
        || module == "fastmcp"
        || module.starts_with("fastmcp.");
    server.then(|| module.to_string())
}

/// `import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"` →
/// that path; `StdioServerTransport`, `McpServer`, npm `fastmcp`.
fn js_server(l: &str) -> Option<String> {
    if let Some(at) = l.find("@modelcontextprotocol/sdk/server") {
        let rest = &l[at..];
        let end = rest.find(['"', '\'', '`']).unwrap_or(rest.len());
        return Some(rest[..end].to_string());
    }
    for quoted in ["\"fastmcp\"", "'fastmcp'"] {
        if l.contains(quoted) && (l.contains("from ") || l.contains("require(") || l.contains("import(")) {
            return Some("fastmcp".into());
        }
    }
    ["StdioServerTransport", "McpServer"].into_iter().find(|w| l.contains(w)).map(str::to_string)
}

/// A manifest's SDK dependency and declared entries; `None` if unparsable.
fn manifest(text: &str, lang: Lang) -> Option<Manifest> {
    let mut m = Manifest::default();
    match lang {
        Lang::Js => {
            let v: serde_json::Value = serde_json::from_str(text).ok()?;
            for key in ["dependencies", "devDependencies", "peerDependencies", "optionalDependencies"] {
                let Some(deps) = v.get(key).and_then(serde_json::Value::as_object) else { continue };
                if let Some(d) = ["@modelcontextprotocol/sdk", "fastmcp"].into_iter().find(|d| deps.contains_key(*d)) {
                    m.sdk.get_or_insert_with(|| d.to_string());
                }
            }
            if let Some(main) = v.get("main").and_then(serde_json::Value::as_str) {
                m.entries.push(PathBuf::from(main));
            }
            match v.get("bin") {
                Some(serde_json::Value::String(b)) => m.entries.push(PathBuf::from(b)),
                Some(serde_json::Value::Object(o)) => {
                    m.entries.extend(o.values().filter_map(serde_json::Value::as_str).map(PathBuf::from));
                }
                _ => {}
            }
        }
        Lang::Python => {
            let v: toml::Value = toml::from_str(text).ok()?;
            let project = v.get("project");
            let deps = project.and_then(|p| p.get("dependencies")).and_then(toml::Value::as_array);
            for d in deps.into_iter().flatten().filter_map(toml::Value::as_str) {
                let name: String = d
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                    .collect::<String>()
                    .to_ascii_lowercase();
                if name == "mcp" || name == "fastmcp" {
                    m.sdk.get_or_insert(name);
                }
            }
            let poetry = v.get("tool").and_then(|t| t.get("poetry")).and_then(|p| p.get("dependencies"));
            if let Some(t) = poetry.and_then(toml::Value::as_table)
                && let Some(d) = ["mcp", "fastmcp"].into_iter().find(|d| t.contains_key(*d))
            {
                m.sdk.get_or_insert_with(|| d.to_string());
            }
            let scripts = project.and_then(|p| p.get("scripts")).and_then(toml::Value::as_table);
            for (name, target) in scripts.into_iter().flatten() {
                let module = target.as_str().unwrap_or_default().split([':', '.']).next().unwrap_or_default();
                m.scripts.push((name.clone(), module.to_string()));
            }
        }
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_imports_client_imports_and_neither() {
        let py = |t| analyse(t, Lang::Python);
        let js = |t| analyse(t, Lang::Js);
        assert_eq!(
            py("from mcp.server.fastmcp import FastMCP\nmcp = FastMCP('w')\n"),
            Says::Server("mcp.server.fastmcp".into())
        );
        assert_eq!(
            py("try:\n    import mcp.server.stdio\nexcept ImportError:\n    pass\n"),
            Says::Server("mcp.server.stdio".into())
        );
        assert_eq!(py("from fastmcp import FastMCP\n"), Says::Server("fastmcp".into()));
        assert_eq!(py("# from mcp.server.fastmcp import FastMCP\nimport json\n"), Says::Nothing, "a comment");
        assert_eq!(py("from mcp import ClientSession\nfrom mcp.client.stdio import stdio_client\n"), Says::Client);
        assert_eq!(
            py("from mcp.server.fastmcp import FastMCP\nfrom mcp.client.stdio import stdio_client\n"),
            Says::Client,
            "a proxy or agent with both halves is a host"
        );
        assert_eq!(py("import mcpx\nfrom mcp_server_helpers import x\nimport http.server\n"), Says::Nothing);
        assert_eq!(
            js("import { McpServer } from \"@modelcontextprotocol/sdk/server/mcp.js\";\n"),
            Says::Server("@modelcontextprotocol/sdk/server/mcp.js".into())
        );
        assert_eq!(js("const { StdioServerTransport } = require('x');\n"), Says::Server("StdioServerTransport".into()));
        assert_eq!(js("import { FastMCP } from 'fastmcp';\n"), Says::Server("fastmcp".into()));
        assert_eq!(js("import { Client } from \"@modelcontextprotocol/sdk/client/index.js\";\n"), Says::Client);
        assert_eq!(js("// McpServer\nconsole.log(1)\n"), Says::Nothing);
    }

    #[test]
    fn manifests_declare_the_sdk_and_their_entries() {
        let p = manifest(
            "[project]\nname = \"forecast\"\ndependencies = [\"httpx>=0.27\", \"mcp[cli]>=1.2.0\"]\n[project.scripts]\nforecast = \"forecast.main:run\"\n",
            Lang::Python,
        )
        .unwrap();
        assert_eq!(p.sdk.as_deref(), Some("mcp"));
        assert_eq!(p.scripts, vec![("forecast".to_string(), "forecast".to_string())]);
        let n = manifest(
            r#"{"name": "weather", "main": "build/index.js", "bin": {"weather": "./build/index.js"}, "dependencies": {"@modelcontextprotocol/sdk": "^1.20.0", "zod": "^3"}}"#,
            Lang::Js,
        )
        .unwrap();
        assert_eq!(n.sdk.as_deref(), Some("@modelcontextprotocol/sdk"));
        assert!(is_entry(&n, Path::new("/p"), Path::new("/p/build/index.js")));
        assert!(!is_entry(&n, Path::new("/p"), Path::new("/p/scripts/seed.js")));
        assert!(manifest("[project]\ndependencies = [\"mcpx\", \"mcp-proxy\"]\n", Lang::Python).unwrap().sdk.is_none());
        assert!(manifest("{", Lang::Js).is_none());
    }
}
