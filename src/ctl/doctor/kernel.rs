//! What the kernel gives the reaper: a readable `/proc`, pidfds, process
//! events, cgroup v2 and memory pressure (PSI).

use std::path::Path;

use super::caps;
use super::check::{Check, missing, ok, warn};
use crate::config::Config;

pub fn procfs() -> Check {
    let procfs = crate::scan::ProcFs::new(Path::new("/proc"));
    if std::fs::read_to_string("/proc/self/stat").is_err() {
        return missing("/proc", "cannot read /proc/self/stat", "nothing can be scanned: no tree is seen or reaped");
    }
    match procfs.hidden_notice() {
        Some(note) => warn("/proc", "mounted with hidepid", note),
        None => ok("/proc", "every process visible"),
    }
}

pub fn pidfds() -> Check {
    let me = crate::ids::Pid::new(rustix::process::getpid().as_raw_nonzero().get()).expect("our own pid");
    match crate::sys::pidfd_open(me) {
        Ok(_) => ok("pidfds", "pidfd_open works"),
        Err(e) => missing(
            "pidfds",
            format!("pidfd_open failed: {e}"),
            "no signal can be tied to the process it was meant for, so none is sent: nothing is reaped \
             (Linux 5.3 or later is needed)",
        ),
    }
}

pub fn events(cfg: &Config) -> Check {
    use crate::scan::events::Connector;
    let opened = Connector::open().and_then(|fd| {
        Connector::prove(std::os::fd::AsFd::as_fd(&fd), std::time::Duration::from_millis(100)).map(|()| fd)
    });
    match opened {
        Ok(_) => ok("process events", "the kernel's proc connector delivers"),
        Err(e) => {
            let why = if caps::effective() & (1 << caps::CAP_NET_ADMIN) == 0 { " (needs CAP_NET_ADMIN)" } else { "" };
            warn(
                "process events",
                format!("proc connector unavailable: {e}{why}"),
                format!(
                    "the daemon watches hosts with pidfds and scans every {}s: an orphan whose host it did not \
                     watch waits for the next scan",
                    cfg.interval_secs
                ),
            )
        }
    }
}

pub fn cgroups() -> Check {
    match crate::session::cgroup::Hierarchy::find() {
        Some(h) if h.mount == Path::new("/sys/fs/cgroup") => ok("cgroups", "cgroup v2 (unified) at /sys/fs/cgroup"),
        Some(h) => ok("cgroups", format!("cgroup v2 at {} (hybrid or nested)", h.mount.display())),
        None => warn(
            "cgroups",
            "no cgroup v2 mount",
            "`reaperctl run` sessions cannot be kept in a cgroup of their own (what they leave is found by \
             ancestry alone), and memory is read from each process instead of its cgroup",
        ),
    }
}

pub fn pressure(cfg: &Config) -> Check {
    let Some(file) = cfg.pressure.file() else {
        return ok("memory pressure", "off by configuration ([pressure] enabled = false)");
    };
    match crate::scan::pressure::read(&file) {
        Ok(p) => ok("memory pressure", format!("{}: some avg10={:.1}%", file.display(), p.some_avg10)),
        Err(e) => warn(
            "memory pressure",
            format!("cannot read {}: {e}", file.display()),
            "orphans always wait out their grace, even while memory runs out (PSI needs CONFIG_PSI, and psi=1 \
             where the kernel turns it off by default)",
        ),
    }
}
