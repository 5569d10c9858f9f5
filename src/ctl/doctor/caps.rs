//! The capabilities the system units keep (`CapabilityBoundingSet=` of
//! systemd/mcp-reaper.service and mcp-reaper-once.service), each tried on a
//! process of another uid. A bit in `CapEff` is what the kernel was given,
//! not proof that it lets the access through (a user namespace, an LSM or
//! Yama may still refuse), and a daemon without one of them reaps nothing
//! of other users while looking healthy: so each is tried as the daemon
//! uses it. The one call aimed at another process is `kill(pid, 0)`, which
//! asks whether a signal would be allowed and sends none.

use std::io;

use super::check::{Check, missing, ok, warn};
use super::other_uid::{self, Tried};
use crate::config::Config;

pub const CAP_DAC_OVERRIDE: u32 = 1;
pub const CAP_DAC_READ_SEARCH: u32 = 2;
pub const CAP_KILL: u32 = 5;
pub const CAP_NET_ADMIN: u32 = 12;
pub const CAP_SYS_PTRACE: u32 = 19;

/// Effective capabilities of this process (`CapEff` in /proc/self/status).
pub fn effective() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or(0)
}

/// One capability the units keep: how the daemon uses it on another
/// uid's process, and what a system daemon without it loses.
struct Kept {
    name: &'static str,
    bit: u32,
    doing: fn(i32) -> String,
    attempt: fn(i32) -> io::Result<()>,
    /// Broader capabilities that also let the access through, which the
    /// units do not keep (root outside them holds all).
    broader: &'static [(&'static str, u32)],
    cost: &'static str,
}

/// Costs as measured: a uid-65534 orphan, `reaperctl scan` and
/// `mcp-reaperd --once` run as root under `setpriv --bounding-set` without
/// each (packaging/README.md has the probe's table).
const KEPT: [Kept; 3] = [
    Kept {
        name: "CAP_KILL",
        bit: CAP_KILL,
        doing: |pid| format!("kill({pid}, 0) (no signal sent)"),
        attempt: |pid| {
            let pid = rustix::process::Pid::from_raw(pid).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
            rustix::process::test_kill_process(pid).map_err(io::Error::from)
        },
        broader: &[],
        cost: "SIGTERM and SIGKILL to another user's process fail with EPERM: other users' orphaned trees are \
               judged due, then every reap of them fails (`reaperctl history` shows the errors); none is ended",
    },
    Kept {
        name: "CAP_SYS_PTRACE",
        bit: CAP_SYS_PTRACE,
        doing: |pid| format!("readlink /proc/{pid}/exe"),
        attempt: |pid| std::fs::read_link(format!("/proc/{pid}/exe")).map(drop),
        broader: &[],
        cost: "another user's /proc/PID/exe, fd/N, ns/pid and smaps_rollup cannot be read (EACCES): their \
               servers' stdio is unknown, so every tree of theirs is kept as protected (\"cannot read the stdio \
               (fd 0, 1)\") and never reaped",
    },
    Kept {
        name: "CAP_DAC_READ_SEARCH",
        bit: CAP_DAC_READ_SEARCH,
        doing: |pid| format!("opening /proc/{pid}/fd/"),
        attempt: |pid| std::fs::read_dir(format!("/proc/{pid}/fd")).map(drop),
        broader: &[("CAP_DAC_OVERRIDE", CAP_DAC_OVERRIDE)],
        cost: "another user's /proc/PID/fd/ cannot be searched (EACCES, whatever CAP_SYS_PTRACE allows): their \
               servers' stdio is unknown, so every tree of theirs is kept as protected (\"cannot read the stdio \
               (fd 0, 1)\") and never reaped",
    },
];

/// The `privileges` check and, for root (the daemon's system mode), one
/// check per capability the units keep.
pub fn checks(cfg: &Config) -> Vec<Check> {
    let uid = rustix::process::geteuid().as_raw();
    if uid != 0 {
        // A daemon that is not root runs in user mode: its own uid's trees
        // only, for which it needs no capability.
        return vec![warn(
            "privileges",
            format!("uid {uid}: user mode"),
            format!(
                "only uid {uid}'s own trees are reaped; other users' processes are judged from what /proc shows \
                 everyone, their stdio and environment unread (run the system daemon as root for the whole machine)"
            ),
        )];
    }
    let caps = effective();
    let targets = other_uid::find(uid);
    let mut all = vec![ok(
        "privileges",
        format!("root: system mode, the trees of every uid \u{2265} {} (CapEff {caps:#018x})", cfg.min_uid),
    )];
    all.extend(KEPT.iter().map(|k| judge(k, caps, other_uid::attempt(&targets, k.doing, k.attempt))));
    all
}

fn judge(k: &Kept, caps: u64, tried: Tried) -> Check {
    let has = |bit: u32| caps & (1 << bit) != 0;
    let held = has(k.bit);
    match tried {
        Tried::Worked(said) if held => ok(k.name, format!("in CapEff; {said} works")),
        Tried::Worked(said) => {
            let through: Vec<&str> = k.broader.iter().filter(|(_, bit)| has(*bit)).map(|(name, _)| *name).collect();
            let why = if through.is_empty() {
                String::new()
            } else {
                format!(", through {}, which the units do not keep", through.join(" and "))
            };
            ok(k.name, format!("not in CapEff; {said} works{why}"))
        }
        Tried::Denied(said, e) if held => missing(
            k.name,
            format!("in CapEff, yet {said} failed: {e} (a user namespace, an LSM or Yama refuses it)"),
            k.cost,
        ),
        Tried::Denied(said, e) => missing(k.name, format!("not in CapEff; {said} failed: {e}"), k.cost),
        Tried::NoTarget if held => ok(k.name, "in CapEff (no process of another uid runs to try it on)"),
        Tried::NoTarget => missing(k.name, "not in CapEff (no process of another uid runs to try it on)", k.cost),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctl::doctor::check::Health;

    /// The capabilities a unit names in `key=` lines.
    fn listed(unit: &str, key: &str) -> Vec<String> {
        let mut caps: Vec<String> = unit
            .lines()
            .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .flat_map(|v| v.split_ascii_whitespace().map(str::to_string))
            .collect();
        caps.sort();
        caps
    }

    #[test]
    fn every_capability_a_system_unit_keeps_is_checked() {
        let mut checked: Vec<String> = KEPT.iter().map(|k| k.name.to_string()).collect();
        checked.sort();
        for unit in [
            include_str!("../../../systemd/mcp-reaper.service"),
            include_str!("../../../systemd/mcp-reaper-once.service"),
        ] {
            assert_eq!(listed(unit, "CapabilityBoundingSet"), checked);
            for cap in listed(unit, "AmbientCapabilities") {
                assert!(checked.contains(&cap), "{cap} is given but not checked");
            }
        }
    }

    #[test]
    fn a_capability_is_judged_by_what_trying_it_showed() {
        const HELD: u64 = 1 << CAP_DAC_READ_SEARCH;
        let k = &KEPT[2];
        let denied = || {
            Tried::Denied(
                "opening /proc/7/fd/ of pid 7 (sleep, uid 1000)".into(),
                io::Error::from_raw_os_error(libc::EACCES),
            )
        };
        let c = judge(k, 0, denied());
        assert_eq!(c.health, Health::Missing);
        assert_eq!(c.name, "CAP_DAC_READ_SEARCH");
        assert!(
            c.found
                .starts_with("not in CapEff; opening /proc/7/fd/ of pid 7 (sleep, uid 1000) failed: Permission denied"),
            "{}",
            c.found
        );
        assert!(c.cost.unwrap().contains("never reaped"));
        let c = judge(k, HELD, denied());
        assert_eq!(c.health, Health::Missing);
        assert!(c.found.starts_with("in CapEff, yet opening"), "{}", c.found);
        let c = judge(k, HELD, Tried::Worked("opening /proc/7/fd/ of pid 7 (sleep, uid 1000)".into()));
        assert_eq!(
            (c.health, c.found.as_str()),
            (Health::Ok, "in CapEff; opening /proc/7/fd/ of pid 7 (sleep, uid 1000) works")
        );
        let c = judge(k, 1 << CAP_DAC_OVERRIDE, Tried::Worked("opening /proc/7/fd/ of pid 7 (sleep, uid 1000)".into()));
        assert_eq!(c.health, Health::Ok);
        assert!(c.found.ends_with("works, through CAP_DAC_OVERRIDE, which the units do not keep"), "{}", c.found);
        assert_eq!(judge(k, HELD, Tried::NoTarget).health, Health::Ok);
        assert_eq!(judge(k, 0, Tried::NoTarget).health, Health::Missing);
    }
}
