//! Stage 1: read `/proc` into a [`Snapshot`].
//!
//! Two tiers keep a scan cheap: every process costs one `stat` and one
//! `cmdline` read; the rest ([`Details`]: uid, swap, exe, fds, namespace) is read
//! only for the processes a decision is about (tree members and their ancestors).
//! Each process is read through a directory fd on `/proc/PID`, which stays bound
//! to that process even if its pid is reused, so all files of one process are
//! consistent with each other.
//!
//! Memory is bounded whatever the process table holds: at most
//! [`CMDLINE_KEEP`] bytes of a command line are read and kept per process
//! (whole arguments, a cut line ends in ` …`), identical lines are kept once
//! per read (`incremental.rs`) and distinct long ones up to
//! [`CMDLINES_TOTAL`] in all, then [`CMDLINE_SHORT`] bytes each; details
//! (fds 0–2, exe, status fields) are a few short strings, and only for the
//! processes a decision is about. Command lines cost at most about
//! `CMDLINES_TOTAL + processes × (CMDLINE_SHORT + 128)` bytes, plus ~200
//! bytes per process; the README states the budget, `cargo bench --bench
//! memory` measures it.
//!
//! The rooms: [`process`] holds what a scan produces (the types), `procfs`
//! is a `/proc` and its whole-system files, `pid_dir` reads one process
//! through its directory fd, `details` the second tier and cgroups
//! (`high_fds` its fds above 2, where a moved transport would be),
//! `incremental` the whole-table reads and the rules for building on the
//! last snapshot, `recheck` the read of the trees to reap, right before a
//! reap.

mod activity;
mod comm;
mod details;
pub mod events;
mod events_filter;
mod family;
mod high_fds;
mod incremental;
mod link;
mod listen;
mod netlink;
pub mod parse;
mod pid_dir;
pub mod pressure;
pub mod process;
mod procfs;
mod recheck;
pub mod runtime;
pub mod sockdiag;
mod sockpoll;
pub mod tcp_table;
#[cfg(test)]
pub(crate) mod test_support;

use std::io;
use std::path::PathBuf;

pub use activity::{Activity, TreeCounters};
pub use comm::Comm;
pub use incremental::{DETAILS_SETTLED_SECS, Read, Reuse, Sweep};
pub use link::Question;
pub use parse::{MemInfo, Rollup};
pub use pid_dir::{Opened, Unopened};
pub use pressure::Pressure;
pub use process::{
    CgroupContainer, Context, Details, FdKind, FdTarget, HighLink, Holder, Listening, ProcState, Process, Snapshot,
    StdinEnd, Transport, Unit, boot_tick,
};
pub use procfs::{CMDLINE_KEEP, CMDLINE_SHORT, CMDLINE_WHOLE, CMDLINES_TOTAL, ProcFs};
pub use runtime::PodName;

/// Errors that stop a scan as a whole (a single vanished process never does).
#[derive(Debug)]
pub enum ScanError {
    ReadDir { path: PathBuf, source: io::Error },
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::ReadDir { path, source } => write!(f, "reading {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for ScanError {}
