//! The grace clocks `reaperctl scan` judges by. The daemon's are the ones
//! that count: asked over its control socket first (it holds trees its state
//! file has not caught up with, and a user cannot read root's state file),
//! then the state file. When neither answers while a daemon may be running,
//! the scan says why. The scan's own first sight is no clock: a tree no
//! daemon has seen is shown by its evidence (`GraceBook::observing`).

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use super::{Cli, proto};
use crate::config::Config;
use crate::ids::{Identity, Pid, StartTime};
use crate::policy::GraceBook;

/// How long a scan waits for the daemon's answer: status is served from
/// memory, so a daemon that takes longer is stuck or swamped.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// The grace book for a scan of `proc_root`, and the notes to print.
pub(super) fn for_scan(cli: &Cli, cfg: &Config, proc_root: &Path) -> (GraceBook, Vec<String>) {
    let state_path = crate::paths::state_file(cfg.state_file.as_deref());
    let (book, file_warning) = crate::state::load(&state_path);
    let mut book = book.observing();
    // A fixture tree is not the machine any daemon watches.
    if proc_root != Path::new("/proc") {
        return (book, file_warning.iter().map(|w| warning(w)).collect());
    }
    let socket = super::socket_path(cli, Some(cfg));
    match ask_status(&socket) {
        Ok(status) => {
            let mut notes = Vec::new();
            for t in &status.trees {
                if let (Some(pid), Some(ms)) = (Pid::new(t.root_pid), t.first_seen_unix_ms) {
                    let id = Identity { pid, start_time: StartTime(t.root_start_time) };
                    book.insert(id, UNIX_EPOCH + Duration::from_millis(ms));
                }
            }
            if status.trees.iter().any(|t| t.grace_left_secs.is_some() && t.first_seen_unix_ms.is_none()) {
                notes.push(format!(
                    "note: mcp-reaperd {} does not tell its grace clocks (an older version); grace times are \
                     the state file's, or unknown",
                    status.version
                ));
            }
            if let Some(uid) = status.filtered_for_uid
                && file_warning.is_some()
            {
                notes.push(format!(
                    "note: the daemon tells uid {uid} the grace of its own trees only; other users' trees \
                     are shown by their evidence, their grace unknown"
                ));
            }
            (book, notes)
        }
        Err(Unasked::NoDaemon) => (book, file_warning.iter().map(|w| warning(w)).collect()),
        Err(Unasked::Failed(why)) => {
            let notes = match file_warning {
                Some(w) => vec![format!(
                    "note: no grace clock could be read: {w}, and the daemon at {} did not answer ({why}); \
                     trees are shown by their evidence",
                    socket.display()
                )],
                None => vec![format!(
                    "note: the daemon at {} did not answer ({why}); grace times are its state file's",
                    socket.display()
                )],
            };
            (book, notes)
        }
    }
}

fn warning(w: &str) -> String {
    format!("warning: {w}")
}

pub(super) enum Unasked {
    /// No socket: no daemon runs there, so none tracks a grace.
    NoDaemon,
    Failed(String),
}

pub(super) fn ask_status(socket: &Path) -> Result<proto::Status, Unasked> {
    if !socket.exists() {
        return Err(Unasked::NoDaemon);
    }
    super::trusted_socket(socket).map_err(Unasked::Failed)?;
    let mut stream = std::os::unix::net::UnixStream::connect(socket).map_err(|e| match e.kind() {
        // A socket file without a listener: a daemon that is gone.
        std::io::ErrorKind::ConnectionRefused => Unasked::NoDaemon,
        _ => Unasked::Failed(format!("cannot connect: {e}")),
    })?;
    let _ = stream.set_read_timeout(Some(ASK_TIMEOUT));
    let _ = stream.set_write_timeout(Some(ASK_TIMEOUT));
    let reply = proto::call(&mut stream, &proto::Request { v: proto::VERSION, cmd: proto::Command::Status })
        .map_err(|e| Unasked::Failed(e.to_string()))?;
    match reply.status {
        Some(s) if reply.ok => Ok(s),
        _ => Err(Unasked::Failed(reply.error.unwrap_or_else(|| "no status in its reply".into()))),
    }
}
