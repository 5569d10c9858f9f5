//! The control-socket protocol: frames of a 4-byte big-endian length and a
//! JSON body; every request and reply carries the protocol version `v`.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use crate::config::Mode;

pub const VERSION: u32 = 1;
/// Requests are tiny; anything larger is hostile.
pub const MAX_REQUEST: usize = 64 * 1024;
pub const MAX_REPLY: usize = 16 << 20;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub v: u32,
    #[serde(flatten)]
    pub cmd: Command,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Command {
    Status,
    Reload,
    ReapNow {
        #[serde(default)]
        dry_run: bool,
    },
    Metrics,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reply {
    pub v: u32,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload: Option<ReloadResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reap: Option<ReapResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
}

impl Reply {
    pub fn error(msg: impl Into<String>) -> Reply {
        Reply { v: VERSION, ok: false, error: Some(msg.into()), ..Reply::default() }
    }
    pub fn ok() -> Reply {
        Reply { v: VERSION, ok: true, ..Reply::default() }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReloadResult {
    pub at_unix: u64,
    pub ok: bool,
    /// What changed, or every error found.
    pub messages: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReapResult {
    pub dry_run: bool,
    pub events: Vec<ReapEvent>,
}

/// One tree acted on, as remembered by the daemon.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReapEvent {
    pub at_unix: u64,
    pub dry_run: bool,
    pub verdict: String,
    pub root: i32,
    pub root_cmd: String,
    pub reason: String,
    /// Owner of the tree's root, for per-user filtering.
    pub uid: Option<u32>,
    pub members: usize,
    pub signals: Vec<String>,
    pub escalated: bool,
    pub unkillable: usize,
    pub errors: Vec<String>,
    pub took_ms: u64,
    pub reclaimed_bytes: u64,
    pub line: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TreeStatus {
    pub verdict: String,
    pub reap: bool,
    pub root: i32,
    pub root_cmd: String,
    pub reason: String,
    pub members: usize,
    pub memory_bytes: u64,
    pub grace_left_secs: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Totals {
    pub trees_reaped: u64,
    pub processes_reaped: u64,
    pub reclaimed_bytes: u64,
    pub escalations: u64,
    pub failures: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ScanStats {
    pub count: u64,
    pub last_duration_ms: f64,
    pub last_processes: usize,
    pub last_at_unix: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    pub version: String,
    pub pid: u32,
    pub uptime_secs: f64,
    pub mode: Mode,
    pub config_sources: Vec<String>,
    pub last_reload: Option<ReloadResult>,
    /// "netlink" (proc connector), "pidfd" (watching hosts), or "polling".
    pub event_mode: String,
    pub interval_secs: u64,
    pub grace_secs: u64,
    pub scans: ScanStats,
    pub by_verdict: BTreeMap<String, usize>,
    /// Trees visible to the asking user (root sees all).
    pub trees: Vec<TreeStatus>,
    pub totals: Totals,
    pub recent: Vec<ReapEvent>,
    /// True when the list was filtered to the asking user's processes.
    pub filtered_for_uid: Option<u32>,
}

#[derive(Debug)]
pub enum FrameError {
    Io(io::Error),
    TooLarge(usize),
    Json(serde_json::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "{e}"),
            FrameError::TooLarge(n) => write!(f, "frame of {n} bytes is over the limit"),
            FrameError::Json(e) => write!(f, "malformed message: {e}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Checks a frame header against the limit before any body is read.
pub fn frame_len(header: [u8; 4], max: usize) -> Result<usize, FrameError> {
    let n = u32::from_be_bytes(header) as usize;
    if n > max { Err(FrameError::TooLarge(n)) } else { Ok(n) }
}

pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("protocol types serialize");
    let mut out = Vec::with_capacity(4 + body.len());
    let len = u32::try_from(body.len()).expect("a message far below 4 GiB (replies are capped by the tree count)");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    out
}

pub fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(body).map_err(FrameError::Json)
}

/// Blocking client call (reaperctl).
pub fn call(stream: &mut std::os::unix::net::UnixStream, req: &Request) -> Result<Reply, FrameError> {
    stream.write_all(&encode(req)).map_err(FrameError::Io)?;
    let mut hdr = [0u8; 4];
    stream.read_exact(&mut hdr).map_err(FrameError::Io)?;
    let n = frame_len(hdr, MAX_REPLY)?;
    let mut body = vec![0u8; n];
    stream.read_exact(&mut body).map_err(FrameError::Io)?;
    decode(&body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_wire_format_is_stable() {
        let r = Request { v: 1, cmd: Command::ReapNow { dry_run: true } };
        let bytes = encode(&r);
        assert_eq!(&bytes[4..], br#"{"v":1,"cmd":"reap-now","dry_run":true}"#);
        assert_eq!(decode::<Request>(&bytes[4..]).unwrap(), r);
        assert_eq!(decode::<Request>(br#"{"v":1,"cmd":"status"}"#).unwrap().cmd, Command::Status);
        assert!(decode::<Request>(br#"{"v":1,"cmd":"rm -rf"}"#).is_err());
        assert!(matches!(frame_len(u32::MAX.to_be_bytes(), MAX_REQUEST), Err(FrameError::TooLarge(_))));
    }
}
