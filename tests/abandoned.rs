//! Leaks under live hosts (issue 16), with real processes: a server whose
//! live host ended its stdin (pipe or socketpair) while the server ignores
//! EOF is `abandoned` and reaped after the grace, its host and the host's
//! other servers untouched; a write end leaked into a helper keeps it (and
//! says so); an adopted host without a terminal whose stdin has no writer is
//! `stale`, unless a live pipeline feeds it or its stdin is `/dev/null`; the
//! same server started twice by one host is reported.
//!
//! Safety: every tree lives below its own sandbox scope process and every
//! reaper run is `--scope`d to it with a temporary config and state file.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use common::{Sandbox, Spec, alive, ppid_of, reaperctl, reaperd, s, scan_json, text, tree_rooted_at, wait_until};
use serde_json::Value;

const CLAUDE: &[&str] = &["claude", "--resume"];
/// A host driven over its stdin (the Agent SDK's claude): its stdin is its
/// only channel, so an adopted one nobody writes to is stale (a terminal
/// UI's argv on a pipe is not: `tests/state_not_text.rs`).
const SDK_HOST: &[&str] = &["claude", "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"];
const PIPE_SERVER: &[&str] = &["node", "/srv/pipe-mcp/index.js"];
const OTHER_SERVER: &[&str] = &["node", "/srv/other-mcp/index.js"];
/// Something that started a host and went away (a terminal-less launcher).
const WRAPPER: &[&str] = &["host-starter"];

/// Where the reaper runs: in the test's network namespace, or (root only)
/// in one of its own (`unshare --net`), where the kernel's socket
/// diagnostics see none of the test's sockets, as under the shipped system
/// unit's `PrivateNetwork=yes`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Net {
    Shared,
    Own,
}

/// `bin args` (under `unshare --net` for [`Net::Own`]).
fn run_in(net: Net, bin: &str, args: &[String]) -> Output {
    let mut cmd = if net == Net::Own {
        let mut c = std::process::Command::new(common::find_tool("unshare").expect("unshare"));
        c.args(["--net", "--", bin]);
        c
    } else {
        std::process::Command::new(bin)
    };
    cmd.args(args).output().unwrap()
}

/// `mcp-reaperd --once --json --scope S --config C`, asserting exit 0.
fn once(sb: &Sandbox, cfg: &Path) -> (Value, Output) {
    once_in(Net::Shared, sb, cfg)
}

fn once_in(net: Net, sb: &Sandbox, cfg: &Path) -> (Value, Output) {
    let args = [
        s("--once"),
        s("--json"),
        s("--log-target"),
        s("stderr"),
        s("--scope"),
        s(sb.scope_pid()),
        s("--config"),
        s(cfg.display()),
    ];
    let out = if net == Net::Own { run_in(net, env!("CARGO_BIN_EXE_mcp-reaperd"), &args) } else { reaperd(args) };
    assert_eq!(out.status.code(), Some(0), "mcp-reaperd failed:\n{}\n{}", text(&out.stdout), text(&out.stderr));
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", text(&out.stdout)));
    (v, out)
}

fn scan(sb: &Sandbox, cfg: &Path) -> Value {
    scan_in(Net::Shared, sb, cfg)
}

fn scan_in(net: Net, sb: &Sandbox, cfg: &Path) -> Value {
    if net == Net::Shared {
        return scan_json(cfg, &["--scope", &s(sb.scope_pid())]);
    }
    let args = [s("scan"), s("--json"), s("--config"), s(cfg.display()), s("--scope"), s(sb.scope_pid())];
    let out = run_in(net, env!("CARGO_BIN_EXE_reaperctl"), &args);
    assert!(out.status.success(), "reaperctl scan failed:\n{}\n{}", text(&out.stdout), text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", text(&out.stdout)))
}

/// Scans until the tree rooted at `root` has verdict `verdict` (10 s at most).
fn scan_until(sb: &Sandbox, cfg: &Path, root: i32, verdict: &str) -> Value {
    scan_until_in(Net::Shared, sb, cfg, root, verdict)
}

fn scan_until_in(net: Net, sb: &Sandbox, cfg: &Path, root: i32, verdict: &str) -> Value {
    let mut last = Value::Null;
    let ok = wait_until(Duration::from_secs(60), || {
        last = scan_in(net, sb, cfg);
        last["trees"].as_array().unwrap().iter().any(|t| t["root"] == root && t["verdict"] == verdict)
    });
    assert!(ok, "tree {root} never became {verdict}: {last:#}");
    last
}

/// A host with three servers: the first gets its stdin ended after 200 ms
/// (`stdio`: pipe or socket), the other two keep theirs.
fn host_closing_one(socket: bool) -> Sandbox {
    let mut first = Spec::new(PIPE_SERVER).close_stdin_after(200);
    let mut second = Spec::new(OTHER_SERVER);
    if socket {
        first = first.stdio_socket();
        second = second.stdio_socket();
    }
    Sandbox::new(vec![Spec::new(CLAUDE).child(first).child(second).child(Spec::new(&["uvx", "mcp-server-fetch"]))])
}

fn abandoned_is_reaped_after_grace(socket: bool, net: Net) {
    let sb = host_closing_one(socket);
    let (host, gone, kept, fetch) =
        (sb.pid_of("claude"), sb.pid_of(&PIPE_SERVER.join(" ")), sb.pid_of(&OTHER_SERVER.join(" ")), sb.pid_of("uvx"));
    let cfg = sb.dir().config(1, "");
    // Grace 1 s: a scan shows the evidence's verdict and names the evidence
    // (its own first sight is no clock); `--once` keeps the clock.
    let v = scan_until_in(net, &sb, &cfg, gone, "abandoned");
    let t = tree_rooted_at(&v, gone);
    let reason = t["reason"].as_str().unwrap();
    assert!(reason.contains("a daemon reaps it after the 1s grace"), "{reason}");
    assert!(reason.contains(&format!("stdin closed by claude --resume (pid {host})")), "{reason}");
    let what = match (socket, net) {
        (false, _) => "no process holds the write end",
        (true, Net::Shared) => "the peer of its stdin socket closed it (socket diagnostics)",
        (true, Net::Own) => "the peer of its stdin socket closed it (poll of a duplicate of its fd 0)",
    };
    assert!(reason.contains(what), "{reason}");
    let stdin = common::member(t, gone)["evidence"]["stdin"].as_str().unwrap().to_string();
    assert!(stdin.starts_with("gone: ") && stdin.contains(what), "{t:#}");
    let k = tree_rooted_at(&v, kept);
    assert_eq!(k["verdict"], "live", "{v:#}");
    let open = if net == Net::Own {
        "open (poll of a duplicate of its fd 0; holder not known)"
    } else {
        "open, held by its owner"
    };
    assert_eq!(common::member(k, kept)["evidence"]["stdin"], open, "{k:#}");
    assert_eq!(tree_rooted_at(&v, fetch)["verdict"], "live", "{v:#}");

    let (v, _) = once_in(net, &sb, &cfg);
    let first = Instant::now();
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 0, "young: nothing signalled yet: {v:#}");
    assert!(alive(gone));
    std::thread::sleep(Duration::from_millis(1200).saturating_sub(first.elapsed()));
    let (v, out) = once_in(net, &sb, &cfg);
    let o = v["outcomes"].as_array().unwrap();
    assert_eq!(o.len(), 1, "{v:#}\n{}", text(&out.stderr));
    assert_eq!(o[0]["verdict"], "abandoned", "{v:#}");
    assert_eq!(o[0]["root"]["pid"], gone, "{v:#}");
    assert!(wait_until(Duration::from_secs(60), || !alive(gone)), "the abandoned server survived");
    sb.assert_alive(&[host, kept, fetch, sb.scope_pid()]);
    assert!(text(&out.stderr).contains(&format!("reaped abandoned tree root={gone}")), "{}", text(&out.stderr));
}

#[test]
fn server_whose_live_host_closed_its_stdin_pipe_is_reaped_after_grace() {
    abandoned_is_reaped_after_grace(false, Net::Shared);
}

#[test]
fn server_whose_live_host_closed_its_socketpair_is_reaped_after_grace() {
    if sockdiag_unavailable() {
        common::skip("server_whose_live_host_closed_its_socketpair_is_reaped_after_grace", "no unix sock_diag here");
        return;
    }
    abandoned_is_reaped_after_grace(true, Net::Shared);
}

/// Whether the reaper can be run in a network namespace of its own (root
/// and `unshare`); prints the skip otherwise.
fn own_network_namespace(test: &str) -> bool {
    if !common::is_root() {
        common::skip(test, "needs root (unshare --net, and pidfd_getfd of the test's processes)");
        return false;
    }
    if common::find_tool("unshare").is_none() {
        common::skip(test, "util-linux unshare not found");
        return false;
    }
    true
}

/// As under the shipped system unit (`PrivateNetwork=yes`): the socket
/// diagnostics see none of the test's sockets, the poll of a duplicate of
/// the server's fd 0 decides.
#[test]
fn socketpair_server_abandoned_by_its_live_host_is_reaped_from_another_network_namespace() {
    if !own_network_namespace("socketpair_server_abandoned_by_its_live_host_is_reaped_from_another_network_namespace") {
        return;
    }
    abandoned_is_reaped_after_grace(true, Net::Own);
}

#[test]
fn socketpair_server_whose_host_keeps_its_end_is_kept_from_another_network_namespace() {
    if !own_network_namespace("socketpair_server_whose_host_keeps_its_end_is_kept_from_another_network_namespace") {
        return;
    }
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(PIPE_SERVER).stdio_socket()).child(Spec::new(OTHER_SERVER).stdio_socket()),
    ]);
    let (host, first, second) =
        (sb.pid_of("claude"), sb.pid_of(&PIPE_SERVER.join(" ")), sb.pid_of(&OTHER_SERVER.join(" ")));
    let cfg = sb.dir().config(0, "");
    let v = scan_in(Net::Own, &sb, &cfg);
    for server in [first, second] {
        let t = tree_rooted_at(&v, server);
        assert_eq!(t["verdict"], "live", "{t:#}");
        let stdin = &common::member(t, server)["evidence"]["stdin"];
        assert_eq!(stdin, "open (poll of a duplicate of its fd 0; holder not known)", "{t:#}");
    }
    let (v, out) = once_in(Net::Own, &sb, &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 0, "{v:#}\n{}", text(&out.stderr));
    sb.assert_alive(&[host, first, second, sb.scope_pid()]);
}

/// Whether `ss -x` style socket diagnostics are missing (no `unix_diag`).
fn sockdiag_unavailable() -> bool {
    mcp_reaper::scan::sockdiag::unix_socket(0x7fff_fff0).is_err_and(|e| e.raw_os_error() != Some(libc::ENOENT))
}

#[test]
fn write_end_leaked_into_a_helper_keeps_the_server_and_is_reported() {
    let sb =
        Sandbox::new(vec![Spec::new(CLAUDE).child(
            Spec::new(PIPE_SERVER).close_stdin_after(100).stdin_leak(Spec::new(&["stdin-keeper", "--forever"])),
        )]);
    let (host, server, helper) = (sb.pid_of("claude"), sb.pid_of(&PIPE_SERVER.join(" ")), sb.pid_of("stdin-keeper"));
    assert_eq!(ppid_of(helper), Some(host), "the helper is the host's child");
    let cfg = sb.dir().config(0, "");
    let mut last = Value::Null;
    let reported = wait_until(Duration::from_secs(60), || {
        last = scan(&sb, &cfg);
        tree_rooted_at(&last, server)["reason"].as_str().unwrap().contains("leaked write end")
    });
    assert!(reported, "{last:#}");
    let t = tree_rooted_at(&last, server);
    assert_eq!(t["verdict"], "live", "{t:#}");
    let reason = t["reason"].as_str().unwrap();
    assert!(reason.contains(&format!("stdin-keeper --forever (pid {helper})")), "{reason}");
    let (v, _) = once(&sb, &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 0, "{v:#}");
    sb.assert_alive(&[host, server, helper]);
}

/// `host-starter` → `claude` (stdin as `host`) → server; the starter exits,
/// so the host is adopted by the sandbox's scope process.
fn adopted_host(host: Spec) -> Sandbox {
    let sb = Sandbox::new(vec![Spec::new(WRAPPER).exit_after_spawn().child(host.child(Spec::new(PIPE_SERVER)))]);
    let h = sb.pid_of("claude");
    assert!(wait_until(Duration::from_secs(60), || ppid_of(h) == Some(sb.scope_pid())), "host {h} was not adopted");
    sb
}

/// The same with the host on a socketpair whose other end went with its
/// starter, judged from a network namespace of the reaper's own.
#[test]
fn adopted_host_whose_stdin_socket_peer_is_gone_is_stale_from_another_network_namespace() {
    if !own_network_namespace("adopted_host_whose_stdin_socket_peer_is_gone_is_stale_from_another_network_namespace") {
        return;
    }
    let sb = adopted_host(Spec::new(SDK_HOST).stdio_socket());
    let (host, server) = (sb.pid_of("claude"), sb.pid_of(&PIPE_SERVER.join(" ")));
    let cfg = sb.dir().config(0, "");
    let v = scan_until_in(Net::Own, &sb, &cfg, host, "stale");
    let reason = tree_rooted_at(&v, host)["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("the peer of its stdin socket closed it (poll of a duplicate of its fd 0)"), "{reason}");
    let (v, _) = once_in(Net::Own, &sb, &cfg);
    reaped_as_stale(&v, host, server);
}

/// The run reaped one tree, as stale, and the host and its server are gone.
fn reaped_as_stale(v: &Value, host: i32, server: i32) {
    let o = v["outcomes"].as_array().unwrap();
    assert_eq!(o.len(), 1, "{v:#}");
    assert_eq!(o[0]["verdict"], "stale", "{v:#}");
    assert!(wait_until(Duration::from_secs(60), || !alive(host) && !alive(server)), "host and server survived");
}

#[test]
fn adopted_host_without_terminal_whose_stdin_writer_is_gone_is_stale() {
    let sb = adopted_host(Spec::new(SDK_HOST));
    let (host, server) = (sb.pid_of("claude"), sb.pid_of(&PIPE_SERVER.join(" ")));
    let cfg = sb.dir().config(0, "");
    let v = scan_until(&sb, &cfg, host, "stale");
    let t = tree_rooted_at(&v, host);
    let reason = t["reason"].as_str().unwrap();
    assert!(reason.contains("has no terminal, was adopted by the scope process"), "{reason}");
    assert!(reason.contains("no process holds the write end of its stdin pipe"), "{reason}");
    let (v, _) = once(&sb, &cfg);
    reaped_as_stale(&v, host, server);
}

#[test]
fn adopted_host_fed_by_a_live_pipeline_is_kept() {
    let sb = adopted_host(Spec::new(SDK_HOST).stdin_leak(Spec::new(&["producer", "--lines"])));
    let (host, server, producer) = (sb.pid_of("claude"), sb.pid_of(&PIPE_SERVER.join(" ")), sb.pid_of("producer"));
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    assert_eq!(tree_rooted_at(&v, server)["verdict"], "live", "{v:#}");
    let (v, _) = once(&sb, &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 0, "{v:#}");
    sb.assert_alive(&[host, server, producer]);
}

#[test]
fn adopted_gui_style_host_with_dev_null_stdin_is_kept_with_its_servers() {
    let sb = adopted_host(Spec::new(SDK_HOST).stdio_null());
    let (host, server) = (sb.pid_of("claude"), sb.pid_of(&PIPE_SERVER.join(" ")));
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let t = tree_rooted_at(&v, server);
    assert_eq!(t["verdict"], "live", "{t:#}");
    let (v, _) = once(&sb, &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 0, "{v:#}");
    sb.assert_alive(&[host, server]);
}

#[test]
fn the_same_server_twice_under_one_host_is_reported_not_reaped() {
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE)
            .child(Spec::new(PIPE_SERVER))
            .child(Spec::new(PIPE_SERVER))
            .child(Spec::new(PIPE_SERVER))
            .child(Spec::new(OTHER_SERVER)),
    ]);
    let host = sb.pid_of("claude");
    let mut copies: Vec<i32> = sb.ready().iter().filter(|r| r.cmd == PIPE_SERVER.join(" ")).map(|r| r.pid).collect();
    copies.sort_unstable();
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let d = v["duplicates"].as_array().unwrap();
    assert_eq!(d.len(), 1, "{v:#}");
    assert_eq!(d[0]["host_pid"], host, "{v:#}");
    assert_eq!(d[0]["count"], 3, "{v:#}");
    assert_eq!(d[0]["command"], "pipe-mcp", "the program identity: {v:#}");
    let mut roots: Vec<i64> = d[0]["root_pids"].as_array().unwrap().iter().map(|p| p.as_i64().unwrap()).collect();
    roots.sort_unstable();
    assert_eq!(roots, copies.iter().map(|&p| i64::from(p)).collect::<Vec<_>>());
    assert_eq!(v["summary"]["duplicate_servers"], 2, "{v:#}");

    let out = reaperctl(["scan", "--config", cfg.to_str().unwrap(), "--scope", &s(sb.scope_pid())]);
    let human = text(&out.stdout);
    assert!(human.contains("DUPLICATES"), "{human}");
    assert!(human.contains(&format!("3× pipe-mcp under host {host}")), "{human}");

    let (v, _) = once(&sb, &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 0, "{v:#}");
    sb.assert_alive(&copies);
}

#[test]
fn daemon_reaps_the_abandoned_server_and_reports_duplicates_in_status_and_metrics() {
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE)
            .child(Spec::new(PIPE_SERVER).close_stdin_after(300))
            .child(Spec::new(OTHER_SERVER))
            .child(Spec::new(OTHER_SERVER)),
    ]);
    let (host, gone) = (sb.pid_of("claude"), sb.pid_of(&PIPE_SERVER.join(" ")));
    let cfg = sb.dir().config_with(0, "interval_secs = 1", "");
    let d = common::Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &common::Launch::default());
    let st = d.status_until(Duration::from_secs(60), "the abandoned server is reaped", |st| {
        st["recent"].as_array().is_some_and(|r| r.iter().any(|e| e["root"] == gone && e["verdict"] == "abandoned"))
    });
    assert!(wait_until(Duration::from_secs(60), || !alive(gone)), "the abandoned server survived");
    sb.assert_alive(&[host]);
    let others: Vec<i32> =
        sb.ready().iter().filter(|r| r.cmd == OTHER_SERVER.join(" ")).map(|r| r.pid).collect::<Vec<_>>();
    sb.assert_alive(&others);
    let dups = st["duplicates"].as_array().unwrap();
    assert_eq!(dups.len(), 1, "{st:#}");
    assert_eq!(dups[0]["count"], 2, "{st:#}");
    assert_eq!(dups[0]["host_pid"], host, "{st:#}");
    let human = text(&d.ctl(&["status"]).stdout);
    assert!(human.contains("duplicate 2× other-mcp under host"), "{human}");
    let metrics = text(&d.ctl(&["metrics"]).stdout);
    assert!(metrics.contains("mcp_reaper_duplicate_servers 1\n"), "{metrics}");
    assert!(metrics.contains("mcp_reaper_trees{verdict=\"abandoned\"}"), "{metrics}");
}

/// Opens `/proc/PID/fd/0` (a pipe) for writing, writes `data`, closes it.
fn write_into_stdin(pid: i32, data: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(format!("/proc/{pid}/fd/0")).unwrap();
    f.write_all(data).unwrap();
}

/// What is waiting unread in the pipe on `/proc/PID/fd/0` (read, so taken).
fn take_from_stdin(pid: i32) -> Vec<u8> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/{pid}/fd/0"))
        .unwrap();
    let mut out = vec![0u8; 64];
    let n = f.read(&mut out).unwrap_or(0);
    out.truncate(n);
    out
}

#[test]
fn looking_at_a_stdin_pipe_never_takes_what_waits_in_it() {
    let cue_dir = common::TempDir::new("stdin-cue");
    let cue = cue_dir.path().join("close");
    let sb = Sandbox::new(vec![Spec::new(CLAUDE).child(Spec::new(PIPE_SERVER).close_stdin_when(&cue))]);
    let server = sb.pid_of(&PIPE_SERVER.join(" "));
    write_into_stdin(server, b"{\"jsonrpc\":\"2.0\"}\n");
    let cfg = sb.dir().config(600, "");
    // Looked at while the host holds the write end, then after it closed it
    // (on the test's cue, however long the first scan took).
    let v = scan(&sb, &cfg);
    assert_eq!(tree_rooted_at(&v, server)["verdict"], "live", "{v:#}");
    std::fs::write(&cue, "").unwrap();
    let v = scan_until(&sb, &cfg, server, "abandoned");
    assert!(tree_rooted_at(&v, server)["reason"].as_str().unwrap().contains("stdin closed by"), "{v:#}");
    scan(&sb, &cfg);
    assert_eq!(take_from_stdin(server), b"{\"jsonrpc\":\"2.0\"}\n", "the scans left the pending bytes in the pipe");
}

#[test]
fn adopted_one_shot_host_that_read_its_prompt_to_the_end_is_kept() {
    // `echo task | claude -p &` from a shell that exited: stdin at EOF by design.
    let sb = adopted_host(Spec::new(&["claude", "-p", "--output-format", "json"]));
    let (host, server) = (sb.pid_of("claude"), sb.pid_of(&PIPE_SERVER.join(" ")));
    let cfg = sb.dir().config(0, "");
    let v = scan(&sb, &cfg);
    let t = tree_rooted_at(&v, server);
    assert_eq!(t["verdict"], "live", "{t:#}");
    let (v, _) = once(&sb, &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 0, "{v:#}");
    sb.assert_alive(&[host, server]);
}

/// A duplicate of fd `fd` of process `pid` (the test is root here).
fn dup_of(pid: i32, fd: i32) -> std::os::fd::OwnedFd {
    use rustix::process::{PidfdFlags, PidfdGetfdFlags};
    let pidfd = rustix::process::pidfd_open(rustix::process::Pid::from_raw(pid).unwrap(), PidfdFlags::empty()).unwrap();
    rustix::process::pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()).unwrap()
}

/// The fd of process `pid` that is `target` (`socket:[N]`).
fn fd_of(pid: i32, target: &str) -> i32 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .find(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_str() == Some(target)))
        .and_then(|e| e.file_name().to_str()?.parse().ok())
        .unwrap_or_else(|| panic!("{pid} holds no {target}"))
}

#[test]
fn looking_at_a_stdin_socket_from_another_network_namespace_never_takes_what_waits_in_it() {
    let name = "looking_at_a_stdin_socket_from_another_network_namespace_never_takes_what_waits_in_it";
    if !own_network_namespace(name) {
        return;
    }
    if sockdiag_unavailable() {
        common::skip(name, "no unix sock_diag here (the test finds the host's end with it)");
        return;
    }
    let sb = Sandbox::new(vec![Spec::new(CLAUDE).child(Spec::new(PIPE_SERVER).stdio_socket())]);
    let (host, server) = (sb.pid_of("claude"), sb.pid_of(&PIPE_SERVER.join(" ")));
    // The host's end of the server's stdin, found through the diagnostics
    // of the test's own namespace, gets a message for the server.
    let link = std::fs::read_link(format!("/proc/{server}/fd/0")).unwrap();
    let ino: u32 = link.to_str().unwrap().trim_start_matches("socket:[").trim_end_matches(']').parse().unwrap();
    let peer = mcp_reaper::scan::sockdiag::unix_socket(ino).unwrap().peer.unwrap();
    let msg = b"{\"jsonrpc\":\"2.0\"}\n";
    let end = dup_of(host, fd_of(host, &format!("socket:[{peer}]")));
    assert_eq!(rustix::net::send(&end, msg, rustix::net::SendFlags::empty()).unwrap(), msg.len());
    drop(end); // the host still holds its own
    let cfg = sb.dir().config(0, "");
    let v = scan_in(Net::Own, &sb, &cfg);
    let t = tree_rooted_at(&v, server);
    assert_eq!(t["verdict"], "live", "{t:#}");
    assert!(common::member(t, server)["evidence"]["stdin"].as_str().unwrap().contains("poll of a duplicate"), "{t:#}");
    let (v, _) = once_in(Net::Own, &sb, &cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 0, "{v:#}");
    // What the server would read next: still the whole message.
    let mine = dup_of(server, 0);
    let mut buf = [0u8; 64];
    let n = rustix::net::recv(&mine, &mut buf[..], rustix::net::RecvFlags::DONTWAIT).unwrap().0;
    assert_eq!(&buf[..n], msg, "the reaper's looks left the pending bytes in the socket");
    sb.assert_alive(&[host, server]);
}

/// A daemon leaves a live host's servers uninspected in their first second
/// (issue 37: their fds, cgroup and stdin question were read at every scan
/// of a short life), then reads them: a server dropped in its first second
/// is still found abandoned, and nothing else is touched.
#[test]
fn daemon_inspects_a_live_hosts_new_server_once_settled_and_finds_it_abandoned() {
    const TEST: &str = "daemon_inspects_a_live_hosts_new_server_once_settled_and_finds_it_abandoned";
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(PIPE_SERVER).close_stdin_after(300)).child(Spec::new(OTHER_SERVER)),
    ]);
    let ready = Instant::now();
    let (host, gone, kept) =
        (sb.pid_of("claude"), sb.pid_of(&PIPE_SERVER.join(" ")), sb.pid_of(&OTHER_SERVER.join(" ")));
    let cfg = sb.dir().config_with(0, "interval_secs = 1", "");
    let d = common::Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &common::Launch::default());
    let answering = ready.elapsed();
    d.status_until(Duration::from_secs(60), "the abandoned server is reaped", |st| {
        st["recent"].as_array().is_some_and(|r| r.iter().any(|e| e["root"] == gone && e["verdict"] == "abandoned"))
    });
    assert!(wait_until(Duration::from_secs(60), || !alive(gone)), "the abandoned server survived");
    sb.assert_alive(&[host, kept, sb.scope_pid()]);
    // Its first sight, when it came in the server's first second.
    let log = d.log_text();
    let first = log.lines().find(|l| l.contains(&format!("live tree root={gone} "))).unwrap_or("");
    if answering < Duration::from_millis(500) {
        assert!(first.contains("inspected once settled"), "first sight: {first:?}\n{log}");
    } else {
        eprintln!("{TEST}: the daemon answered {answering:?} after the tree was ready: its first sight is not checked");
    }
    let reaped = log.lines().find(|l| l.contains(&format!("reaped abandoned tree root={gone}"))).unwrap_or("");
    assert!(reaped.contains(&format!("stdin closed by claude --resume (pid {host})")), "{log}");
}
