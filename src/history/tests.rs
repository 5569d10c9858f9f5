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
        seq: None,
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
    let size: u64 =
        [path.clone(), journal::of(&path)].iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum();
    assert!(size < 200 * 2048, "{size} bytes for 200 entries");
    let l = load(&path).unwrap().unwrap();
    assert_eq!((l.entries.len(), l.lifetime().totals.trees_reaped), (200, 200));
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
    let old = Ledger { version: VERSION, entries: vec![hostile(1, 0)], ..Ledger::default() };
    std::fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
    let l = load(&path).unwrap().unwrap();
    assert_eq!(l.entries[0].programs.len(), MAX_PROGRAMS);
    // It is cut on disk at the next fold.
    let (mut w, _) = Writer::open(&path).unwrap();
    w.append(vec![entry(2, true)]).unwrap();
    w.append((0..FOLD_ENTRIES).map(|i| entry(3 + i, true)).collect()).unwrap();
    assert!(!journal::of(&path).exists(), "folded");
    let on_disk: Ledger = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(on_disk.entries[0].programs.len(), MAX_PROGRAMS);
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
    assert_eq!(back.lifetime(), l);
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
    std::fs::remove_file(journal::of(&path)).unwrap();
    let newer = r#"{"version":1,"since_unix":1,"totals":{"trees_reaped":3,"processes_reaped":4,"reclaimed_bytes":5,
        "escalations":0,"failures":0,"galaxies":9},"entries":[{"at_unix":1,"verdict":"stale","reason":"r",
        "root_pid":9,"root_start_time":1,"root_cmd":"c","colour":"red"}]}"#;
    std::fs::write(&path, newer).unwrap();
    let l = load(&path).unwrap().unwrap();
    assert_eq!(l.lifetime().totals.trees_reaped, 3);
    assert_eq!(l.entries[0].verdict, Verdict::Stale);
    assert!(load(&dir.path().join("none.json")).unwrap().is_none());
}

/// Entries enough to pass the journal's fold size.
const FOLD_ENTRIES: u64 = 1000;

#[test]
fn an_append_writes_a_line_and_reads_nothing_until_the_journal_is_folded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let (mut w, warning) = Writer::open(&path).unwrap();
    assert!(warning.is_none());
    w.append(vec![entry(10, true)]).unwrap();
    w.append(vec![entry(11, false), entry(12, true)]).unwrap();
    assert!(!path.exists(), "the ledger is not written at each append");
    let text = std::fs::read_to_string(journal::of(&path)).unwrap();
    assert_eq!(text.lines().filter(|l| !l.is_empty()).count(), 2, "{text}");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(journal::of(&path)).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let l = load(&path).unwrap().unwrap();
    assert_eq!(l.entries.iter().map(|e| e.seq).collect::<Vec<_>>(), [Some(1), Some(2), Some(3)]);
    assert_eq!(&l.lifetime(), w.lifetime());
    assert_eq!((l.lifetime().totals.trees_reaped, l.lifetime().since_unix), (2, Some(10)));
    // Past the fold size the journal goes into the ledger, and the numbers go on.
    w.append((0..FOLD_ENTRIES).map(|i| entry(100 + i, true)).collect()).unwrap();
    assert!(path.exists() && !journal::of(&path).exists());
    w.append(vec![entry(5000, true)]).unwrap();
    let l = load(&path).unwrap().unwrap();
    assert_eq!(l.entries.len(), 4 + FOLD_ENTRIES as usize);
    assert_eq!(l.entries.last().unwrap().seq, Some(4 + FOLD_ENTRIES));
    assert_eq!(&l.lifetime(), w.lifetime());
    // A writer opened afresh goes on from there.
    let (mut again, _) = Writer::open(&path).unwrap();
    again.append(vec![entry(5001, true)]).unwrap();
    assert_eq!(load(&path).unwrap().unwrap().entries.last().unwrap().seq, Some(5 + FOLD_ENTRIES));
}

#[test]
fn a_crash_between_the_fold_and_the_journals_removal_counts_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let (mut w, _) = Writer::open(&path).unwrap();
    w.append(vec![entry(1, true), entry(2, true)]).unwrap();
    let before_fold = std::fs::read(journal::of(&path)).unwrap();
    w.append((0..FOLD_ENTRIES).map(|i| entry(3 + i, true)).collect()).unwrap();
    // The journal the fold removed is back, as if the fold had stopped there.
    std::fs::write(journal::of(&path), &before_fold).unwrap();
    let l = load(&path).unwrap().unwrap();
    assert_eq!(l.entries.len(), 2 + FOLD_ENTRIES as usize);
    assert_eq!(l.lifetime().totals.trees_reaped, 2 + FOLD_ENTRIES);
    let (mut again, _) = Writer::open(&path).unwrap();
    assert_eq!(again.lifetime().totals.trees_reaped, 2 + FOLD_ENTRIES);
    again.append(vec![entry(9999, true)]).unwrap();
    let l = load(&path).unwrap().unwrap();
    assert_eq!(l.entries.len(), 3 + FOLD_ENTRIES as usize);
    assert_eq!(l.entries.last().unwrap().seq, Some(3 + FOLD_ENTRIES), "numbered after the fold's last");
}

#[test]
fn a_line_cut_short_is_skipped_and_the_next_append_starts_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    append(&path, vec![entry(1, true)]).unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(journal::of(&path)).unwrap();
    std::io::Write::write_all(&mut f, b"\n[{\"at_unix\":2,\"verdict\":\"orph").unwrap();
    drop(f);
    let (l, _) = append(&path, vec![entry(3, true)]).unwrap();
    assert_eq!(l.totals.trees_reaped, 2);
    let back = load(&path).unwrap().unwrap();
    assert_eq!(back.entries.iter().map(|e| e.at_unix).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(back.skipped, 1);
    let view = View::new(&path, Some(&back), None, None);
    assert!(view.note.unwrap().contains("1 unreadable"));
}

#[test]
fn a_symlink_at_the_journals_name_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, journal::of(&path)).unwrap();
    assert!(append(&path, vec![entry(1, true)]).is_err());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
}

#[test]
fn a_corrupt_ledger_goes_aside_with_its_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    append(&path, vec![entry(1, true)]).unwrap();
    std::fs::write(&path, "{half").unwrap();
    let (l, w) = append(&path, vec![entry(2, true)]).unwrap();
    assert!(w.unwrap().contains("its journal"));
    assert_eq!(l.totals.trees_reaped, 1);
    assert!(dir.path().join("history.jsonl.corrupt").exists());
    assert_eq!(load(&path).unwrap().unwrap().entries.len(), 1);
}
