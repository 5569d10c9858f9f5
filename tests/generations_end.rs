//! Issue 35 item 4: `reaperctl generations --end HOST_PID` ends one live
//! host's old idle copies on the user's request, as that user: a dry run
//! lists exactly what would end and signals nothing; without a daemon,
//! reaperctl looks at each copy's counters twice and ends the old idle
//! ones, keeping the newest, the busy ones and the host; another uid is
//! refused before anything is signalled.
//!
//! The host stand-in is `common::pile`'s (bash holding each copy's stdin,
//! fakeproc `serve` copies). 6 copies in 3 generations; the
//! host writes to the newest generation and to copy [`POKED`] only. Every
//! reaperctl call is `--scope`d to the test's sandbox and names a socket
//! where no daemon answers (so a daemon of the machine is never asked).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{Sandbox, TempDir, alive, pile, s, text};
use serde_json::Value;

const GENERATIONS: usize = 3;
const PER_GENERATION: usize = 2;
const COPIES: usize = GENERATIONS * PER_GENERATION;
/// The old copy the host keeps sending requests to: busy, so kept.
const POKED: usize = 1;
/// With `keep_newest = 1`, the newest copy is kept as the newest; the other
/// copy of the newest generation only because it is busy.
const CONFIG: &str = "[generations]\nkeep_newest = 1\n";

/// Copies that must end: old, idle.
fn idle_old() -> Vec<usize> {
    (0..COPIES - PER_GENERATION).filter(|&i| i != POKED).collect()
}

struct World {
    sb: Sandbox,
    dir: TempDir,
    host: i32,
    /// Copy pids, oldest first.
    copies: Vec<i32>,
    config: PathBuf,
}

fn world(name: &str) -> Option<World> {
    world_of(name, false)
}

fn world_of(name: &str, respawn: bool) -> Option<World> {
    let shape = pile::Shape { generations: GENERATIONS, per_generation: PER_GENERATION, busy: vec![POKED], respawn };
    let p = pile::start(name, "generations-end", &shape)?;
    let config = p.dir.write("config.toml", CONFIG);
    Some(World { sb: p.sb, dir: p.dir, host: p.host, copies: p.copies, config })
}

impl World {
    /// `reaperctl generations --end HOST ARGS`, scoped, with this world's
    /// config and a socket no daemon answers on.
    fn end_args(&self, args: &[&str]) -> Vec<String> {
        let mut a = vec![s("generations"), s("--end"), s(self.host), s("--sample-secs"), s(2)];
        a.extend(args.iter().map(s));
        a.extend([s("--scope"), s(self.sb.scope_pid()), s("--config"), s(self.config.display())]);
        a.extend([s("--socket"), s(self.dir.path().join("no-daemon.sock").display())]);
        a
    }

    fn end(&self, args: &[&str]) -> Output {
        common::reaperctl(self.end_args(args))
    }

    fn pids(&self, idx: &[usize]) -> Vec<i64> {
        let mut v: Vec<i64> = idx.iter().map(|&i| i64::from(self.copies[i])).collect();
        v.sort_unstable();
        v
    }
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "exit {:?}\n{}\n{}", out.status.code(), text(&out.stderr), text(&out.stdout));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

/// The pids of the report's copies with `field == true`, sorted.
fn marked(v: &Value, field: &str) -> Vec<i64> {
    let mut p: Vec<i64> = v["copies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c[field] == true)
        .map(|c| c["pid"].as_i64().unwrap())
        .collect();
    p.sort_unstable();
    p
}

#[test]
fn a_dry_run_lists_the_old_idle_copies_and_signals_nothing() {
    let name = "a_dry_run_lists_the_old_idle_copies_and_signals_nothing";
    let Some(w) = world(name) else { return };
    let v = json(&w.end(&["--dry-run", "--json"]));
    assert_eq!(v["dry_run"], true, "{v:#}");
    assert_eq!(v["host_pid"], w.host, "{v:#}");
    assert_eq!(v["copies"].as_array().unwrap().len(), COPIES, "{v:#}");
    assert_eq!(marked(&v, "end"), w.pids(&idle_old()), "exactly the old idle copies: {v:#}");
    assert_eq!(marked(&v, "ended"), Vec::<i64>::new(), "{v:#}");
    assert_eq!(v["ended"], idle_old().len(), "{v:#}");
    assert!(v["reclaimed_bytes"].as_u64().unwrap() > 0, "{v:#}");
    assert_eq!(v["watched_secs"], 0, "{v:#}");
    assert!(v["evidence"].as_str().unwrap().contains("two looks 2s apart"), "{v:#}");
    let poked = v["copies"].as_array().unwrap().iter().find(|c| c["pid"] == w.copies[POKED]).unwrap();
    assert!(poked["why"].as_str().unwrap().contains("did I/O or used CPU"), "{poked:#}");

    let out = w.end(&["--dry-run"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let words = text(&out.stdout);
    for &i in &idle_old() {
        assert!(words.contains(&format!("would end pid {} ", w.copies[i])), "copy {i}:\n{words}");
    }
    assert!(words.contains("nothing was signalled"), "{words}");
    assert!(w.copies.iter().all(|&p| alive(p)) && alive(w.host), "a dry run ends nothing");
}

#[test]
fn without_a_daemon_the_old_idle_copies_end_the_newest_busy_and_host_stay() {
    let name = "without_a_daemon_the_old_idle_copies_end_the_newest_busy_and_host_stay";
    let Some(w) = world(name) else { return };
    let v = json(&w.end(&["--json"]));
    let want = w.pids(&idle_old());
    assert_eq!(marked(&v, "end"), want, "{v:#}");
    assert_eq!(marked(&v, "ended"), want, "{v:#}");
    assert_eq!(v["ended"], want.len(), "{v:#}");
    assert!(v["reclaimed_bytes"].as_u64().unwrap() > 0, "{v:#}");
    assert!(v["watched_secs"].as_u64().unwrap() > 0, "{v:#}");
    assert_eq!(v["restarted"], serde_json::json!([]), "{v:#}");
    assert!(v["sentence"].as_str().unwrap().contains("the host started no new copy"), "{v:#}");
    for &i in &idle_old() {
        let pid = w.copies[i];
        assert!(common::wait_until(Duration::from_secs(30), || !alive(pid)), "copy {i} (pid {pid}) should end");
    }
    let kept: Vec<usize> = (0..COPIES).filter(|i| !idle_old().contains(i)).collect();
    for &i in &kept {
        assert!(alive(w.copies[i]), "copy {i} (newest or busy) stays: {v:#}");
    }
    assert!(alive(w.host), "the host stays");
    // Nothing more is idle and old: a second request ends nothing.
    let again = json(&w.end(&["--json"]));
    assert_eq!(marked(&again, "end"), Vec::<i64>::new(), "{again:#}");
    assert!(kept.iter().all(|&i| alive(w.copies[i])));
}

#[test]
fn another_user_is_refused_and_nothing_ends() {
    let name = "another_user_is_refused_and_nothing_ends";
    if !common::is_root() {
        common::skip(name, "needs root (a host of another uid than the caller's)");
        return;
    }
    let Some(setpriv) = common::find_tool("setpriv") else {
        common::skip(name, "setpriv (util-linux) is not installed");
        return;
    };
    let Some(w) = world(name) else { return };
    let ctl = common::reachable::reachable(Path::new(env!("CARGO_BIN_EXE_reaperctl")));
    let mut args = w.end_args(&[]);
    // The config beside the test is in a private directory: the default.
    let at = args.iter().position(|a| a == "--config").unwrap();
    args[at + 1] = s("-");
    let out = Command::new(setpriv)
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups", "--"])
        .arg(&ctl)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running setpriv: {e}"));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "NOPERM: {err}\n{}", text(&out.stdout));
    assert!(err.contains("not as you (uid 65534)") && err.contains("nothing was signalled"), "{err}");
    std::thread::sleep(Duration::from_secs(1));
    assert!(w.copies.iter().all(|&p| alive(p)) && alive(w.host), "nothing ends");
}

#[test]
fn a_pid_that_is_no_host_with_copies_is_a_usage_error() {
    let name = "a_pid_that_is_no_host_with_copies_is_a_usage_error";
    let Some(w) = world(name) else { return };
    let mut args = w.end_args(&[]);
    let at = args.iter().position(|a| a == "--end").unwrap();
    args[at + 1] = s(w.copies[0]);
    let out = common::reaperctl(&args);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is no live host holding MCP server copies"), "{}", text(&out.stderr));
    assert!(w.copies.iter().all(|&p| alive(p)));
}

/// With a daemon answering: `reaperctl generations` shows its samples per
/// copy and pile, and `--end --dry-run` judges by them, in its idle window.
#[test]
fn with_a_daemon_its_samples_are_shown_and_judged_by() {
    let name = "with_a_daemon_its_samples_are_shown_and_judged_by";
    let Some(w) = world(name) else { return };
    let cfg = w.dir.write(
        "daemon.toml",
        format!(
            "[reaper]\ngrace_secs = 0\ninterval_secs = 1\n{CONFIG}idle_secs = 4\nsample_secs = 1\nnotify_copies = 0\n"
        ),
    );
    let dir = w.dir.path().join("daemon");
    std::fs::create_dir_all(&dir).unwrap();
    let d = common::Daemon::start_in(w.sb.scope_pid(), &cfg, &dir, &common::Launch::default());
    let old = idle_old().len();
    d.status_until(Duration::from_secs(120), "the old copies idle", |st| {
        st["generations"].as_array().and_then(|g| g.first()).is_some_and(|p| p["idle_copies"] == old)
    });
    let scope = s(w.sb.scope_pid());
    let socket = s(d.socket.display());
    let common_args = ["--scope", &scope, "--config", &s(cfg.display()), "--socket", &socket];
    let mut view = vec!["generations", "--json"];
    view.extend(common_args);
    let v = json(&common::reaperctl(&view));
    assert_eq!(v["idle"], "sampled by the daemon every 1s", "{v:#}");
    let pile = &v["hosts"][0]["servers"][0];
    assert_eq!(pile["idle_secs"], 4, "{pile:#}");
    assert!(pile["sentence"].as_str().unwrap().contains(&format!("; {old} idle for more than 4s")), "{pile:#}");
    let copies: Vec<&Value> =
        pile["generations"].as_array().unwrap().iter().flat_map(|g| g["copies"].as_array().unwrap()).collect();
    assert_eq!(copies.len(), COPIES, "{pile:#}");
    for c in &copies {
        assert!(c["idle_secs"].is_u64() && c["watched_secs"].is_u64(), "{c:#}");
        assert_eq!(c["policy_end"], false, "the daemon's policy is off: {c:#}");
        assert!(c["policy_why"].as_str().unwrap().contains("end_idle is off"), "{c:#}");
    }
    let oldest = copies.iter().find(|c| c["pid"] == w.copies[0]).unwrap();
    assert!(oldest["idle_secs"].as_u64().unwrap() >= 4, "{oldest:#}");

    let mut words = vec!["generations"];
    words.extend(common_args);
    let out = common::reaperctl(&words);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let words = text(&out.stdout);
    assert!(words.contains("idle: sampled by the daemon every 1s"), "{words}");
    assert!(words.contains(&format!("; {old} idle for more than 4s")), "{words}");

    let mut end = vec!["generations", "--end"];
    let host = s(w.host);
    end.extend([host.as_str(), "--dry-run", "--json"]);
    end.extend(common_args);
    let v = json(&common::reaperctl(&end));
    assert!(v["evidence"].as_str().unwrap().contains("the daemon's samples"), "{v:#}");
    assert_eq!(v["idle_secs"], 4, "{v:#}");
    assert_eq!(marked(&v, "end"), w.pids(&idle_old()), "{v:#}");
    assert!(w.copies.iter().all(|&p| alive(p)) && alive(w.host), "a dry run ends nothing");
}

/// A host that restarts each copy it loses: the copies end, and the report
/// says the host started new ones right after.
#[test]
fn a_host_that_restarts_what_it_loses_is_said_to() {
    let name = "a_host_that_restarts_what_it_loses_is_said_to";
    let Some(w) = world_of(name, true) else { return };
    let v = json(&w.end(&["--json"]));
    assert_eq!(marked(&v, "ended"), w.pids(&idle_old()), "{v:#}");
    let restarted = v["restarted"].as_array().unwrap();
    assert!(!restarted.is_empty(), "{v:#}");
    assert!(restarted.iter().all(|r| !w.copies.contains(&i32::try_from(r["pid"].as_i64().unwrap()).unwrap())), "{v:#}");
    assert!(v["sentence"].as_str().unwrap().contains("the host restarts what it loses"), "{v:#}");
    assert!(alive(w.host));
}
