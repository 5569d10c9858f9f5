//! Issue 35 item 1: `reaperctl generations` shows, per live host, its
//! server copies by command and generation, with evidence per copy.
//!
//! The host stand-in must start copies seconds apart while holding every
//! pipe, which fakeproc cannot (it starts its children at once): it is
//! bash, run through a link named `claude`, giving each copy its stdin
//! from a process substitution (bash keeps the write end) and sleeping
//! between sets. The copies are fakeproc again, named by `exec -a`.

mod common;

use std::fmt::Write as _;
use std::time::Duration;

use common::{Sandbox, Spec, TempDir, s, text};
use serde_json::Value;

const GENERATIONS: usize = 4;
const PER_GENERATION: usize = 3;
const SESSION_A: &str = "0b9e4c1e-6f1a-4a35-9d0e-2f1f5c3a7b11";
const SESSION_B: &str = "7d2f0c55-1b8e-4e0a-a3c4-5e6f7a8b9c0d";

/// The host's script: 4 sets of 3 `npx -y @playwright/mcp@latest`, more
/// than the generation window apart (sets 1–2 in session A, 3–4 in B), and
/// one `uvx mcp-server-time` whose session id is hostile; then it waits,
/// holding every write end.
fn script(fakeproc: &str, window: u64) -> String {
    let copy = |argv: &[&str], session: &str| {
        let spec = serde_json::json!({ "argv": argv }).to_string();
        format!(
            "exec {{w}}> >(export FAKEPROC='{spec}' CLAUDE_CODE_SESSION_ID=$'{session}'; exec -a {} '{fakeproc}' {})\n",
            argv[0],
            argv[1..].join(" ")
        )
    };
    let mut sh = String::new();
    for g in 0..GENERATIONS {
        let session = if g < GENERATIONS / 2 { SESSION_A } else { SESSION_B };
        for _ in 0..PER_GENERATION {
            sh.push_str(&copy(&["npx", "-y", "@playwright/mcp@latest"], session));
        }
        // Past the window counted from this set's first copy, however
        // slowly this set was started.
        let _ = writeln!(sh, "sleep {}", window + 1);
    }
    sh.push_str(&copy(&["uvx", "mcp-server-time"], "\\e[2Jevil"));
    sh.push_str("while :; do sleep 3600; done\n");
    sh
}

fn by_command<'a>(host: &'a Value, needle: &str) -> &'a Value {
    host["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["command"].as_str().is_some_and(|c| c.contains(needle)))
        .unwrap_or_else(|| panic!("no server {needle}: {host:#}"))
}

#[test]
fn twelve_copies_in_four_generations_under_one_live_host() {
    let Some(bash) = common::find_tool("bash") else {
        common::skip("twelve_copies_in_four_generations_under_one_live_host", "no bash");
        return;
    };
    let bin = TempDir::new("generations");
    let link = bin.path().join("claude");
    std::os::unix::fs::symlink(&bash, &link).unwrap();
    // The window the command uses, so the test's spacing follows the rule.
    let window = mcp_reaper::policy::generations::WINDOW_SECS;
    let fakeproc = common::fakeproc_path().to_str().unwrap().to_string();
    let script = bin.write("session.sh", script(&fakeproc, window));
    let host = Spec::new(&[link.to_str().unwrap(), script.to_str().unwrap()]).real().stdio_pty();
    let mut sb = Sandbox::new(vec![host]);
    // The scope, the host, and every copy once it reported ready.
    let copies = GENERATIONS * PER_GENERATION + 1;
    sb.wait_ready(2 + copies);
    let host_pid = sb.pid_of(link.to_str().unwrap());
    let cfg = sb.dir().config(0, "");
    let scope = s(sb.scope_pid());

    // No daemon answers there: the view is one look, as said.
    let nowhere = s(bin.path().join("no-daemon.sock").display());
    let out = common::reaperctl([
        "generations",
        "--json",
        "--config",
        &s(cfg.display()),
        "--scope",
        &scope,
        "--socket",
        &nowhere,
    ]);
    assert!(out.status.success(), "{}\n{}", text(&out.stderr), text(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    let hosts = v["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1, "{v:#}");
    let h = &hosts[0];
    assert_eq!(h["host_pid"], host_pid, "{v:#}");
    assert_eq!(h["copies"], copies, "{v:#}");

    let pw = by_command(h, "playwright");
    assert_eq!(pw["copies"], GENERATIONS * PER_GENERATION, "{pw:#}");
    assert_eq!(pw["generation_count"], GENERATIONS, "{pw:#}");
    let gens = pw["generations"].as_array().unwrap();
    assert!(gens.iter().all(|g| g["copies"].as_array().unwrap().len() == PER_GENERATION), "{pw:#}");
    assert_eq!(gens[0]["session"], SESSION_A);
    assert_eq!(gens[GENERATIONS - 1]["session"], SESSION_B);
    let sessions = pw["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{pw:#}");
    assert!(pw["memory_bytes"].as_u64().unwrap() > 0, "{pw:#}");
    for c in gens.iter().flat_map(|g| g["copies"].as_array().unwrap()) {
        assert!(c["memory_bytes"].as_u64().unwrap() > 0, "{c:#}");
        assert_eq!(c["host_holds_transport"], true, "{c:#}");
        assert!(c["cpu_secs"].is_number(), "{c:#}");
        assert!(c["rchar"].is_u64() && c["wchar"].is_u64(), "{c:#}");
    }
    // Older generations are older.
    let ages: Vec<f64> = gens.iter().map(|g| g["age_secs"].as_f64().unwrap()).collect();
    assert!(ages.windows(2).all(|w| w[0] > w[1]), "{ages:?}");

    let time = by_command(h, "mcp-server-time");
    assert_eq!(time["copies"], 1);
    assert!(time["sessions"][0]["session"].is_null(), "a hostile session id is not believed: {time:#}");
    assert_eq!(v["idle"], "needs the daemon's samples");

    let out =
        common::reaperctl(["generations", "--config", &s(cfg.display()), "--scope", &scope, "--socket", &nowhere]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let words = text(&out.stdout);
    eprintln!("{words}");
    let command = pw["command"].as_str().unwrap();
    let sentence = format!("holds 12 copies of {command} in 4 generations, ");
    assert!(words.contains(&sentence), "no {sentence:?} in:\n{words}");
    assert!(words.contains(&format!("(pid {host_pid}) {sentence}")), "the host named: {words}");
    assert!(words.contains("idle: needs the daemon's samples"), "{words}");
    assert!(!words.contains('\u{1b}'), "{words}");
    assert!(words.lines().all(|l| l.chars().count() <= 200), "{words}");

    // Read-only: everything still runs.
    assert!(wait_until_alive(&sb), "a process of the sandbox is gone");
}

fn wait_until_alive(sb: &Sandbox) -> bool {
    common::wait_until(Duration::from_secs(1), || sb.all_pids().iter().all(|&p| common::alive(p)))
}

/// Claude Code's own layout: servers on a socketpair whose other end the
/// host holds (the socket diagnostics name the holder), started together:
/// one generation, every transport held. Ending the host's end of one
/// makes that copy's transport no longer held.
#[test]
fn copies_on_socketpairs_started_together_are_one_generation() {
    let dir = TempDir::new("generations-socket");
    let cue = dir.path().join("close");
    let server = || Spec::new(&["uvx", "mcp-server-fetch"]).stdio_socket();
    let host = Spec::new(&["claude", "--resume"])
        .stdio_pty()
        .child(server())
        .child(server())
        .child(server().close_stdin_when(&cue));
    let sb = Sandbox::new(vec![host]);
    let cfg = sb.dir().config(0, "");
    let scope = s(sb.scope_pid());
    let look = || {
        let out = common::reaperctl(["generations", "--json", "--config", &s(cfg.display()), "--scope", &scope]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let v = look();
    let fetch = by_command(&v["hosts"][0], "mcp-server-fetch");
    assert_eq!(fetch["copies"], 3, "{v:#}");
    assert_eq!(fetch["generation_count"], 1, "{v:#}");
    let held = |f: &Value| -> Vec<Value> {
        f["generations"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["copies"].as_array().unwrap().iter().map(|c| c["host_holds_transport"].clone()))
            .collect()
    };
    assert!(held(fetch).iter().all(|h| *h == true), "{fetch:#}");

    std::fs::write(&cue, "").unwrap();
    let mut last = Value::Null;
    let dropped = common::wait_until(Duration::from_secs(60), || {
        last = look();
        held(by_command(&last["hosts"][0], "mcp-server-fetch")).iter().filter(|h| **h == false).count() == 1
    });
    assert!(dropped, "one copy's transport should read as no longer held: {last:#}");
    let copies = by_command(&last["hosts"][0], "mcp-server-fetch")["generations"][0]["copies"].clone();
    let let_go = copies.as_array().unwrap().iter().find(|c| c["host_holds_transport"] == false).unwrap();
    assert_eq!(let_go["verdict"], "abandoned", "{let_go:#}");
}
