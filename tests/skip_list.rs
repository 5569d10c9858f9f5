//! The list behind the skip summary at the end of `cargo test`
//! (`tests/common/skips.rs`, printed by `tests/zz_skip_summary.rs`): a skip is
//! listed under its own run, and the list of a run whose cargo is gone (it
//! stopped before its summary) is dropped, never counted by a later run.

mod common;

use common::skips;

#[test]
fn a_skip_is_listed_for_its_run_and_a_finished_runs_list_is_dropped() {
    let run = skips::this_run().expect("the run of this test process (its parent, cargo)");
    // Recorded directly rather than through `common::skip`, and taken back
    // at once: this test is not skipped, and its line must not reach the
    // summary.
    skips::record("probe\nof the list", "because\tof a test");
    let mine = skips::dir().join(&run).join(format!("{}.txt", std::process::id()));
    let listed = skips::read(&run);
    std::fs::remove_file(&mine).unwrap_or_else(|e| panic!("{}: {e}", mine.display()));
    let want = ("skip_list::probe of the list".to_string(), "because of a test".to_string());
    assert!(listed.contains(&want), "{listed:?}");

    // A run whose process is gone, and one still running (PID 1 stands in
    // for a concurrent `cargo test` in the same target directory).
    let dead = skips::dir().join("4194304-1");
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(dead.join("1.txt"), "old::test\tstale\n").unwrap();
    let live = skips::dir().join(skips::run_of(1).expect("PID 1's start time"));
    let live_existed = live.exists();
    std::fs::create_dir_all(&live).unwrap();
    skips::clear("no-such-run");
    let (dead_left, live_left, ours_left) = (dead.exists(), live.exists(), skips::dir().join(&run).exists());
    if !live_existed {
        let _ = std::fs::remove_dir_all(&live);
    }
    assert!(!dead_left, "{} outlived its run", dead.display());
    assert!(live_left, "{} was dropped while its process runs", live.display());
    assert!(ours_left, "this run's list was dropped before its summary");
}
