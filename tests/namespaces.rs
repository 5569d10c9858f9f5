//! PID namespaces, with real processes (root only: `unshare --pid`):
//! - the daemon run *inside* a namespace (a devcontainer's own reaper): the
//!   proc connector is deaf there, so it runs in pidfd mode, says why, and
//!   still reaps a host's orphans long before its 30 s interval;
//! - the opt-in `reap_other_pid_namespaces`, run from *outside*: a child
//!   namespace whose PID 1 is a `sleep infinity` stand-in holds an orphaned
//!   server tree and bystanders; with the setting the tree is reaped and PID 1
//!   and the bystanders live; without it nothing in there is touched.
//!
//! Safety: every process a test signals or lets the reaper signal lives in a
//! PID namespace the test created; the outside reaper is `--scope`d to the
//! `unshare` process above that namespace; the namespace dies with its PID 1,
//! which the test kills at the end by the pid it started.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{PidNamespace, Spec, TempDir, alive, pid_namespace_tool, sigkill, text, wait_until};
use serde_json::Value;

const CLAUDE: &[&str] = &["claude", "--resume"];
const NPM_PLAYWRIGHT: &[&str] = &["npm", "exec", "@playwright/mcp@latest"];
const NODE_PLAYWRIGHT: &[&str] = &["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"];
const GITHUB_STDIO: &[&str] = &["/usr/local/bin/github-mcp-server", "stdio"];
const TSC_WATCH: &[&str] = &["node", "/home/u/src/mcp-server-weather/node_modules/.bin/tsc", "--watch"];

// ------------------------------------------------------------ 1. the daemon inside

/// PID 1 of the namespace: starts the daemon (enforcing: nothing but this
/// script's own processes lives here), then a host with a server tree once
/// the daemon has scanned, kills the host 0.5 s later and reports how long
/// its servers outlived it.
const INSIDE: &str = r#"
"$REAPERD" --log-target stderr --config "$CFG" --socket "$SOCK" 2>"$DLOG" & d=$!
n=0
until grep -q "events=" "$DLOG"; do
  n=$((n + 1)); if [ $n -gt 3000 ]; then echo "no start line" >&2; kill $d; exit 3; fi; sleep 0.01
done
# The host is this shell's child, named as the real one: bash's `exec -a`.
FAKEPROC="$SPEC_HOST" bash -c 'exec -a claude "$0" --resume' "$FP" </dev/null >/dev/null 2>>"$LOG" & h=$!
n=0
while [ "$(wc -l < "$FAKEPROC_READY")" -lt "$TOTAL" ]; do
  n=$((n + 1)); if [ $n -gt 3000 ]; then echo "not ready" >&2; kill $d; exit 3; fi; sleep 0.01
done
servers=$(awk -v h=$h '$1 != h { print $1 }' "$FAKEPROC_READY")
sleep 0.5
t0=$(date +%s%N)
kill -KILL $h
n=0
while :; do
  left=0
  for p in $servers; do
    st=$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)
    case "$st" in ""|Z|X) ;; *) left=1 ;; esac
  done
  [ $left = 0 ] && break
  n=$((n + 1)); if [ $n -gt 2000 ]; then echo "servers outlived their host by 20 s" >&2; break; fi
  sleep 0.01
done
echo "gone_ms $(( ($(date +%s%N) - t0) / 1000000 ))"
"$CTL" status --json --socket "$SOCK" > "$STATUS" || echo "status failed" >&2
kill -TERM $d; wait $d
"#;

#[test]
fn daemon_inside_a_pid_namespace_reaps_in_pidfd_mode_long_before_its_interval() {
    const TEST: &str = "daemon_inside_a_pid_namespace_reaps_in_pidfd_mode_long_before_its_interval";
    let Some(unshare) = pid_namespace_tool(TEST, "a PID namespace of its own") else { return };
    let dir = TempDir::new("pidns-inside");
    let host = Spec::new(CLAUDE).child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT)));
    let cfg = dir.config_with(0, "interval_secs = 30", "");
    let script = dir.write("inside.sh", INSIDE);
    let (dlog, ready) = (dir.path().join("daemon.log"), dir.path().join("ready"));
    std::fs::write(&ready, "").unwrap();
    let out = Command::new(unshare)
        .args(["--pid", "--fork", "--mount-proc", "sh"])
        .arg(&script)
        .env("REAPERD", env!("CARGO_BIN_EXE_mcp-reaperd"))
        .env("CTL", env!("CARGO_BIN_EXE_reaperctl"))
        .env("STATUS", dir.path().join("status.json"))
        .env("FP", common::fakeproc_path())
        .env("CFG", &cfg)
        .env("SOCK", dir.path().join("control.sock"))
        .env("DLOG", &dlog)
        .env("LOG", dir.path().join("fakeproc.log"))
        .env("FAKEPROC_READY", &ready)
        .env("SPEC_HOST", host.to_json().to_string())
        .env("TOTAL", host.count().to_string())
        .stdin(Stdio::null())
        .output()
        .expect("running unshare");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let log = std::fs::read_to_string(&dlog).unwrap_or_default();
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}\ndaemon log:\n{log}");
    assert!(out.status.success(), "{:?}\n{ctx}", out.status);
    assert!(log.contains("events=pidfd"), "the start line shows the mode that works: {ctx}");
    assert!(log.contains("PID namespace other than the initial one"), "and why: {ctx}");
    assert!(log.contains("reaped orphan tree"), "{ctx}");
    assert!(!log.contains("foreign tree"), "the host must be known as one: {ctx}");
    let status: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("status.json")).unwrap_or_default())
            .unwrap_or_else(|e| panic!("no status ({e}): {ctx}"));
    assert_eq!(status["event_mode"], "pidfd", "{status:#}");
    let why = status["event_mode_reason"].as_str().unwrap_or_default();
    assert!(why.contains("PID namespace other than the initial one"), "status says why: {status:#}");
    assert!(!stderr.contains("outlived their host"), "a 30 s interval, yet the servers must go at once: {ctx}");
    let ms: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("gone_ms "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no measurement: {ctx}"));
    eprintln!("inside a PID namespace (pidfd mode, interval 30 s): servers gone {ms} ms after their host's SIGKILL");
}

// ------------------------------------------------------------ 2. judging a container from outside

fn once(c: &PidNamespace, cfg: &Path) -> Value {
    common::once_json(c.scope(), cfg)
}

fn list<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v[key].as_array().unwrap_or_else(|| panic!("no {key}: {v:#}"))
}

#[test]
fn a_containers_orphans_are_reaped_from_outside_only_when_asked() {
    const TEST: &str = "a_containers_orphans_are_reaped_from_outside_only_when_asked";
    let Some(unshare) = pid_namespace_tool(TEST, "a PID namespace to stand for a container") else { return };
    // PID 1 reaps what it adopts (as docker-init and tini do). The host runs
    // in a session of its own, as `docker exec` gives; the bystanders: a
    // watcher PID 1 started itself, and a server someone detached onto
    // /dev/null from another session.
    let init = Spec::new(&["sleep", "infinity"])
        .subreaper()
        .child(Spec::new(CLAUDE).setsid().child(Spec::new(NPM_PLAYWRIGHT).child(Spec::new(NODE_PLAYWRIGHT))))
        .child(Spec::new(TSC_WATCH).stdio_null())
        .child(Spec::new(&["bash"]).setsid().exit_after_spawn().child(Spec::new(GITHUB_STDIO).stdio_null()));
    let c = PidNamespace::start(&unshare, &init);
    let (pid1, host, npm, node) =
        (c.pid_of("sleep infinity"), c.pid_of("claude"), c.pid_of("npm exec"), c.pid_of("node /home/u/.npm"));
    let (tsc, github) = (c.pid_of("node /home/u/src"), c.pid_of(GITHUB_STDIO[0]));
    sigkill(host);
    assert!(
        wait_until(Duration::from_secs(60), || common::ppid_of(npm) == Some(pid1)),
        "the host's server was not adopted by the namespace's PID 1"
    );

    let off = c.dir.config(0, "");
    let v = once(&c, &off);
    assert!(list(&v, "outcomes").is_empty(), "nothing in another PID namespace is touched by default: {v:#}");
    let kept = list(&v, "kept").iter().find(|k| k["root"] == npm).unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(kept["verdict"], "protected", "{kept:#}");
    let why = kept["reason"].as_str().unwrap();
    assert!(why.contains("PID 1 of its PID namespace (pid:["), "{why}");
    assert!(why.contains("reap_other_pid_namespaces = false"), "{why}");
    for p in [pid1, npm, node, tsc, github] {
        assert!(alive(p), "{p} was touched with the setting off: {v:#}");
    }

    let on = c.dir.config_with(0, "reap_other_pid_namespaces = true", "");
    let v = once(&c, &on);
    let roots: Vec<&Value> = list(&v, "outcomes").iter().map(|o| &o["root"]["pid"]).collect();
    assert_eq!(roots, vec![&Value::from(npm)], "{v:#}");
    let o = &list(&v, "outcomes")[0];
    assert_eq!(o["verdict"], "orphan", "{o:#}");
    assert!(o["reason"].as_str().unwrap().contains("PID 1 of its PID namespace"), "{o:#}");
    assert!(wait_until(Duration::from_secs(60), || !alive(npm) && !alive(node)), "the orphan survived: {v:#}");
    for p in [pid1, tsc, github] {
        assert!(alive(p), "{p} must live: {v:#}");
    }
}

// ------------------------------------------------------------ 3. a client the daemon cannot see

/// The daemon in a PID namespace of its own (as in a container), ended with
/// its namespace on drop: SIGKILL to its PID 1, the one child of `unshare`.
struct DaemonInside {
    unshare: std::process::Child,
}

impl Drop for DaemonInside {
    fn drop(&mut self) {
        if let Some(&init) = common::descendants_of(self.unshare.id().cast_signed()).first() {
            sigkill(init);
        }
        let _ = self.unshare.wait();
    }
}

/// `reaperctl status` from outside the daemon's PID namespace: the daemon
/// cannot see the client's pid (`SO_PEERCRED` gives 0), so it refuses with a
/// reason the client prints (not a bare `Broken pipe`), and logs that once
/// however many such clients come.
#[test]
fn a_client_outside_the_daemons_pid_namespace_is_refused_with_a_reason_logged_once() {
    let test = "a_client_outside_the_daemons_pid_namespace_is_refused_with_a_reason_logged_once";
    let Some(unshare) = pid_namespace_tool(test, "to run the daemon in a PID namespace of its own") else { return };
    let dir = TempDir::new("pidns-client");
    let cfg = dir.config(0, "");
    let (sock, log) = (dir.path().join("control.sock"), dir.path().join("daemon.log"));
    // Dry run, and alone in its namespace (its own /proc): nothing to act on.
    let _daemon = DaemonInside {
        unshare: Command::new(unshare)
            .args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"])
            .arg(env!("CARGO_BIN_EXE_mcp-reaperd"))
            .args(["--dry-run", "--log-target", "stderr", "--log-level", "debug", "--config"])
            .arg(&cfg)
            .arg("--socket")
            .arg(&sock)
            .arg("--state-file")
            .arg(dir.path().join("state.json"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawning unshare"),
    };
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(60), || sock.exists() && log_text().contains("events=")),
        "the daemon did not start:\n{}",
        log_text()
    );
    for _ in 0..3 {
        let out = common::reaperctl(["status", "--socket", sock.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "refused, not answered: {out:?}");
        assert!(!err.contains("Broken pipe"), "a reason, not a broken pipe: {err}");
        assert!(err.contains("PID namespace"), "the client prints why: {err}");
    }
    let logged = || log_text().lines().filter(|l| l.contains("cannot see the pid of")).count();
    assert!(wait_until(Duration::from_secs(20), || logged() >= 1), "logged:\n{}", log_text());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(logged(), 1, "logged once, not per connection:\n{}", log_text());
}
