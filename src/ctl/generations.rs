//! `reaperctl generations`: read-only, like `scan`. Judges the machine now,
//! groups each live host's server copies ([`crate::policy::generations`]),
//! reads each copy's evidence from `/proc` and prints it (issue 35 item 1).
//!
//! The per-copy reads live here, not in `scan/`, because only this command
//! asks for them today; the daemon's sampling (item 1's idle counting) will
//! want them in `scan/`. Every read is of a user's process, so hostile:
//! bounded, through a `/proc/PID` dirfd whose start time was checked (a
//! reused pid reads as nothing), and of the environment only one variable,
//! validated.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::process::ExitCode;

use rustix::fs::{Mode, OFlags};

use super::{Cli, ScanArgs, assess_now};
use crate::exit;
use crate::ids::Identity;
use crate::policy::generations::{Group, generations, session_in_environ};
use crate::report::generations::Usage;
use crate::scan::{ProcFs, Snapshot};
use crate::stdout::{out, outln};

/// The variable Claude Code names its session in, in its stdio servers'
/// environment (2.1.154 and later).
pub const SESSION_VAR: &str = "CLAUDE_CODE_SESSION_ID";

/// Environments are read this far at most: the variable is looked for in
/// the first 256 KiB (a server whose environment is bigger and puts it past
/// that shows no session; nothing else is concluded from it).
const ENVIRON_MAX: usize = 256 * 1024;
/// `stat` and `io` are a few hundred bytes.
const SMALL_MAX: usize = 4096;

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
    let mut buf = Vec::with_capacity(SMALL_MAX);
    for &m in members {
        let p = &snap.procs[m];
        if let Some(r) = procfs.rollup(p.id) {
            u.memory_bytes += r.pss_bytes + r.swap_pss_bytes;
        } else {
            u.memory_fallbacks += 1;
            u.memory_bytes += p.rss_bytes + p.swap_bytes();
        }
        let Some(dir) = open_verified(procfs, p.id, &mut buf) else {
            u.io_unreadable += 1;
            continue;
        };
        if let Some(t) = cpu_ticks(&buf) {
            *u.cpu_ticks.get_or_insert(0) += t;
        }
        match read_at(&dir, "io", &mut buf, SMALL_MAX).map(|()| io_counters(&buf)) {
            Some((Some(r), Some(w))) => {
                *u.rchar.get_or_insert(0) += r;
                *u.wchar.get_or_insert(0) += w;
            }
            _ => u.io_unreadable += 1,
        }
    }
    u
}

/// The session a copy's root names in its environment, validated.
fn session(procfs: &ProcFs, id: Identity) -> Option<String> {
    let mut buf = Vec::new();
    let dir = open_verified(procfs, id, &mut buf)?;
    read_at(&dir, "environ", &mut buf, ENVIRON_MAX)?;
    buf.truncate(ENVIRON_MAX);
    session_in_environ(&buf, SESSION_VAR)
}

/// The `/proc/PID` dirfd of `id`, checked through that fd to be the process
/// with `id`'s start time; `buf` holds its `stat` after.
fn open_verified(procfs: &ProcFs, id: Identity, buf: &mut Vec<u8>) -> Option<OwnedFd> {
    let path = procfs.root().join(id.pid.to_string());
    let dir = rustix::fs::open(&path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    read_at(&dir, "stat", buf, SMALL_MAX)?;
    (crate::scan::parse::parse_stat(buf).ok()?.start_time == id.start_time.0).then_some(dir)
}

/// At most `limit` bytes of `name` below a `/proc/PID` dirfd.
fn read_at(dir: &OwnedFd, name: &str, buf: &mut Vec<u8>, limit: usize) -> Option<()> {
    buf.clear();
    let fd = rustix::fs::openat(dir.as_fd(), name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let mut chunk = [0u8; 4096];
    while buf.len() < limit {
        match rustix::io::read(&fd, &mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    Some(())
}

/// utime + stime (fields 14 and 15 of `stat`), counted after the last `)`:
/// comm may hold anything, `)` and spaces included.
fn cpu_ticks(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut f = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// `rchar` and `wchar` of `/proc/PID/io`.
fn io_counters(io: &[u8]) -> (Option<u64>, Option<u64>) {
    let text = String::from_utf8_lossy(io);
    let field =
        |name: &str| text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse::<u64>().ok());
    (field("rchar"), field("wchar"))
}

#[cfg(test)]
mod tests {
    use super::{cpu_ticks, io_counters};

    #[test]
    fn cpu_time_is_counted_past_a_hostile_comm() {
        let stat = b"42 (a) S 1 2 3 (b) S 1 42 42 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 1 0 900 1000 10\n";
        assert_eq!(cpu_ticks(stat), Some(12));
        assert_eq!(cpu_ticks(b"42 (x"), None);
    }

    #[test]
    fn io_counters_by_name() {
        let io = b"rchar: 1234\nwchar: 56\nsyscr: 3\nsyscw: 2\nread_bytes: 0\n";
        assert_eq!(io_counters(io), (Some(1234), Some(56)));
        assert_eq!(io_counters(b"xrchar: 1\n"), (None, None));
    }
}
