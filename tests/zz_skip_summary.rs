//! Says, at the end of `cargo test`, which tests of this run were skipped
//! and why: libtest counts them as passed, and prints their reason only
//! with `--nocapture`. Cargo runs test targets in name order, so this one
//! (`zz_…`) comes after every other; not a libtest harness (Cargo.toml,
//! `harness = false`), so what it prints is never captured. The list is
//! written by `common::skip` (tests/common/skips.rs).

#[path = "common/skips.rs"]
#[allow(dead_code)] // the recording half is the tests'
mod skips;

fn main() {
    // `cargo test -- --list` (and test runners that list first): no test here.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Some(run) = skips::this_run() else { return };
    let skipped = skips::read(&run);
    skips::clear(&run);
    if skipped.is_empty() {
        println!("\nskip summary: no test was skipped\n");
        return;
    }
    println!("\nskip summary: {} test(s) SKIPPED, each reported `ok` above without running:", skipped.len());
    for (test, why) in &skipped {
        println!("  {test}: {why}");
    }
    println!();
}
