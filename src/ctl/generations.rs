//! `reaperctl generations`: read-only, like `scan`. Judges the machine now,
//! groups each live host's server copies ([`crate::policy::generations`]),
//! reads each copy's evidence from `/proc` and prints it (issue 35 item 1).
//!
//! The per-copy reads are `scan/activity.rs`'s (bounded, through a checked
//! `/proc/PID` dirfd); of the environment only one variable is taken,
//! validated.

use std::collections::HashMap;
use std::process::ExitCode;

use super::{Cli, ScanArgs, assess_now};
use crate::exit;
use crate::ids::Identity;
use crate::policy::generations::{Group, SESSION_VAR, generations, session_in_environ};
use crate::report::generations::Usage;
use crate::scan::{ProcFs, Snapshot};
use crate::stdout::{out, outln};

/// Environments are read this far at most: the variable is looked for in
/// the first 256 KiB (a server whose environment is bigger and puts it past
/// that shows no session; nothing else is concluded from it).
const ENVIRON_MAX: usize = 256 * 1024;

#[derive(clap::Args, Debug)]
pub struct GenerationsArgs {
    #[command(flatten)]
    pub args: ScanArgs,
}

pub fn run(cli: &Cli, cmd: &GenerationsArgs) -> ExitCode {
    let (_cfg, procfs, a) = match assess_now(cli, &cmd.args) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let snap = &a.snapshot;
    let groups = generations(snap, &a.judgements, |root| session(&procfs, snap.procs[root].id));
    let usage: HashMap<usize, Usage> =
        groups.iter().flat_map(Group::copies).map(|c| (c.root, usage(&procfs, snap, &c.members))).collect();
    let r = crate::report::generations::build(snap, &groups, &usage);
    if cmd.args.json {
        outln!("{}", crate::names::printable_json(&serde_json::to_string_pretty(&r).expect("report serializes")));
    } else {
        out!("{}", crate::names::printable_lines(&crate::report::generations_text::render(&r)));
    }
    ExitCode::from(exit::OK)
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
            u.memory_bytes += p.rss_bytes + p.swap_bytes();
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
fn session(procfs: &ProcFs, id: Identity) -> Option<String> {
    session_in_environ(&procfs.environ(id, ENVIRON_MAX)?, SESSION_VAR)
}
