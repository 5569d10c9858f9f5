//! When the schedule reads what: the kinds of read, the quiet period, and
//! the safety-net reads' spacing and spread.

use super::*;

fn pid(n: i32) -> Pid {
    Pid::new(n).unwrap()
}

/// A schedule past its first read, judged on an empty snapshot.
fn started() -> Schedule {
    let mut s = Schedule::new();
    s.need_full = false;
    s.judged(Snapshot::default(), &[]);
    s
}

#[test]
fn pidfd_scans_between_periodic_ones_read_the_new_pids_counted_not_a_listing() {
    let interval = Duration::from_secs(30);
    let mut s = started();
    s.changed(pid(500)); // born, from the pid counter
    match s.next_read(false, HashSet::from([pid(40)]), interval) {
        Read::Delta { changed, details: true, .. } => {
            assert_eq!(changed, HashSet::from([pid(500), pid(40)]), "the new pids and the exited ones");
        }
        other => panic!("expected a read of what changed, got {}", other.kind()),
    }
    // Pids came too fast to count: the next one lists /proc.
    s.judged(Snapshot::default(), &[]);
    s.want_listing();
    assert!(matches!(s.next_read(false, HashSet::new(), interval), Read::NewPids { .. }));
    s.judged(Snapshot::default(), &[]);
    assert!(matches!(s.next_read(false, HashSet::new(), interval), Read::Delta { .. }), "once");
    // The periodic scan (details afresh) sweeps the snapshot, no listing:
    // unwatched exits go.
    s.judged(Snapshot::default(), &[]);
    s.last_details -= interval;
    let read = s.next_read(false, HashSet::new(), interval);
    assert!(matches!(read, Read::Delta { details: false, sweep: Sweep::Only(_), .. }), "got {}", read.kind());
}

#[test]
fn a_new_pid_found_gone_is_not_read_unless_the_last_snapshot_holds_it() {
    let interval = Duration::from_secs(30);
    let mut s = Schedule::new();
    s.need_full = false;
    let held = crate::scan::Process::synthetic(600, 1, 1000, "sh");
    s.judged(Snapshot::from_processes(vec![held], crate::scan::process::Context::default()), &[]);
    for p in [600, 601, 602] {
        s.changed(pid(p));
    }
    s.gone_unread(pid(600)); // in the snapshot: read, so that it leaves it
    s.gone_unread(pid(601));
    match s.next_read(false, HashSet::new(), interval) {
        Read::Delta { changed, .. } => assert_eq!(changed, HashSet::from([pid(600), pid(602)])),
        other => panic!("expected a read of what changed, got {}", other.kind()),
    }
}

#[test]
fn a_periodic_pidfd_scan_sweeps_only_if_the_table_changed_since_the_last_listing_or_sweep() {
    let interval = Duration::from_secs(30);
    let mut s = started();
    s.last_details -= interval;
    s.table_unchanged();
    match s.next_read(false, HashSet::new(), interval) {
        read @ Read::Delta { details: false, sweep: Sweep::Off, .. } => assert!(!finds_exits(&read)),
        other => panic!("nothing was born or reaped: no sweep, got {}", other.kind()),
    }
    // Said for one read only.
    s.judged(Snapshot::default(), &[]);
    s.last_details -= interval;
    let read = s.next_read(false, HashSet::new(), interval);
    assert!(matches!(read, Read::Delta { details: false, sweep: Sweep::Only(_), .. }));
    // Pids too fast to count list /proc, whatever the census said.
    s.judged(Snapshot::default(), &[]);
    s.last_details -= interval;
    s.want_listing();
    s.table_unchanged();
    let read = s.next_read(false, HashSet::new(), interval);
    assert!(matches!(read, Read::NewPids { .. }) && finds_exits(&read));
    // Event mode is unchanged by it.
    s.judged(Snapshot::default(), &[]);
    s.table_unchanged();
    assert!(matches!(s.next_read(true, HashSet::new(), interval), Read::Delta { .. }));
}

#[test]
fn the_quiet_period_applies_only_while_the_last_scan_found_nothing_to_follow() {
    let mut s = Schedule::new();
    let (interval, quiet) = (Duration::from_secs(10), Duration::from_secs(60));
    assert_eq!(s.period(interval, quiet), interval, "before any scan");
    s.found(true);
    assert_eq!(s.period(interval, quiet), quiet);
    let start = s.last_scan;
    assert_eq!(s.deadline(s.period(interval, quiet)), start + quiet);
    assert_eq!(s.period(interval, Duration::from_secs(5)), interval, "never shorter than the interval");
    s.soon_after_exec();
    assert!(s.deadline(s.period(interval, quiet)) < start + interval, "a new host or server is scanned soon");
    s.found(false);
    assert_eq!(s.period(interval, quiet), interval);
}

#[test]
fn event_modes_safety_net_reads_are_further_apart_while_quiet() {
    let full_after = |quiet: bool, events: bool, ago: Duration| {
        let mut s = Schedule::new();
        s.judged(Snapshot::default(), &[]);
        let _ = s.next_read(events, HashSet::new(), Duration::from_secs(10)); // the first: fresh
        s.judged(Snapshot::default(), &[]);
        s.found(quiet);
        s.last_full -= ago;
        matches!(s.next_read(events, HashSet::new(), Duration::from_secs(10)), Read::Stats { .. })
    };
    assert!(full_after(false, true, RESYNC), "event mode, something to follow: every RESYNC");
    assert!(!full_after(true, true, RESYNC), "event mode, quiet: not yet");
    assert!(full_after(true, true, RESYNC * QUIET_SPACING), "event mode, quiet: further apart");
    assert!(full_after(false, false, PIDFD_RESYNC), "pidfd mode, something to follow: every PIDFD_RESYNC");
    assert!(!full_after(true, false, PIDFD_RESYNC), "pidfd mode, quiet: spread instead (SPREAD)");
}

#[test]
fn pidfd_modes_safety_net_is_spread_over_quiet_scans() {
    let interval = Duration::from_secs(10);
    let procs = (100..400).map(|p| crate::scan::Process::synthetic(p, 1, 5, "sleep 600")).collect();
    let table = Snapshot::from_processes(procs, crate::scan::process::Context::default());
    let mut s = started();
    s.found(true);
    let mut read_again: HashSet<Pid> = HashSet::new();
    for scan in 0..SPREAD {
        s.judged(table.clone(), &[]);
        // The clocks need not be moved back: while quiet, pidfd mode
        // reads no full or fresh read by them (the test above).
        s.last_details -= interval;
        if scan % 2 == 1 {
            s.table_unchanged();
        }
        let turn = match s.next_read(false, HashSet::new(), interval) {
            Read::Delta { turn, details: false, .. } | Read::NewPids { turn, details: false, .. } => turn,
            other => panic!("a quiet periodic scan, got {}", other.kind()),
        };
        assert!(turn.len() <= 300 / SPREAD as usize + 1, "one turn's share: {}", turn.len());
        assert!(turn.is_sorted(), "sorted, for the read's lookups");
        read_again.extend(turn);
    }
    assert_eq!(read_again.len(), 300, "every process read again within SPREAD quiet scans");
    // A scan between periodic ones reads no turn; the quiet ends: the
    // full read is due PIDFD_RESYNC after the last quiet scan, not at once.
    s.judged(table.clone(), &[]);
    assert!(
        matches!(s.next_read(false, HashSet::new(), interval), Read::Delta { details: true, ref turn, .. } if turn.is_empty())
    );
    s.judged(table, &[]);
    s.found(false);
    assert!(matches!(s.next_read(false, HashSet::new(), interval), Read::Delta { .. }));
}

#[test]
fn children_are_found_from_the_index_by_parent() {
    use crate::scan::{Context, Process};
    let mut s = Schedule::new();
    assert_eq!(s.children_of(pid(1)), None, "no snapshot yet");
    let procs = vec![
        Process::synthetic(1, 0, 1, "/sbin/init"),
        Process::synthetic(7, 1, 2, "bash"),
        Process::synthetic(9, 7, 3, "claude"),
        Process::synthetic(12, 1, 4, "sshd"),
        Process::synthetic(15, 9, 5, "npm exec @playwright/mcp@latest"),
        Process::synthetic(20, 9, 6, "uvx mcp-server-fetch"),
        Process::synthetic(21, 7, 7, "vim"),
    ];
    s.judged(Snapshot::from_processes(procs, Context::default()), &[]);
    let kids = |p: i32| s.children_of(pid(p)).unwrap().iter().map(|id| id.pid.get()).collect::<Vec<_>>();
    assert_eq!(kids(1), [7, 12]);
    assert_eq!(kids(7), [9, 21]);
    assert_eq!(kids(9), [15, 20]);
    assert!(kids(15).is_empty() && kids(8).is_empty() && kids(99).is_empty());
    let ids = s.children_of(pid(9)).unwrap();
    assert_eq!(ids[1].start_time.0, 6, "the child's identity, start time included");
}

#[test]
fn a_sweep_under_way_asks_of_parents_and_tree_members_always_and_of_leaves_in_turn() {
    let mut s = started();
    let procs = [(1, 0), (100, 1), (101, 100), (102, 100), (203, 1), (204, 1), (305, 1)]
        .iter()
        .map(|&(p, pp)| crate::scan::Process::synthetic(p, pp.max(1), 10, "sh"))
        .collect();
    let snap = Snapshot::from_processes(procs, crate::scan::process::Context::default());
    s.members = HashSet::from([pid(305)]);
    let mut swept_leaves = HashSet::new();
    for _ in 0..SWEEP_SPREAD {
        let swept = s.pids_to_sweep(&snap);
        for always in [1, 100, 305] {
            assert!(swept.contains(&pid(always)), "{always} (a parent or a member) in {swept:?}");
        }
        swept_leaves.extend(swept.into_iter().filter(|p| ![1, 100, 305].contains(&p.get())));
    }
    assert_eq!(swept_leaves, HashSet::from([pid(101), pid(102), pid(203), pid(204)]), "every leaf within a round");
}
