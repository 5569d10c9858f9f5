//! Parsers for the few `/proc` files the reaper reads. They take bytes and never
//! panic: a process may write anything into its `comm` and argv.

use std::fmt;

use super::comm::Comm;

mod cgroup;
pub use cgroup::{Mount, cgroup_mounts, cgroup_unit, container_of, container_ref, mounts, pod_of};

/// What `/proc/PID/stat` tells us. Field numbers follow proc(5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    pub pid: i32,
    /// Field 2 without the parentheses, lossily decoded. May contain anything.
    pub comm: Comm,
    pub state: u8,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    pub tty_nr: u32,
    pub flags: u32,
    pub num_threads: i64,
    pub start_time: u64,
    /// Resident set size in pages.
    pub rss_pages: u64,
    /// Field 28 (see [`stat_start_stack`]); 0 when missing or hidden.
    pub start_stack: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub what: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed {}", self.what)
    }
}

impl std::error::Error for ParseError {}

fn bad(what: &'static str) -> ParseError {
    ParseError { what }
}

/// `PF_KTHREAD` from include/linux/sched.h.
pub const PF_KTHREAD: u32 = 0x0020_0000;

/// Parses `/proc/PID/stat`. The comm field is delimited by the first `(` and the
/// *last* `)`: the kernel does not escape it, so `a) S (b` is a legal comm.
pub fn parse_stat(buf: &[u8]) -> Result<Stat, ParseError> {
    let open = buf.iter().position(|&b| b == b'(').ok_or(bad("stat: no '('"))?;
    let close = buf.iter().rposition(|&b| b == b')').ok_or(bad("stat: no ')'"))?;
    if close < open {
        return Err(bad("stat: ')' before '('"));
    }
    // The kernel never writes a pid below 1; a Stat with one would name a process group or everyone.
    let pid = parse_num::<i32>(trim_ascii(&buf[..open])).filter(|&p| p > 0).ok_or(bad("stat: pid"))?;
    let comm = Comm::from_bytes(&buf[open + 1..close]);
    let mut rest = buf[close + 1..].split(u8::is_ascii_whitespace).filter(|f| !f.is_empty());
    // After the comm, field 3 (state) is index 0.
    let mut field = |n: usize| -> Option<&[u8]> {
        // `n` counts from field 3; callers ask in increasing order.
        rest.nth(n)
    };
    let state = *field(0).and_then(|f| f.first()).ok_or(bad("stat: state"))?;
    let ppid = num(field(0), "stat: ppid")?;
    let pgrp = num(field(0), "stat: pgrp")?;
    let session = num(field(0), "stat: session")?;
    // tty_nr is a dev_t printed as a signed int.
    let tty_nr = num::<i32>(field(0), "stat: tty_nr")?.cast_unsigned();
    let flags = num::<u32>(field(1), "stat: flags")?; // skip tpgid
    let num_threads = num::<i64>(field(10), "stat: num_threads")?; // fields 10..19 skipped
    let start_time = num::<u64>(field(1), "stat: starttime")?; // skip itrealvalue
    let rss_pages = u64::try_from(num::<i64>(field(1), "stat: rss")?).unwrap_or(0); // skip vsize
    // Skip rsslim, startcode, endcode. Old fixtures end before it.
    let start_stack = field(3).and_then(parse_num).unwrap_or(0);
    Ok(Stat { pid, comm, state, ppid, pgrp, session, tty_nr, flags, num_threads, start_time, rss_pages, start_stack })
}

/// Field 28 of `stat` (`startstack`): where the main stack starts. Set at
/// exec (randomized), copied by fork: a child whose `startstack` and comm
/// are its parent's has not exec'd. Zero when the reader may not trace the
/// process; `None` when missing.
pub fn stat_start_stack(buf: &[u8]) -> Option<u64> {
    stat_field(buf, 28)
}

/// Whether a `stat` line is a thread's that does not lead its group (field
/// 38, `exit_signal`, is -1 only for those): `/proc/TID` answers for any
/// thread though it is not listed, and a pid read from the pid counter may
/// be one. A thread is no process.
pub fn stat_is_thread(buf: &[u8]) -> bool {
    stat_field::<i64>(buf, 38) == Some(-1)
}

/// Field `n` (counted as in proc(5)) of a `stat` line.
fn stat_field<T: std::str::FromStr>(buf: &[u8], n: usize) -> Option<T> {
    let close = buf.iter().rposition(|&b| b == b')')?;
    let mut rest = buf[close + 1..].split(u8::is_ascii_whitespace).filter(|f| !f.is_empty());
    parse_num(rest.nth(n - 3)?)
}

fn num<T: std::str::FromStr>(f: Option<&[u8]>, what: &'static str) -> Result<T, ParseError> {
    f.and_then(parse_num).ok_or(bad(what))
}

fn parse_num<T: std::str::FromStr>(f: &[u8]) -> Option<T> {
    std::str::from_utf8(f).ok()?.parse().ok()
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

/// The lines of `/proc/PID/status` the reaper uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub real_uid: Option<u32>,
    pub vm_swap_bytes: Option<u64>,
    pub vm_rss_bytes: Option<u64>,
    /// Number of entries on the `NSpid:` line: how deep in nested PID namespaces
    /// the process lives, counted from the namespace this /proc belongs to.
    pub nspid_depth: Option<usize>,
    /// The last entry of `NSpid:`: the pid in its own, innermost namespace
    /// (1 for a namespace's init).
    pub nspid_inner: Option<u32>,
}

/// Parses `/proc/PID/status`. Unknown or malformed lines are ignored: the file's
/// format grows with the kernel. The `Name:` line is escaped by the kernel, but
/// we never need it (stat's comm is enough).
pub fn parse_status(buf: &[u8]) -> Status {
    let mut s = Status::default();
    for line in buf.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (key, val) = (&line[..colon], &line[colon + 1..]);
        match key {
            b"Uid" => s.real_uid = first_num(val),
            b"VmSwap" => s.vm_swap_bytes = kib(val),
            b"VmRSS" => s.vm_rss_bytes = kib(val),
            b"NSpid" => {
                let mut pids = val.split(u8::is_ascii_whitespace).filter(|f| !f.is_empty());
                s.nspid_depth = Some(pids.clone().count());
                s.nspid_inner = pids.next_back().and_then(parse_num);
            }
            _ => {}
        }
    }
    s
}

fn first_num<T: std::str::FromStr>(val: &[u8]) -> Option<T> {
    val.split(u8::is_ascii_whitespace).find(|f| !f.is_empty()).and_then(parse_num)
}

/// `"   1234 kB"` → bytes.
fn kib(val: &[u8]) -> Option<u64> {
    first_num::<u64>(val).map(|k| k.saturating_mul(1024))
}

/// Proportional memory from `/proc/PID/smaps_rollup`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rollup {
    pub pss_bytes: u64,
    pub swap_pss_bytes: u64,
}

pub fn parse_smaps_rollup(buf: &[u8]) -> Option<Rollup> {
    let mut pss = None;
    let mut swap_pss = None;
    for line in buf.split(|&b| b == b'\n') {
        if let Some(v) = line.strip_prefix(b"Pss:") {
            pss = kib(v);
        } else if let Some(v) = line.strip_prefix(b"SwapPss:") {
            swap_pss = kib(v);
        }
    }
    Some(Rollup { pss_bytes: pss?, swap_pss_bytes: swap_pss.unwrap_or(0) })
}

/// System-wide figures from `/proc/meminfo`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemInfo {
    pub mem_available_bytes: u64,
    pub swap_free_bytes: u64,
}

pub fn parse_meminfo(buf: &[u8]) -> MemInfo {
    let mut m = MemInfo::default();
    for line in buf.split(|&b| b == b'\n') {
        if let Some(v) = line.strip_prefix(b"MemAvailable:") {
            m.mem_available_bytes = kib(v).unwrap_or(0);
        } else if let Some(v) = line.strip_prefix(b"SwapFree:") {
            m.swap_free_bytes = kib(v).unwrap_or(0);
        }
    }
    m
}

/// `/proc/loadavg` (`0.97 0.94 1.00 2/345 12345`): the pid most recently
/// allocated (fifth field) and the number of tasks (the fourth's total,
/// after `running/`). One parser for every reader of the counter, so they
/// cannot disagree on what a well-formed line is.
pub(crate) fn parse_loadavg(text: &str) -> Option<(i32, u32)> {
    let mut f = text.split_whitespace().skip(3);
    let tasks = f.next()?.split_once('/')?.1.parse().ok()?;
    Some((f.next()?.parse().ok()?, tasks))
}

/// NUL-separated argv → one line, args joined by single spaces, lossily decoded.
/// A process that rewrote its argv (node, npm set the title) may leave no NULs
/// between words, or trailing NULs: both come out as expected.
pub fn join_cmdline(buf: &[u8]) -> String {
    join_argv(buf, &mut Vec::new())
}

/// [`join_cmdline`], noting where each argv element lies in the joined text.
/// [`join_argv`] of at most the first `keep` bytes of a `cmdline` (`buf`
/// may hold more: then the line was longer). Only whole arguments are kept;
/// a line that did not fit ends in ` …`, outside every span.
pub fn join_argv_kept(buf: &[u8], keep: usize, spans: &mut Vec<crate::program::Span>) -> String {
    if buf.len() <= keep {
        return join_argv(buf, spans);
    }
    // The arguments that end (with their NUL) within `keep` bytes.
    let whole = buf[..keep].iter().rposition(|&b| b == 0).map_or(0, |i| i + 1);
    let mut text = join_argv(&buf[..whole], spans);
    text.push_str(if text.is_empty() { "…" } else { " …" });
    text
}

pub fn join_argv(buf: &[u8], spans: &mut Vec<crate::program::Span>) -> String {
    spans.clear();
    let mut out = String::with_capacity(buf.len());
    for arg in buf.split(|&b| b == 0) {
        if arg.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        let start = out.len();
        out.push_str(&String::from_utf8_lossy(arg));
        spans.push(crate::program::Span::new(start, out.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &[u8] = b"4242 (npm exec @playwri) S 1 4242 4242 0 -1 4194560 1 0 0 0 3 1 0 0 20 0 11 0 123456 1000 2500 18446744073709551615\n";

    #[test]
    fn a_long_argv_keeps_whole_arguments() {
        let mut spans = Vec::new();
        let buf = b"node\0/x/.bin/srv\0AAAAAAAAAA\0B";
        // Fits: as it is.
        assert_eq!(join_argv_kept(buf, buf.len(), &mut spans), "node /x/.bin/srv AAAAAAAAAA B");
        // Cut inside the third argument: it goes whole, and the line says so.
        assert_eq!(join_argv_kept(buf, 20, &mut spans), "node /x/.bin/srv …");
        assert_eq!(spans.len(), 2);
        // argv[0] alone is too long: nothing of it is a program.
        assert_eq!(join_argv_kept(buf, 3, &mut spans), "…");
        assert!(spans.is_empty());
    }

    #[test]
    fn stat_plain() {
        let s = parse_stat(STAT).unwrap();
        assert_eq!(s.pid, 4242);
        assert_eq!(s.comm, "npm exec @playwri");
        assert_eq!(s.state, b'S');
        assert_eq!((s.ppid, s.pgrp, s.session, s.tty_nr), (1, 4242, 4242, 0));
        assert_eq!(s.flags, 4194560);
        assert_eq!(s.num_threads, 11);
        assert_eq!(s.start_time, 123456);
        assert_eq!(s.rss_pages, 2500);
    }

    #[test]
    fn stat_hostile_comm() {
        let s = parse_stat(b"7 (a) S (b) R 3 4 5 34817 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 7\n").unwrap();
        assert_eq!(s.comm, "a) S (b");
        assert_eq!(s.state, b'R');
        assert_eq!(s.ppid, 3);
        assert_eq!(s.tty_nr, 34817);
        assert_eq!(s.start_time, 99);
        let s = parse_stat(b"8 (x\ny) ) Z 1 8 8 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n").unwrap();
        assert_eq!(s.comm, "x\ny) ");
        assert_eq!(s.state, b'Z');
    }

    #[test]
    fn stat_garbage_is_an_error_not_a_panic() {
        for junk in [&b""[..], b"12", b"12 (x", b"12 x) S", b"12 (x) S 1", b")(", b"(\xff) S 1 2 3 4 5 6"] {
            assert!(parse_stat(junk).is_err(), "{junk:?}");
        }
    }

    #[test]
    fn status_fields() {
        let s = parse_status(
            b"Name:\tnode\nUid:\t1000\t1000\t1000\t1000\nNSpid:\t812\t1\nVmRSS:\t  2048 kB\nVmSwap:\t  4 kB\n",
        );
        assert_eq!(s.real_uid, Some(1000));
        assert_eq!(s.vm_swap_bytes, Some(4096));
        assert_eq!(s.vm_rss_bytes, Some(2048 * 1024));
        assert_eq!(s.nspid_depth, Some(2));
        assert_eq!(s.nspid_inner, Some(1));
        assert_eq!(parse_status(b"\xff\xfe:\n::"), Status::default());
    }

    #[test]
    fn rollup_and_meminfo() {
        let r =
            parse_smaps_rollup(b"55d0-7ff [rollup]\nRss: 100 kB\nPss: 80 kB\nSwap: 10 kB\nSwapPss: 6 kB\n").unwrap();
        assert_eq!(r, Rollup { pss_bytes: 80 * 1024, swap_pss_bytes: 6 * 1024 });
        assert_eq!(parse_smaps_rollup(b""), None);
        let m = parse_meminfo(b"MemTotal: 10 kB\nMemAvailable:  7 kB\nSwapFree: 3 kB\n");
        assert_eq!(m, MemInfo { mem_available_bytes: 7168, swap_free_bytes: 3072 });
    }

    #[test]
    fn cmdline_joining() {
        assert_eq!(join_cmdline(b"npm\0exec\0@playwright/mcp\0"), "npm exec @playwright/mcp");
        assert_eq!(join_cmdline(b"node title rewritten\0\0\0"), "node title rewritten");
        assert_eq!(join_cmdline(b"py\0\xffbad\0"), "py \u{fffd}bad");
        assert_eq!(join_cmdline(b""), "");
    }

    #[test]
    fn loadavg_gives_the_last_pid_and_the_tasks() {
        assert_eq!(parse_loadavg("0.97 0.94 1.00 2/345 12345\n"), Some((12345, 345)));
        // Too short, no `running/total`, a total or a pid that is no number.
        let bad = ["", "0.97 0.94 1.00 2/345", "0.97 0.94 1.00 345 12345", "0 0 0 2/x 12345", "0 0 0 1/2 pid"];
        for text in bad {
            assert_eq!(parse_loadavg(text), None, "{text:?}");
        }
    }
}
