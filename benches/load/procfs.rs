//! What the bench reads from /proc, and pidfds.

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid as RPid, PidfdFlags};

pub(crate) fn status_number(pid: i32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.split_whitespace().next()?.parse().ok()))
        .unwrap_or(0)
}

/// (utime, stime) in clock ticks.
pub(crate) fn cpu_split(pid: i32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit_once(')').map_or("", |x| x.1);
    let f: Vec<&str> = after.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (n(11), n(12))
}

pub(crate) fn cpu_ticks(pid: i32) -> u64 {
    let (u, s) = cpu_split(pid);
    u + s
}

pub(crate) fn ppid_of(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// Pss + `SwapPss` in bytes, from `smaps_rollup`.
pub(crate) fn pss_swap_pss(pid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let kib = |key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.split_whitespace().next()?.parse().ok()))
            .unwrap_or(0)
    };
    (kib("Pss:") + kib("SwapPss:")) * 1024
}

pub(crate) fn meminfo_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.split_whitespace().next()?.parse().ok()))
        .unwrap_or(0)
}

pub(crate) fn read_num(path: &str) -> u64 {
    std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// Every strict descendant of `root`, by ppid links, as of now.
pub(crate) fn descendants_of(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if let Some(pp) = ppid_of(pid) {
            children.entry(pp).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    let mut seen = HashSet::new();
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            if c != root && seen.insert(c) {
                out.push(c);
                stack.push(c);
            }
        }
    }
    out
}

pub(crate) fn pidfd(pid: i32) -> Option<OwnedFd> {
    rustix::process::pidfd_open(RPid::from_raw(pid)?, PidfdFlags::empty()).ok()
}

/// Whether the process behind `fd` has exited (zombie or reaped).
pub(crate) fn exited(fd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let ts = rustix::fs::Timespec { tv_sec: 0, tv_nsec: 0 };
    matches!(rustix::event::poll(&mut fds, Some(&ts)), Ok(n) if n > 0)
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of `Instant` and of the
/// nodes' `term` lines.
pub(crate) fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}
