//! The markers hosts leave in their servers' environments (see
//! docs: Claude Code gives `CLAUDECODE=1` and `CLAUDE_CODE_SESSION_ID`,
//! Gemini CLI `GEMINI_CLI=1`; issue 23: opencode `OPENCODE=1` and
//! `OPENCODE_PID`, Qwen Code `QWEN_CODE_SESSION_ID` and
//! `QWEN_CODE_LAUNCHER_PID`, Kilo `KILO=1`, `KILO_PID` and `KILO_RUN_ID`,
//! Cline `CLINE_CONNECTOR_CLI_LAUNCH`). Read only for candidates, only these
//! names; the one value kept is the session id.

use std::io::Read;
use std::path::Path;

/// What a process's environment says about the host that started it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // one flag per host family's marker
pub struct Markers {
    pub claude_code: bool,
    pub gemini_cli: bool,
    pub opencode: bool,
    pub qwen: bool,
    pub kilo: bool,
    pub cline: bool,
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
        let Some(eq) = var.iter().position(|&b| b == b'=') else { continue };
        let (name, value) = (&var[..eq], &var[eq + 1..]);
        match name {
            b"CLAUDECODE" => m.claude_code |= value == b"1",
            b"GEMINI_CLI" => m.gemini_cli |= value == b"1",
            b"OPENCODE" => m.opencode |= value == b"1",
            b"OPENCODE_PID" => m.opencode |= is_pid(value),
            b"QWEN_CODE_LAUNCHER_PID" => m.qwen |= is_pid(value),
            b"KILO" => m.kilo |= value == b"1",
            b"KILO_PID" => m.kilo |= is_pid(value),
            b"KILO_RUN_ID" => m.kilo |= !value.is_empty(),
            b"CLINE_CONNECTOR_CLI_LAUNCH" => m.cline |= !value.is_empty(),
            b"CLAUDE_CODE_SESSION_ID" => m.session = session(value).or(m.session.take()),
            b"QWEN_CODE_SESSION_ID" => {
                m.qwen = true;
                m.session = m.session.take().or_else(|| session(value));
            }
            _ => {}
        }
    }
    m
}

/// A session id is a UUID; anything else is not kept.
fn session(v: &[u8]) -> Option<String> {
    let v = String::from_utf8_lossy(v);
    (!v.is_empty() && v.len() <= 64 && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')).then(|| v.into_owned())
}

fn is_pid(v: &[u8]) -> bool {
    !v.is_empty() && v.len() <= 10 && v.iter().all(u8::is_ascii_digit)
}

/// The host families that mark their servers, by host program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    ClaudeCode,
    GeminiCli,
    OpenCode,
    Qwen,
    Kilo,
    Cline,
    /// A host that leaves no marker we know.
    Unmarked,
}

pub fn family(host_program: &str) -> Family {
    match host_program {
        "claude" | "claude.exe" | "@anthropic-ai/claude-code" | "@anthropic-ai/claude-agent-sdk" => Family::ClaudeCode,
        "gemini" | "gemini.js" | "@google/gemini-cli" => Family::GeminiCli,
        "opencode" | "opencode.exe" => Family::OpenCode,
        "qwen" | "@qwen-code/qwen-code" => Family::Qwen,
        "kilo" | "kilocode" | "@kilocode/cli" => Family::Kilo,
        "cline" | ".cline" => Family::Cline,
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
            Family::OpenCode => self.opencode,
            Family::Qwen => self.qwen,
            Family::Kilo => self.kilo,
            Family::Cline => self.cline,
            Family::Unmarked => true,
        }
    }
}
