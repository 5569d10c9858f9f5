//! What a scan produces: [`Snapshot`] of [`Process`]es, their second-tier
//! [`Details`], and the small types those are made of (the second tier's in
//! `process/details.rs`). No reading here.

use std::sync::Arc;
use std::time::SystemTime;

use crate::ids::{Identity, Pid, Uid};
use crate::program::Program;

mod details;
pub use details::{CgroupContainer, Details, FdKind, FdTarget, HighLink, Holder, Listening, StdinEnd, Transport, Unit};

/// Process state letter from `stat` field 3 (an ASCII letter: one byte,
/// not a 4-byte `char`, in each process of a snapshot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcState(pub u8);

impl ProcState {
    pub fn is_zombie(self) -> bool {
        matches!(self.0, b'Z' | b'X' | b'x')
    }
    /// Uninterruptible sleep: not even SIGKILL acts until it returns.
    pub fn is_uninterruptible(self) -> bool {
        self.0 == b'D'
    }
    pub fn as_char(self) -> char {
        char::from(self.0)
    }
}

/// One process as first read.
#[derive(Clone, Debug)]
pub struct Process {
    pub id: Identity,
    /// `None` for PID 1 and kernel roots (ppid 0) and for parents outside our namespace.
    pub ppid: Option<Pid>,
    pub pgid: Option<Pid>,
    pub sid: Option<Pid>,
    pub tty_nr: u32,
    pub state: ProcState,
    pub kernel_thread: bool,
    pub comm: super::Comm,
    /// argv joined by spaces (lossy UTF-8). Empty for kernel threads and zombies.
    /// Raw, secrets included: for matching only; show [`Process::display_cmd`].
    pub cmdline: Arc<str>,
    /// What it runs, as spans of `cmdline` (see [`crate::program`]).
    pub program: Program,
    /// Resident memory in KiB (4 bytes where bytes took 8; 4 TiB at most).
    pub rss_kib: u32,
    /// Boxed: most processes never get details, and a snapshot holds thousands.
    pub details: Option<Box<Details>>,
    /// Its role from the command line alone, kept with the command line
    /// across scans (see [`crate::config::Matcher::classify_cached`]).
    pub role: Option<crate::role::CachedRole>,
    /// Inode of its `/proc/PID` directory as listed (0 when unknown). 32
    /// bits: procfs numbers its inodes with `get_next_ino`, an `unsigned int`.
    pub dir_ino: u32,
    /// Its `startstack` folded to 32 bits ([`exec_mark`]): a read that takes
    /// the command line over when the comm is unchanged also wants this
    /// unchanged, which tells an exec that kept its comm (`node` → `node`).
    pub exec_mark: u32,
    /// Clock tick (since boot) at which this process was last seen holding
    /// its pid, taken before the read. See [`Process::identity_settled`].
    pub checked_tick: u64,
}

/// Processes as unit tests build them, without /proc.
#[cfg(test)]
impl Process {
    /// Sleeping, in a session and group of its own, no details, read long
    /// after it started; its comm is the base name of `cmd`'s first word.
    pub(crate) fn synthetic(pid: i32, ppid: i32, start_time: u64, cmd: &str) -> Process {
        let me = Pid::new(pid).expect("a positive pid");
        Process {
            id: Identity { pid: me, start_time: crate::ids::StartTime(start_time) },
            ppid: Pid::new(ppid),
            pgid: Some(me),
            sid: Some(me),
            tty_nr: 0,
            state: ProcState(b'S'),
            kernel_thread: false,
            comm: super::Comm::from(
                &*cmd
                    .split(' ')
                    .next()
                    .unwrap_or("")
                    .rsplit('/')
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(15)
                    .collect::<String>(),
            ),
            cmdline: cmd.into(),
            program: crate::program::Program::of_joined(cmd),
            rss_kib: 0,
            details: None,
            role: None,
            dir_ino: 0,
            exec_mark: 0,
            checked_tick: u64::MAX,
        }
    }
}

impl Process {
    pub fn pid(&self) -> Pid {
        self.id.pid
    }

    /// What to show: the command line with secrets masked ([`crate::redact`]),
    /// or `[comm]` like ps does. Every command line a human, a log or JSON
    /// sees comes from here; match on the raw `cmdline` instead.
    pub fn display_cmd(&self) -> std::borrow::Cow<'_, str> {
        if self.cmdline.is_empty() {
            crate::redact::redact(&format!("[{}]", self.comm)).into_owned().into()
        } else {
            crate::redact::redact(&self.cmdline)
        }
    }

    /// Resident memory in bytes.
    pub fn rss_bytes(&self) -> u64 {
        u64::from(self.rss_kib) * 1024
    }

    pub fn uid(&self) -> Option<Uid> {
        self.details.as_ref().and_then(|d| d.uid)
    }

    pub fn swap_bytes(&self) -> u64 {
        self.details.as_ref().and_then(|d| d.swap_bytes).unwrap_or(0)
    }

    pub fn exe(&self) -> Option<&str> {
        self.details.as_ref().and_then(|d| d.exe.as_deref())
    }

    /// The container its cgroup names (`containerd 0123456789ab`), when
    /// its details were read.
    pub fn container(&self) -> Option<&str> {
        self.details.as_ref().and_then(|d| d.container.as_ref()).map(|c| c.name.as_str())
    }

    /// The Kubernetes pod its container runs in, by namespace and name,
    /// when the runtime's state names it.
    pub fn pod(&self) -> Option<&super::runtime::PodName> {
        self.details.as_ref().and_then(|d| d.container.as_ref()).and_then(|c| c.pod.as_ref())
    }

    /// The Kubernetes pod UID its cgroup names, when its details were read.
    pub fn pod_uid(&self) -> Option<&str> {
        self.details.as_ref().and_then(|d| d.container.as_ref()).and_then(|c| c.pod_uid.as_deref())
    }

    /// Whether `(pid, start time)` names this process and no other. Start
    /// times count 10 ms ticks, so a process read within its own start tick
    /// could still die and have its pid reused by a newcomer *in that same
    /// tick*, with an identical identity. Once a read that began after the
    /// start tick ended has seen it, any later holder of the pid starts in a
    /// later tick: the identity is unambiguous from then on.
    pub fn identity_settled(&self) -> bool {
        self.id.start_time.0 < self.checked_tick
    }
}

/// `startstack` (`stat` field 28) folded to 32 bits: exec randomizes it
/// (ASLR), fork copies it. Zero when the reader may not trace the process,
/// as for kernel threads: then only the comm tells an exec.
pub fn exec_mark(start_stack: u64) -> u32 {
    let [a, b, c, d, e, f, g, h] = start_stack.to_le_bytes();
    u32::from_le_bytes([a ^ e, b ^ f, c ^ g, d ^ h])
}

/// Clock ticks since boot, on the clock `stat`'s start times count
/// (`CLOCK_BOOTTIME` in `USER_HZ` units, rounded down like the kernel does).
pub fn boot_tick(clk_tck: u64) -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    // CLOCK_BOOTTIME is never negative.
    let ns = u128::from(t.tv_sec.cast_unsigned()) * 1_000_000_000 + u128::from(t.tv_nsec.cast_unsigned());
    u64::try_from(ns * u128::from(clk_tck.max(1)) / 1_000_000_000).unwrap_or(u64::MAX)
}

/// Facts about the scanning process itself and the clock, taken with the snapshot.
#[derive(Clone, Debug, Default)]
pub struct Context {
    pub self_pid: Option<Pid>,
    pub self_pidns: Option<u64>,
    pub self_nspid_depth: Option<usize>,
    pub self_uid: Option<Uid>,
    pub uptime_secs: f64,
    pub clk_tck: u64,
}

/// Every process of the namespace at one moment (as close to one as /proc allows).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Sorted by pid: lookups are binary searches, no index to hold.
    pub procs: Vec<Process>,
    pub ctx: Context,
    pub taken_at: Option<SystemTime>,
}

impl Snapshot {
    /// The snapshot of `procs`, sorted by pid, one process a pid.
    pub fn from_processes(procs: Vec<Process>, ctx: Context) -> Snapshot {
        let mut procs = sorted_by_pid(procs);
        procs.dedup_by_key(|p| p.pid());
        procs.shrink_to_fit();
        Snapshot { procs, ctx, taken_at: Some(SystemTime::now()) }
    }

    pub fn get(&self, pid: Pid) -> Option<&Process> {
        self.index_of(pid).map(|i| &self.procs[i])
    }

    pub fn get_mut(&mut self, pid: Pid) -> Option<&mut Process> {
        self.index_of(pid).map(|i| &mut self.procs[i])
    }

    pub fn index_of(&self, pid: Pid) -> Option<usize> {
        self.procs.binary_search_by_key(&pid, Process::pid).ok()
    }

    /// The pids, in the order of `procs`: for thousands of lookups in a row
    /// (a binary search through 4 bytes a process, not 136; issue 37).
    /// Indexes found in it hold only while `procs` is not changed.
    pub fn pids(&self) -> Vec<Pid> {
        self.procs.iter().map(Process::pid).collect()
    }

    pub fn len(&self) -> usize {
        self.procs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }

    /// Age of a process in seconds, from its start time and the uptime at scan.
    pub fn age_secs(&self, p: &Process) -> f64 {
        let tck = self.ctx.clk_tck.max(1) as f64;
        (self.ctx.uptime_secs - p.id.start_time.0 as f64 / tck).max(0.0)
    }
}

/// `procs` sorted by pid. Reads build on a sorted table and append what
/// they read again (a refresh's changed pids, a re-check's trees): only
/// the part from where the first of those goes is sorted, not the whole
/// table again (issue 37: at 10,000 processes sorting it moved its 1.4 MB
/// some fourteen times over at every scan; new pids, the highest under
/// churn, leave the run in place). The table's own sort, so no second one
/// in the binary (a merge was 1.7 KB of it).
fn sorted_by_pid(mut procs: Vec<Process>) -> Vec<Process> {
    let run = 1 + procs.windows(2).take_while(|w| w[0].pid() <= w[1].pid()).count();
    let Some(lowest) = procs.get(run..).and_then(|tail| tail.iter().map(Process::pid).min()) else {
        return procs;
    };
    let from = procs[..run].partition_point(|p| p.pid() < lowest);
    procs[from..].sort_unstable_by_key(Process::pid);
    procs
}

#[cfg(test)]
mod tests {
    /// A snapshot holds one per process (5,000 on a busy machine): what
    /// each field costs is multiplied (issue 37). 160 bytes before pids
    /// became non-zero and the comm inline.
    #[test]
    fn a_process_stays_small() {
        assert!(std::mem::size_of::<super::Process>() <= 136, "{}", std::mem::size_of::<super::Process>());
    }

    /// Every shape a read hands over (in order, a sorted run and a tail,
    /// the tail below, among or above the run, duplicates) comes out as a
    /// plain sort would have it.
    #[test]
    fn a_sorted_run_and_a_tail_come_out_sorted() {
        use super::{Process, sorted_by_pid};
        let shapes: [&[i32]; 7] = [
            &[],
            &[5],
            &[1, 2, 3, 9],
            &[2, 4, 6, 8, 7, 1, 9],
            &[10, 20, 30, 31, 32, 5, 25, 40, 25],
            &[3, 2, 1],
            &[1, 3, 5, 7, 3, 2, 7, 100, 0x7fff_fff0],
        ];
        for pids in shapes {
            let procs: Vec<Process> = pids.iter().map(|&pid| Process::synthetic(pid, 1, 100, "p")).collect();
            let mut want = pids.to_vec();
            want.sort_unstable();
            let got: Vec<i32> = sorted_by_pid(procs).iter().map(|p| p.pid().get()).collect();
            assert_eq!(got, want, "from {pids:?}");
        }
    }
}
