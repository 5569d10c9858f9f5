//! `reaperctl generations`: read-only, like `scan`. Judges the machine now,
//! groups each live host's server copies ([`crate::policy::generations`]),
//! reads each copy's evidence from `/proc` and prints it (issue 35 item 1),
//! with the daemon's samples of each copy when a daemon answers: one look
//! cannot tell an idle copy from a busy one, the daemon's looks over time
//! can. `--end HOST_PID` is `generations_end.rs`.
//!
//! The per-copy reads are `scan/activity.rs`'s (bounded, through a checked
//! `/proc/PID` dirfd); of the environment only one variable is taken,
//! validated.

use std::collections::HashMap;
use std::process::ExitCode;

use super::grace::{Unasked, ask_status};
use super::{Cli, ScanArgs, assess_now};
use crate::config::Config;
use crate::exit;
use crate::ids::{Identity, Pid};
use crate::policy::generations::{ENVIRON_MAX, Group, SESSION_VAR, generations, session_in_environ};
use crate::report::generations::Usage;
use crate::scan::{ProcFs, Snapshot};
use crate::stdout::{out, outln};

#[derive(clap::Args, Debug)]
pub struct GenerationsArgs {
    #[command(flatten)]
    pub args: ScanArgs,
    /// End this host's old idle copies, as the user running reaperctl:
    /// the newest `[generations] keep_newest` per command, the only copy,
    /// a copy that did I/O or used CPU, or with a request waiting in its
    /// stdin, are kept. Idle by the daemon's samples when it answers, else
    /// by two looks `--sample-secs` apart.
    #[arg(long, value_name = "HOST_PID", value_parser = super::parse_pid)]
    pub end: Option<Pid>,
    /// With `--end`: print exactly what would end, and signal nothing.
    #[arg(long, requires = "end")]
    pub dry_run: bool,
    /// With `--end` and no daemon's samples: seconds between the two looks
    /// at each copy's counters (a copy whose counters moved is busy).
    #[arg(long, value_name = "N", default_value_t = 10, requires = "end",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub sample_secs: u64,
}

pub fn run(cli: &Cli, cmd: &GenerationsArgs) -> ExitCode {
    if let Some(host) = cmd.end {
        return super::generations_end::run(cli, cmd, host);
    }
    let (cfg, procfs, a) = match assess_now(cli, &cmd.args) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let snap = &a.snapshot;
    let groups = generations(snap, &a.judgements, |root| session(&procfs, snap.procs[root].id));
    let usage: HashMap<usize, Usage> =
        groups.iter().flat_map(Group::copies).map(|c| (c.root, usage(&procfs, snap, &c.members))).collect();
    let mut r = crate::report::generations::build(snap, &groups, &usage);
    if let Some(st) = daemon_status(cli, &cfg, &cmd.args) {
        // The daemon's own cadence where it says it, else this config's.
        let every = st.generations.iter().map(|g| g.sample_secs).find(|&n| n > 0);
        crate::report::generations::merge_samples(
            &mut r,
            &st.generations,
            every.unwrap_or(cfg.generations.sample_secs),
        );
    }
    if cmd.args.json {
        outln!("{}", crate::names::printable_json(&serde_json::to_string_pretty(&r).expect("report serializes")));
    } else {
        out!("{}", crate::names::printable_lines(&crate::report::generations_text::render(&r)));
    }
    ExitCode::from(exit::OK)
}

/// The daemon's status when one answers on the control socket (`None`
/// when none runs there: the view stays one look). A daemon that exists
/// but does not answer is said on stderr.
pub(super) fn daemon_status(cli: &Cli, cfg: &Config, args: &ScanArgs) -> Option<crate::proto::Status> {
    // A fixture tree is not the machine any daemon watches.
    if args.proc_root != std::path::Path::new("/proc") {
        return None;
    }
    let socket = super::socket_path(cli, Some(cfg));
    match ask_status(&socket) {
        Ok(st) => Some(st),
        Err(Unasked::NoDaemon) => None,
        Err(Unasked::Failed(why)) => {
            crate::say_err!(
                "reaperctl: note: the daemon at {} did not answer ({why}); idle is not known",
                socket.display()
            );
            None
        }
    }
}

/// One copy's tree, every member summed.
fn usage(procfs: &ProcFs, snap: &Snapshot, members: &[usize]) -> Usage {
    let mut u = Usage::default();
    for &m in members {
        let p = &snap.procs[m];
        let a = procfs.activity(p.id);
        if let Some(r) = a.and_then(|a| a.rollup) {
            u.memory_bytes += r.pss_bytes + r.swap_pss_bytes;
        } else {
            u.memory_fallbacks += 1;
            u.memory_bytes += p.rss_bytes() + p.swap_bytes();
        }
        let Some(a) = a else {
            u.io_unreadable += 1;
            continue;
        };
        if let Some(t) = a.cpu_ticks {
            *u.cpu_ticks.get_or_insert(0) += t;
        }
        match a.io {
            Some((r, w)) => {
                *u.rchar.get_or_insert(0) += r;
                *u.wchar.get_or_insert(0) += w;
            }
            None => u.io_unreadable += 1,
        }
    }
    u
}

/// The session a copy's root names in its environment, validated.
pub(super) fn session(procfs: &ProcFs, id: Identity) -> Option<String> {
    session_in_environ(&procfs.environ(id, ENVIRON_MAX)?, SESSION_VAR)
}
