//! Replays every committed fuzz input (`fuzz/seeds/<target>/` and
//! `fuzz/regressions/<target>/`) through the same invariant checks as the
//! cargo-fuzz targets in `fuzz/`, on stable Rust, in a plain `cargo test`.
//! See fuzz/README.md for running the fuzzers themselves.

mod fuzz_checks;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut v: Vec<PathBuf> =
        rd.filter_map(std::result::Result::ok).map(|e| e.path()).filter(|p| p.is_file()).collect();
    v.sort();
    v
}

fn replay(target: &str, check: fn(&[u8])) {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let seeds = files(&fuzz.join("seeds").join(target));
    let regressions = files(&fuzz.join("regressions").join(target));
    assert!(!seeds.is_empty(), "no seed inputs in fuzz/seeds/{target}/");
    assert!(!regressions.is_empty(), "no regression inputs in fuzz/regressions/{target}/");
    let mut failed = Vec::new();
    for path in seeds.iter().chain(&regressions) {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        if catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
            failed.push(path.strip_prefix(&fuzz).unwrap_or(path).display().to_string());
        }
    }
    assert!(failed.is_empty(), "{target}: invariants fail on {failed:#?}");
}

#[test]
fn every_target_has_a_replay_test() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
    let mut on_disk: Vec<String> =
        files(&dir).iter().filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned())).collect();
    on_disk.sort();
    let mut here: Vec<String> = fuzz_checks::TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    here.sort();
    assert_eq!(on_disk, here, "fuzz/fuzz_targets/ and fuzz_checks::TARGETS differ");
}

#[test]
fn proc_stat() {
    replay("proc_stat", fuzz_checks::proc_stat);
}

#[test]
fn proc_stat_structured() {
    replay("proc_stat_structured", fuzz_checks::proc_stat_structured);
}

#[test]
fn proc_status() {
    replay("proc_status", fuzz_checks::proc_status);
}

#[test]
fn config() {
    replay("config", fuzz_checks::config);
}

#[test]
fn ctl_frame() {
    replay("ctl_frame", fuzz_checks::ctl_frame);
}

#[test]
fn netlink() {
    replay("netlink", fuzz_checks::netlink);
}

#[test]
fn netlink_structured() {
    replay("netlink_structured", fuzz_checks::netlink_structured);
}
