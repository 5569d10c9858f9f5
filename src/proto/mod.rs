//! The control-socket protocol, shared by the daemon (`daemon::control`)
//! and its client (`ctl`), owned by neither: frames of a 4-byte big-endian
//! length and a JSON body ([`frame`]); every request and reply carries the
//! protocol version `v`. What replies carry (status, outcomes, history) is
//! plain data from `report::status` and `history`.

mod frame;

use serde::{Deserialize, Serialize};

pub use frame::{FrameError, call, decode, encode, frame_len};

pub use crate::report::status::{ReapEvent, ReapResult, ReloadResult, ScanStats, Status, Totals, TreeStatus};

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
    /// The ledger of what was reaped (`reaperctl history`), a user's own
    /// trees only unless root or the daemon's user asks.
    History {
        /// Entries at or after this time (unix seconds); all when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since_unix: Option<u64>,
    },
    /// A host is ending its session on purpose (`reaperctl session-end`,
    /// from the host's hook): reap its trees as soon as it exits, without
    /// grace. Only a descendant of the host may ask.
    SessionEnd {
        host_pid: i32,
        host_start_time: u64,
        /// The host's own session id, for the log.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        /// Why the host says it ends (`reason` of its hook input).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// What the daemon will do for a host that ends its session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionEndResult {
    pub host_pid: i32,
    /// The host's children now (the roots of its trees among them): each
    /// is reaped without grace once the host is gone, if it is an orphan.
    pub children: usize,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reply {
    pub v: u32,
    pub ok: bool,
    /// What kind of failure `error` describes: clients act on this, never
    /// on the message's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ErrorKind>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_end: Option<SessionEndResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<crate::history::View>,
}

/// Why a request failed, on the wire as `"kind": "busy"` and so on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// Too many clients at once: try again.
    Busy,
    /// Only root and the daemon's own user may reload or reap.
    PermissionDenied,
    /// Malformed, oversized, incomplete or of another protocol version.
    BadRequest,
    /// The daemon is stopping.
    ShuttingDown,
    /// The reloaded config has errors; the daemon keeps its previous one.
    Config,
    /// A kind this client does not know (a newer daemon).
    #[serde(other)]
    Unknown,
}

impl ErrorKind {
    /// The exit status of a client whose request failed so.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Busy => crate::exit::TEMPFAIL,
            ErrorKind::PermissionDenied => crate::exit::NOPERM,
            ErrorKind::BadRequest => crate::exit::PROTOCOL,
            ErrorKind::ShuttingDown => crate::exit::UNAVAILABLE,
            ErrorKind::Config => crate::exit::CONFIG,
            ErrorKind::Unknown => crate::exit::SOFTWARE,
        }
    }
}

impl Reply {
    pub fn error(kind: ErrorKind, msg: impl Into<String>) -> Reply {
        Reply { v: VERSION, ok: false, kind: Some(kind), error: Some(msg.into()), ..Reply::default() }
    }
    pub fn ok() -> Reply {
        Reply { v: VERSION, ok: true, ..Reply::default() }
    }
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
        let h = Request { v: 1, cmd: Command::History { since_unix: Some(5) } };
        assert_eq!(&encode(&h)[4..], br#"{"v":1,"cmd":"history","since_unix":5}"#);
        assert_eq!(
            decode::<Request>(br#"{"v":1,"cmd":"history"}"#).unwrap().cmd,
            Command::History { since_unix: None }
        );
        assert!(matches!(frame_len(u32::MAX.to_be_bytes(), MAX_REQUEST), Err(FrameError::TooLarge(_))));
    }

    #[test]
    fn error_replies_carry_a_kind() {
        let r = Reply::error(ErrorKind::PermissionDenied, "permission denied: no");
        let bytes = encode(&r);
        assert_eq!(&bytes[4..], br#"{"v":1,"ok":false,"kind":"permission-denied","error":"permission denied: no"}"#);
        let back: Reply = decode(&bytes[4..]).unwrap();
        assert_eq!(back.kind, Some(ErrorKind::PermissionDenied));
        // A kind from a newer daemon is still a reply, of a kind we do not know.
        let newer: Reply = decode(br#"{"v":1,"ok":false,"kind":"on-fire","error":"x"}"#).unwrap();
        assert_eq!(newer.kind, Some(ErrorKind::Unknown));
        assert_eq!(ErrorKind::Busy.exit_code(), crate::exit::TEMPFAIL);
    }
}
