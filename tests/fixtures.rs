//! The scanner and policy on a hand-made `/proc` (tests/data/proc-basic, see
//! tests/data/README.md), through `reaperctl scan --json --proc-root DIR`.
//!
//! The fixture is used three ways:
//! - as stored: plain files only, no symlinks, so no exe, fds, namespace
//!   inodes, and no `self` (the reaper's own pid is unknown);
//! - copied, with the symlinks listed in its `links` file (exe, fd/N, ns/pid);
//! - copied with the links and a `self` link naming pid 4242 as the reaper.

mod common;

use std::path::{Path, PathBuf};

use common::{TempDir, member, reaperctl, s, scan_json, tree_rooted_at};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// A copy of fixture `name` in a temp dir with its symlinks made, and `self`
/// pointing at `self_pid` if given. Returns the dir and the proc root in it.
fn materialize(name: &str, self_pid: Option<u32>) -> (TempDir, PathBuf) {
    let dir = TempDir::new("fixture");
    let root = dir.path().join("proc");
    copy_dir(&fixture(name), &root);
    let links = std::fs::read_to_string(root.join("links")).unwrap();
    for line in links.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let (path, target) = line.split_once('\t').unwrap_or_else(|| panic!("bad links line {line:?}"));
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, &path).unwrap();
    }
    if let Some(pid) = self_pid {
        std::os::unix::fs::symlink(pid.to_string(), root.join("self")).unwrap();
    }
    (dir, root)
}

fn scan(dir: &TempDir, root: &Path, min_uid: u32) -> Value {
    let cfg = dir.config(0, "");
    let cfg = if min_uid == 0 {
        cfg
    } else {
        let text = std::fs::read_to_string(&cfg).unwrap().replace("min_uid = 0", &format!("min_uid = {min_uid}"));
        dir.write("config-min-uid.toml", text)
    };
    scan_json(&cfg, &["--proc-root", root.to_str().unwrap()])
}

fn roots(v: &Value) -> Vec<i64> {
    v["trees"].as_array().unwrap().iter().map(|t| t["root"].as_i64().unwrap()).collect()
}

fn members(t: &Value) -> Vec<i64> {
    t["members"].as_array().unwrap().iter().map(|m| m["pid"].as_i64().unwrap()).collect()
}

fn verdict(v: &Value, root: i32) -> (String, bool, String) {
    let t = tree_rooted_at(v, root);
    (
        t["verdict"].as_str().unwrap().to_string(),
        t["reap"].as_bool().unwrap(),
        t["reason"].as_str().unwrap().to_string(),
    )
}

#[track_caller]
fn assert_verdict(v: &Value, root: i32, want: &str, reap: bool, reason_has: &str) {
    let (got, r, reason) = verdict(v, root);
    assert_eq!((got.as_str(), r), (want, reap), "tree {root}: {reason}");
    assert!(reason.contains(reason_has), "tree {root}: reason {reason:?} lacks {reason_has:?}");
}

const ALL_ROOTS: [i64; 11] = [1000, 2001, 3000, 4000, 5000, 6001, 7000, 8000, 8100, 8200, 9000];

#[test]
fn full_fixture_with_self_gives_every_verdict() {
    let (dir, root) = materialize("proc-basic", Some(4242));
    let v = scan(&dir, &root, 0);
    assert_eq!(v["summary"]["processes_scanned"], 28, "every pid dir, kernel threads and zombie included");
    assert_eq!(roots(&v), ALL_ROOTS, "{v:#}");

    // A: npm exec adopted by systemd --user; the setsid'd chrome and its zombie child go with it.
    assert_verdict(&v, 1000, "orphan", true, "adopted by /usr/lib/systemd/systemd --user (pid 900)");
    let a = tree_rooted_at(&v, 1000);
    assert_eq!(members(a), [1000, 1001, 1002, 1003]);
    assert_eq!(a["owner"]["pid"], 900);
    assert_eq!(member(a, 1002)["sid"], 1002);
    assert_eq!(member(a, 1003)["state"], "Z");
    assert_eq!(member(a, 1003)["cmdline"], "[chrome]", "a zombie's argv is not read");
    assert_eq!(member(a, 1000)["uid"], 1000);
    let page = a["members"][0]["rss_bytes"].as_u64().unwrap() / 2500;
    assert!(page >= 4096, "rss is pages × page size: {page}");
    let live_rss: u64 = [1000, 1001, 1002].iter().map(|&p| member(a, p)["rss_bytes"].as_u64().unwrap()).sum();
    let swap: u64 = [1000, 1001, 1002].iter().map(|&p| member(a, p)["swap_bytes"].as_u64().unwrap()).sum();
    assert_eq!(member(a, 1000)["swap_bytes"], (1000 % 7) * 1024 * 1024, "VmSwap is read");
    assert_eq!(a["memory_bytes"].as_u64().unwrap(), live_rss + swap, "the zombie counts for nothing");

    // B: claude with a live terminal above it.
    assert_verdict(&v, 2001, "live", false, "host claude --resume (pid 2000) is alive with terminal /dev/pts/1");
    assert_eq!(tree_rooted_at(&v, 2001)["host"]["pid"], 2000);
    assert_eq!(members(tree_rooted_at(&v, 2001)), [2001, 2002]);

    // C: the host's terminal is gone: the tree grows to the host.
    assert_verdict(&v, 3000, "stale", true, "(pid 3000) is alive but its terminal /dev/pts/7 (deleted) is gone");
    let c = tree_rooted_at(&v, 3000);
    assert_eq!(members(c), [3000, 3001]);
    assert_eq!(c["host"]["pid"], 3000);
    assert_eq!(c["owner"]["pid"], 900);
    assert_eq!(c["servers"], serde_json::json!([3001]));

    // D: hostile comms; an orphan like any other.
    assert_verdict(&v, 4000, "orphan", true, "(pid 900)");
    assert_eq!(members(tree_rooted_at(&v, 4000)), [4000, 4001]);

    // E: non-UTF-8 argv.
    assert_verdict(&v, 5000, "orphan", true, "adopted by");
    assert_eq!(
        member(tree_rooted_at(&v, 5000), 5000)["cmdline"],
        "python3 -m mcp_server_git --repository /home/u/caf\u{fffd}/\u{fffd}"
    );

    // F: a login shell owns it.
    assert_verdict(
        &v,
        6001,
        "foreign",
        false,
        "run from -bash (pid 6000), the interactive shell of a person's terminal /dev/pts/2",
    );

    // G: deeper PID namespace (NSpid has two levels, the reaper's one).
    assert_verdict(&v, 7000, "protected", false, "lives in another PID namespace");

    // H: root's orphan, adopted by PID 1; min_uid = 0 makes it a target.
    assert_verdict(&v, 8000, "orphan", true, "adopted by PID 1");
    assert_eq!(members(tree_rooted_at(&v, 8000)), [8000, 8001]);

    // I: a member whose status vanished cannot be inspected: keep.
    assert_verdict(&v, 8100, "protected", false, "cannot tell which PID namespace member");
    assert!(verdict(&v, 8100).2.contains("(pid 8101)"));

    // K: a server started with /dev/null and a log file for stdio (nohup):
    // adopted, but nobody's stdio server.
    assert_verdict(
        &v,
        8200,
        "detached",
        false,
        "server mcp-server-notes (pid 8200) has stdin /dev/null and stdout file",
    );
    let m = member(tree_rooted_at(&v, 8200), 8200);
    assert_eq!(m["program"], "mcp-server-notes");
    assert_eq!((&m["evidence"]["fd0"], &m["evidence"]["fd1"]), (&s("/dev/null").into(), &s("file").into()));

    // J: the reaper (self = 4242) runs below this server: never touched.
    assert_verdict(&v, 9000, "protected", false, "contains mcp-reaper itself or one of its ancestors");
    assert_eq!(members(tree_rooted_at(&v, 9000)), [9000, 9001, 4242]);

    let s = &v["summary"];
    assert_eq!(s["trees"], 11);
    assert_eq!(
        s["by_verdict"],
        serde_json::json!({"abandoned": 0, "detached": 1, "foreign": 1, "live": 1, "orphan": 4, "protected": 3, "stale": 1, "young": 0})
    );
    assert_eq!(s["reap_trees"], 5);
    assert_eq!(s["reap_processes"], 4 + 2 + 2 + 1 + 2);
    assert_eq!(s["scope"], Value::Null);
}

#[test]
fn hostile_comm_fields_parse_right() {
    let (dir, root) = materialize("proc-basic", Some(4242));
    let v = scan(&dir, &root, 0);
    let d = tree_rooted_at(&v, 4000);
    let m = member(d, 4000);
    assert_eq!(m["ppid"], 900, "{m:#}");
    assert_eq!(m["pgid"], 4000);
    assert_eq!(m["sid"], 4000);
    assert_eq!(m["state"], "S");
    assert_eq!(m["start_time"], 7_654_321);
    assert_eq!(m["cmdline"], "node /opt/mcp/mcp-server-hostile.js");
    assert_eq!(m["role"], "server");
    assert_eq!(d["root_start_time"], 7_654_321);
    let tck = rustix::param::clock_ticks_per_second() as f64;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // whole seconds, clamped at 0
    let age = (100_000.0 - 7_654_321.0 / tck).max(0.0) as u64;
    assert_eq!(m["age_secs"], age, "age from uptime and start time");

    // comm "x\ny z", argv cleared: shown as [comm] like ps does.
    let m = member(d, 4001);
    assert_eq!(m["ppid"], 4000, "{m:#}");
    assert_eq!(m["start_time"], 7_654_400);
    assert_eq!(m["cmdline"], "[x\ny z]");
    assert_eq!(m["role"], "other");
    assert_eq!(m["depth"], 1);
}

#[test]
fn kernel_threads_and_pid_1_are_never_tree_members() {
    let (dir, root) = materialize("proc-basic", Some(4242));
    let v = scan(&dir, &root, 0);
    for t in v["trees"].as_array().unwrap() {
        for pid in members(t) {
            assert!(![1, 2, 37].contains(&pid), "{pid} in tree {}", t["root"]);
        }
    }
}

#[test]
fn without_self_the_namespace_is_unknown_and_every_candidate_is_kept() {
    // Links but no `self`: the reaper's own PID namespace depth is unknown,
    // so no candidate can be shown to share it.
    let (dir, root) = materialize("proc-basic", None);
    let v = scan(&dir, &root, 0);
    assert_eq!(roots(&v), ALL_ROOTS);
    for r in [1000, 3000, 4000, 5000, 7000, 8000, 8100, 9000] {
        assert_verdict(&v, r, "protected", false, "cannot tell which PID namespace member");
    }
    assert_verdict(&v, 1000, "protected", false, "adopted by /usr/lib/systemd/systemd --user (pid 900)");
    assert_verdict(&v, 3000, "protected", false, "terminal /dev/pts/7 (deleted) is gone");
    assert_verdict(&v, 2001, "live", false, "alive with terminal /dev/pts/1");
    assert_verdict(&v, 6001, "foreign", false, "-bash (pid 6000)");
    assert_eq!(v["summary"]["reap_trees"], 0);
}

#[test]
fn stored_fixture_without_links_is_read_as_plain_files() {
    // No symlinks at all: no fds (so no terminal is known), no exe, no ns inode.
    let dir = TempDir::new("fixture-raw");
    let v = scan(&dir, &fixture("proc-basic"), 0);
    assert_eq!(v["summary"]["processes_scanned"], 28);
    // Without fds the closed terminal is invisible: the host looks headless.
    assert_verdict(&v, 3001, "live", false, "(pid 3000) is alive (no terminal: headless or IDE)");
    assert_verdict(&v, 2001, "live", false, "(no terminal: headless or IDE)");
    assert_verdict(&v, 1000, "protected", false, "cannot tell which PID namespace member");
    assert_eq!(v["summary"]["reap_trees"], 0);
    assert_eq!(member(tree_rooted_at(&v, 4000), 4000)["start_time"], 7_654_321);
}

#[test]
fn min_uid_protects_system_users() {
    let (dir, root) = materialize("proc-basic", Some(4242));
    let v = scan(&dir, &root, 1000);
    assert_verdict(&v, 8000, "protected", false, "belongs to uid 0, below min_uid 1000");
    assert_verdict(&v, 1000, "orphan", true, "adopted by");
}

#[test]
fn scope_limits_the_fixture_to_one_subtree() {
    let (dir, root) = materialize("proc-basic", Some(4242));
    let cfg = dir.config(0, "");
    let v = scan_json(&cfg, &["--proc-root", root.to_str().unwrap(), "--scope", "1900"]);
    assert_eq!(roots(&v), [2001], "{v:#}");
    assert_verdict(&v, 2001, "live", false, "host claude --resume (pid 2000)");
    // Scoped to systemd --user: the trees adopted by PID 1 or owned elsewhere drop out.
    let v = scan_json(&cfg, &["--proc-root", root.to_str().unwrap(), "--scope", "900"]);
    assert_eq!(roots(&v), [1000, 3000, 4000, 5000, 7000, 8100, 9000], "{v:#}");
    assert_verdict(&v, 1000, "orphan", true, "adopted by the scope process /usr/lib/systemd/systemd --user (pid 900)");
}

#[test]
fn human_view_of_the_fixture_does_not_choke() {
    let (dir, root) = materialize("proc-basic", Some(4242));
    let cfg = dir.config(0, "");
    let out = reaperctl(["scan", "--proc-root", root.to_str().unwrap(), "--config", cfg.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for heading in [
        "ORPHAN · 4 trees",
        "STALE · 1 tree",
        "LIVE · 1 tree",
        "FOREIGN · 1 tree",
        "PROTECTED · 3 trees",
        "DETACHED · 1 tree",
    ] {
        assert!(text.contains(heading), "{heading:?} missing:\n{text}");
    }
    assert!(text.contains("zombie"), "the zombie's memory column:\n{text}");
    assert!(text.contains("11 trees among 28 processes"), "{text}");
    assert!(text.contains("server:mcp-server-notes"), "the program column:\n{text}");
}

#[test]
fn missing_proc_root_is_an_error() {
    let dir = TempDir::new("fixture-missing");
    let cfg = dir.config(0, "");
    let out = reaperctl(["scan", "--proc-root", "/nonexistent/proc", "--config", cfg.to_str().unwrap()]);
    // EX_OSFILE: a system file (/proc) cannot be read; `mcp-reaperd --once` says the same.
    assert_eq!(out.status.code(), Some(72));
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading /nonexistent/proc"));
}
