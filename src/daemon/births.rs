//! New processes without the proc connector (pidfd mode): three to five
//! times a second ([`super::lookout`]), the last allocated pid of the
//! namespace says whether anything was created since the last look, and the
//! pids in between are the only ones read. A host or server among them is
//! scanned soon, so its host is watched (or its orphans found) long before
//! the next periodic scan.
//!
//! Most new processes under churn are forks that do not exec (a shell's
//! subshells, worker pools): such a child runs its parent's program, so it
//! has its parent's role, and reading its command line (a walk of its
//! memory by the kernel) tells nothing new. A child whose comm and
//! `startstack` are its parent's has not exec'd (exec randomizes the stack;
//! fork copies it), so it costs one `stat` read (issue 24: reading every new
//! pid whole was the largest part of the pidfd mode's cost under churn).
//! Without address randomization (`randomize_va_space` 0, `setarch -R`) an
//! exec of the parent's own program looks like a fork: its role is then
//! learnt at the next scan instead, which is later, never wrong.
//!
//! A new pid is looked at one look after it was counted: under churn 200
//! to 400 ms old, when most processes born (a shell's commands, a build's
//! compilers, the forks of a worker pool) are gone, and a pid gone costs a
//! failed lookup instead of a read; after a rest, 100 ms after it was
//! counted, within 400 ms of its birth either way. A host is then watched
//! (or its orphans scanned for) at most one look later than it could be. A
//! scan reads only the new pids a look found alive: those counted and not
//! looked at yet (born in the last look or two) wait for the next look,
//! under churn mostly gone by then (issue 37: a scan read ~90 such pids,
//! ~25 µs each, most dying within the next 200 ms). Where a look cannot
//! open a pid (out of fds), the next read reads it.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Duration;

use super::exits::Seen;
use super::lookout::{Lookout, Pace};
use crate::ids::{Identity, Pid, StartTime};
use crate::scan::{ProcFs, Process, Unopened};

/// How often to look: a host is seen within 400 ms of its birth (a pid is
/// looked at one look after it was counted), a host that lives that long is
/// watched before it dies, and a host born and dead sooner is found by the
/// next scan. Scans are few under churn (the exits of hosts not watched yet
/// are not heard): this bounds how late such a host's orphans are found. A
/// look costs a read of `loadavg` and, on a virtual machine mostly, a
/// wake-up; the new pids are read once whatever the pace.
const PACE: Pace =
    Pace { busy: Duration::from_millis(200), resting: Duration::from_millis(300), follow: Duration::from_millis(100) };
/// More new pids than this in one look (a fork storm, a wrapped counter):
/// scan instead of reading them one by one.
const MAX_READ: i32 = 2048;

/// What was created since the last look.
pub(crate) enum Born {
    Nothing,
    Pids(Vec<Pid>),
    /// Too many to read one by one.
    Many,
}

/// Parents of new processes remembered at most; past that the book starts over.
const MAX_PARENTS: usize = 512;

/// A parent of new processes as read once: what its forks look like, and its role.
struct Parent {
    comm: crate::scan::Comm,
    stack: u64,
    seen: Seen,
}

pub(crate) struct Births {
    last: Option<i32>,
    lookout: Lookout,
    /// Whether exec randomizes the stack here (a fork can be told apart).
    randomized: bool,
    parents: HashMap<Pid, Parent>,
    /// Pids counted at the last look, looked at at the next ([`Births::ripe`]).
    waiting: Vec<Pid>,
    /// `loadavg`, kept open: a look is then one `pread`, not the open,
    /// `statx`, two reads and close of a fresh read (a third of an idle
    /// pidfd-mode daemon's CPU, five times a second). The look thread reads
    /// the same fd (a `pread` has no file position to share).
    loadavg: Option<Arc<File>>,
    /// See [`Births::listed`].
    listed_at: Option<Census>,
}

/// The last pid allocated in this namespace and the tasks (threads
/// included) of the whole system, from `loadavg`'s last two fields.
///
/// Equal to the census before the last listing of `/proc` (a sweep takes
/// none: it asks of leaves in turn, see `schedule::Listing`), it says the
/// table is as that listing found it: no pid was allocated since (a new task moves the counter;
/// pids come back only once it wraps), and none was released (a task
/// leaves the count when it is reaped, which is also when its `/proc`
/// directory goes). A scan then needs no listing nor sweep (issue 37: at 5,000
/// processes the listing was 42 % of an idle pidfd-mode daemon's CPU, ~1 µs
/// a directory entry in the kernel). The count is the
/// whole system's: in a container, another's task born while one of ours
/// is reaped would hide that exit until a listing; such a process stays in
/// the snapshot a while longer, which can only keep a tree, never reap one
/// (the re-check before a reap reads every member afresh), and the full
/// read every two minutes lists anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Census {
    last: i32,
    tasks: u32,
}

impl Census {
    /// `0.97 0.94 1.00 2/345 12345`: the fourth field's total, the fifth.
    fn parse(text: &str) -> Option<Census> {
        crate::scan::parse::parse_loadavg(text).map(|(last, tasks)| Census { last, tasks })
    }

    /// What `loadavg` (kept open, read from its start each time: the kernel
    /// renders it afresh at offset 0) tells of the table now. It does not
    /// allocate: the look thread calls it too.
    pub(crate) fn read(loadavg: &File) -> Option<Census> {
        let mut buf = [0u8; 128];
        let n = loadavg.read_at(&mut buf, 0).ok()?;
        Census::parse(std::str::from_utf8(&buf[..n]).ok()?)
    }

    /// The pid most recently allocated.
    pub(crate) fn last_pid(self) -> i32 {
        self.last
    }

    /// Whether a scan that finds the table as this census does needs no
    /// listing of `/proc`, the last listing having begun at `listed`: the
    /// table is as that listing found it, or, while `quiet` (no host or
    /// server: see `Schedule::period`), fewer than [`QUIET_DRIFT`] pids were
    /// allocated since.
    pub(crate) fn spares_listing(self, listed: Option<Census>, quiet: bool) -> bool {
        listed.is_some_and(|l| self == l || quiet && (0..QUIET_DRIFT).contains(&self.last.wrapping_sub(l.last)))
    }
}

/// While quiet, a periodic scan sweeps its snapshot (or lists `/proc`) only
/// once this many pids were allocated since the last listing. What either
/// finds is the processes that exited unwatched (the new ones the looks count and read); with no
/// tree to judge, such a process left in the snapshot keeps nothing, and
/// fewer than this many can be left (each also leaves at its turn to be read
/// again: see `schedule::SPREAD`; a wrapped counter lists), ~35 KB at
/// most. Issue 37: at 5,000 processes a quiet scan read for 14.7 ms with its
/// listing, 3.9 ms without, every `quiet_interval_secs`, on a machine where
/// something forks now and then (two pids every 5 s: a listing every fifth
/// quiet scan).
const QUIET_DRIFT: i32 = 256;

impl Births {
    pub(crate) fn new(procfs: &ProcFs) -> Births {
        let aslr = std::fs::read_to_string(procfs.root().join("sys/kernel/randomize_va_space"));
        let randomized = aslr.is_ok_and(|t| matches!(t.trim(), "1" | "2"));
        let loadavg = File::open(procfs.root().join("loadavg")).ok().map(Arc::new);
        let lookout = Lookout::new(PACE, loadavg.clone());
        Births {
            last: None,
            lookout,
            randomized,
            parents: HashMap::new(),
            waiting: Vec::new(),
            loadavg,
            listed_at: None,
        }
    }

    /// What a new pid is. A fork that did not exec is its parent's copy:
    /// one `stat` read, the role its parent has. Anything else is read whole
    /// (through the directory its `stat` was read from) and judged by `seen`.
    /// [`Unopened::Gone`] only when the kernel said there is no such process.
    pub(crate) fn look(
        &mut self,
        procfs: &ProcFs,
        pid: Pid,
        seen: impl Fn(&Process) -> Seen,
    ) -> Result<Seen, Unopened> {
        if procfs.surely_gone(pid) {
            return Err(Unopened::Gone);
        }
        let o = procfs.open_process_or_why(pid)?;
        let stack = o.start_stack.filter(|&s| s != 0 && self.randomized);
        if let (Some(stack), Some(ppid)) = (stack, Pid::new(o.stat.ppid))
            && let Some(parent) = self.parent(procfs, ppid, &seen)
            && parent.stack == stack
            && parent.comm == o.stat.comm
            && parent.seen.id.start_time.0 <= o.stat.start_time
        {
            let id = Identity { pid, start_time: StartTime(o.stat.start_time) };
            return Ok(Seen { id, role: parent.seen.role, ppid: Some(ppid) });
        }
        procfs.read_opened(o).map(|p| seen(&p)).ok_or(Unopened::Failed)
    }

    /// A parent of new processes, read (whole, once) when first met.
    fn parent(&mut self, procfs: &ProcFs, ppid: Pid, seen: impl Fn(&Process) -> Seen) -> Option<&Parent> {
        if !self.parents.contains_key(&ppid) {
            if self.parents.len() >= MAX_PARENTS {
                self.parents.clear();
            }
            let o = procfs.open_process(ppid)?;
            let (stack, comm) = (o.start_stack?, o.stat.comm.clone());
            let p = procfs.read_opened(o)?;
            self.parents.insert(ppid, Parent { comm, stack, seen: seen(&p) });
        }
        self.parents.get(&ppid)
    }

    /// The new pids to look at now, given those counted at this look: the
    /// ones counted at the previous look; these wait for the next (see
    /// the module docs).
    pub(crate) fn ripe(&mut self, counted: Vec<Pid>) -> Vec<Pid> {
        std::mem::replace(&mut self.waiting, counted)
    }

    /// The pids counted and not looked at yet are read by a scan that lists
    /// `/proc`: they need no look.
    pub(crate) fn read_by_scan(&mut self) {
        self.waiting.clear();
    }

    /// Pids counted before a scan: looked at by the next look, with those
    /// counted at the last one (a scan reads only pids a look found alive).
    pub(crate) fn wait_for_look(&mut self, counted: Vec<Pid>) {
        self.waiting.extend(counted);
    }

    /// Resolves at the next look that may find something: the counter
    /// moved, or pids counted are waiting ([`super::lookout`]); never while
    /// `active` is false (event mode hears of every exec from the kernel).
    pub(crate) async fn ready(&mut self, active: bool) {
        if active {
            self.lookout.moved().await;
        } else {
            std::future::pending::<()>().await;
        }
    }

    /// The last allocated pid, from the `loadavg` kept open.
    fn last_pid(&self) -> Option<i32> {
        self.census().map(Census::last_pid)
    }

    /// What the `loadavg` kept open tells of the table now.
    pub(crate) fn census(&self) -> Option<Census> {
        Census::read(self.loadavg.as_deref()?)
    }

    /// The census taken just before the last listing of `/proc` began.
    pub(crate) fn listed_at(&self) -> Option<Census> {
        self.listed_at
    }

    /// A listing of `/proc` begins, the table as `census` found it.
    pub(crate) fn listed(&mut self, census: Option<Census>) {
        self.listed_at = census;
    }

    /// The pids allocated since the last look.
    pub(crate) fn since(&mut self, procfs: &ProcFs) -> Born {
        let Some(now) = self.last_pid().or_else(|| procfs.last_pid()) else { return Born::Nothing };
        let Some(last) = self.last.replace(now) else { return Born::Nothing };
        if now == last {
            Born::Nothing
        } else if now < last || now - last > MAX_READ {
            Born::Many
        } else {
            Born::Pids(((last + 1)..=now).filter_map(Pid::new).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::config::Role;

    /// Births on this machine's `/proc`, with the runtime its ticker needs.
    fn births_here() -> (tokio::runtime::Runtime, Births) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let births = {
            let _timer_needs_it = rt.enter();
            Births::new(&ProcFs::new("/proc"))
        };
        (rt, births)
    }

    #[test]
    fn a_pid_is_looked_at_one_look_after_it_was_counted_unless_a_scan_read_it() {
        let (_rt, mut births) = births_here();
        let pids = |v: &[i32]| v.iter().filter_map(|&p| Pid::new(p)).collect::<Vec<_>>();
        assert!(births.ripe(pids(&[100, 101])).is_empty(), "counted now, looked at next time");
        assert_eq!(births.ripe(pids(&[102])), pids(&[100, 101]));
        assert_eq!(births.ripe(Vec::new()), pids(&[102]), "a look that counts nothing still looks at the waiting");
        births.ripe(pids(&[103]));
        births.read_by_scan();
        assert!(births.ripe(Vec::new()).is_empty(), "a scan read them");
    }

    #[test]
    fn pids_counted_before_a_scan_wait_for_the_next_look_with_the_others() {
        let (_rt, mut births) = births_here();
        let pids = |v: &[i32]| v.iter().filter_map(|&p| Pid::new(p)).collect::<Vec<_>>();
        births.ripe(pids(&[100]));
        // A scan counted these: it reads only what a look found alive.
        births.wait_for_look(pids(&[101, 102]));
        assert_eq!(births.ripe(pids(&[103])), pids(&[100, 101, 102]));
        assert_eq!(births.ripe(Vec::new()), pids(&[103]));
    }

    #[test]
    fn only_a_free_pid_or_a_threads_id_is_gone() {
        let procfs = ProcFs::new("/proc");
        let me = Pid::new(std::process::id().cast_signed()).unwrap();
        assert!(procfs.open_process_or_why(me).is_ok());
        let mut child = Command::new("true").spawn().expect("true");
        let pid = Pid::new(child.id().cast_signed()).unwrap();
        child.wait().expect("reaped");
        // Reaped: its pid is free until the counter comes round again.
        assert_eq!(procfs.open_process_or_why(pid).err(), Some(Unopened::Gone));
        // `/proc/TID` answers for a thread, which is no process.
        crate::scan::test_support::with_parked_thread(|tid| {
            assert_eq!(procfs.open_process_or_why(tid).err(), Some(Unopened::Gone));
        });
    }

    /// The look's first question, asked of the kernel without a walk of
    /// `/proc`: gone only when no task has the pid; a thread's id is left
    /// to the `stat` (above), and a `/proc` that is not this process's own
    /// (a fixture) is never answered for.
    #[test]
    fn surely_gone_is_a_free_pid_in_this_processs_own_proc_only() {
        let procfs = ProcFs::new("/proc");
        let me = Pid::new(std::process::id().cast_signed()).unwrap();
        assert!(!procfs.surely_gone(me));
        let mut child = Command::new("true").spawn().expect("true");
        let pid = Pid::new(child.id().cast_signed()).unwrap();
        assert!(!procfs.surely_gone(pid), "running, or a zombie until reaped: a task still");
        child.wait().expect("reaped");
        assert!(procfs.surely_gone(pid), "reaped: no task has its pid");
        crate::scan::test_support::with_parked_thread(|tid| assert!(!procfs.surely_gone(tid)));
        let fixture = tempfile::tempdir().unwrap();
        assert!(!ProcFs::new(fixture.path()).surely_gone(pid), "not this process's /proc");
    }

    #[test]
    fn a_census_is_loadavgs_last_pid_and_task_count() {
        assert_eq!(Census::parse("0.97 0.94 1.00 2/345 12345\n"), Some(Census { last: 12345, tasks: 345 }));
        assert_eq!(Census::parse("0.97 0.94 1.00 2 12345"), None);
        assert_eq!(Census::parse("0.97 0.94"), None);
    }

    #[test]
    fn a_listing_is_spared_when_the_table_is_unchanged_or_while_quiet_when_few_pids_were_allocated() {
        let at = |last, tasks| Census { last, tasks };
        let listed = Some(at(1000, 300));
        assert!(at(1000, 300).spares_listing(listed, false), "unchanged");
        assert!(!at(1000, 299).spares_listing(listed, false), "a task reaped: its /proc entry went");
        assert!(!at(1001, 301).spares_listing(listed, false), "a pid allocated");
        assert!(!at(1000, 300).spares_listing(None, true), "no listing yet");
        assert!(at(1000, 290).spares_listing(listed, true), "quiet: reaped ones may stay a while");
        assert!(at(1000 + QUIET_DRIFT - 1, 350).spares_listing(listed, true), "quiet: a few allocated");
        assert!(!at(1000 + QUIET_DRIFT, 350).spares_listing(listed, true), "quiet, but as many as may stay");
        assert!(!at(999, 300).spares_listing(listed, true), "the counter wrapped");
        assert!(!at(400, 300).spares_listing(Some(at(i32::MAX - 10, 300)), true), "wrapped at the top");
    }

    #[test]
    fn a_census_moves_when_a_process_is_born_and_when_one_is_reaped() {
        let (_rt, births) = births_here();
        let before = births.census().expect("loadavg");
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep");
        assert_ne!(births.census(), Some(before), "born: the counter moved");
        let born = births.census().expect("loadavg");
        child.kill().expect("kill");
        child.wait().expect("reaped");
        // Reaped: one task fewer, unless others were born meanwhile (then
        // the counter moved): either way not the census after the birth.
        assert_ne!(births.census(), Some(born));
    }

    #[test]
    fn the_kept_loadavg_follows_the_pid_counter() {
        let (_rt, births) = births_here();
        let before = births.last_pid().expect("loadavg read through the kept fd");
        Command::new("true").status().expect("true");
        let after = births.last_pid().expect("read again from its start");
        assert_ne!(before, after, "a process was created in between");
        let fresh = ProcFs::new("/proc").last_pid().expect("loadavg");
        assert!(fresh >= after || fresh < before, "the same counter as a fresh read: {after} vs {fresh}");
    }

    #[test]
    fn a_fork_that_did_not_exec_takes_its_parents_role_without_a_read() {
        let procfs = ProcFs::new("/proc");
        let (_rt, mut births) = births_here();
        if !births.randomized {
            eprintln!("skipped: exec does not randomize the stack here (randomize_va_space)");
            return;
        }
        // A subshell (a fork running a builtin) and an exec'd shell, both `sh`.
        let mut parent = Command::new("sh")
            .args(["-c", "exec 3<&0; (read a <&3) & sh -c 'read b; :' <&3 & wait"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("sh");
        let ppid = Pid::new(parent.id().cast_signed()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let kids = loop {
            let kids = procfs.children(ppid).unwrap_or_default();
            // The subshell's line is its parent's, which names `read b`
            // too: the exec'd one is told by its own line, whole.
            let execd = kids.iter().any(|&k| procfs.cmdline(k).is_some_and(|c| c.starts_with("sh -c read b")));
            if kids.len() == 2 && execd {
                break kids;
            }
            assert!(Instant::now() < deadline, "the shell's children did not appear");
            std::thread::sleep(Duration::from_millis(10));
        };
        let read_whole = RefCell::new(Vec::new());
        let look = |p: &Process| {
            read_whole.borrow_mut().push(p.pid());
            let role = if p.pid() == ppid { Role::Host } else { Role::Other };
            Seen { id: p.id, role, ppid: p.ppid }
        };
        for &k in &kids {
            let seen = births.look(&procfs, k, look).expect("alive");
            let forked = procfs.cmdline(k).is_some_and(|c| !c.starts_with("sh -c read b"));
            if forked {
                assert_eq!(seen.role, Role::Host, "the subshell is its parent's copy");
                assert!(!read_whole.borrow().contains(&k), "and is not read whole");
            } else {
                assert_eq!(seen.role, Role::Other, "the exec'd shell is read whole");
                assert!(read_whole.borrow().contains(&k));
            }
            assert_eq!(seen.ppid, Some(ppid));
        }
        assert_eq!(read_whole.borrow().iter().filter(|&&p| p == ppid).count(), 1, "the parent is read once");
        drop(parent.stdin.take()); // both children read EOF and exit, then the parent
        parent.wait().expect("wait");
    }
}
