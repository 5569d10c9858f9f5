//! Skipped tests, said once more at the end of the run: libtest reports a
//! test that returned early as `ok`, and its reason shows only with
//! `--nocapture`. Each skip is a line in a file of its `cargo test` run;
//! the last test target (`tests/zz_skip_summary.rs`) prints the run's lines
//! and removes them.
//!
//! A run is the process that started this test binary (cargo, which runs
//! every test binary of one `cargo test` itself), by pid and start time:
//! a run stopped before its summary (a failure without `--no-fail-fast`,
//! Ctrl-C) leaves lines no later run counts, and a concurrent run in the
//! same target directory keeps its own.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// `target/tmp/test-skips/`: a directory per run, a file per test process.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-skips")
}

/// `PID-STARTTIME` of process `pid` (start time: field 22 of its stat, in
/// clock ticks since boot), so a reused pid is another run.
pub fn run_of(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the comm, which may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let start = rest.split_ascii_whitespace().nth(19)?;
    Some(format!("{pid}-{start}"))
}

/// The run this process belongs to: its parent's.
pub fn this_run() -> Option<String> {
    run_of(std::os::unix::process::parent_id())
}

/// This test binary's target name (`real_hosts` of `real_hosts-0fd3…`).
fn target_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe.as_deref().and_then(Path::file_stem).and_then(|s| s.to_str()).unwrap_or("?");
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => name.to_string(),
        _ => stem.to_string(),
    }
}

/// Adds `test`'s skip to its run's list. Best effort: a list that cannot
/// be written loses the summary line, never the test.
pub fn record(test: &str, why: &str) {
    let Some(run) = this_run() else { return };
    let run_dir = dir().join(run);
    if std::fs::create_dir_all(&run_dir).is_err() {
        return;
    }
    let one_line = |s: &str| s.replace(['\n', '\r', '\t'], " ");
    let line = format!("{}::{}\t{}\n", target_name(), one_line(test), one_line(why));
    let file = run_dir.join(format!("{}.txt", std::process::id()));
    // One write of one line on an O_APPEND file: the test threads of this
    // process do not interleave within a line.
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(file) {
        let _ = f.write_all(line.as_bytes());
    }
}

/// The lines of `run`, sorted: `(test, why)`.
pub fn read(run: &str) -> Vec<(String, String)> {
    let Ok(files) = std::fs::read_dir(dir().join(run)) else { return Vec::new() };
    let mut lines: Vec<(String, String)> = files
        .filter_map(|f| std::fs::read_to_string(f.ok()?.path()).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| l.split_once('\t'))
                .map(|(t, w)| (t.to_string(), w.to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    lines.sort();
    lines.dedup();
    lines
}

/// Removes `run`'s list, and those of runs whose process is gone.
pub fn clear(run: &str) {
    let _ = std::fs::remove_dir_all(dir().join(run));
    let Ok(runs) = std::fs::read_dir(dir()) else { return };
    for entry in runs.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let alive = name.split_once('-').and_then(|(pid, _)| pid.parse().ok()).and_then(run_of);
        if alive.as_deref() != Some(name.as_str()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
