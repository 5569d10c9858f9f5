//! The markers hosts leave in their servers' environments (see
//! docs: Claude Code gives `CLAUDECODE=1` and `CLAUDE_CODE_SESSION_ID`,
//! Gemini CLI `GEMINI_CLI=1`). Read only for candidates, only these names;
//! the one value kept is the session id.

use std::io::Read;
use std::path::Path;

/// What a process's environment says about the host that started it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Markers {
    pub claude_code: bool,
    pub gemini_cli: bool,
    pub session: Option<String>,
}

/// An environment is at most a few hundred KiB (`ARG_MAX` shares it with argv).
const MAX: u64 = 1 << 20;

/// The markers in `/proc/PID/environ` under `proc_dir`; `None` if unreadable.
pub fn read(proc_dir: &Path) -> Option<Markers> {
    let mut buf = Vec::new();
    std::fs::File::open(proc_dir.join("environ")).ok()?.take(MAX).read_to_end(&mut buf).ok()?;
    Some(parse(&buf))
}

pub fn parse(environ: &[u8]) -> Markers {
    let mut m = Markers::default();
    for var in environ.split(|&b| b == 0) {
        if var == b"CLAUDECODE=1" {
            m.claude_code = true;
        } else if var == b"GEMINI_CLI=1" {
            m.gemini_cli = true;
        } else if let Some(v) = var.strip_prefix(b"CLAUDE_CODE_SESSION_ID=") {
            // A session id is a UUID; anything else is not kept.
            let v = String::from_utf8_lossy(v);
            if !v.is_empty() && v.len() <= 64 && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                m.session = Some(v.into_owned());
            }
        }
    }
    m
}

/// The host families that mark their servers, by host program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    ClaudeCode,
    GeminiCli,
    /// A host that leaves no marker we know.
    Unmarked,
}

pub fn family(host_program: &str) -> Family {
    match host_program {
        "claude" | "claude.exe" | "@anthropic-ai/claude-code" | "@anthropic-ai/claude-agent-sdk" => Family::ClaudeCode,
        "gemini" | "gemini.js" | "@google/gemini-cli" => Family::GeminiCli,
        _ => Family::Unmarked,
    }
}

impl Markers {
    /// Whether these markers are the ones `f` leaves (always, for a host
    /// that leaves none).
    pub fn fit(&self, f: Family) -> bool {
        match f {
            Family::ClaudeCode => self.claude_code,
            Family::GeminiCli => self.gemini_cli,
            Family::Unmarked => true,
        }
    }
}
