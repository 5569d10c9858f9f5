use super::*;
use crate::scan::process::{Details, Holder, StdinEnd};

/// What `f` gives once it gives something, within a generous deadline
/// (a busy machine is slow to fork and exec).
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(std::time::Instant::now() < deadline, "waited 30 s for {what}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `sh -c ARGS…` with its stdin a pipe this test writes, and its pid.
fn piped_sh(args: &[&str]) -> (std::process::Child, Pid) {
    let sh =
        std::process::Command::new("sh").arg("-c").args(args).stdin(std::process::Stdio::piped()).spawn().expect("sh");
    let pid = Pid::new(sh.id().cast_signed()).expect("pid");
    (sh, pid)
}

/// A process started at tick 1000 and last read at `checked`, with its
/// stdin's far end known.
fn read_at(checked: u64) -> Process {
    Process {
        pgid: None,
        sid: None,
        details: Some(Box::new(Details { stdin: Some(StdinEnd::Open(Holder::Expected)), ..Details::default() })),
        dir_ino: 7,
        checked_tick: checked,
        ..Process::synthetic(42, 1, 1000, "node server.js")
    }
}

#[test]
fn details_are_taken_over_from_settled_processes_without_the_stdin_answer() {
    let tck = rustix::param::clock_ticks_per_second();
    let mut old = read_at(1000 + 5 * tck);
    take_over_details(&mut old);
    let d = old.details.expect("kept: read five seconds after it started");
    assert_eq!(d.stdin, None, "who can still write to its stdin is asked at every scan");
    // Read in its first second: it may have exec'd, moved its stdio or
    // renamed itself since; read again.
    let mut young = read_at(1000 + tck / 2);
    take_over_details(&mut young);
    assert!(young.details.is_none());
    // First read young, its details read again once it had settled:
    // these are kept (a server first read in its first second would
    // otherwise have its details read at every scan for ever).
    let mut settled_later = read_at(1000 + tck / 2);
    settled_later.details.as_mut().expect("details").read_tick = 1000 + 2 * tck;
    take_over_details(&mut settled_later);
    assert!(settled_later.details.is_some());
    let mut read_young_again = read_at(1000 + tck / 2);
    read_young_again.details.as_mut().expect("details").read_tick = 1000 + tck / 2 + 1;
    take_over_details(&mut read_young_again);
    assert!(read_young_again.details.is_none());
}

#[test]
fn a_fork_without_an_exec_shares_its_parents_command_line() {
    // `read x &` runs in a forked subshell: a child with the same line
    // (stdin given explicitly: a background job's is /dev/null).
    let (mut sh, pid) = piped_sh(&["exec 5<&0; read x <&5 & read y; wait", "fork-sharing-test"]);
    let procfs = ProcFs::new("/proc");
    let (snap, child) = wait_for("the subshell to show", || {
        let snap = procfs.snapshot().expect("snapshot");
        let child = snap.procs.iter().find(|p| p.ppid == Some(pid)).map(Process::pid)?;
        snap.get(child).is_some_and(Process::identity_settled).then_some((snap, child))
    });
    let shared = |s: &Snapshot| {
        let (p, c) = (s.get(pid).expect("parent"), s.get(child).expect("child"));
        assert_eq!(p.cmdline, c.cmdline, "a fork has its parent's line");
        Arc::ptr_eq(&p.cmdline, &c.cmdline)
    };
    assert!(shared(&snap), "a whole read");
    let changed = HashSet::from([child]);
    assert!(shared(&procfs.refresh(snap.clone(), &changed, false, &[])), "a delta that read the child again");
    let listed = procfs.rescan(Some(&snap), Reuse::Cmdlines, &changed, &[]).expect("rescan");
    assert!(shared(&listed), "a listing that read the child again");
    drop(sh.stdin.take());
    let _ = sh.kill();
    let _ = sh.wait();
}

#[test]
fn a_turn_reads_the_stat_again_and_sees_an_exec_that_kept_the_comm() {
    use std::io::Write;
    // `sh` that execs another `sh` (same comm) once it reads a line,
    // named after the line (`second-go`: in no command line before).
    let (mut child, pid) = piped_sh(&["read x; exec sh -c 'read y' \"second-$x\""]);
    let procfs = ProcFs::new("/proc");
    let snap = wait_for("it to settle", || {
        let snap = procfs.snapshot().expect("snapshot");
        snap.get(pid).is_some_and(Process::identity_settled).then_some(snap)
    });
    child.stdin.as_mut().expect("stdin").write_all(b"go\n").expect("write");
    wait_for("the exec", || procfs.cmdline(pid).filter(|c| c.contains("second-go")));
    let line = |s: &Snapshot| s.get(pid).map(|p| p.cmdline.to_string()).unwrap_or_default();
    let none = HashSet::new();
    assert!(!line(&snap).contains("second-go"), "before: {}", line(&snap));
    assert!(!line(&procfs.refresh(snap.clone(), &none, false, &[])).contains("second-go"), "taken over");
    assert!(line(&procfs.refresh(snap.clone(), &none, false, &[pid])).contains("second-go"), "a delta's turn");
    let listed = procfs.rescan(Some(&snap), Reuse::Unchanged, &none, &[]).expect("rescan");
    assert!(!line(&listed).contains("second-go"), "taken over");
    let listed = procfs.rescan(Some(&snap), Reuse::Unchanged, &none, &[pid]).expect("rescan");
    assert!(line(&listed).contains("second-go"), "a listing's turn");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_parent_read_again_for_its_newcomer_keeps_its_details_unless_it_execd() {
    use std::io::Write;
    // `sh` that forks a child on its first line and execs another `sh`
    // (same comm) on its second.
    let (mut sh, pid) = piped_sh(&["read x; sleep 30 & read y; exec sh -c 'read z' second"]);
    let procfs = ProcFs::new("/proc");
    let tck = rustix::param::clock_ticks_per_second();
    // Details read once it has settled are taken over (`take_over_details`).
    let mut before = wait_for("it to settle", || {
        let snap = procfs.snapshot().expect("snapshot");
        let p = snap.get(pid)?;
        (p.identity_settled() && procfs.now_tick() >= p.id.start_time.0 + 2 * tck).then_some(snap)
    });
    procfs.load_details(&mut before, [pid]);
    assert!(before.get(pid).and_then(|p| p.details.as_ref()).is_some(), "details read");
    let stdin = sh.stdin.as_mut().expect("stdin");
    stdin.write_all(b"fork\n").expect("write");
    let child = wait_for("its child", || {
        let snap = procfs.snapshot().expect("snapshot");
        snap.procs.iter().find(|p| p.ppid == Some(pid) && p.identity_settled()).map(Process::pid)
    });
    // Ended through a pidfd opened while it is sh's child, not by its pid.
    let child_fd = crate::sys::pidfd_open(child).expect("pidfd of the child");
    let newcomer = HashSet::from([child]);
    let details = |s: &Snapshot| s.get(pid).expect("the parent").details.is_some();
    assert!(details(&procfs.refresh(before.clone(), &newcomer, true, &[])), "unchanged: its details kept");
    assert!(!details(&procfs.refresh(before.clone(), &newcomer, false, &[])), "a read that drops details");
    stdin.write_all(b"exec\n").expect("write");
    // The first line holds the second's words too: the exec'd one lacks
    // the first's.
    let execd = |c: &str| c.contains("second") && !c.contains("read x");
    wait_for("the exec", || procfs.cmdline(pid).filter(|c| execd(c)));
    let after = procfs.refresh(before.clone(), &newcomer, true, &[]);
    assert!(execd(&after.get(pid).expect("the parent").cmdline), "read again");
    assert!(!details(&after), "it exec'd: its details are read afresh");
    drop(sh.stdin.take());
    let _ = sh.kill();
    let _ = sh.wait();
    let _ = crate::sys::pidfd_signal(std::os::fd::AsFd::as_fd(&child_fd), rustix::process::Signal::KILL);
}

/// Pidfd mode's periodic scan: a sweep finds the exit nothing watched (its
/// pid has no task any more) and reads the orphan it left again, re-parented,
/// as a listing of `/proc` would; without it the dead parent is taken over.
#[test]
fn a_sweep_drops_an_unwatched_exit_and_reads_its_orphan_again() {
    use std::io::Write;
    let (mut sh, pid) = piped_sh(&["sleep 600 & read y", "sweep-test"]);
    let procfs = ProcFs::new("/proc");
    let (snap, child) = wait_for("the sleep and its shell, settled", || {
        let snap = procfs.snapshot().expect("snapshot");
        let child = snap.procs.iter().find(|p| p.ppid == Some(pid) && &*p.comm == "sleep").map(Process::pid)?;
        let settled = |p: Pid| snap.get(p).is_some_and(Process::identity_settled);
        (settled(pid) && settled(child)).then_some((snap, child))
    });
    sh.stdin.take().expect("stdin").write_all(b"\n").expect("the line its shell waits for");
    sh.wait().expect("the shell, reaped: no task at its pid");
    let read = |sweep| {
        let read = Read::Delta { prev: snap.clone(), changed: HashSet::new(), details: false, turn: Vec::new(), sweep };
        procfs.read(read).expect("read")
    };
    let kept = read(Sweep::Off);
    let swept = read(Sweep::Only(snap.pids()));
    let parents_only = read(Sweep::Only(vec![pid]));
    // Ours to end: its parent is gone, and nothing else waits on it.
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.get()).expect("pid"),
        rustix::process::Signal::KILL,
    );
    assert!(kept.get(pid).is_some(), "without a sweep the exit is taken over");
    assert_eq!(kept.get(child).and_then(|c| c.ppid), Some(pid));
    assert!(swept.get(pid).is_none(), "the sweep found the exit");
    assert!(parents_only.get(pid).is_none(), "a sweep of the parent alone found it too");
    assert_ne!(parents_only.get(child).and_then(|c| c.ppid), Some(pid));
    let orphan = swept.get(child).expect("the sleep, still running");
    assert_ne!(orphan.ppid, Some(pid), "read again: re-parented");
}
