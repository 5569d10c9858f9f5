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

/// Real configs are a few KiB (`~/.claude.json`, the largest, holds history
/// and grows to a few MiB); anything beyond this is not read.
pub const MAX_BYTES: u64 = 4 << 20;

/// A config file of one host, relative to a home or a project directory.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    pub rel: &'static str,
    pub host: &'static str,
    pub format: Format,
}

const fn src(rel: &'static str, host: &'static str, format: Format) -> Source {
    Source { rel, host, format }
}

/// In a user's home.
pub const USER: &[Source] = &[
    src(".claude.json", "claude-code", Format::ClaudeJson),
    src(".cursor/mcp.json", "cursor", Format::McpServers),
    src(".codex/config.toml", "codex", Format::CodexToml),
    src(".gemini/settings.json", "gemini", Format::McpServers),
    src(".config/Code/User/mcp.json", "vscode", Format::VsCode),
    src(".config/VSCodium/User/mcp.json", "vscode", Format::VsCode),
    src(".config/Claude/claude_desktop_config.json", "claude-desktop", Format::McpServers),
    src(".config/zed/settings.json", "zed", Format::Zed),
    src(".config/goose/config.yaml", "goose", Format::GooseYaml),
    src(".config/opencode/opencode.json", "opencode", Format::OpenCode),
    src(".config/opencode/opencode.jsonc", "opencode", Format::OpenCode),
    src(".codeium/windsurf/mcp_config.json", "windsurf", Format::McpServers),
    src(".aws/amazonq/mcp.json", "amazonq", Format::McpServers),
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
];

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
