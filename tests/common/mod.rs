//! Shared helpers for the integration tests: real process trees in a sandbox
//! that nothing else can see into, and the real binaries.
//!
//! Safety: a [`Sandbox`] is a `fakeproc` "scope" process that is a child
//! subreaper. Everything a test starts lives below it, and orphans re-parent
//! to it (never to PID 1 or a session manager), so each test's trees stay in
//! its own subtree. The helpers only ever signal processes found below the
//! scope process by walking `/proc` ppid links from it, and the scope itself.

#![allow(dead_code)] // each test crate uses its own subset

pub mod pile;
pub mod reachable;
pub mod skips;

use std::collections::{HashMap, HashSet};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

// ---------------------------------------------------------------- temp dirs

/// A directory of its own per test, removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("mcp-reaper-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `text` to `name` inside the directory and returns its path.
    pub fn write(&self, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path.join(name);
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("writing {}: {e}", p.display()));
        p
    }

    /// A reaper config for tests: no grace unless asked, every uid a target
    /// (tests may run as root; a non-root reaper only targets its own uid
    /// anyway), a private state file so no daemon's grace book leaks in, and
    /// memory pressure ignored (a busy test machine must not cut a grace
    /// short; tests/pressure.rs turns it on in a drop-in).
    /// `extra` is appended verbatim (e.g. a `[patterns]` section).
    pub fn config(&self, grace_secs: u64, extra: &str) -> PathBuf {
        self.config_with(grace_secs, "", extra)
    }

    /// [`TempDir::config`] with more `[reaper]` keys (`reaper_keys`, lines
    /// of TOML) before `extra`.
    pub fn config_with(&self, grace_secs: u64, reaper_keys: &str, extra: &str) -> PathBuf {
        self.write("config.toml", self.config_text(grace_secs, reaper_keys, extra))
    }

    /// The text [`TempDir::config_with`] writes.
    pub fn config_text(&self, grace_secs: u64, reaper_keys: &str, extra: &str) -> String {
        let state = self.path.join("state.json");
        format!(
            "[reaper]\ngrace_secs = {grace_secs}\nmin_uid = 0\n{reaper_keys}\n\n[daemon]\nstate_file = {:?}\n\n{extra}\n\n[pressure]\nenabled = false\n",
            state.display().to_string()
        )
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

// ---------------------------------------------------------------- binaries

pub fn reaperctl<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    run(env!("CARGO_BIN_EXE_reaperctl"), args)
}

pub fn reaperd<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    run(env!("CARGO_BIN_EXE_mcp-reaperd"), args)
}

fn run<I, S>(bin: &str, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(bin).args(args).stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("running {bin}: {e}"))
}

/// Whether this test process runs as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// An executable named `name` on `$PATH`.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| {
        std::fs::metadata(p)
            .is_ok_and(|m| m.is_file() && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
    })
}

/// Whether any user may reach and run `path`: o+x on the file and on every
/// directory above it (a target dir below a 0700 home is not).
pub fn world_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Ok(path) = path.canonicalize() else { return false };
    path.ancestors().all(|p| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// Prints why a test is skipped (visible with `--nocapture` or on failure)
/// and lists it for the summary at the end of the run (`tests/zz_skip_summary.rs`).
pub fn skip(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
    skips::record(test, why);
}

/// `unshare` for a test that needs a PID namespace of its own: `None`
/// (the skip printed) when not root (`why_root` says what for) or when
/// util-linux's `unshare` is missing.
pub fn pid_namespace_tool(test: &str, why_root: &str) -> Option<PathBuf> {
    if !is_root() {
        skip(test, &format!("needs root ({why_root})"));
        return None;
    }
    let tool = find_tool("unshare");
    if tool.is_none() {
        skip(test, "unshare (util-linux) is not installed");
    }
    tool
}

/// `mcp-reaperd --once --json [--scope S] --config C [extra]`, enforcing
/// (only below the scope; a test without one runs in a PID namespace of its
/// own), asserting exit 0: the report parsed, and the raw output.
pub fn once_output(scope: Option<i32>, cfg: &Path, extra: &[&str]) -> (Value, Output) {
    let mut args = vec![s("--once"), s("--json"), s("--log-target"), s("stderr")];
    if let Some(sc) = scope {
        args.extend([s("--scope"), s(sc)]);
    }
    args.extend([s("--config"), s(cfg.display())]);
    args.extend(extra.iter().map(s));
    let out = reaperd(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "mcp-reaperd {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON on stdout ({e}):\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr)));
    (v, out)
}

/// [`once_output`] scoped to `scope`, without extra arguments: the report.
pub fn once_json(scope: i32, cfg: &Path) -> Value {
    once_output(Some(scope), cfg, &[]).0
}

/// `reaperctl scan --json …`, asserting success, parsed.
pub fn scan_json(config: &Path, extra: &[&str]) -> Value {
    let mut args: Vec<std::ffi::OsString> = vec!["scan".into(), "--json".into(), "--config".into(), config.into()];
    args.extend(extra.iter().map(Into::into));
    let out = reaperctl(&args);
    assert!(
        out.status.success(),
        "reaperctl {args:?} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("reaperctl printed no JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)))
}

/// Path of the `fakeproc` example, built on first use: one every uid can
/// run (a tree may start processes as another uid; see
/// [`reachable::reachable`]).
pub fn fakeproc_path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| reachable::reachable(&example_path("fakeproc")))
}

/// Path of an example of this package, built on demand. `cargo test --test X`
/// does not build examples, so this runs `cargo build --example NAME` (cheap
/// when it is up to date). Callers cache the result.
pub fn example_path(name: &str) -> PathBuf {
    // One build at a time: parallel tests would otherwise race on cargo's lock.
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let me = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test-binary>
    let profile_dir = me
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("unexpected test binary location {}", me.display()));
    let path = profile_dir.join("examples").join(name);
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "--example", name]);
    if release {
        cmd.arg("--release");
    }
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    let built = cmd.status();
    assert!(
        path.is_file(),
        "the {name} example is missing at {} (building it: {built:?}); run `cargo build --example {name}{}` first",
        path.display(),
        if release { " --release" } else { "" }
    );
    path
}

// ---------------------------------------------------------------- process specs

/// One process of a fake tree (see examples/fakeproc.rs).
#[derive(Clone, Debug)]
#[allow(clippy::struct_excessive_bools)] // the switches of fakeproc's JSON spec
pub struct Spec {
    argv: Vec<Value>,
    children: Vec<Spec>,
    setsid: bool,
    ignore_term: bool,
    subreaper: bool,
    exit_after_spawn: bool,
    handle_term: bool,
    term_delay_ms: u64,
    note_term: bool,
    uid: Option<u32>,
    on_usr1: Vec<Spec>,
    exec_on_usr1: Option<Box<Spec>>,
    reap: bool,
    touch_mib: u64,
    exe: Option<PathBuf>,
    flip: Vec<Value>,
    pad_kib: usize,
    /// `"pipe"`, `"socket"`, `"null"` or `"inherit"` (see examples/fakeproc.rs).
    stdio: &'static str,
    cwd: Option<PathBuf>,
    env: Vec<(String, String)>,
    hook: Option<Value>,
    real: bool,
    close_stdin_ms: Option<u64>,
    close_stdin_when: Option<PathBuf>,
    stdin_leak: Option<Box<Spec>>,
    title: Vec<Value>,
    retitle: Vec<Value>,
    out_file: Option<PathBuf>,
    listen: bool,
}

impl Spec {
    pub fn new(argv: &[&str]) -> Spec {
        Spec {
            argv: argv.iter().map(|a| json!(a)).collect(),
            children: Vec::new(),
            setsid: false,
            ignore_term: false,
            subreaper: false,
            exit_after_spawn: false,
            handle_term: false,
            term_delay_ms: 0,
            note_term: false,
            uid: None,
            on_usr1: Vec::new(),
            exec_on_usr1: None,
            reap: false,
            touch_mib: 0,
            exe: None,
            flip: Vec::new(),
            pad_kib: 0,
            stdio: "pipe",
            cwd: None,
            env: Vec::new(),
            hook: None,
            real: false,
            close_stdin_ms: None,
            close_stdin_when: None,
            stdin_leak: None,
            title: Vec::new(),
            retitle: Vec::new(),
            out_file: None,
            listen: false,
        }
    }

    /// Started in `dir` by its parent.
    pub fn cwd(mut self, dir: &Path) -> Spec {
        self.cwd = Some(dir.to_path_buf());
        self
    }

    /// The real program `argv[0]` (on `PATH`), not a stand-in: e.g. a
    /// host's `docker run -i` client. Its parent writes its ready line.
    pub fn real(mut self) -> Spec {
        self.real = true;
        self
    }

    /// Started with `name=value` added to its environment (the markers
    /// hosts set for their servers; a real program's settings).
    pub fn env(mut self, name: &str, value: &str) -> Spec {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// argv with arbitrary bytes (not necessarily UTF-8).
    pub fn raw(argv: &[&[u8]]) -> Spec {
        let mut s = Spec::new(&[]);
        s.argv = argv.iter().map(|a| json!(a)).collect();
        s
    }

    pub fn child(mut self, c: Spec) -> Spec {
        self.children.push(c);
        self
    }

    pub fn setsid(mut self) -> Spec {
        self.setsid = true;
        self
    }

    pub fn ignore_term(mut self) -> Spec {
        self.ignore_term = true;
        self
    }

    pub fn exit_after_spawn(mut self) -> Spec {
        self.exit_after_spawn = true;
        self
    }

    /// Exits from a SIGTERM handler (which, unlike the default action, only
    /// runs once a stopped process is continued).
    pub fn handle_term(mut self) -> Spec {
        self.handle_term = true;
        self
    }

    /// Exits from a SIGTERM handler after `ms` milliseconds (a browser that
    /// takes a moment to shut down).
    pub fn slow_term(mut self, ms: u64) -> Spec {
        self.handle_term = true;
        self.term_delay_ms = ms;
        self
    }

    /// Catches SIGTERM, notes when it arrived (see [`Sandbox::term_notes`])
    /// and keeps running: only SIGKILL ends it.
    pub fn note_term(mut self) -> Spec {
        self.note_term = true;
        self
    }

    /// Runs as this uid and gid (the sandbox must run as root).
    pub fn uid(mut self, uid: u32) -> Spec {
        self.uid = Some(uid);
        self
    }

    /// A child spawned only when this process gets SIGUSR1 (once), after it
    /// reported ready. Not counted by [`Spec::count`].
    pub fn on_usr1(mut self, c: Spec) -> Spec {
        self.on_usr1.push(c);
        self
    }

    /// Reaps its children as they exit, as real hosts do: no zombie stays.
    pub fn reap(mut self) -> Spec {
        self.reap = true;
        self
    }

    /// What this process execs into (same pid, no fork) when it gets
    /// SIGUSR1, after it reported ready; `next` then writes its own ready
    /// line and starts its children. Not counted by [`Spec::count`].
    pub fn exec_on_usr1(mut self, next: Spec) -> Spec {
        self.exec_on_usr1 = Some(Box::new(next));
        self
    }

    /// Holds `mib` MiB of private memory, every page written (Pss of that size).
    pub fn touch_mib(mut self, mib: u64) -> Spec {
        self.touch_mib = mib;
        self
    }

    /// Started through `path`, a symlink to fakeproc: the process's comm is
    /// the link's name (see examples/fakeproc.rs).
    pub fn exe(mut self, path: &Path) -> Spec {
        self.exe = Some(path.to_path_buf());
        self
    }

    /// Started with `kib` KiB of filler arguments after its argv (a huge
    /// command line; see examples/fakeproc.rs).
    pub fn pad_kib(mut self, kib: usize) -> Spec {
        self.pad_kib = kib;
        self
    }

    /// Execs itself every 3 ms, alternating between its argv and `argv`.
    pub fn flip(mut self, argv: &[&str]) -> Spec {
        self.flip = argv.iter().map(|a| json!(a)).collect();
        self
    }

    /// A child subreaper: orphans below it are re-parented to it (a scope of
    /// its own, e.g. one running as another uid).
    pub fn subreaper(mut self) -> Spec {
        self.subreaper = true;
        self
    }

    /// fd 0 and fd 1 on `/dev/null`: detached on purpose (a daemon, a
    /// `nohup`-like bystander). The default is a pipe to the parent for each,
    /// as most hosts start a stdio server.
    pub fn stdio_null(mut self) -> Spec {
        self.stdio = "null";
        self
    }

    /// fd 0–2 on a new pseudo-terminal that is the controlling terminal
    /// of a session this process leads; the parent holds the master and,
    /// with [`Spec::close_stdin_after`], closes it then (the window closed).
    pub fn stdio_pty(mut self) -> Spec {
        self.stdio = "pty";
        self
    }

    /// fd 0 and fd 1 both one end of a unix socketpair whose other end the
    /// parent holds, as Claude Code starts its servers.
    pub fn stdio_socket(mut self) -> Spec {
        self.stdio = "socket";
        self
    }

    /// fd 0, 1 and 2 the parent's own: a launcher that relaunches itself
    /// with its stdio passed through (Gemini CLI's outer node).
    pub fn stdio_share(mut self) -> Spec {
        self.stdio = "share";
        self
    }

    /// fd 1 and fd 2 on `path` (appended): `> log 2>&1`, `nohup.out`.
    pub fn out_file(mut self, path: &Path) -> Spec {
        self.out_file = Some(path.to_path_buf());
        self
    }

    /// Listens on a TCP socket on 127.0.0.1 (an ephemeral port) while it
    /// lives: a host that also serves clients over the network.
    pub fn listen(mut self) -> Spec {
        self.listen = true;
        self
    }

    /// stdin on `/dev/null`, stdout the parent's own (fakeproc's old default).
    pub fn stdio_inherit(mut self) -> Spec {
        self.stdio = "inherit";
        self
    }

    /// On SIGUSR1 (once, after ready), runs the real program `argv` with
    /// `stdin` on its stdin, as a host runs a hook, and writes
    /// `{"code", "stdout", "stderr"}` to `report` when it exited.
    pub fn hook(mut self, argv: &[&str], stdin: &str, report: &Path) -> Spec {
        self.hook = Some(json!({"argv": argv, "stdin": stdin, "report": report}));
        self
    }

    /// The parent ends this process's stdin `ms` after starting it (closes
    /// its write end of the pipe, or its end of the socketpair), as a host
    /// ends a server's stdin; the process never reads it and keeps running.
    pub fn close_stdin_after(mut self, ms: u64) -> Spec {
        self.close_stdin_ms = Some(ms);
        self
    }

    /// Writes `argv` over its own at start (as `process.title` does), before
    /// its ready line (which shows the argv it was started with).
    pub fn title(mut self, argv: &[&str]) -> Spec {
        self.title = argv.iter().map(|a| json!(a)).collect();
        self
    }

    /// Writes `argv` over its own when it gets SIGUSR1 (after its ready line).
    pub fn retitle(mut self, argv: &[&str]) -> Spec {
        self.retitle = argv.iter().map(|a| json!(a)).collect();
        self
    }

    /// The parent ends this process's stdin once the file `cue` exists
    /// (the test creates it when it has looked at the open pipe): a close
    /// that no slow scan can race.
    pub fn close_stdin_when(mut self, cue: &Path) -> Spec {
        self.close_stdin_when = Some(cue.to_path_buf());
        self
    }

    /// A helper the parent starts holding a copy of its end of this
    /// process's stdin (a leaked write end). Counted by [`Spec::count`].
    pub fn stdin_leak(mut self, helper: Spec) -> Spec {
        self.stdin_leak = Some(Box::new(helper));
        self
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "argv": self.argv,
            "children": self.children.iter().map(Spec::to_json).collect::<Vec<_>>(),
            "setsid": self.setsid,
            "ignore_term": self.ignore_term,
            "subreaper": self.subreaper,
            "exit_after_spawn": self.exit_after_spawn,
            "handle_term": self.handle_term,
            "term_delay_ms": self.term_delay_ms,
            "note_term": self.note_term,
            "uid": self.uid,
            "on_usr1": self.on_usr1.iter().map(Spec::to_json).collect::<Vec<_>>(),
            "exec_on_usr1": self.exec_on_usr1.as_ref().map(|n| n.to_json()),
            "reap": self.reap,
            "touch_mib": self.touch_mib,
            "exe": self.exe,
            "flip": self.flip,
            "pad_kib": self.pad_kib,
            "stdio": self.stdio,
            "cwd": self.cwd,
            "env": self.env,
            "hook": self.hook,
            "real": self.real,
            "close_stdin_ms": self.close_stdin_ms,
            "close_stdin_when": self.close_stdin_when,
            "stdin_leak": self.stdin_leak.as_ref().map(|h| h.to_json()),
            "title": self.title,
            "retitle": self.retitle,
            "out_file": self.out_file,
            "listen": self.listen,
        });
        // Only the switches that are set (fakeproc defaults the rest): a big
        // tree's spec must stay under the 128 KiB one environment string may hold.
        let unset = |x: &Value| match x {
            Value::Null | Value::Bool(false) => true,
            Value::Number(n) => n.as_u64() == Some(0),
            Value::Array(a) => a.is_empty(),
            _ => false,
        };
        if let Value::Object(m) = &mut v {
            // `uid: 0` asks for root: only a missing uid means "the parent's".
            m.retain(|k, x| k == "argv" || (k == "uid" && !x.is_null()) || !unset(x));
        }
        v
    }

    /// This process and all below it (as started: `on_usr1` children not counted).
    pub fn count(&self) -> usize {
        1 + self.children.iter().map(Spec::count).sum::<usize>() + self.stdin_leak.as_ref().map_or(0, |h| h.count())
    }
}

// ---------------------------------------------------------------- /proc helpers

/// `(state, ppid)` of a pid from `/proc/PID/stat`, or `None` if it is gone.
pub fn stat_of(pid: i32) -> Option<(char, i32)> {
    let buf = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // comm may hold anything: the fields start after the last ')'.
    let close = buf.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&buf[close + 1..]).ok()?;
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((state, ppid))
}

/// `(pgid, sid)` of a pid, or `None` if it is gone.
pub fn pgid_sid_of(pid: i32) -> Option<(i32, i32)> {
    let buf = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = buf.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&buf[close + 1..]).ok()?;
    let mut f = rest.split_ascii_whitespace().skip(2); // state, ppid
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

pub fn pgid_of(pid: i32) -> Option<i32> {
    pgid_sid_of(pid).map(|p| p.0)
}

pub fn ppid_of(pid: i32) -> Option<i32> {
    stat_of(pid).map(|s| s.1)
}

/// Exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    stat_of(pid).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X' | 'x'))
}

/// pid → ppid for every process now.
fn ppid_map() -> HashMap<i32, i32> {
    let mut m = HashMap::new();
    for e in std::fs::read_dir("/proc").expect("reading /proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(pp) = ppid_of(pid) {
            m.insert(pid, pp);
        }
    }
    m
}

/// Every strict descendant of `root`, by ppid links, as of now.
pub fn descendants_of(root: i32) -> Vec<i32> {
    let m = ppid_map();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, &pp) in &m {
        children.entry(pp).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            if c != root && seen.insert(c) {
                out.push(c);
                stack.push(c);
            }
        }
    }
    out.sort_unstable();
    out
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (the clock [`Sandbox::term_notes`] uses).
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // CLOCK_MONOTONIC is never negative.
    t.tv_sec.cast_unsigned() * 1_000_000_000 + t.tv_nsec.cast_unsigned()
}

/// Polls `cond` every 10 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn sigkill(pid: i32) {
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

// ---------------------------------------------------------------- the sandbox

/// One line a fakeproc wrote once ready.
#[derive(Clone, Debug)]
pub struct Ready {
    pub pid: i32,
    pub ppid: i32,
    /// argv joined by spaces, lossily decoded.
    pub cmd: String,
}

/// A child-subreaper scope process with a tree of fake processes below it.
pub struct Sandbox {
    scope: Child,
    ready: Vec<Ready>,
    dir: TempDir,
}

pub const SCOPE_ARGV0: &str = "mcp-reaper-test-scope";

impl Sandbox {
    /// Starts the scope process with `children` below it and waits (10 s at
    /// most) until every process of the tree has reported ready.
    pub fn new(children: Vec<Spec>) -> Sandbox {
        let mut scope = Spec::new(&[SCOPE_ARGV0]).subreaper();
        for c in children {
            scope = scope.child(c);
        }
        let expected = scope.count();
        let dir = TempDir::new("sandbox");
        let ready_file = dir.path().join("ready");
        // World-writable, so processes started as another uid can report.
        std::fs::write(&ready_file, "").expect("creating the ready file");
        std::fs::set_permissions(&ready_file, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .expect("chmod of the ready file");
        let notes_file = dir.path().join("notes");
        std::fs::write(&notes_file, "").expect("creating the notes file");
        std::fs::set_permissions(&notes_file, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .expect("chmod of the notes file");
        let stderr_file = dir.path().join("stderr.log");
        let stderr = std::fs::File::create(&stderr_file).expect("creating the sandbox's stderr log");
        // stdin/stdout on /dev/null and stderr on a file: no fake process
        // holds a terminal, so verdict reasons don't depend on how the tests
        // were started.
        let child = Command::new(fakeproc_path())
            .arg0(SCOPE_ARGV0)
            .env("FAKEPROC", scope.to_json().to_string())
            .env("FAKEPROC_READY", &ready_file)
            .env("FAKEPROC_NOTES", &notes_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawning the fakeproc scope process");
        let mut sb = Sandbox { scope: child, ready: Vec::new(), dir };
        let ok = wait_until(Duration::from_secs(60), || {
            sb.ready = read_ready(&ready_file);
            sb.ready.len() >= expected
        });
        assert!(
            ok,
            "only {} of {expected} fake processes became ready in 30 s: {:#?}\nfakeproc stderr:\n{}",
            sb.ready.len(),
            sb.ready,
            std::fs::read_to_string(&stderr_file).unwrap_or_default()
        );
        let scope_pid = sb.scope_pid();
        assert!(
            sb.ready.iter().any(|r| r.pid == scope_pid),
            "the scope process {scope_pid} did not report ready: {:#?}",
            sb.ready
        );
        // A process read in its own start tick has no settled identity yet
        // (`Process::identity_settled`): its tree is "young", confirmed at
        // the next scan. Every one started before now: once the clock has
        // ticked, a test's first scan sees them settled, however fast it
        // follows.
        let procfs = mcp_reaper::scan::ProcFs::default();
        let started_by = procfs.now_tick();
        assert!(wait_until(Duration::from_secs(60), || procfs.now_tick() > started_by), "the clock did not tick");
        sb
    }

    pub fn scope_pid(&self) -> i32 {
        self.scope.id().cast_signed()
    }

    pub fn dir(&self) -> &TempDir {
        &self.dir
    }

    pub fn ready(&self) -> &[Ready] {
        &self.ready
    }

    /// Waits (10 s at most) until `total` processes have reported ready in
    /// all, e.g. after [`Spec::on_usr1`] children were triggered, and returns
    /// the lines that are new.
    pub fn wait_ready(&mut self, total: usize) -> Vec<Ready> {
        let before = self.ready.len();
        let file = self.dir.path().join("ready");
        let ok = wait_until(Duration::from_secs(60), || {
            self.ready = read_ready(&file);
            self.ready.len() >= total
        });
        assert!(ok, "only {} of {total} fake processes became ready in 30 s: {:#?}", self.ready.len(), self.ready);
        self.ready[before..].to_vec()
    }

    /// `(pid, CLOCK_MONOTONIC ns)` of every SIGTERM a [`Spec::note_term`]
    /// process caught so far.
    pub fn term_notes(&self) -> Vec<(i32, u64)> {
        let text = std::fs::read_to_string(self.dir.path().join("notes")).unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let mut f = l.split(' ');
                let pid = f.next()?.parse().ok()?;
                (f.next()? == "TERM").then_some(())?;
                Some((pid, f.next()?.parse().ok()?))
            })
            .collect()
    }

    /// Sends `sig` to one process of the sandbox (checked to be below the
    /// scope process first).
    pub fn signal(&self, pid: i32, sig: rustix::process::Signal) {
        assert!(self.is_descendant(pid), "refusing to signal {pid}: not below the sandbox's scope process");
        let p = rustix::process::Pid::from_raw(pid).expect("a positive pid");
        rustix::process::kill_process(p, sig).unwrap_or_else(|e| panic!("signalling {pid}: {e}"));
    }

    /// The pid of the one process whose argv starts with `prefix`.
    pub fn pid_of(&self, prefix: &str) -> i32 {
        let hits: Vec<&Ready> = self.ready.iter().filter(|r| r.cmd.starts_with(prefix)).collect();
        match hits.as_slice() {
            [one] => one.pid,
            [] => panic!("no sandbox process starts with {prefix:?}: {:#?}", self.ready),
            _ => panic!("several sandbox processes start with {prefix:?}: {hits:#?}"),
        }
    }

    /// Every pid the sandbox reported ready, but the scope's.
    pub fn all_pids(&self) -> Vec<i32> {
        let s = self.scope_pid();
        self.ready.iter().map(|r| r.pid).filter(|&p| p != s).collect()
    }

    pub fn is_descendant(&self, pid: i32) -> bool {
        let scope = self.scope_pid();
        let mut cur = pid;
        for _ in 0..4096 {
            match ppid_of(cur) {
                Some(pp) if pp == scope => return true,
                Some(pp) if pp > 1 => cur = pp,
                _ => return false,
            }
        }
        false
    }

    pub fn descendants(&self) -> Vec<i32> {
        descendants_of(self.scope_pid())
    }

    /// SIGKILLs one process of the sandbox (checked to be below the scope
    /// process first), waits until it is dead and until its children have
    /// been re-parented to the scope process.
    pub fn kill_host(&self, pid: i32) {
        assert!(self.is_descendant(pid), "refusing to signal {pid}: not below the sandbox's scope process");
        let orphans: Vec<i32> = self.ready.iter().filter(|r| r.ppid == pid).map(|r| r.pid).collect();
        sigkill(pid);
        assert!(wait_until(Duration::from_secs(60), || !alive(pid)), "{pid} survived SIGKILL for 10 s");
        let scope = self.scope_pid();
        for o in orphans {
            assert!(
                wait_until(Duration::from_secs(60), || ppid_of(o) == Some(scope) || !alive(o)),
                "{o} was not re-parented to the scope process {scope} after its parent {pid} died"
            );
        }
    }

    /// Asserts that each of `pids` still runs (not a zombie).
    #[allow(clippy::unused_self)] // a sandbox method, so a test reads `sb.assert_alive(..)`
    pub fn assert_alive(&self, pids: &[i32]) {
        for &p in pids {
            assert!(alive(p), "sandbox process {p} should still be alive: {:?}", stat_of(p));
        }
    }
}

fn read_ready(path: &Path) -> Vec<Ready> {
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // Only complete lines: a line is one write, but a read may race it.
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => &bytes[..=i],
        None => return out,
    };
    for line in complete.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let line = String::from_utf8_lossy(line);
        let mut it = line.splitn(3, ' ');
        let (Some(pid), Some(ppid)) = (it.next().and_then(|s| s.parse().ok()), it.next().and_then(|s| s.parse().ok()))
        else {
            panic!("malformed ready line {line:?}");
        };
        out.push(Ready { pid, ppid, cmd: it.next().unwrap_or("").to_string() });
    }
    out
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let scope = self.scope_pid();
        // Everything below the scope first (the scope reaps them), a few
        // rounds in case one was forking, then the scope itself.
        for _ in 0..50 {
            let below = descendants_of(scope);
            if below.is_empty() {
                break;
            }
            for p in below {
                sigkill(p);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.scope.kill();
        let _ = self.scope.wait();
    }
}

// ---------------------------------------------------------------- JSON and text

#[allow(clippy::needless_pass_by_value)] // called with literals and numbers: `s("x")`, `s(pid)`
pub fn s(x: impl ToString) -> String {
    x.to_string()
}

/// Process output as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The tree of a `scan --json` report rooted at `root`.
pub fn tree_rooted_at(v: &Value, root: i32) -> &Value {
    v["trees"]
        .as_array()
        .expect("trees is an array")
        .iter()
        .find(|t| t["root"] == root)
        .unwrap_or_else(|| panic!("no tree rooted at {root}: {v:#}"))
}

/// The tree of a `scan --json` report that holds `pid` (whatever its root).
pub fn tree_holding(v: &Value, pid: i32) -> &Value {
    v["trees"]
        .as_array()
        .expect("trees is an array")
        .iter()
        .find(|t| t["members"].as_array().unwrap().iter().any(|m| m["pid"] == pid))
        .unwrap_or_else(|| panic!("no tree holds {pid}: {v:#}"))
}

/// Waits until `pid`'s fd 0 is a pseudo-terminal whose master is gone.
pub fn wait_terminal_closed(pid: i32) {
    let ok = wait_until(Duration::from_secs(10), || {
        std::fs::read_link(format!("/proc/{pid}/fd/0"))
            .is_ok_and(|t| t.to_string_lossy().starts_with("/dev/pts/") && t.to_string_lossy().ends_with(" (deleted)"))
    });
    assert!(ok, "the terminal of {pid} never closed");
}

/// Enforcing `--once` (scoped to the sandbox, grace 0 in `cfg`) reaps
/// nothing, and `pids` live on.
pub fn nothing_reaped(sb: &Sandbox, cfg: &Path, pids: &[i32]) {
    let v = once_json(sb.scope_pid(), cfg);
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 0, "{v:#}");
    sb.assert_alive(pids);
}

/// The member `pid` of a tree.
pub fn member(t: &Value, pid: i32) -> &Value {
    t["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["pid"] == pid)
        .unwrap_or_else(|| panic!("{pid} is not a member: {t:#}"))
}

/// The member `pid` of any tree of a `scan --json` or `--once --json`
/// report, if it is in one.
pub fn in_any_tree(v: &Value, pid: i32) -> Option<&Value> {
    v["trees"].as_array()?.iter().flat_map(|t| t["members"].as_array().into_iter().flatten()).find(|m| m["pid"] == pid)
}

/// The root pids of a `--once --json` run's outcomes, sorted.
pub fn reaped_roots(v: &Value) -> Vec<i64> {
    let mut r: Vec<i64> =
        v["outcomes"].as_array().into_iter().flatten().filter_map(|o| o["root"]["pid"].as_i64()).collect();
    r.sort_unstable();
    r
}

// ---------------------------------------------------------------- a daemon's socket and log

/// A running daemon as a test talks to it: its control socket and its log.
pub struct DaemonCtl {
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl DaemonCtl {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many log lines contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.log_text().lines().filter(|l| l.contains(needle)).count()
    }

    /// `reaperctl ARGS --socket <this daemon's socket>`.
    pub fn ctl(&self, args: &[&str]) -> Output {
        let mut a: Vec<String> = args.iter().map(s).collect();
        a.extend([s("--socket"), s(self.socket.display())]);
        reaperctl(&a)
    }

    /// `reaperctl status --json`, parsed.
    pub fn status(&self) -> Value {
        let out = self.ctl(&["status", "--json"]);
        assert!(
            out.status.success(),
            "reaperctl status failed: {}\ndaemon log:\n{}",
            text(&out.stderr),
            self.log_text()
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("status JSON ({e}): {}", text(&out.stdout)))
    }

    /// Polls the status until `cond` holds (`timeout` at most); the last one.
    pub fn status_until(&self, timeout: Duration, what: &str, mut cond: impl FnMut(&Value) -> bool) -> Value {
        let end = Instant::now() + timeout;
        loop {
            let st = self.status();
            if cond(&st) {
                return st;
            }
            assert!(
                Instant::now() < end,
                "{what}: not within {timeout:?}; last status:\n{st:#}\nlog:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

// ---------------------------------------------------------------- the daemon

/// How to start `mcp-reaperd` as a daemon ([`Daemon::start`]); the default
/// runs it directly, logging to stderr.
#[derive(Default)]
pub struct Launch {
    /// More arguments, after the usual ones (e.g. `--dry-run`).
    pub args: Vec<String>,
    /// Shell commands run first inside a private mount namespace (`unshare
    /// --mount`), e.g. mounts only this daemon sees.
    pub in_namespace: Option<String>,
    /// Run as uid/gid 65534 (through setpriv).
    pub as_nobody: bool,
    /// A umask of its own (octal), so created modes are the daemon's choice.
    pub umask: Option<&'static str>,
    /// Log to stderr (the default) or journald.
    pub log_target: Option<&'static str>,
    pub env: Vec<(&'static str, String)>,
    /// Written to the daemon's stdin, which is then closed (a config given
    /// as `--config /dev/stdin`); `/dev/null` when `None`.
    pub stdin: Option<String>,
}

impl Launch {
    /// The default launch with more arguments for the daemon.
    pub fn with_args(args: &[&str]) -> Launch {
        Launch { args: args.iter().map(s).collect(), ..Launch::default() }
    }
}

/// A running `mcp-reaperd` scoped to a sandbox (`--scope`), with its own
/// config, socket, state file and debug log; stopped on drop (SIGTERM, then
/// SIGKILL after 5 s), panics included. Derefs to its [`DaemonCtl`].
pub struct Daemon {
    pub child: Child,
    ctl: DaemonCtl,
}

impl Daemon {
    /// Starts the daemon (`--scope scope`, `--config`, `--socket`,
    /// `--state-file`, debug logs into `log`) and waits until it answers.
    pub fn start(scope: i32, config: &Path, socket: &Path, state: &Path, log: &Path, how: &Launch) -> Daemon {
        let mut d = Daemon::spawn(scope, config, socket, state, log, how);
        d.wait_answering();
        d
    }

    /// [`Daemon::start`] with `control.sock`, `state.json` and `daemon.log`
    /// in `dir`.
    pub fn start_in(scope: i32, config: &Path, dir: &Path, how: &Launch) -> Daemon {
        let (socket, state, log) = (dir.join("control.sock"), dir.join("state.json"), dir.join("daemon.log"));
        Daemon::start(scope, config, &socket, &state, &log, how)
    }

    /// Starts the daemon without waiting for it.
    pub fn spawn(scope: i32, config: &Path, socket: &Path, state: &Path, log: &Path, how: &Launch) -> Daemon {
        const NOBODY: &str = "65534";
        let reaperd = Path::new(env!("CARGO_BIN_EXE_mcp-reaperd"));
        let reaperd = if how.as_nobody { reachable::reachable(reaperd) } else { reaperd.to_path_buf() };
        let args: Vec<std::ffi::OsString> = vec![
            "--config".into(),
            config.into(),
            "--scope".into(),
            s(scope).into(),
            "--socket".into(),
            socket.into(),
            "--state-file".into(),
            state.into(),
            "--log-target".into(),
            how.log_target.unwrap_or("stderr").into(),
            "--log-level".into(),
            "debug".into(),
        ];
        let mut steps: Vec<String> = how.umask.iter().map(|u| format!("umask {u}")).collect();
        steps.extend(how.in_namespace.clone());
        let mut cmd = if steps.is_empty() && !how.as_nobody {
            Command::new(&reaperd)
        } else {
            let setpriv = if how.as_nobody {
                format!("setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups -- ")
            } else {
                String::new()
            };
            let script: String = steps.iter().flat_map(|s| [s, " && "]).collect();
            let mut c = if how.in_namespace.is_some() {
                let mut c = Command::new("unshare");
                c.args(["--mount", "--", "sh"]);
                c
            } else {
                Command::new("sh")
            };
            c.arg("-c").arg(format!("{script}exec {setpriv}\"$0\" \"$@\"")).arg(&reaperd);
            c
        };
        cmd.args(&args).args(&how.args);
        let logf = std::fs::File::create(log).expect("creating the daemon log");
        let mut child = cmd
            .envs(how.env.iter().map(|(k, v)| (k, v)))
            .stdin(if how.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .expect("spawning mcp-reaperd");
        if let (Some(text), Some(mut pipe)) = (&how.stdin, child.stdin.take()) {
            std::io::Write::write_all(&mut pipe, text.as_bytes()).expect("writing the daemon's stdin");
        }
        Daemon { child, ctl: DaemonCtl { socket: socket.to_path_buf(), log: log.to_path_buf() } }
    }

    /// Waits (30 s at most) until the socket answers `reaperctl status`;
    /// panics with the log when the daemon exits first.
    pub fn wait_answering(&mut self) {
        let ok = wait_until(Duration::from_secs(60), || {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("mcp-reaperd exited at start ({st}):\n{}", self.log_text());
            }
            self.ctl(&["status"]).status.success()
        });
        assert!(ok, "mcp-reaperd did not answer on {} in 30 s:\n{}", self.socket.display(), self.log_text());
    }

    pub fn pid(&self) -> i32 {
        self.child.id().cast_signed()
    }

    /// Still running (not exited).
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL, and wait until it is gone.
    pub fn sigkill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl std::ops::Deref for Daemon {
    type Target = DaemonCtl;
    fn deref(&self) -> &DaemonCtl {
        &self.ctl
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.running() {
            if let Some(p) = rustix::process::Pid::from_raw(self.pid()) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
            }
            if !wait_until(Duration::from_secs(5), || !matches!(self.child.try_wait(), Ok(None))) {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

/// A `dockerd` of a test's own, its data, sockets and log in `dir`
/// (`d.sock`, `engine.log`): no iptables, no bridge, so it touches nothing
/// of the machine's networking. Returns the child and the socket's path.
pub fn spawn_dockerd(dockerd: &Path, dir: &TempDir) -> (std::process::Child, PathBuf) {
    let sock = dir.path().join("d.sock");
    let log = std::fs::File::create(dir.path().join("engine.log")).expect("creating the dockerd log");
    let child = Command::new(dockerd)
        .args(["--iptables=false", "--bridge=none", "--data-root"])
        .arg(dir.path().join("data"))
        .arg("--exec-root")
        .arg(dir.path().join("exec"))
        .arg("-H")
        .arg(format!("unix://{}", sock.display()))
        .arg("--pidfile")
        .arg(dir.path().join("dockerd.pid"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("dup of the log"))
        .stderr(log)
        .spawn()
        .expect("spawning dockerd");
    (child, sock)
}

/// The one process below `scope` whose command line starts with `prefix`
/// (its pid as seen from here, whatever namespace it is in).
pub fn one_below(scope: i32, prefix: &str) -> i32 {
    let hits: Vec<i32> = descendants_of(scope)
        .into_iter()
        .filter(|&p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmd).replace('\0', " ").starts_with(prefix)
        })
        .collect();
    match hits.as_slice() {
        [one] => *one,
        _ => panic!("expected one process starting with {prefix:?} below {scope}: {hits:?}"),
    }
}

/// A PID namespace of the test's own, as a container is: `unshare --pid
/// --fork` runs a `sleep infinity`-looking PID 1 (bash's `exec -a`, the
/// argv of a devcontainer's init) whose first child is the `init` tree.
/// Everything in it ends with it: PID 1 gets SIGKILL on drop.
pub struct PidNamespace {
    unshare: Child,
    pub dir: TempDir,
}

impl PidNamespace {
    /// Starts it and waits (60 s at most) until every process of `init`
    /// reported ready.
    pub fn start(unshare: &Path, init: &Spec) -> PidNamespace {
        let dir = TempDir::new("pidns");
        let ready = dir.path().join("ready");
        std::fs::write(&ready, "").unwrap();
        let unshare = Command::new(unshare)
            .args(["--pid", "--fork", "bash", "-c", "exec -a sleep \"$0\" infinity"])
            .arg(fakeproc_path())
            .env("FAKEPROC", init.to_json().to_string())
            .env("FAKEPROC_READY", &ready)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("fakeproc.log")).unwrap())
            .spawn()
            .expect("spawning unshare");
        let ns = PidNamespace { unshare, dir };
        let total = init.count();
        let ok = wait_until(Duration::from_secs(60), || {
            std::fs::read_to_string(&ready).unwrap_or_default().lines().count() >= total
        });
        assert!(ok, "the namespace's processes did not get ready: {:?}", std::fs::read_to_string(&ready));
        ns
    }

    /// The `unshare` process outside: every process of the namespace is below it.
    pub fn scope(&self) -> i32 {
        self.unshare.id().cast_signed()
    }

    /// Outer pid of the one process inside whose command line starts with
    /// `prefix` (the ready file has the pids inside the namespace).
    pub fn pid_of(&self, prefix: &str) -> i32 {
        one_below(self.scope(), prefix)
    }
}

impl Drop for PidNamespace {
    fn drop(&mut self) {
        // PID 1 of the namespace: the kernel ends everything else in it.
        if let Some(&init) = descendants_of(self.scope()).first() {
            sigkill(init);
        }
        let _ = self.unshare.wait();
    }
}

/// The system's interpreter, else PATH's (a pyenv shim execs the real
/// one); `None` with the skip printed when there is none.
pub fn python3(test: &str) -> Option<PathBuf> {
    let system = Some(PathBuf::from("/usr/bin/python3")).filter(|p| p.is_file());
    let found = system.or_else(|| find_tool("python3"));
    if found.is_none() {
        skip(test, "no python3 on PATH");
    }
    found
}

/// `bin EXTRA… --json --scope <the sandbox's>` with the default test config
/// of `dir` and `$HOME` at `dir/home`: its JSON report.
pub fn json_in(dir: &TempDir, bin: &str, sb: &Sandbox, extra: &[&str]) -> Value {
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let scope = s(sb.scope_pid());
    let mut args = extra.to_vec();
    args.extend(["--json", "--scope", &scope]);
    json_with_home(bin, &args, &dir.config(0, ""), &home)
}

/// `bin ARGS… --config CFG` with `$HOME` set to `home`, asserting exit 0:
/// its JSON report (a host's configs are read from the fixture's home).
pub fn json_with_home(bin: &str, args: &[&str], cfg: &Path, home: &Path) -> Value {
    let out = Command::new(bin)
        .args(args)
        .arg("--config")
        .arg(cfg)
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .expect("running the reaper");
    assert_eq!(out.status.code(), Some(0), "stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}):\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr)))
}
