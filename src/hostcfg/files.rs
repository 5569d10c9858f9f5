//! Which files the hosts keep their MCP servers in, and reading them
//! defensively: a user's config is input the reaper does not control (and a
//! root daemon reads every user's). A file that is not a regular file, is
//! larger than [`MAX_BYTES`], is owned by someone else than the home's owner,
//! loops through symlinks or does not parse is skipped, with one log line per
//! file and change. Reads are cached per owner by the version read (device,
//! inode, size, mtime, ctime): an unchanged file costs one resolution as its
//! owner. Nothing below a directory the owner may not search is looked at.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::formats::{Declared, Format, parse};
use super::places::Base;
use crate::access::{self, Cred};
use crate::userfile::FileId;

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

#[derive(Debug)]
struct Cached {
    /// The version read (the opened file's), or the one a refusal was
    /// about; `None` when the path itself was refused.
    id: Option<FileId>,
    read: Servers,
}

/// One file's servers, or why they are not known.
pub type Servers = Result<Arc<Vec<Declared>>, String>;

/// Files read so far, per (owner, path): what one user may read says
/// nothing of what another may.
#[derive(Debug, Default)]
pub struct FileCache {
    files: HashMap<(u32, PathBuf), Cached>,
    /// The owners' credentials, looked up once per pass over their files
    /// (each is a read of the passwd database).
    creds: HashMap<u32, Cred>,
}

impl FileCache {
    /// The servers `path` declares, for a home (or project) owned by `owner`;
    /// `None` when there is no such file for them. Read again only when it
    /// changed. The path is resolved as `owner` before anything else looks at
    /// it ([`access::lookup`]): a file below a directory they may not search
    /// is no file of theirs, whether or not it exists, and logs nothing.
    pub fn get(&mut self, path: &Path, format: Format, owner: u32) -> Option<Servers> {
        let key = (owner, path.to_path_buf());
        let cred = self.creds.entry(owner).or_insert_with(|| Cred::of_user(owner)).clone();
        let r = match access::lookup(path, &cred) {
            Ok(Some(r)) => r,
            Ok(None) => {
                self.files.remove(&key);
                return None;
            }
            Err(why) => return Some(self.outcome(key, None, Err(why.to_string()))),
        };
        let seen = FileId::of(&r.stat);
        if let Some(c) = self.files.get(&key)
            && c.id == Some(seen)
        {
            return Some(c.read.clone());
        }
        match crate::userfile::read_resolved(&r, &cred, MAX_BYTES) {
            Ok((bytes, id)) => Some(self.outcome(key, Some(id), parse_text(bytes, format))),
            Err(why) => Some(self.outcome(key, Some(seen), Err(why.to_string()))),
        }
    }

    /// Keeps a fresh outcome; logs a failure once per file and change.
    fn outcome(&mut self, key: (u32, PathBuf), id: Option<FileId>, read: Servers) -> Servers {
        if let Err(why) = &read {
            let old = self.files.get(&key);
            let repeated = old.is_some_and(|c| c.id == id && c.read.as_ref().err() == Some(why));
            if !repeated {
                tracing::warn!(reaper_action = "host-config", "skipping MCP config {}: {why}", key.1.display());
            }
        }
        self.files.insert(key, Cached { id, read: read.clone() });
        read
    }

    /// Forgets files not in `keep` (homes and projects no longer looked at)
    /// at the end of a pass, and the credentials it used.
    pub fn retain(&mut self, keep: &std::collections::HashSet<PathBuf>) {
        self.files.retain(|(_, p), _| keep.contains(p));
        self.creds.clear();
    }
}

/// Parses a user's file, read defensively ([`crate::userfile`]).
fn parse_text(bytes: Vec<u8>, format: Format) -> Servers {
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    parse(format, &text).map(Arc::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_file_below_a_directory_its_owner_may_not_search_is_none_whether_or_not_it_is_there() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
        let there = locked.join(".claude.json");
        std::fs::write(&there, "{}").unwrap();
        let me = rustix::process::geteuid().as_raw();
        let mut cache = FileCache::default();
        let other = me + 4242;
        assert!(cache.get(&there, Format::ClaudeJson, other).is_none());
        assert!(cache.get(&locked.join("absent.json"), Format::ClaudeJson, other).is_none());
        assert!(cache.files.is_empty(), "nothing kept, nothing to log: {:?}", cache.files);
        assert!(cache.get(&there, Format::ClaudeJson, me).is_some_and(|r| r.is_ok()), "its owner reads it");
    }
}
