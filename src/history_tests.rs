//! The ledger's bounds and its reads.

use super::*;

fn entry(at: u64, reaped: bool) -> Entry {
    Entry {
        at_unix: at,
        verdict: Verdict::Orphan,
        reason: "its host exited".into(),
        root_pid: 42,
        root_start_time: 7,
        root_cmd: "npm exec x".into(),
        programs: vec!["npm".into(), "node".into()],
        uid: Some(1000),
        members: 2,
        processes: usize::from(reaped) * 2,
        signals: vec!["TERM".into()],
        escalated: false,
        reaped,
        ok: reaped,
        reclaimed_bytes: 1 << 20,
        mem_available_delta: None,
        containers: vec![],
        errors: vec![],
        programs_more: 0,
        programs_digest: None,
    }
}

/// A tree of 120 members, each with a distinct 3 KB program name.
fn hostile(at: u64, seed: u64) -> Entry {
    let mut e = entry(at, true);
    e.programs = (0..120).map(|i| format!("{seed}-{i}-{}", "x".repeat(3000))).collect();
    e.members = 120;
    e
}

#[test]
fn an_entry_keeps_a_few_names_whatever_the_tree() {
    let e = hostile(1, 0).bounded();
    assert_eq!((e.programs.len(), e.programs_more), (MAX_PROGRAMS, 120 - MAX_PROGRAMS));
    assert!(e.programs.iter().all(|p| p.chars().count() == NAME_WIDTH && p.ends_with('…')));
    assert_eq!(e.members, 120, "the count is kept");
    assert!(serde_json::to_vec(&e).unwrap().len() < 2048);
    // The digest tells the same programs from others, not their order in the file.
    assert_eq!(e.programs_digest, hostile(2, 0).bounded().programs_digest);
    assert_ne!(e.programs_digest, hostile(2, 1).bounded().programs_digest);
    // Bounding twice changes nothing.
    assert_eq!(e.clone().bounded(), e);
}

#[test]
fn hostile_trees_reaped_200_times_leave_a_small_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    for i in 0..200 {
        append(&path, vec![hostile(i, i)]).unwrap();
    }
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < 200 * 2048, "{size} bytes for 200 entries");
    let l = load(&path).unwrap().unwrap();
    assert_eq!((l.entries.len(), l.lifetime.totals.trees_reaped), (200, 200));
}

#[test]
fn the_ledger_stays_within_its_bytes_and_keeps_counting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let mut big = entry(0, true);
    big.reason = "r".repeat(5000);
    big.errors = vec!["e".repeat(5000); 40];
    let per = serde_json::to_vec(&big.clone().bounded()).unwrap().len();
    let n = MAX_BYTES / per + 50;
    let (l, _) = append(&path, (0..n as u64).map(|i| Entry { at_unix: i, ..big.clone() }).collect()).unwrap();
    let size = usize::try_from(std::fs::metadata(&path).unwrap().len()).unwrap();
    assert!(size <= MAX_BYTES, "{size}");
    assert!(l.dropped >= 50, "{}", l.dropped);
    assert_eq!(l.totals.trees_reaped, n as u64, "the totals count what was dropped");
    assert_eq!(load(&path).unwrap().unwrap().entries.last().unwrap().at_unix, n as u64 - 1, "the newest kept");
}

#[test]
fn a_ledger_written_before_the_bounds_is_cut_when_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let old = Ledger { version: VERSION, lifetime: Lifetime::default(), entries: vec![hostile(1, 0)] };
    std::fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
    let l = load(&path).unwrap().unwrap();
    assert_eq!(l.entries[0].programs.len(), MAX_PROGRAMS);
    append(&path, vec![entry(2, true)]).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() < 4096);
}

#[test]
fn appends_counts_and_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub").join(FILE_NAME);
    let (l, w) = append(&path, vec![entry(100, true), entry(200, false)]).unwrap();
    assert!(w.is_none());
    assert_eq!(l.since_unix, Some(100));
    assert_eq!((l.totals.trees_reaped, l.totals.failures, l.totals.processes_reaped), (1, 1, 2));
    let many: Vec<Entry> = (0..MAX_ENTRIES as u64).map(|i| entry(300 + i, true)).collect();
    let (l, _) = append(&path, many).unwrap();
    assert_eq!(l.totals.trees_reaped, 1 + MAX_ENTRIES as u64, "the totals count what the entries no longer hold");
    assert_eq!(l.dropped, 2);
    let back = load(&path).unwrap().unwrap();
    assert_eq!(back.entries.len(), MAX_ENTRIES);
    assert_eq!(back.entries[0].at_unix, 300, "the oldest went first");
    assert_eq!(back.since(300 + MAX_ENTRIES as u64 - 3).count(), 3);
    assert_eq!(back.lifetime, l);
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_corrupt_ledger_is_moved_aside_and_a_newer_one_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    std::fs::write(&path, "{half").unwrap();
    assert!(matches!(load(&path), Err(ReadError::Corrupt(_))));
    let (l, w) = append(&path, vec![entry(5, true)]).unwrap();
    assert!(w.unwrap().contains("corrupt"));
    assert_eq!(l.totals.trees_reaped, 1);
    assert_eq!(std::fs::read_to_string(dir.path().join("history.json.corrupt")).unwrap(), "{half");
    // A newer writer's fields are skipped, not refused.
    let newer = r#"{"version":1,"since_unix":1,"totals":{"trees_reaped":3,"processes_reaped":4,"reclaimed_bytes":5,
        "escalations":0,"failures":0,"galaxies":9},"entries":[{"at_unix":1,"verdict":"stale","reason":"r",
        "root_pid":9,"root_start_time":1,"root_cmd":"c","colour":"red"}]}"#;
    std::fs::write(&path, newer).unwrap();
    let l = load(&path).unwrap().unwrap();
    assert_eq!(l.lifetime.totals.trees_reaped, 3);
    assert_eq!(l.entries[0].verdict, Verdict::Stale);
    assert!(load(&dir.path().join("none.json")).unwrap().is_none());
}
