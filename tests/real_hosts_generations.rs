//! Issue 35 on real hosts: the copies of a server a live host starts again
//! and again, grouped by `reaperctl generations` with the session the
//! copies' real environment names.
//!
//! - Codex's app-server (`codex app-server`, JSON-RPC over stdio) starts a
//!   copy of each configured stdio server per thread (`thread/start`), and
//!   keeps it while the app-server lives (`thread/unsubscribe` leaves it
//!   running). The test starts threads more than the generation window
//!   apart: one generation per thread, every copy's stdin held by the
//!   app-server. Codex gives its servers no thread or
//!   session id (a short fixed environment): the copies show no session.
//! - Claude Code (`claude -p --input-format stream-json`: one process kept
//!   alive across inputs) gives its stdio servers `CLAUDE_CODE_SESSION_ID`.
//!   Two servers of one command start in its first session; `/clear` starts
//!   a new session (its stream-json says both ids) and the `mcp_reconnect`
//!   control request restarts one server, in the new session. The host then
//!   holds copies of one command in two sessions: two generations, each
//!   copy's `session` the id in its real environ and in Claude Code's output.
//!
//! The hosts come from `scripts/real-hosts-setup` (`target/real-hosts/`);
//! a host that is not there is skipped with a printed reason. The model is
//! `scripts/real-hosts-mock.py` on loopback (no step here asks it anything;
//! it keeps whatever the hosts send at start-up off the network).
//!
//! Measured on 2026-11-28 (2 busy cores), Codex 0.171.0 and Claude Code
//! 2.1.332: the Codex test takes 10–12 s (3 threads, more than 3 s apart),
//! the Claude Code test 6–8 s; the first run of a cold machine is slower.
//!
//! Each host runs below its own sandbox scope (a child subreaper), started
//! by `/bin/sh -c 'exec HOST … <FIFO >OUT'`: the test writes the host's
//! input into the FIFO and reads its output from the file. Nothing is
//! signalled but by the sandbox's drop (pids found below its scope).

mod common;

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Sandbox, Spec, TempDir, alive, ppid_of, s, text, wait_until};
use serde_json::{Value, json};

/// Where `scripts/real-hosts-setup` installs.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/real-hosts")
}

fn bin(rel: &str) -> String {
    root().join(rel).display().to_string()
}

const CODEX: &str = "npm/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
const CLAUDE: &str = "npm/claude/node_modules/.bin/claude";
/// The quickstart weather server, run by its venv's python (no launcher
/// between host and server: the copy is the host's child).
const PYTHON: &str = "weather/.venv/bin/python";
const SERVER: &str = "weather/weather.py";

/// Deadlines: the machine is busy (others compile); a host's start-up
/// alone has taken tens of seconds.
const START: Duration = Duration::from_secs(180);
const STEP: Duration = Duration::from_secs(120);

/// One host at a time: each is heavy, and two starve each other's start-up.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether everything `rels` names is installed; else the skip, printed.
fn installed(test: &str, rels: &[&str]) -> bool {
    let missing: Vec<String> =
        rels.iter().map(|r| root().join(r)).filter(|p| !p.exists()).map(|p| p.display().to_string()).collect();
    if !missing.is_empty() {
        common::skip(test, &format!("not installed: {} (run scripts/real-hosts-setup)", missing.join(", ")));
        return false;
    }
    if !Path::new("/bin/sh").exists() {
        common::skip(test, "no /bin/sh to start the host with its input on a FIFO");
        return false;
    }
    true
}

// ---------------------------------------------------------------- the mock model

/// `scripts/real-hosts-mock.py` on loopback, stopped on drop.
struct Mock {
    child: Child,
    port: u16,
}

impl Mock {
    fn start(dir: &Path) -> Mock {
        let port_file = dir.join("mock.port");
        let child = Command::new(bin("py/bin/python"))
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/real-hosts-mock.py"))
            .arg(&port_file)
            .arg(dir.join("mock.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("starting the mock model");
        let mut port = 0;
        let up = wait_until(Duration::from_secs(60), || {
            port = std::fs::read_to_string(&port_file).ok().and_then(|p| p.trim().parse().ok()).unwrap_or(0);
            port != 0
        });
        assert!(up, "the mock model did not start");
        Mock { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------- a host driven through a FIFO

/// A real host below a sandbox scope, its stdin a FIFO the test writes, its
/// stdout a file the test reads line by line.
struct Driven {
    sb: Sandbox,
    host: i32,
    input: File,
    out: PathBuf,
    err: PathBuf,
}

impl Driven {
    /// Starts `argv` in `cwd` with `env` added, below a new sandbox scope.
    fn start(dir: &Path, argv: &[String], env: &[(&str, String)], cwd: &Path) -> Driven {
        let (fifo, out, err) = (dir.join("host.in"), dir.join("host.out"), dir.join("host.err"));
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, 0o600.into(), 0)
            .expect("mkfifo for the host's input");
        // A session this test itself runs in (a Claude Code terminal) is
        // not the host's: its variables are not passed on.
        let script = r#"unset CLAUDECODE CLAUDE_CODE_SESSION_ID CLAUDE_CODE_LAUNCHED_BY_SESSION_IDS CLAUDE_CODE_ENTRYPOINT; exec "$0" "$@" <"$HOST_IN" >"$HOST_OUT" 2>"$HOST_ERR""#;
        let mut sh: Vec<&str> = vec!["/bin/sh", "-c", script];
        sh.extend(argv.iter().map(String::as_str));
        let mut spec = Spec::new(&sh)
            .real()
            .stdio_null()
            .cwd(cwd)
            .env("HOST_IN", &fifo.display().to_string())
            .env("HOST_OUT", &out.display().to_string())
            .env("HOST_ERR", &err.display().to_string());
        for (k, v) in env {
            spec = spec.env(k, v);
        }
        let sb = Sandbox::new(vec![spec]);
        // The shell execs the host: the same pid.
        let host = sb.pid_of("/bin/sh");
        // The FIFO's write end, once the shell opened its read end (it
        // blocks in open until then): non-blocking open until it does.
        let mut input = None;
        let opened = wait_until(START, || {
            input = rustix::fs::open(&fifo, rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::NONBLOCK, 0.into()).ok();
            input.is_some()
        });
        assert!(opened, "the host {host} never opened its input FIFO");
        let input = input.unwrap();
        rustix::fs::fcntl_setfl(&input, rustix::fs::OFlags::empty()).expect("making the FIFO blocking");
        let execd = wait_until(START, || !cmdline(host).starts_with("/bin/sh"));
        assert!(execd, "the shell {host} did not exec the host");
        Driven { sb, host, input: File::from(input), out, err }
    }

    /// Writes one JSON line to the host's stdin.
    fn send(&mut self, v: &Value) {
        writeln!(self.input, "{v}").unwrap_or_else(|e| panic!("writing to the host: {e}; {}", self.stderr()));
    }

    /// Every complete JSON line the host wrote so far.
    fn lines(&self) -> Vec<Value> {
        let t = std::fs::read_to_string(&self.out).unwrap_or_default();
        let complete = t.rfind('\n').map_or("", |i| &t[..i]);
        complete.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// The first line (of those at index `from` and after) `pred` accepts,
    /// waited for; a failure names `what` and shows the host's output.
    fn wait_line(&self, what: &str, from: usize, pred: impl Fn(&Value) -> bool) -> (usize, Value) {
        let mut hit = None;
        let ok = wait_until(STEP, || {
            hit = self.lines().into_iter().enumerate().skip(from).find(|(_, l)| pred(l));
            hit.is_some()
        });
        assert!(ok, "{what}: not in the host's output after {STEP:?}:\n{}\n{}", self.stdout_tail(), self.stderr());
        hit.unwrap()
    }

    fn stdout_tail(&self) -> String {
        let t = std::fs::read_to_string(&self.out).unwrap_or_default();
        let lines: Vec<&str> = t.lines().collect();
        lines[lines.len().saturating_sub(20)..].iter().map(|l| cut(l, 400)).collect::<Vec<_>>().join("\n")
    }

    fn stderr(&self) -> String {
        format!("host stderr:\n{}", cut(&std::fs::read_to_string(&self.err).unwrap_or_default(), 4000))
    }

    /// The host's live server copies: its children running the weather
    /// server, oldest first.
    fn copies(&self) -> Vec<i32> {
        let mut c: Vec<i32> = self
            .sb
            .descendants()
            .into_iter()
            .filter(|&p| ppid_of(p) == Some(self.host) && alive(p) && cmdline(p).contains(SERVER))
            .collect();
        c.sort_by_key(|&p| (start_tick(p), p));
        c
    }

    /// Waits until `pred` holds of the host's copies, and returns them.
    fn copies_until(&self, what: &str, pred: impl Fn(&[i32]) -> bool) -> Vec<i32> {
        let mut now = Vec::new();
        let ok = wait_until(STEP, || {
            now = self.copies();
            pred(&now)
        });
        assert!(ok, "{what}: the host's copies are {now:?} after {STEP:?}\n{}\n{}", self.stdout_tail(), self.stderr());
        now
    }

    /// `reaperctl generations --json`, scoped to this sandbox.
    fn generations(&self, cfg: &Path) -> Value {
        let scope = s(self.sb.scope_pid());
        let out = common::reaperctl(["generations", "--json", "--config", &s(cfg.display()), "--scope", &scope]);
        assert!(out.status.success(), "reaperctl generations: {}\n{}", text(&out.stderr), text(&out.stdout));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
    }

    /// The one host of the report, checked to be ours, and its server entry
    /// holding `copies` (every copy of that command it lists).
    fn group<'a>(&self, v: &'a Value, copies: &[i32]) -> &'a Value {
        let hosts = v["hosts"].as_array().unwrap_or_else(|| panic!("no hosts: {v:#}"));
        assert_eq!(hosts.len(), 1, "one live host below the scope: {v:#}");
        assert_eq!(hosts[0]["host_pid"], self.host, "{v:#}");
        let servers = hosts[0]["servers"].as_array().unwrap_or_else(|| panic!("no servers: {v:#}"));
        let g = servers
            .iter()
            .find(|g| pids_of(g).contains(&copies[0]))
            .unwrap_or_else(|| panic!("the copy {} is in no group: {v:#}", copies[0]));
        let mut listed = pids_of(g);
        listed.sort_unstable();
        let mut want = copies.to_vec();
        want.sort_unstable();
        assert_eq!(listed, want, "the group lists exactly the host's live copies: {g:#}");
        g
    }
}

/// Every copy pid of a server entry, in the report's order.
fn pids_of(g: &Value) -> Vec<i32> {
    g["generations"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|gn| gn["copies"].as_array().into_iter().flatten())
        .filter_map(|c| c["pid"].as_i64().and_then(|p| i32::try_from(p).ok()))
        .collect()
}

/// The copy entry of `pid` in a server entry.
fn copy_entry(g: &Value, pid: i32) -> &Value {
    g["generations"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|gn| gn["copies"].as_array().into_iter().flatten())
        .find(|c| c["pid"] == pid)
        .unwrap_or_else(|| panic!("no copy {pid}: {g:#}"))
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}…", s.chars().take(n).collect::<String>()) }
}

fn cmdline(pid: i32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()).replace('\0', " ")
}

/// A process's start time in clock ticks since boot (stat field 22).
fn start_tick(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rfind(')')
        .and_then(|i| stat[i + 2..].split_ascii_whitespace().nth(19))
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

fn ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

/// The environment of `pid`, as `(name, value)` pairs.
fn environ(pid: i32) -> Vec<(String, String)> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_else(|e| panic!("environ of {pid}: {e}"));
    raw.split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let e = String::from_utf8_lossy(e);
            let (k, v) = e.split_once('=').unwrap_or((&e, ""));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// The names in the environment of `pid` (its values may hold a host's
/// tokens: never printed).
fn names(pid: i32) -> Vec<String> {
    environ(pid).into_iter().map(|(k, _)| k).collect()
}

/// The value `getenv(name)` gives `pid` (the last entry).
fn env_of(pid: i32, name: &str) -> Option<String> {
    environ(pid).into_iter().rev().find(|(k, _)| k == name).map(|(_, v)| v)
}

/// Whether `host` holds, on one of its fds, the pipe or socket that is
/// fd 0 of `copy`: the pipe's other end (a pipe's two ends read alike in
/// `/proc/PID/fd`), or Claude Code's end of the socketpair (a different
/// inode: told by the report's `host_holds_transport`, not here).
fn host_holds_pipe(host: i32, copy: i32) -> Option<bool> {
    let fd0 = std::fs::read_link(format!("/proc/{copy}/fd/0")).ok()?;
    let fd0 = fd0.to_string_lossy().into_owned();
    if !fd0.starts_with("pipe:") {
        return None;
    }
    let fds = std::fs::read_dir(format!("/proc/{host}/fd")).ok()?;
    Some(fds.flatten().any(|f| std::fs::read_link(f.path()).is_ok_and(|l| l.to_string_lossy() == fd0)))
}

/// Waits until the clock is more than the generation window past `pid`'s
/// start: a copy started after that is of another generation.
fn wait_past_window(pid: i32) {
    let tck = ticks_per_second();
    let window = mcp_reaper::policy::generations::WINDOW_SECS;
    let until = start_tick(pid) + (window + 1) * tck;
    let procfs = mcp_reaper::scan::ProcFs::default();
    assert!(wait_until(STEP, || procfs.now_tick() > until), "the clock did not pass the window");
}

// ---------------------------------------------------------------- Codex: a copy per thread

/// Threads the app-server is asked to start.
const THREADS: usize = 3;

/// `codex app-server` with one stdio server in `$CODEX_HOME/config.toml`
/// and the mock as its model provider, initialized; and its project dir.
fn start_codex(dir: &TempDir, mock: &Mock) -> (Driven, PathBuf) {
    let (home, project) = (dir.path().join("home"), dir.path().join("project"));
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        home.join(".codex/config.toml"),
        format!(
            "model = \"mock-model\"\nmodel_provider = \"mock\"\napproval_policy = \"never\"\n\n\
             [model_providers.mock]\nname = \"mock\"\nbase_url = \"{}/v1\"\nenv_key = \"MOCK_API_KEY\"\n\
             wire_api = \"responses\"\n\n[mcp_servers.weather]\ncommand = {:?}\nargs = [{:?}]\n\
             env = {{ NWS_API_BASE = {:?} }}\nstartup_timeout_sec = 120\n",
            mock.url(),
            bin(PYTHON),
            bin(SERVER),
            mock.url()
        ),
    )
    .unwrap();
    let path = format!("{}:{}", bin("bin"), std::env::var("PATH").unwrap_or_default());
    let env = [
        ("HOME", home.display().to_string()),
        ("CODEX_HOME", home.join(".codex").display().to_string()),
        ("MOCK_API_KEY", "sk-mock".to_string()),
        ("PATH", path),
    ];
    let mut h = Driven::start(dir.path(), &[bin(CODEX), "app-server".into()], &env, &project);
    h.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"clientInfo": {"name": "mcp-reaper-test", "version": "1"}}}));
    h.wait_line("the answer to initialize", 0, |l| l["id"] == 1 && l["result"].is_object());
    h.send(&json!({"jsonrpc": "2.0", "method": "initialized"}));
    (h, project)
}

/// Starts [`THREADS`] threads more than the window apart, each waited for
/// until its server is ready and its copy is there: the thread ids and the
/// copies, oldest first.
fn start_threads(h: &mut Driven, project: &Path) -> (Vec<String>, Vec<i32>) {
    let mut threads: Vec<String> = Vec::new();
    let mut copies: Vec<i32> = Vec::new();
    for i in 0..THREADS {
        if let Some(&last) = copies.last() {
            wait_past_window(last);
        }
        let id = 10 + i;
        h.send(&json!({"jsonrpc": "2.0", "id": id, "method": "thread/start",
            "params": {"cwd": project.display().to_string()}}));
        let (_, answer) = h.wait_line("the answer to thread/start", 0, |l| l["id"] == id);
        let thread = answer["result"]["thread"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("thread/start failed: {answer:#}\n{}", h.stderr()))
            .to_string();
        let (_, status) = h.wait_line("the weather server's start-up status", 0, |l| {
            l["method"] == "mcpServer/startupStatus/updated"
                && l["params"]["threadId"] == thread.as_str()
                && l["params"]["status"] != "starting"
        });
        assert_eq!(status["params"]["status"], "ready", "thread {thread}: {status:#}\n{}", h.stderr());
        let now = h.copies_until("a copy for the new thread", |c| c.len() > copies.len());
        assert_eq!(now.len(), i + 1, "one copy per thread: {now:?} after {} threads", i + 1);
        assert_eq!(now[..copies.len()], copies[..], "the older threads' copies are still there: {now:?}");
        threads.push(thread);
        copies = now;
    }
    (threads, copies)
}

#[test]
fn codex_app_server_starts_a_copy_per_thread() {
    let test = "codex_app_server_starts_a_copy_per_thread";
    if !installed(test, &[CODEX, PYTHON, SERVER, "py/bin/python"]) {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let began = Instant::now();
    let dir = TempDir::new("realgen-codex");
    let mock = Mock::start(dir.path());
    let (mut h, project) = start_codex(&dir, &mock);
    let cfg = dir.config(0, "");
    let (threads, copies) = start_threads(&mut h, &project);

    // A client leaving the first thread does not end the thread nor its
    // copy: it stays loaded, its copy held (what piles copies up).
    h.send(&json!({"jsonrpc": "2.0", "id": 30, "method": "thread/unsubscribe", "params": {"threadId": threads[0]}}));
    let (_, left) = h.wait_line("the answer to thread/unsubscribe", 0, |l| l["id"] == 30);
    assert_eq!(left["result"]["status"], "unsubscribed", "{left:#}");
    h.send(&json!({"jsonrpc": "2.0", "id": 31, "method": "thread/loaded/list", "params": {}}));
    let (_, loaded) = h.wait_line("the answer to thread/loaded/list", 0, |l| l["id"] == 31);
    let loaded: Vec<&str> =
        loaded["result"]["data"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let still_loaded = loaded.contains(&threads[0].as_str());
    assert!(
        alive(copies[0]) && h.copies() == copies,
        "Codex ended the unsubscribed thread's copy ({:?} of {copies:?} left): docs/generations.md says it does not",
        h.copies()
    );

    // What Codex gives its servers: no thread id, no session of its own.
    for &c in &copies {
        let n = names(c);
        let env = environ(c);
        for t in &threads {
            assert!(!env.iter().any(|(_, v)| v.contains(t.as_str())), "copy {c} names thread {t}: {n:?}");
        }
        assert!(env_of(c, "CLAUDE_CODE_SESSION_ID").is_none(), "copy {c}: {n:?}");
        assert_eq!(host_holds_pipe(h.host, c), Some(true), "the app-server holds copy {c}'s stdin pipe");
    }

    let v = h.generations(&cfg);
    let g = h.group(&v, &copies);
    assert_eq!(g["copies"], THREADS, "{g:#}");
    assert_eq!(g["generation_count"], THREADS, "a generation per thread: {g:#}");
    let gens = g["generations"].as_array().unwrap();
    for (gn, &c) in gens.iter().zip(&copies) {
        let in_gen: Vec<&Value> = gn["copies"].as_array().unwrap().iter().collect();
        assert_eq!(in_gen.len(), 1, "{gn:#}");
        assert_eq!(in_gen[0]["pid"], c, "generations oldest first: {g:#}");
        assert!(gn["session"].is_null(), "Codex names no session: {gn:#}");
        assert_eq!(in_gen[0]["host_holds_transport"], true, "{gn:#}");
        assert_eq!(in_gen[0]["verdict"], "live", "{gn:#}");
        assert!(in_gen[0]["memory_bytes"].as_u64().unwrap_or(0) > 0, "{gn:#}");
    }
    assert_eq!(g["sessions"], json!([{"session": null, "copies": THREADS}]), "{g:#}");

    // The sentence a reader gets.
    let out = common::reaperctl(["generations", "--config", &s(cfg.display()), "--scope", &s(h.sb.scope_pid())]);
    let words = text(&out.stdout);
    let said = format!(
        "(pid {}) holds {THREADS} copies of {} in {THREADS} generations",
        h.host,
        g["command"].as_str().unwrap()
    );
    assert!(words.contains(&said), "no {said:?} in:\n{words}");
    eprintln!(
        "REAL HOST codex app-server {} ({}): threads {threads:?}; copies {copies:?}; the first thread still loaded after \
         thread/unsubscribe: {still_loaded}; copy environment {:?}; {:.1?} in all\n{words}",
        h.host,
        cmdline(h.host).trim_end(),
        names(copies[0]),
        began.elapsed()
    );
}

// ---------------------------------------------------------------- Claude Code: copies of two sessions

/// Claude Code's session id a stream-json line carries.
fn session_of(l: &Value) -> String {
    l["session_id"].as_str().unwrap_or_else(|| panic!("no session_id: {l:#}")).to_string()
}

/// `claude -p` reading stream-json from its stdin (one process across
/// inputs), with two servers of one command in `~/.claude.json`, so that
/// one can be restarted in a new session while the other stays in the first.
fn start_claude(dir: &TempDir, mock: &Mock) -> Driven {
    let (home, project) = (dir.path().join("home"), dir.path().join("project"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let server = json!({"type": "stdio", "command": bin(PYTHON), "args": [bin(SERVER)],
        "env": {"NWS_API_BASE": mock.url()}});
    let cfg = json!({"mcpServers": {"weather_a": server, "weather_b": server}});
    std::fs::write(home.join(".claude.json"), cfg.to_string()).unwrap();
    let path = format!("{}:{}", bin("bin"), std::env::var("PATH").unwrap_or_default());
    let env = [
        ("HOME", home.display().to_string()),
        ("ANTHROPIC_BASE_URL", mock.url()),
        ("ANTHROPIC_API_KEY", "sk-mock".to_string()),
        // A server's start-up on a busy machine: 120 s, not 30.
        ("MCP_TIMEOUT", "120000".to_string()),
        ("PATH", path),
    ];
    let argv: Vec<String> =
        [CLAUDE, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
            .iter()
            .enumerate()
            .map(|(i, a)| if i == 0 { bin(a) } else { (*a).to_string() })
            .collect();
    Driven::start(dir.path(), &argv, &env, &project)
}

#[test]
fn claude_code_copies_carry_their_session() {
    let test = "claude_code_copies_carry_their_session";
    if !installed(test, &[CLAUDE, PYTHON, SERVER, "py/bin/python"]) {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let began = Instant::now();
    let dir = TempDir::new("realgen-claude");
    let mock = Mock::start(dir.path());
    let mut h = start_claude(&dir, &mock);
    let cfg = dir.config(0, "");

    // Session one: both servers, started together, in Claude Code's session.
    let first = h.copies_until("both servers started", |c| c.len() == 2);
    let a =
        env_of(first[0], "CLAUDE_CODE_SESSION_ID").unwrap_or_else(|| panic!("no session among {:?}", names(first[0])));
    assert_eq!(env_of(first[1], "CLAUDE_CODE_SESSION_ID").as_deref(), Some(a.as_str()), "one session for both");
    let v = h.generations(&cfg);
    let g = h.group(&v, &first);
    assert_eq!(g["copies"], 2, "{g:#}");
    assert_eq!(g["sessions"], json!([{"session": a, "copies": 2}]), "{g:#}");
    for &c in &first {
        let e = copy_entry(g, c);
        assert_eq!(e["session"], a.as_str(), "{e:#}");
        assert_eq!(e["host_holds_transport"], true, "{e:#}");
    }
    let spread = start_tick(first[1]) - start_tick(first[0]);
    if spread < mcp_reaper::policy::generations::WINDOW_SECS * ticks_per_second() {
        assert_eq!(g["generation_count"], 1, "started {spread} ticks apart: one generation: {g:#}");
    }

    // `/clear`: Claude Code says the session it leaves (the copies') and the new one.
    h.send(&json!({"type": "user", "message": {"role": "user", "content": "/clear"}}));
    let (at, reset) = h.wait_line("the reset of /clear", 0, |l| l["type"] == "conversation_reset");
    assert_eq!(session_of(&reset), a, "the copies' session is the one /clear left: {reset:#}");
    let (at, init) = h.wait_line("the new session's init", at, |l| l["type"] == "system" && l["subtype"] == "init");
    let b = session_of(&init);
    assert_ne!(a, b, "/clear starts a new session");

    // A reconnect of one server: its new copy is of the new session.
    h.send(&json!({"type": "control_request", "request_id": "reconnect-b",
        "request": {"subtype": "mcp_reconnect", "serverName": "weather_b"}}));
    let (_, answer) = h.wait_line("the answer to mcp_reconnect", at, |l| {
        l["type"] == "control_response" && l["response"]["request_id"] == "reconnect-b"
    });
    assert_eq!(answer["response"]["subtype"], "success", "{answer:#}");
    let new = h.copies_until("a copy of the new session", |c| {
        c.iter().any(|&p| env_of(p, "CLAUDE_CODE_SESSION_ID").as_deref() == Some(b.as_str()))
    });
    // Claude Code 2.1.332 ends the copy it replaces; whether it did is
    // said, and the report must list whatever really runs.
    let ended = wait_until(Duration::from_secs(60), || first.iter().filter(|&&p| alive(p)).count() == 1);
    let now = h.copies_until("the copies after the reconnect", |c| c.contains(&new[new.len() - 1]));
    let v = h.generations(&cfg);
    let g = h.group(&v, &now);
    let mut sessions_seen = Vec::new();
    for &c in &now {
        let real = env_of(c, "CLAUDE_CODE_SESSION_ID").unwrap_or_else(|| panic!("no session in {c}'s environ"));
        assert!(real == a || real == b, "copy {c}: session {real} is neither {a} nor {b}");
        let e = copy_entry(g, c);
        assert_eq!(e["session"], real.as_str(), "the report's session is the environ's: {e:#}");
        assert_eq!(e["host_holds_transport"], true, "{e:#}");
        sessions_seen.push(real);
    }
    assert!(sessions_seen.contains(&a) && sessions_seen.contains(&b), "copies of both sessions: {sessions_seen:?}");
    let gens = g["generations"].as_array().unwrap();
    for gn in gens {
        for c in gn["copies"].as_array().unwrap() {
            assert_eq!(c["session"], gn["session"], "a generation is of one session: {gn:#}");
        }
    }
    let of = |sess: &str| gens.iter().position(|gn| gn["session"] == sess);
    let (ga, gb) = (of(&a), of(&b));
    assert!(ga.is_some() && gb.is_some() && ga < gb, "the first session's generation comes first: {g:#}");
    if ended {
        // One copy of each session: a generation each.
        assert_eq!(g["generation_count"], 2, "{g:#}");
    }
    let want_sessions: usize = g["sessions"].as_array().unwrap().len();
    assert_eq!(want_sessions, 2, "{g:#}");
    let out = common::reaperctl(["generations", "--config", &s(cfg.display()), "--scope", &s(h.sb.scope_pid())]);
    let words = text(&out.stdout);
    assert!(words.contains(&a) && words.contains(&b), "both sessions named:\n{words}");
    eprintln!(
        "REAL HOST claude {} ({}): session {a} → /clear → {b}; copies {first:?} → {now:?}; reconnect ended the \
         replaced copy: {ended}; copy environment names {:?}; {:.1?} in all\n{words}",
        h.host,
        cmdline(h.host).trim_end(),
        names(now[0]).into_iter().filter(|k| k.starts_with("CLAUDE") || k.starts_with("AI_")).collect::<Vec<_>>(),
        began.elapsed()
    );
}
