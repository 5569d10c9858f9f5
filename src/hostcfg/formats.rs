//! The hosts' MCP config formats, each reduced to what the reaper needs of a
//! configured server: its command and arguments (and a working directory
//! where the format has one). Env values, headers and URLs are never taken:
//! they hold secrets, and a remote server is no process of ours.

use serde_json::Value;

/// One configured stdio server, as a file declares it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Declared {
    /// Where in the file: `mcpServers.weather`, `projects["/p"].mcpServers.x`.
    pub key: String,
    /// Command followed by its arguments.
    pub argv: Vec<String>,
    /// The directory the host starts it in, when the file says.
    pub cwd: Option<String>,
}

/// How a file is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `mcpServers` (Claude Code's `.mcp.json`, Cursor, Gemini, Claude
    /// Desktop, Windsurf, Amazon Q, Qwen Code, Cline, Copilot CLI, Kiro, LM
    /// Studio).
    McpServers,
    /// `~/.claude.json`: `mcpServers` and `projects.<dir>.mcpServers`.
    ClaudeJson,
    /// VS Code's `mcp.json`: `servers`.
    VsCode,
    /// Zed's `settings.json`: `context_servers`.
    Zed,
    /// opencode and its twins (Kilo's `kilo.json`, Crush's `crush.json`):
    /// `mcp.<name>.command`, the whole argv or a string with `args`.
    OpenCode,
    /// Codex `config.toml`: `[mcp_servers.<name>]`.
    CodexToml,
    /// Goose `config.yaml`: `extensions.<name>.cmd` and `args`.
    GooseYaml,
    /// Continue `config.yaml`: `mcpServers: [{name, command, args, cwd}]`.
    ContinueYaml,
}

/// The servers a file declares, or why it could not be read as its format.
pub fn parse(format: Format, text: &str) -> Result<Vec<Declared>, String> {
    match format {
        Format::CodexToml => codex(text),
        Format::GooseYaml => super::yaml::goose(text),
        Format::ContinueYaml => super::yaml::continue_servers(text),
        _ => {
            let v: Value =
                serde_json::from_str(&super::jsonc::strip(text)).map_err(|e| format!("invalid JSON: {e}"))?;
            Ok(json(format, &v))
        }
    }
}

fn json(format: Format, v: &Value) -> Vec<Declared> {
    let mut out = Vec::new();
    match format {
        Format::McpServers => servers(v, "mcpServers", "", None, &mut out),
        Format::ClaudeJson => {
            servers(v, "mcpServers", "", None, &mut out);
            if let Some(projects) = v.get("projects").and_then(Value::as_object) {
                for (dir, p) in projects {
                    servers(p, "mcpServers", &format!("projects[{dir:?}]."), Some(dir), &mut out);
                }
            }
        }
        Format::VsCode => servers(v, "servers", "", None, &mut out),
        Format::Zed => servers(v, "context_servers", "", None, &mut out),
        Format::OpenCode => servers(v, "mcp", "", None, &mut out),
        Format::CodexToml | Format::GooseYaml | Format::ContinueYaml => {}
    }
    out
}

/// Every entry of `v[member]` that has a command.
fn servers(v: &Value, member: &str, prefix: &str, cwd: Option<&str>, out: &mut Vec<Declared>) {
    let Some(map) = v.get(member).and_then(Value::as_object) else { return };
    for (name, s) in map {
        if let Some(argv) = command(s) {
            let cwd = s.get("cwd").and_then(Value::as_str).or(cwd).map(str::to_string);
            out.push(Declared { key: format!("{prefix}{member}.{name}"), argv, cwd });
        }
    }
}

/// `command` + `args`, in the shapes the formats use: a string and an array
/// (most), an array alone (opencode), `{path, args}` (Zed before 0.194).
fn command(s: &Value) -> Option<Vec<String>> {
    let strings =
        |a: &Value| -> Option<Vec<String>> { a.as_array()?.iter().map(|x| x.as_str().map(str::to_string)).collect() };
    let (cmd, args) = match s.get("command")? {
        Value::String(c) => (c.clone(), s.get("args").map_or(Some(Vec::new()), strings)?),
        a @ Value::Array(_) => {
            let mut all = strings(a)?;
            if all.is_empty() {
                return None;
            }
            let rest = all.split_off(1);
            (all.remove(0), rest)
        }
        Value::Object(o) => {
            let path = o.get("path")?.as_str()?.to_string();
            (path, o.get("args").map_or(Some(Vec::new()), strings)?)
        }
        _ => return None,
    };
    if cmd.trim().is_empty() {
        return None;
    }
    Some(std::iter::once(cmd).chain(args).collect())
}

/// Codex: `[mcp_servers.NAME]` with `command`, `args` and `cwd`.
fn codex(text: &str) -> Result<Vec<Declared>, String> {
    // Where, not what: toml's messages can quote the file (a duplicate key).
    let v: toml::Value = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start.min(text.len()));
        let line = text.as_bytes()[..at].split(|&b| b == b'\n').count();
        format!("invalid TOML at line {line}")
    })?;
    let mut out = Vec::new();
    let Some(map) = v.get("mcp_servers").and_then(toml::Value::as_table) else { return Ok(out) };
    for (name, s) in map {
        let Some(cmd) = s.get("command").and_then(toml::Value::as_str) else { continue };
        let args: Option<Vec<String>> = match s.get("args") {
            None => Some(Vec::new()),
            Some(a) => a.as_array().and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect()),
        };
        let Some(args) = args else { continue };
        let cwd = s.get("cwd").and_then(toml::Value::as_str).map(str::to_string);
        out.push(Declared {
            key: format!("mcp_servers.{name}"),
            argv: std::iter::once(cmd.to_string()).chain(args).collect(),
            cwd,
        });
    }
    Ok(out)
}
