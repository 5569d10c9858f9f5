//! Which files the hosts keep their MCP servers in, and reading them
//! defensively: a user's config is input the reaper does not control (and a
//! root daemon reads every user's). A file that is not a regular file, is
//! larger than [`MAX_BYTES`], is owned by someone else than the home's owner,
//! loops through symlinks or does not parse is skipped, with one log line per
//! file and change. Reads are cached by (device, inode, mtime, size): an
//! unchanged file costs one `stat`.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::formats::{Declared, Format, parse};
use super::places::Base;

/// Real configs are a few KiB (`~/.claude.json`, the largest, holds history
/// and grows to a few MiB); anything beyond this is not read.
pub const MAX_BYTES: u64 = 4 << 20;

/// A config file of one host, relative to a directory of the host's
/// environment ([`Base`]; a project's files to the project directory).
#[derive(Clone, Copy, Debug)]
pub struct Source {
    pub base: Base,
    pub rel: &'static str,
    pub host: &'static str,
    pub format: Format,
}

const fn src(rel: &'static str, host: &'static str, format: Format) -> Source {
    Source { base: Base::Home, rel, host, format }
}

const fn at(base: Base, rel: &'static str, host: &'static str, format: Format) -> Source {
    Source { base, rel, host, format }
}

/// A user's own: in the home, or where the host's environment points
/// (`$XDG_CONFIG_HOME`, `$CODEX_HOME`, …; see [`super::places`]).
pub const USER: &[Source] = &[
    at(Base::Claude, ".claude.json", "claude-code", Format::ClaudeJson),
    src(".cursor/mcp.json", "cursor", Format::McpServers),
    at(Base::Codex, "config.toml", "codex", Format::CodexToml),
    at(Base::Gemini, ".gemini/settings.json", "gemini", Format::McpServers),
    at(Base::XdgConfig, "Code/User/mcp.json", "vscode", Format::VsCode),
    at(Base::XdgConfig, "VSCodium/User/mcp.json", "vscode", Format::VsCode),
    at(Base::XdgConfig, "Claude/claude_desktop_config.json", "claude-desktop", Format::McpServers),
    at(Base::XdgConfig, "zed/settings.json", "zed", Format::Zed),
    at(Base::XdgConfig, "goose/config.yaml", "goose", Format::GooseYaml),
    at(Base::XdgConfig, "opencode/opencode.json", "opencode", Format::OpenCode),
    at(Base::XdgConfig, "opencode/opencode.jsonc", "opencode", Format::OpenCode),
    src(".codeium/windsurf/mcp_config.json", "windsurf", Format::McpServers),
    src(".aws/amazonq/mcp.json", "amazonq", Format::McpServers),
    // Qwen Code (a Gemini CLI fork): `mcpServers` in ~/.qwen/settings.json.
    src(".qwen/settings.json", "qwen-code", Format::McpServers),
    // Continue (`cn` and the IDE extensions): `mcpServers:` list in config.yaml.
    at(Base::Continue, "config.yaml", "continue", Format::ContinueYaml),
    // Kilo CLI (an opencode fork): opencode's format in kilo.json, or its twin opencode.json.
    at(Base::XdgConfig, "kilo/kilo.json", "kilo", Format::OpenCode),
    at(Base::XdgConfig, "kilo/kilo.jsonc", "kilo", Format::OpenCode),
    at(Base::XdgConfig, "kilo/opencode.json", "kilo", Format::OpenCode),
    // Cline: the CLI's data directory, and the VS Code extension's global storage.
    at(Base::ClineData, "settings/cline_mcp_settings.json", "cline", Format::McpServers),
    at(
        Base::XdgConfig,
        "Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
        "cline",
        Format::McpServers,
    ),
    src(".copilot/mcp-config.json", "copilot", Format::McpServers),
    at(Base::XdgConfig, "crush/crush.json", "crush", Format::OpenCode),
    src(".kiro/settings/mcp.json", "kiro", Format::McpServers),
    src(".lmstudio/mcp.json", "lm-studio", Format::McpServers),
];

/// In a project: the working directory of a host.
pub const PROJECT: &[Source] = &[
    src(".mcp.json", "claude-code", Format::McpServers),
    src(".cursor/mcp.json", "cursor", Format::McpServers),
    src(".gemini/settings.json", "gemini", Format::McpServers),
    src(".vscode/mcp.json", "vscode", Format::VsCode),
    src(".zed/settings.json", "zed", Format::Zed),
    src("opencode.json", "opencode", Format::OpenCode),
    src("opencode.jsonc", "opencode", Format::OpenCode),
    src(".amazonq/mcp.json", "amazonq", Format::McpServers),
    src(".qwen/settings.json", "qwen-code", Format::McpServers),
    src("kilo.json", "kilo", Format::OpenCode),
    src("kilo.jsonc", "kilo", Format::OpenCode),
    src("crush.json", "crush", Format::OpenCode),
    src(".crush.json", "crush", Format::OpenCode),
    src(".kiro/settings/mcp.json", "kiro", Format::McpServers),
];

/// A file a host's own command line names (`cn --config FILE`).
pub const CONTINUE_ARG: Source = src("", "continue", Format::ContinueYaml);

/// What identifies one version of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime_ns: i128,
    size: u64,
    uid: u32,
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            size: m.size(),
            uid: m.uid(),
        }
    }
}

#[derive(Debug)]
struct Cached {
    stamp: Option<Stamp>,
    owner: u32,
    read: Result<Arc<Vec<Declared>>, String>,
}

/// One file's servers, or why they are not known.
pub type Servers = Result<Arc<Vec<Declared>>, String>;

/// Files read so far, by path.
#[derive(Debug, Default)]
pub struct FileCache {
    files: HashMap<PathBuf, Cached>,
}

impl FileCache {
    /// The servers `path` declares, for a home (or project) owned by `owner`;
    /// `None` when the file does not exist. Read again only when it changed.
    pub fn get(&mut self, path: &Path, format: Format, owner: u32) -> Option<Servers> {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) => {
                self.files.remove(path);
                return None;
            }
            Err(e) => return Some(self.outcome(path, owner, None, Err(crate::userfile::failure(&e)))),
        };
        let stamp = Stamp::of(&meta);
        if let Some(c) = self.files.get(path)
            && c.stamp == Some(stamp)
            && c.owner == owner
        {
            return Some(c.read.clone());
        }
        let read = read(path, format, owner);
        Some(self.outcome(path, owner, Some(stamp), read))
    }

    /// Keeps a fresh outcome; logs a failure once per file and change.
    fn outcome(&mut self, path: &Path, owner: u32, stamp: Option<Stamp>, read: Servers) -> Servers {
        if let Err(why) = &read {
            let old = self.files.get(path);
            let repeated = old.is_some_and(|c| c.stamp == stamp && c.read.as_ref().err() == Some(why));
            if !repeated {
                tracing::warn!(reaper_action = "host-config", "skipping MCP config {}: {why}", path.display());
            }
        }
        self.files.insert(path.to_path_buf(), Cached { stamp, owner, read: read.clone() });
        read
    }

    /// Forgets files not in `keep` (homes and projects no longer looked at).
    pub fn retain(&mut self, keep: &std::collections::HashSet<PathBuf>) {
        self.files.retain(|p, _| keep.contains(p));
    }
}

/// Reads a user's file defensively ([`crate::userfile`]) and parses it.
fn read(path: &Path, format: Format, owner: u32) -> Servers {
    let bytes = crate::userfile::read(path, owner, MAX_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    parse(format, &text).map(Arc::new)
}
