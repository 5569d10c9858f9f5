//! Files read on a user's behalf by a root reaper (issue 34, items 1 and 5):
//! what one user may read, or may not, never decides for another, and
//! nothing a user cannot see changes what the reaper says.
//!
//! Real process trees of two unprivileged users (uid 1001, which needs no
//! passwd entry, and 65534), the real `reaperctl scan` and an enforcing
//! `mcp-reaperd --once`, each `--scope`d to its test's sandbox. Root only
//! (processes of other uids, files owned by them): skipped with the reason
//! otherwise. The fixture scripts are never executed; the reaper only reads
//! their text.

mod common;

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Sandbox, Spec, TempDir, alive, in_any_tree, reaped_roots, s, wait_until};
use serde_json::Value;

/// The script's owner, and another user naming the same path.
const OWNER: u32 = 1001;
const OTHER: u32 = 65534;

const WEATHER_PY: &str = "import sys\ntry:\n    from mcp.server.fastmcp import FastMCP\nexcept ImportError:\n    FastMCP = None\nfor line in sys.stdin:\n    pass\n";

/// Whether this test can run: as root, with the fixture programs and its
/// temporary directories reachable by other uids (a clone below a 0700
/// home is not).
fn can_run(test: &str, dir: &TempDir) -> bool {
    let why = if !common::is_root() {
        "needs root (processes and files of two other uids)"
    } else if !common::world_executable(common::fakeproc_path()) {
        "the fakeproc example is not reachable by other uids (a target dir below a private directory)"
    } else if !common::world_executable(dir.path()) {
        "the temporary directory is not reachable by other uids"
    } else {
        return true;
    };
    common::skip(test, why);
    false
}

fn mode(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", p.display()));
}

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap_or_else(|e| panic!("chown {uid} {}: {e}", p.display()));
}

fn uid_of(pid: i32) -> Option<u32> {
    std::fs::metadata(format!("/proc/{pid}")).ok().map(|m| m.uid())
}

/// The ready process running `cmd` as `uid`.
fn pid_of(sb: &Sandbox, cmd: &str, uid: u32) -> i32 {
    sb.ready()
        .iter()
        .find(|r| r.cmd == cmd && uid_of(r.pid) == Some(uid))
        .map_or_else(|| panic!("no {cmd:?} of uid {uid}: {:#?}", sb.ready()), |r| r.pid)
}

/// Two orphaned `python3 SCRIPT` of two users, one script owned by the
/// first; `owner_first`: the owner's process is started (and so numbered,
/// and looked at in a cycle) first.
fn two_users_on_one_script(test: &str, owner_first: bool) {
    let dir = TempDir::new("user-reads-race");
    if !can_run(test, &dir) {
        return;
    }
    let v = dir.path().join("v");
    std::fs::create_dir_all(&v).unwrap();
    mode(&v, 0o755);
    let script = v.join("weather.py");
    std::fs::write(&script, WEATHER_PY).unwrap();
    chown(&script, OWNER);
    // Readable by the other user: only ownership keeps it from being theirs.
    mode(&script, 0o644);
    let cmd = format!("python3 {}", script.display());
    let host = |uid: u32| Spec::new(&["python3", "agent.py"]).uid(uid);
    let server = |uid: u32| Spec::new(&["python3", &s(script.display())]).uid(uid).cwd(&v);
    let order = if owner_first { [OWNER, OTHER] } else { [OTHER, OWNER] };
    // The second server starts once the first is ready: numbered after it,
    // it is looked at after it in a cycle (a scan reads /proc in pid order).
    let mut sb = Sandbox::new(vec![host(order[0]).child(server(order[0])), host(order[1]).on_usr1(server(order[1]))]);
    let total = sb.ready().len() + 1;
    sb.signal(pid_of(&sb, "python3 agent.py", order[1]), rustix::process::Signal::USR1);
    sb.wait_ready(total);
    let (owners, others) = (pid_of(&sb, &cmd, OWNER), pid_of(&sb, &cmd, OTHER));
    if (owners < others) != owner_first {
        eprintln!("{test}: pids wrapped ({owners}, {others}): this run looks at the other order");
    }
    let hosts = order.map(|uid| pid_of(&sb, "python3 agent.py", uid));
    for host in hosts {
        sb.kill_host(host);
    }

    let scan = common::json_in(&dir, env!("CARGO_BIN_EXE_reaperctl"), &sb, &["scan"]);
    let m = in_any_tree(&scan, owners).unwrap_or_else(|| panic!("{test}: the owner's orphan is no server: {scan:#}"));
    assert_eq!((m["role"].as_str(), m["sdk"]["kind"].as_str()), (Some("server"), Some("imports")), "{test}: {m:#}");
    assert!(in_any_tree(&scan, others).is_none(), "{test}: another user's file made a server: {:#}", scan["trees"]);

    let once = common::json_in(&dir, env!("CARGO_BIN_EXE_mcp-reaperd"), &sb, &["--once", "--log-target", "stderr"]);
    assert_eq!(reaped_roots(&once), [i64::from(owners)], "{test}: {once:#}");
    assert!(wait_until(Duration::from_secs(10), || !alive(owners)), "{test}: the owner's orphan survived");
    sb.assert_alive(&[others]);
}

#[test]
fn a_script_is_judged_by_its_readers_rights_with_its_owner_first() {
    two_users_on_one_script("a_script_is_judged_by_its_readers_rights_with_its_owner_first", true);
}

#[test]
fn a_script_is_judged_by_its_readers_rights_with_another_user_first() {
    two_users_on_one_script("a_script_is_judged_by_its_readers_rights_with_another_user_first", false);
}

/// What a run says about `locked`: the log lines of an enforcing `--once`
/// (debug), and the host files `reaperctl scan` reports, that name it.
fn said_about(dir: &TempDir, sb: &Sandbox, locked: &Path) -> (Vec<String>, Vec<Value>) {
    let needle = locked.display().to_string();
    let (scope, config) = (s(sb.scope_pid()), s(dir.config(0, "").display()));
    let args = ["--once", "--json", "--log-target", "stderr", "--log-level", "debug", "--scope", &scope];
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-reaperd"))
        .args(args)
        .args(["--config", &config])
        .env("HOME", &home)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running mcp-reaperd");
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", common::text(&out.stderr));
    let log = common::text(&out.stderr);
    // Without the timestamp: the words are compared, not when they were said.
    let words = |l: &str| l.split_once(' ').map_or(l, |(_, rest)| rest).trim_start().to_string();
    let lines = log.lines().filter(|l| l.contains(&needle)).map(words).collect();
    let scan = common::json_in(dir, env!("CARGO_BIN_EXE_reaperctl"), sb, &["scan"]);
    let files = scan["hosts"]["files"].as_array().cloned().unwrap_or_default();
    (lines, files.into_iter().filter(|f| f.to_string().contains(&needle)).collect())
}

#[test]
fn a_config_below_a_directory_its_user_may_not_search_is_reported_alike_whether_or_not_it_is_there() {
    let test = "a_config_below_a_directory_its_user_may_not_search_is_reported_alike_whether_or_not_it_is_there";
    let dir = TempDir::new("user-reads-locked");
    if !can_run(test, &dir) {
        return;
    }
    mode(dir.path(), 0o755);
    // Root's, 0700: the host's HOME and CLAUDE_CONFIG_DIR point into it.
    let locked = dir.path().join("locked");
    std::fs::create_dir_all(&locked).unwrap();
    mode(&locked, 0o700);
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    chown(&project, OTHER);
    let claude_dir = locked.join("claude");
    let sb = Sandbox::new(vec![
        Spec::new(&["claude"])
            .uid(OTHER)
            .cwd(&project)
            .env("HOME", &s(locked.display()))
            .env("CLAUDE_CONFIG_DIR", &s(claude_dir.display())),
    ]);
    let config = r#"{"mcpServers": {"weather": {"command": "python3", "args": ["weather.py"]}}}"#;
    let planted: Vec<PathBuf> = [claude_dir.join(".claude.json"), locked.join(".cursor/mcp.json")].into();
    for f in &planted {
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, config).unwrap();
        // The user's own files: only the directory above keeps them out.
        chown(f, OTHER);
    }
    let there = said_about(&dir, &sb, &locked);
    std::fs::remove_dir_all(&claude_dir).unwrap();
    std::fs::remove_dir_all(locked.join(".cursor")).unwrap();
    let absent = said_about(&dir, &sb, &locked);
    assert_eq!(there, absent, "what the reaper says tells whether files exist where uid {OTHER} may not look");
}
