//! A process of another uid for the capability checks to try their access
//! on: what the daemon does to other users' processes only works, or
//! fails, against one (root's own processes would let anything through).

use std::io;

/// A process whose `/proc/PID/` entries belong to a uid other than ours.
#[derive(Clone, Debug)]
pub struct Target {
    pub pid: i32,
    pub uid: u32,
    pub comm: String,
}

impl Target {
    /// How a finding names it: `pid 1234 (sleep, uid 1000)`. Escaped
    /// with the rest of doctor's output.
    pub fn describe(&self) -> String {
        format!("pid {} ({}, uid {})", self.pid, self.comm, self.uid)
    }
}

/// Enough to get past processes that exit while they are tried.
const MOST: usize = 8;

/// Up to [`MOST`] live user processes of uids other than `me`, lowest pid
/// first. Only those whose `fd/` directory belongs to their own uid: a
/// process that made itself non-dumpable (ssh-agent, setuid programs) has
/// `/proc/PID/` owned by root, where root needs no capability to search.
pub fn find(me: u32) -> Vec<Target> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut pids: Vec<i32> =
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).filter(|&p: &i32| p > 0).collect();
    pids.sort_unstable();
    pids.into_iter().filter_map(|pid| target(pid, me)).take(MOST).collect()
}

fn target(pid: i32, me: u32) -> Option<Target> {
    use std::os::unix::fs::MetadataExt as _;
    let owner = std::fs::metadata(format!("/proc/{pid}/fd")).ok()?.uid();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    // Real, effective, saved and filesystem uid alike: a set-uid program
    // that kept root as its saved uid may be signalled by root without
    // CAP_KILL.
    let uids: Vec<u32> = field("Uid:")?.split_ascii_whitespace().map(str::parse).collect::<Result<_, _>>().ok()?;
    let euid = *uids.get(1)?;
    if uids.iter().any(|&u| u != euid) {
        return None;
    }
    // Kernel threads have no command line; a zombie has no fds to look at.
    let live = !field("State:")?.starts_with('Z');
    let user = std::fs::read(format!("/proc/{pid}/cmdline")).ok().is_some_and(|c| !c.is_empty());
    let comm = field("Name:")?.to_string();
    (owner == euid && euid != me && live && user).then_some(Target { pid, uid: euid, comm })
}

/// What trying one operation on the targets showed.
#[derive(Debug)]
pub enum Tried {
    /// It worked on this target.
    Worked(String),
    /// The kernel refused it (the target still there): what, and why.
    Denied(String, io::Error),
    /// No target of another uid was there (or each exited first).
    NoTarget,
}

/// Runs `what` on the first target still alive; `doing` names the
/// operation for a pid (`readlink /proc/1234/exe`).
pub fn attempt(targets: &[Target], doing: impl Fn(i32) -> String, what: impl Fn(i32) -> io::Result<()>) -> Tried {
    for t in targets {
        let said = format!("{} of {}", doing(t.pid), t.describe());
        match what(t.pid) {
            Ok(()) => return Tried::Worked(said),
            // Gone since it was found: the next one.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => {}
            Err(e) => return Tried::Denied(said, e),
        }
    }
    Tried::NoTarget
}
