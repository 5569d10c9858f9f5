//! Hostile process data, with real processes: comms holding `)`, spaces and a
//! newline, a 1 MiB argv, an empty command line, and a process that execs
//! between two names while it is scanned and reaped.
//!
//! Every tree lives below its own sandbox scope process (a child subreaper);
//! every scan and every reap is `--scope`d to it.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Sandbox, Spec, TempDir, alive, member, scan_json, tree_rooted_at, wait_until};
use serde_json::Value;

const CLAUDE: &[&str] = &["claude", "--resume"];
const NODE_PLAYWRIGHT: &[&str] = &["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"];

/// `mcp-reaperd --once --json --scope S --config C`, enforcing, asserting exit 0.
fn once(sb: &Sandbox, cfg: &Path) -> Value {
    common::once_json(sb.scope_pid(), cfg)
}

fn scan(sb: &Sandbox, cfg: &Path) -> Value {
    scan_json(cfg, &["--scope", &sb.scope_pid().to_string()])
}

/// The comm field of `/proc/PID/stat`, raw: between the first `(` and the last `)`.
fn raw_comm(pid: i32) -> Vec<u8> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).unwrap();
    let open = stat.iter().position(|&b| b == b'(').unwrap();
    let close = stat.iter().rposition(|&b| b == b')').unwrap();
    stat[open + 1..close].to_vec()
}

#[test]
fn comms_with_parens_spaces_and_newlines_are_read_and_reaped_right() {
    // Symlinks to fakeproc: a process exec'd through one is named after it.
    let links = TempDir::new("hostile-comm");
    let link = |name: &str| {
        let p = links.path().join(name);
        std::os::unix::fs::symlink(common::fakeproc_path(), &p).unwrap();
        p
    };
    let (paren, newline, spoof) = (link("x) R 1 1 1 (y"), link("a b\nc) S 9"), link(") Z 1 ("));
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(
            Spec::new(NODE_PLAYWRIGHT)
                .exe(&paren)
                .child(Spec::new(&["helper", "--one"]).exe(&newline))
                .child(Spec::new(&["helper", "--two"]).exe(&spoof)),
        ),
        // Not a server: the same hostile names, no tree, never touched.
        Spec::new(&["worker", "--idle"]).exe(&paren),
    ]);
    let (host, server, one, two, worker) = (
        sb.pid_of("claude"),
        sb.pid_of("node "),
        sb.pid_of("helper --one"),
        sb.pid_of("helper --two"),
        sb.pid_of("worker"),
    );
    // The fixture really is hostile: a stat parser that splits on the first
    // ')' or on whitespace gets every field after the comm wrong.
    assert_eq!(raw_comm(server), b"x) R 1 1 1 (y");
    assert_eq!(raw_comm(one), b"a b\nc) S 9");
    assert_eq!(raw_comm(two), b") Z 1 (");

    sb.kill_host(host);
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let t = tree_rooted_at(&v, server);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    for (pid, state) in [(server, "S"), (one, "S"), (two, "S")] {
        let m = member(t, pid);
        assert_eq!(m["ppid"], if pid == server { sb.scope_pid() } else { server }, "{m:#}");
        assert_eq!(m["state"], state, "{m:#}");
    }
    assert!(v["trees"].as_array().unwrap().iter().all(|t| t["root"] != worker), "no tree for the worker: {v:#}");

    let out = once(&sb, &cfg);
    assert_eq!(out["summary"]["trees_reaped"], 1, "{out:#}");
    assert!(wait_until(Duration::from_secs(60), || !alive(server) && !alive(one) && !alive(two)));
    sb.assert_alive(&[worker, sb.scope_pid()]);
}

#[test]
fn a_one_mib_argv_is_kept_cut_and_still_reaped() {
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(NODE_PLAYWRIGHT).pad_kib(1024)),
        Spec::new(&["sleep", "600"]),
    ]);
    let (host, server, bystander) = (sb.pid_of("claude"), sb.pid_of("node "), sb.pid_of("sleep"));
    let raw = std::fs::read(format!("/proc/{server}/cmdline")).unwrap();
    assert!(raw.len() >= 1 << 20, "the argv really is 1 MiB: {} bytes", raw.len());

    sb.kill_host(host);
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let t = tree_rooted_at(&v, server);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    // Kept: the whole arguments of the first 4 KiB (mcp_reaper::scan::CMDLINE_KEEP),
    // then ` …`; protect was settled on the whole line, read again.
    let cmd = member(t, server)["cmdline"].as_str().unwrap();
    assert!(cmd.starts_with(&NODE_PLAYWRIGHT.join(" ")) && cmd.ends_with(" …"), "{cmd}");
    assert!(cmd.len() <= mcp_reaper::scan::CMDLINE_KEEP + " …".len(), "{} bytes kept", cmd.len());

    let out = once(&sb, &cfg);
    assert_eq!(out["summary"]["trees_reaped"], 1, "{out:#}");
    assert!(wait_until(Duration::from_secs(60), || !alive(server)));
    sb.assert_alive(&[bystander, sb.scope_pid()]);
}

#[test]
fn a_protect_match_past_the_kept_part_of_a_command_line_still_protects() {
    // `--port 8931` (the default protect patterns: a shared HTTP server)
    // comes after 5 KiB of arguments: past what a scan keeps.
    let filler = "A".repeat(5000);
    let sb = Sandbox::new(vec![Spec::new(CLAUDE).child(Spec::new(&[
        NODE_PLAYWRIGHT[0],
        NODE_PLAYWRIGHT[1],
        &filler,
        "--port",
        "8931",
    ]))]);
    let (host, server) = (sb.pid_of("claude"), sb.pid_of("node "));
    sb.kill_host(host);
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let t = tree_rooted_at(&v, server);
    assert_eq!(t["verdict"], "protected", "{t:#}");
    // Settled on the whole line, read again: the pattern that matched is named.
    assert!(t["reason"].as_str().is_some_and(|r| r.contains("--(sse-)?port")), "{t:#}");
    let out = once(&sb, &cfg);
    assert_eq!(out["summary"]["trees_reaped"], 0, "{out:#}");
    sb.assert_alive(&[server, sb.scope_pid()]);
}

#[test]
fn an_empty_command_line_is_shown_by_comm_and_its_tree_still_reaped() {
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(NODE_PLAYWRIGHT).child(Spec::new(&[""]))),
        // An empty command line alone makes no tree.
        Spec::new(&[""]),
    ]);
    let (host, server) = (sb.pid_of("claude"), sb.pid_of("node "));
    let empties: Vec<i32> = sb.ready().iter().filter(|r| r.cmd.is_empty()).map(|r| r.pid).collect();
    assert_eq!(empties.len(), 2, "{:#?}", sb.ready());
    let (child, loner) =
        if common::ppid_of(empties[0]) == Some(server) { (empties[0], empties[1]) } else { (empties[1], empties[0]) };
    assert_eq!(std::fs::read(format!("/proc/{child}/cmdline")).unwrap(), b"\0", "argv is one empty string");

    sb.kill_host(host);
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let t = tree_rooted_at(&v, server);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    let shown = member(t, child)["cmdline"].as_str().unwrap();
    assert!(shown.starts_with('[') && shown.ends_with(']'), "shown as [comm], like ps: {shown:?}");
    assert!(v["trees"].as_array().unwrap().iter().all(|t| t["root"] != loner), "{v:#}");

    let out = once(&sb, &cfg);
    assert_eq!(out["summary"]["processes_reaped"], 2, "{out:#}");
    assert!(wait_until(Duration::from_secs(60), || !alive(server) && !alive(child)));
    sb.assert_alive(&[loner, sb.scope_pid()]);
}

#[test]
fn a_process_exec_ing_between_names_never_confuses_scan_or_reap() {
    // An orphan that is an MCP server one moment and `python3 worker.py` the
    // next, 3 ms each, and a bystander.
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(NODE_PLAYWRIGHT).flip(&["python3", "worker.py"])),
        Spec::new(&["sleep", "600"]),
    ]);
    let (host, flipper, bystander) = (sb.pid_of("claude"), sb.pid_of("node "), sb.pid_of("sleep"));
    sb.kill_host(host);
    let cfg = sb.dir().config(0, "");
    let mut seen_as_server = 0;
    for _ in 0..30 {
        let v = scan(&sb, &cfg);
        for t in v["trees"].as_array().unwrap() {
            // Whatever moment a scan caught, what it shows is one image of
            // the process: never the worker's argv in a server tree.
            assert_eq!(t["root"], flipper, "{t:#}");
            let cmd = member(t, flipper)["cmdline"].as_str().unwrap();
            assert!(cmd.starts_with("node /home/u/.npm/"), "a server tree shows the server's argv: {cmd:?}");
            seen_as_server += 1;
        }
    }
    eprintln!("the flipper was a server tree in {seen_as_server} of 30 scans");
    assert!(alive(flipper), "scans never signal");

    // Enforcing: reaped whenever judged a server twice in a row (judgement
    // and the re-check before acting), never anything else.
    let t0 = Instant::now();
    while alive(flipper) && t0.elapsed() < Duration::from_secs(20) {
        let out = once(&sb, &cfg);
        let n = out["summary"]["trees_reaped"].as_u64().unwrap_or(0);
        assert!(n <= 1, "{out:#}");
    }
    assert!(wait_until(Duration::from_secs(60), || !alive(flipper)), "the flipping orphan was reaped in the end");
    sb.assert_alive(&[bystander, sb.scope_pid()]);
}
