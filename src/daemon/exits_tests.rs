//! What an exit or an exec costs: a lookup when it orphans nothing or its
//! tree's owner is watched already, a scan otherwise.

use std::collections::HashMap;

use super::*;
use crate::ids::{Identity, StartTime};
use crate::scan::{Context, Process, Snapshot};

fn pid(n: i32) -> Pid {
    Pid::new(n).unwrap()
}

fn id(n: i32) -> Identity {
    Identity { pid: pid(n), start_time: StartTime(n.cast_unsigned().into()) }
}

fn process(p: i32, ppid: i32) -> Process {
    Process::synthetic(p, ppid, p.cast_unsigned().into(), "x")
}

fn context() -> Context {
    Context {
        self_pid: None,
        self_pidns: None,
        self_nspid_depth: None,
        self_uid: None,
        uptime_secs: 100_000.0,
        clk_tck: 100,
    }
}

/// A snapshot of `(pid, ppid)`s.
fn snapshot(procs: &[(i32, i32)]) -> Snapshot {
    Snapshot::from_processes(procs.iter().map(|&(p, pp)| process(p, pp)).collect(), context())
}

/// A schedule whose last judged snapshot holds `(pid, ppid)`s.
fn judged(procs: &[(i32, i32)]) -> Schedule {
    let mut s = Schedule::new();
    s.judged(snapshot(procs), &[]);
    s
}

/// What `look` finds: pid → (role, ppid); absent pids are gone.
fn world(w: &[(i32, Role, i32)]) -> impl Fn(Pid) -> Option<Seen> {
    let map: HashMap<Pid, Seen> =
        w.iter().map(|&(p, role, pp)| (pid(p), Seen { id: id(p), role, ppid: Pid::new(pp) })).collect();
    move |p| map.get(&p).copied()
}

#[test]
fn an_exit_costs_a_scan_only_when_a_child_lives_on() {
    let s = judged(&[(1, 0), (10, 1), (11, 10)]);
    let mut w = ExitWatch::new(None);
    assert!(w.leaves_children(pid(10), &s), "its child at the last scan lives");
    w.gone.insert(pid(11));
    assert!(!w.leaves_children(pid(10), &s), "its only child exited before it");
    w.forked.insert(pid(10), vec![pid(12)]);
    assert!(w.leaves_children(pid(10), &s), "a child forked since the last scan lives");
    w.gone.insert(pid(12));
    assert!(!w.leaves_children(pid(10), &s));
    assert!(!w.leaves_children(pid(11), &s), "a leaf");
    assert!(w.leaves_children(pid(10), &Schedule::new()), "no snapshot to go by: scan");
}

#[test]
fn pidfd_mode_scans_when_something_below_the_exited_process_is_alive() {
    let s = judged(&[(1, 0), (10, 1), (11, 10)]);
    let mut w = ExitWatch::new(None);
    w.exited.borrow_mut().insert(pid(10));
    assert!(w.exits_left_orphans(&s, |i| i == id(11)), "its child lives");
    assert!(!w.exits_left_orphans(&s, |_| false), "all gone: a lookup");
    w.below.insert(pid(10), vec![id(20)]);
    assert!(w.exits_left_orphans(&s, |i| i == id(20)), "a tree member below it lives");
    w.below.clear();
    w.apart.insert(pid(10));
    assert!(w.exits_left_orphans(&s, |_| false), "a host not above its tree: always a scan");
    assert!(w.exits_left_orphans(&Schedule::new(), |_| false), "no snapshot to go by: scan");
}

#[test]
fn an_exec_below_a_host_is_covered_and_the_chain_up_is_marked() {
    // server 20 ← launcher 21 ← host 22 ← shell 23 ← init
    let look = world(&[(20, Role::Server, 21), (21, Role::Launcher, 22), (22, Role::Host, 23), (23, Role::Other, 1)]);
    let mut w = ExitWatch::new(None);
    assert!(w.covered(look(pid(20)).unwrap(), true, None, &look));
    for p in [21, 22, 23] {
        assert!(w.unseen.contains(&pid(p)), "{p} is marked: its exit with children brings a scan");
    }
    // Pidfd mode: the chain up is to be watched until the next scan, and
    // each one's exit must find this server alive.
    let mut w = ExitWatch::new(None);
    assert!(w.covered(look(pid(20)).unwrap(), false, None, &look));
    assert_eq!(w.passed, vec![id(21), id(22), id(23)]);
    for p in [21, 22, 23] {
        assert_eq!(w.below.get(&pid(p)), Some(&vec![id(20)]), "{p}");
    }
    // Below a watched process: covered; what lies between is watched too.
    let mut w = ExitWatch::new(None);
    w.watched.insert(pid(22));
    assert!(w.covered(look(pid(20)).unwrap(), false, None, &look));
    assert_eq!(w.passed, vec![id(21)]);
    assert_eq!(w.below.get(&pid(22)), Some(&vec![id(20)]), "its exit must find this server alive");
    w.exited.borrow_mut().insert(pid(22));
    w.passed.clear();
    let dead = world(&[(20, Role::Server, 21), (21, Role::Launcher, 22), (23, Role::Other, 1)]);
    assert!(!w.covered(dead(pid(20)).unwrap(), false, None, &dead), "a watched pid that exited covers nothing");
    assert!(w.passed.is_empty(), "not covered: a scan soon watches what it must");
    // A host born: watched itself, with the chain above it.
    let mut w = ExitWatch::new(None);
    assert!(w.covered(look(pid(22)).unwrap(), false, None, &look));
    assert_eq!(w.passed, vec![id(22), id(23)]);
    assert_eq!(w.below.get(&pid(23)), Some(&vec![id(22)]));
    assert_eq!(w.below.get(&pid(22)), None, "a host is not below itself");
}

#[test]
fn a_server_with_no_owner_but_an_adopter_is_scanned_soon() {
    let look = world(&[
        (30, Role::Server, 31),
        (31, Role::Launcher, 1),
        (40, Role::Server, 1),
        (50, Role::Server, 51),
        (60, Role::Server, 61),
        (61, Role::Launcher, 99),
        (70, Role::Server, 71),
        (71, Role::Adopter, 1),
        (80, Role::Server, 81),
        (81, Role::Other, 1),
    ]);
    let scope = Some(pid(99));
    let mut w = ExitWatch::new(None);
    for p in [30, 40, 50, 60, 70] {
        assert!(!w.covered(look(pid(p)).unwrap(), true, scope, &look), "{p}");
    }
    // An owner that is no host, below init: judged by a scan too.
    assert!(!w.covered(look(pid(80)).unwrap(), true, scope, &look));
}

#[test]
fn a_host_born_below_an_adopter_owns_its_trees_to_come_and_is_watched() {
    let look = world(&[(90, Role::Host, 1), (91, Role::Host, 99)]);
    let scope = Some(pid(99));
    let mut w = ExitWatch::new(None);
    assert!(w.covered(look(pid(90)).unwrap(), false, scope, &look));
    assert!(w.covered(look(pid(91)).unwrap(), false, scope, &look));
    assert_eq!(w.passed, vec![id(90), id(91)], "pidfd mode: each watched until the next scan");
    assert!(w.covered(look(pid(90)).unwrap(), true, scope, &look), "event mode: its exit with children is heard");
}

#[test]
fn pidfd_mode_watches_so_many_processes_between_scans_and_then_asks_for_a_scan() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    tokio::task::LocalSet::new().block_on(&rt, async {
        let procfs = crate::scan::ProcFs::new("/proc");
        let me = procfs.process(Pid::new(std::process::id().cast_signed()).unwrap()).expect("this test").id;
        let started = |p: Pid| procfs.stat(p).map(|st| st.start_time);
        let mut w = ExitWatch::new(None);
        // Full: as many watched as allowed (stand-ins that never end).
        for n in 0..MAX_PROVISIONAL {
            let stand_in = Pid::new(4_000_000 + i32::try_from(n).unwrap()).unwrap();
            w.provisional.insert(stand_in, tokio::task::spawn_local(std::future::pending()));
        }
        w.passed.push(me);
        assert!(!w.watch_passed(started), "no room: the caller scans soon instead");
        assert!(!w.provisional.contains_key(&me.pid));
        assert_eq!(w.provisional.len(), MAX_PROVISIONAL);
        // A scan ends them all; then there is room again.
        w.scanning();
        w.passed.push(me);
        assert!(w.watch_passed(started));
        assert!(w.provisional.contains_key(&me.pid), "watched through a pidfd of its own");
        w.scanning();
    });
}

#[test]
fn a_pid_born_and_gone_between_scans_is_not_read_unless_a_fork_reused_it() {
    use crate::scan::Read;
    use crate::scan::events::ProcEvent;
    // 600 is in the last snapshot; 700 and 701 were born since.
    let mut s = Schedule::new();
    let interval = std::time::Duration::from_secs(30);
    // The first read is a fresh one; the next builds on what it judged.
    assert!(matches!(s.next_read(true, HashSet::new(), interval), Read::Fresh));
    s.judged(snapshot(&[(1, 0), (600, 1)]), &[]);
    let mut w = ExitWatch::new(None);
    let events = [
        ProcEvent::Fork { parent: pid(1), child: pid(700) },
        ProcEvent::Exit { pid: pid(700) },
        ProcEvent::Exit { pid: pid(600) },
        ProcEvent::Fork { parent: pid(1), child: pid(701) },
        ProcEvent::Exit { pid: pid(701) },
        ProcEvent::Fork { parent: pid(1), child: pid(701) },
    ];
    let none = world(&[]);
    w.take_events(&events, &mut s, None, Looks { exec: &none, any: &none });
    match s.next_read(true, HashSet::new(), interval) {
        Read::Delta { changed, .. } => assert_eq!(
            changed,
            HashSet::from([pid(600), pid(701)]),
            "600 is read to leave the snapshot, 701 was forked again; 700 is not opened"
        ),
        other => panic!("expected a read of what changed, got {}", other.kind()),
    }
}

#[test]
fn an_exec_is_read_past_its_command_line_only_when_it_is_a_host_or_server() {
    use std::process::{Command, Stdio};
    let cfg = crate::config::Config::embedded();
    let procfs = crate::scan::ProcFs::new("/proc");
    let start = |title: &str| {
        let mut c = Command::new("bash");
        c.args(["-c", &format!("exec -a {title} sleep 30")]).stdin(Stdio::null());
        c.spawn().expect("bash")
    };
    let (mut server, mut other) = (start("mcp-server-fetch"), start("cc1"));
    let pid_of = |c: &std::process::Child| Pid::new(c.id().cast_signed()).unwrap();
    // Until bash has exec'd, the line is bash's, and in the middle of the
    // exec it reads empty: wait for each title.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let titled = |c: &std::process::Child, title: &str| procfs.cmdline(pid_of(c)).is_some_and(|l| l.starts_with(title));
    while !(titled(&server, "mcp-server-fetch") && titled(&other, "cc1")) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let seen = super::super::born::look_at_exec(&procfs, &cfg, pid_of(&server)).expect("a server is seen");
    assert_eq!(seen.role, Role::Server);
    assert_eq!(seen.ppid, Pid::new(std::process::id().cast_signed()), "its stat was read: its parent is this test");
    assert_eq!(seen.id, procfs.process(pid_of(&server)).expect("alive").id);
    let mut line_seen = String::new();
    let found = procfs.process_if(pid_of(&other), |line, _| {
        line_seen = line.to_owned();
        None::<()>
    });
    assert!(found.is_none(), "not wanted: no process read past its line");
    assert!(line_seen.starts_with("cc1 30"), "{line_seen}");
    assert!(super::super::born::look_at_exec(&procfs, &cfg, pid_of(&other)).is_none(), "a compiler is no host");
    for c in [&mut server, &mut other] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Event mode for what rings: a stand-in for the connector's socket (never
/// read here).
fn event_mode() -> ExitWatch {
    let (a, _b) = std::os::unix::net::UnixDatagram::pair().expect("socket pair");
    ExitWatch::new(Some(sys::async_fd(OwnedFd::from(a)).expect("async fd")))
}

fn sleeper() -> (std::process::Child, Pid) {
    let child =
        std::process::Command::new("sleep").arg("30").stdin(std::process::Stdio::null()).spawn().expect("sleep");
    let pid = Pid::new(child.id().cast_signed()).expect("pid");
    (child, pid)
}

/// Whether the loop is woken within `within` (a pidfd rang).
async fn rings(w: &ExitWatch, within: std::time::Duration) -> bool {
    tokio::time::timeout(within, w.pidfd_exit()).await.is_ok()
}

#[test]
fn event_mode_rings_for_a_young_host_that_outlived_its_batch_of_events() {
    use crate::scan::events::ProcEvent;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    tokio::task::LocalSet::new().block_on(&rt, async {
        let (mut host, h) = sleeper();
        let (mut short, q) = sleeper();
        let mut s = judged(&[(1, 0)]);
        let mut w = event_mode();
        let seen = [(h.get(), Role::Host, 1), (q.get(), Role::Host, 1)];
        let hosts = world(&seen);
        let looks = Looks { exec: &hosts, any: &hosts };
        w.take_events(&[ProcEvent::Exec { pid: h }, ProcEvent::Exec { pid: q }], &mut s, None, looks);
        assert!(w.provisional.is_empty(), "none in the batch of its exec: most such hosts are short-lived");
        w.take_events(&[ProcEvent::Exit { pid: q }], &mut s, None, looks);
        assert!(w.provisional.contains_key(&h), "alive through the next batch: a pidfd of its own");
        assert!(!w.provisional.contains_key(&q), "gone within it: none");
        let _ = host.kill(); // a zombie until waited for: its pidfd says it exited
        assert!(rings(&w, std::time::Duration::from_secs(30)).await, "its exit has the events read at once");
        assert!(w.take_exited().is_empty(), "event mode: the exit itself is among the events");
        w.take_events(&[ProcEvent::Exit { pid: h }], &mut s, None, looks);
        assert!(!w.provisional.contains_key(&h), "its exit read, its pid is no longer watched");
        for c in [&mut host, &mut short] {
            let _ = c.kill();
            let _ = c.wait();
        }
    });
}

#[test]
fn a_watched_process_keeps_its_pidfd_from_scan_to_scan_while_it_is_the_same_process() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    tokio::task::LocalSet::new().block_on(&rt, async {
        let procfs = crate::scan::ProcFs::new("/proc");
        let (mut child, p) = sleeper();
        let read = procfs.process(p).expect("the child");
        let snap = |start: u64| {
            let mut read = read.clone();
            read.id.start_time = StartTime(start);
            Snapshot::from_processes(vec![read], context())
        };
        let same = snap(read.id.start_time.0);
        let mut w = ExitWatch::new(None);
        w.watched.insert(p);
        w.watch_by_pidfd(&same);
        let _ = child.kill(); // a zombie until waited for
        assert!(rings(&w, std::time::Duration::from_secs(30)).await, "its pidfd said it exited");
        assert_eq!(w.take_exited(), HashSet::from([p]));
        // The next scan reads the zombie, the same process: not watched again
        // (a pidfd opened now would say at once, and at every scan, that it exited).
        w.watch_by_pidfd(&same);
        assert!(!rings(&w, std::time::Duration::from_millis(300)).await, "no second ring for the same exit");
        // Its pid under another start time is another process: a pidfd of its own.
        w.watch_by_pidfd(&snap(read.id.start_time.0 + 1));
        assert!(rings(&w, std::time::Duration::from_secs(30)).await, "watched afresh");
        let _ = child.wait();
    });
}

#[test]
fn event_mode_covers_an_exec_below_one_covered_a_moment_ago_without_reading_it() {
    use crate::scan::events::ProcEvent::{Exec, Exit, Fork};
    // Pids above any pid_max (4,194,304): a host read here is rung for
    // through a pidfd, which must find no real process.
    const N: i32 = 4_200_000;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let _local = tokio::task::LocalSet::new().enter();
    let _rt = rt.enter();
    let mut s = judged(&[(1, 0), (N + 10, 1)]);
    let mut w = ExitWatch::new(None);
    w.watched.insert(pid(N + 10));
    let known = world(&[
        (N + 20, Role::Host, N + 10),
        (N + 21, Role::Server, N + 20),
        (N + 22, Role::Server, N + 20),
        (N + 40, Role::Host, 1),
        (N + 41, Role::Server, N + 40),
        (N + 50, Role::Server, 1),
        (N + 51, Role::Server, N + 50),
    ]);
    let reads = std::cell::Cell::new(0);
    let look = |p: Pid| {
        reads.set(reads.get() + 1);
        known(p)
    };
    let mut take = |events: &[crate::scan::events::ProcEvent], w: &mut ExitWatch| {
        w.take_events(events, &mut s, None, Looks { exec: &look, any: &look })
    };
    let up = |p: i32| if p == 1 { pid(1) } else { pid(N + p) };
    let (f, e) = (|p: i32, c: i32| Fork { parent: up(p), child: pid(N + c) }, |p: i32| Exec { pid: pid(N + p) });
    // Below a watched process, and below what was exec'd below it since.
    take(&[f(10, 20), e(20), f(20, 21), e(21), f(20, 22)], &mut w);
    assert_eq!(reads.get(), 0, "a host below a watched process and its server: neither read");
    assert!(
        w.unseen.contains(&pid(N + 20)) && w.unseen.contains(&pid(N + 21)),
        "each marked: its exit with children scans"
    );
    // Once that host exited, what its children exec is read (they were re-parented).
    take(&[Exit { pid: pid(N + 20) }, e(22)], &mut w);
    assert!(reads.get() > 0, "below a process gone: read");
    // A host read below the adopter owns the trees it starts: its server is not read.
    reads.set(0);
    take(&[f(1, 40), e(40), f(40, 41), e(41)], &mut w);
    assert_eq!(reads.get(), 1, "the host alone");
    // A server with no host above it covers nothing: what it starts is read.
    reads.set(0);
    take(&[f(1, 50), e(50), f(50, 51), e(51)], &mut w);
    assert!(reads.get() >= 2, "the server and what it started");
    // A scan sees them all: nothing is covered by what it has not judged.
    w.scanning();
    reads.set(0);
    take(&[f(40, 42), e(42)], &mut w);
    assert!(reads.get() > 0, "after a scan, below an unwatched host: read");
}
