//! `reaperctl run`: a host in a session of its own, its leftovers ended
//! after the grace, signals passed on, its exit status passed back.
//!
//! Safety: the wrapper is this test's child and a child subreaper, so
//! everything the stand-in host starts stays below it; this test process is
//! made a child subreaper too, so nothing can land outside it even if a
//! wrapper dies. Only pids the stand-ins reported (and still below this
//! process) are ever signalled by the cleanup.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    Daemon, Launch, Sandbox, Spec, TempDir, alive, descendants_of, fakeproc_path, is_root, s, sigkill, skip, text,
    wait_until,
};
use rustix::process::Signal;

const REAPERCTL: &str = env!("CARGO_BIN_EXE_reaperctl");

/// Makes this test process a child subreaper (once): an escaped process
/// re-parents to it, never to PID 1.
fn contain() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        rustix::process::set_child_subreaper(Some(rustix::process::getpid())).expect("PR_SET_CHILD_SUBREAPER");
    });
}

/// A wrapper running a stand-in host, and the files its processes report to.
struct Wrapped {
    child: Child,
    dir: TempDir,
}

impl Wrapped {
    /// `reaperctl --config C run ARGS -- fakeproc` with `host` as the spec.
    fn start(config: &Path, args: &[&str], host: &Spec, dir: TempDir) -> Wrapped {
        Wrapped::start_program(config, args, fakeproc_path(), host, dir)
    }

    /// [`Wrapped::start`] through `program` (a symlink to fakeproc).
    fn start_program(config: &Path, args: &[&str], program: &Path, host: &Spec, dir: TempDir) -> Wrapped {
        Wrapped::start_prefixed(&[], config, args, program, host, dir)
    }

    /// [`Wrapped::start_program`] as `PRE… reaperctl …` (`PRE` execs it,
    /// so the child is still the wrapper).
    fn start_prefixed(
        pre: &[&str],
        config: &Path,
        args: &[&str],
        program: &Path,
        host: &Spec,
        dir: TempDir,
    ) -> Wrapped {
        contain();
        let ready = dir.path().join("ready");
        let notes = dir.path().join("notes");
        std::fs::write(&ready, "").unwrap();
        std::fs::write(&notes, "").unwrap();
        let mut cmd = Command::new(pre.first().copied().unwrap_or(REAPERCTL));
        if let Some(rest) = pre.get(1..) {
            cmd.args(rest).arg(REAPERCTL);
        }
        let child = cmd
            .arg("--config")
            .arg(config)
            .arg("run")
            .args(args)
            .arg("--")
            .arg(program)
            .env("FAKEPROC", host.to_json().to_string())
            .env("FAKEPROC_READY", &ready)
            .env("FAKEPROC_NOTES", &notes)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning reaperctl run");
        Wrapped { child, dir }
    }

    fn pid(&self) -> i32 {
        self.child.id().cast_signed()
    }

    /// `(pid, argv)` of every stand-in that reported ready, once `n` have.
    fn wait_ready(&self, n: usize) -> Vec<(i32, String)> {
        let mut lines = Vec::new();
        let ok = wait_until(Duration::from_secs(60), || {
            lines = self.ready();
            lines.len() >= n
        });
        assert!(ok, "only {} of {n} stand-ins became ready: {lines:?}", lines.len());
        lines
    }

    fn ready(&self) -> Vec<(i32, String)> {
        let t = std::fs::read_to_string(self.dir.path().join("ready")).unwrap_or_default();
        t.lines()
            .filter_map(|l| {
                let mut f = l.splitn(3, ' ');
                Some((f.next()?.parse().ok()?, f.nth(1)?.to_string()))
            })
            .collect()
    }

    fn pid_of(&self, prefix: &str) -> i32 {
        let r = self.ready();
        r.iter().find(|(_, c)| c.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix:?} in {r:?}")).0
    }

    /// Pids that got a SIGTERM (`note_term` stand-ins).
    fn termed(&self) -> Vec<i32> {
        let t = std::fs::read_to_string(self.dir.path().join("notes")).unwrap_or_default();
        t.lines().filter_map(|l| l.split(' ').next()?.parse().ok()).collect()
    }

    /// Waits for the wrapper (30 s at most): its status and stderr.
    fn finish(&mut self) -> (std::process::ExitStatus, String) {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return (st, err);
            }
            assert!(Instant::now() < end, "reaperctl run did not exit within 30 s");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, sig: Signal) {
        let p = rustix::process::Pid::from_raw(self.pid()).unwrap();
        rustix::process::kill_process(p, sig).unwrap();
    }
}

impl Drop for Wrapped {
    fn drop(&mut self) {
        // Whatever the stand-ins reported and is still below this process.
        let mine = descendants_of(rustix::process::getpid().as_raw_nonzero().get());
        for (pid, _) in self.ready() {
            if mine.contains(&pid) {
                sigkill(pid);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A host that starts its servers and exits at once: one server calls
/// setsid and has a helper; a `sh` double-forks a daemonized server (setsid,
/// stdio on /dev/null) and exits. All three ignore SIGTERM, noting it.
fn forking_host() -> Spec {
    Spec::new(&["claude", "--print"])
        .exit_after_spawn()
        .child(
            Spec::new(&["npm", "exec", "@playwright/mcp@latest"])
                .setsid()
                .note_term()
                .child(Spec::new(&["node", "/x/playwright-mcp"]).note_term()),
        )
        .child(
            Spec::new(&["sh", "-c", "daemonize"])
                .exit_after_spawn()
                .child(Spec::new(&["node", "/x/daemon-mcp"]).setsid().stdio_null().note_term()),
        )
}

fn config(dir: &TempDir) -> std::path::PathBuf {
    dir.config_with(0, "term_timeout_secs = 1", "")
}

fn leftovers_are_ended(args: &[&str]) {
    let dir = TempDir::new("run");
    let cfg = config(&dir);
    // A bystander outside the session: it must survive.
    let sb = Sandbox::new(vec![Spec::new(&["node", "/x/bystander-mcp"]).stdio_null()]);
    let bystander = sb.pid_of("node");
    let mut w = Wrapped::start(&cfg, args, &forking_host(), dir);
    let ready = w.wait_ready(5);
    let left: Vec<i32> = ["npm exec", "node /x/playwright", "node /x/daemon"].iter().map(|p| w.pid_of(p)).collect();
    let (st, err) = w.finish();
    assert_eq!(st.code(), Some(0), "the host's status: {err}");
    for &p in &left {
        assert!(!alive(p), "leftover {p} survived the session's end: {ready:?}\n{err}");
    }
    // Each was alive when the reaper came (it noted the SIGTERM), so it did
    // not just exit by itself.
    let mut termed = w.termed();
    termed.sort_unstable();
    let mut want = left.clone();
    want.sort_unstable();
    assert_eq!(termed, want, "every leftover, and only they, got SIGTERM\n{err}");
    // Issue 36: who left them behind, then what was ended ("ended 3 of 3
    // process(es) claude left behind" read as if claude was left behind).
    let said = err.lines().find(|l| l.contains("behind")).unwrap_or_else(|| panic!("nothing said: {err}"));
    assert!(said.starts_with("reaperctl run: ") && said.contains(" (pid "), "the host, by name and pid: {said}");
    assert!(said.contains(") left 3 processes behind; ended all 3"), "{said}");
    sb.assert_alive(&[bystander]);
}

#[test]
fn leftovers_of_a_host_that_forks_and_exits_are_ended_after_the_grace() {
    leftovers_are_ended(&["--grace", "0.5"]);
}

#[test]
fn without_a_cgroup_the_subreaper_session_ends_them_too() {
    leftovers_are_ended(&["--grace", "0.5", "--no-cgroup"]);
}

#[test]
fn the_host_runs_in_the_sessions_cgroup_when_one_can_be_made() {
    if !is_root() {
        return skip("the_host_runs_in_the_sessions_cgroup", "needs root to make a cgroup");
    }
    let dir = TempDir::new("run-cg");
    let cfg = config(&dir);
    let mut w = Wrapped::start(&cfg, &["--grace", "0"], &Spec::new(&["claude"]), dir);
    let host = w.wait_ready(1)[0].0;
    let cg = std::fs::read_to_string(format!("/proc/{host}/cgroup")).unwrap();
    let line = cg.lines().find(|l| l.starts_with("0::")).unwrap_or_default().to_string();
    let leaf = format!("/mcp-reaper-run-{}", w.pid());
    w.signal(Signal::TERM);
    let (st, err) = w.finish();
    if line.is_empty() || err.contains("Falling back") {
        return skip("the_host_runs_in_the_sessions_cgroup", &format!("no cgroup v2 leaf here: {err}"));
    }
    assert!(line.ends_with(&leaf), "host cgroup {line:?} is not the session's {leaf}");
    assert_eq!(st.code(), Some(128 + 15), "{err}");
}

#[test]
fn exit_status_is_the_hosts() {
    let dir = TempDir::new("run-status");
    let cfg = config(&dir);
    let run = |args: &[&str]| {
        let mut a = vec![s("--config"), s(cfg.display()), s("run"), s("--grace"), s("0"), s("--")];
        a.extend(args.iter().map(s));
        common::reaperctl(&a)
    };
    assert_eq!(run(&["sh", "-c", "exit 7"]).status.code(), Some(7));
    assert_eq!(run(&["sh", "-c", "kill -TERM $$"]).status.code(), Some(128 + 15));
    let missing = run(&["/nonexistent/mcp-host"]);
    assert_eq!(missing.status.code(), Some(127));
    assert!(text(&missing.stderr).contains("cannot run /nonexistent/mcp-host"), "{}", text(&missing.stderr));
}

#[test]
fn without_cgroup_access_it_falls_back_with_a_warning() {
    let dir = TempDir::new("run-noaccess");
    let cfg = config(&dir);
    let run = |pre: &[&str], args: &[&str]| {
        let mut c = Command::new(pre.first().copied().unwrap_or(REAPERCTL));
        if !pre.is_empty() {
            c.args(&pre[1..]).arg(REAPERCTL);
        }
        c.arg("--config").arg(&cfg).arg("run").args(args).args(["--", "sh", "-c", "exit 3"]);
        c.stdin(Stdio::null()).output().expect("running reaperctl run")
    };
    let out = run(&[], &["--cgroup-parent", "/nonexistent/cgroup", "--grace", "0"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("Falling back to a subreaper session"), "{}", text(&out.stderr));
    // Asked for a memory limit, it refuses instead.
    let out = run(&[], &["--cgroup-parent", "/nonexistent/cgroup", "--memory-max", "1G"]);
    assert_eq!(out.status.code(), Some(71), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--memory-max needs a cgroup"), "{}", text(&out.stderr));
    // A user who may not write to their cgroup (nobody, in root's).
    let setpriv = common::find_tool("setpriv");
    if !is_root() || setpriv.is_none() || !common::world_executable(Path::new(REAPERCTL)) {
        return skip("without_cgroup_access (as nobody)", "needs root, setpriv and a world-executable reaperctl");
    }
    let setpriv = s(setpriv.unwrap().display());
    let out = run(&[&setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--"], &["--grace", "0"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    if !err.contains("Falling back") {
        skip("without_cgroup_access (as nobody)", &format!("nobody may make a cgroup here: {err}"));
    }
}

#[test]
fn sigint_to_the_wrapper_reaches_the_host() {
    let dir = TempDir::new("run-int");
    let cfg = config(&dir);
    // A terminal's shell starts its foreground job with SIGINT at its
    // default; a background job of a script (`cargo test &`, CI) inherits it
    // ignored, and so would the host, which then rightly outlives the
    // forwarded signal. The wrapper is started as the terminal would.
    let env = common::find_tool("env").map(|p| s(p.display()));
    let default_int = env
        .as_deref()
        .filter(|e| Command::new(e).args(["--default-signal=INT", "true"]).status().is_ok_and(|st| st.success()));
    let pre: Vec<&str> = default_int.map(|e| vec![e, "--default-signal=INT"]).unwrap_or_default();
    if pre.is_empty() && sigint_ignored() {
        return skip("sigint_to_the_wrapper_reaches_the_host", "SIGINT is ignored here and env cannot reset it");
    }
    let mut w = Wrapped::start_prefixed(&pre, &cfg, &["--grace", "0"], fakeproc_path(), &Spec::new(&["claude"]), dir);
    let host = w.wait_ready(1)[0].0;
    w.signal(Signal::INT);
    let (st, err) = w.finish();
    // The wrapper exits (it is not killed by the signal) with the host's status.
    assert_eq!(st.code(), Some(128 + 2), "{st:?}: {err}");
    assert!(!alive(host), "the host survived");
}

/// Whether this process ignores SIGINT (and so would what it starts).
fn sigint_ignored() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:")).unwrap_or("0");
    u64::from_str_radix(mask.trim(), 16).is_ok_and(|m| m & (1 << (Signal::INT.as_raw() - 1)) != 0)
}

/// Starts a wrapper with `args` around `host` and waits until the host
/// reported ready or the wrapper exited: `true` when the host is ready.
fn start_and_settle(cfg: &Path, args: &[&str], host: &Spec, dir: TempDir) -> (Wrapped, bool) {
    let mut w = Wrapped::start(cfg, args, host, dir);
    let settled =
        wait_until(Duration::from_secs(60), || !w.ready().is_empty() || w.child.try_wait().is_ok_and(|s| s.is_some()));
    assert!(settled, "neither ready nor exited");
    let ready = !w.ready().is_empty();
    (w, ready)
}

/// Where the limit of `host`'s session is: its v2 leaf's `memory.max`
/// file, or (a hybrid system) its v1 memory cgroup's
/// `memory.limit_in_bytes`. Each must be the session's own cgroup.
fn limit_file(host: i32, wrapper: i32) -> std::path::PathBuf {
    let leaf = format!("/mcp-reaper-run-{wrapper}");
    let cg = std::fs::read_to_string(format!("/proc/{host}/cgroup")).unwrap();
    let v2 = cg.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or_default();
    let h = mcp_reaper::session::cgroup::Hierarchy::find().expect("a v2 hierarchy: the session made a leaf");
    assert!(v2.ends_with(&leaf), "host cgroup {v2:?} is not the session's {leaf}");
    let v2_max = h.dir_of(v2).unwrap().join("memory.max");
    if v2_max.exists() {
        return v2_max;
    }
    let v1 = mcp_reaper::session::memcg_v1::memory_path(&cg).expect("no memory.max in v2, so a v1 memory cgroup");
    assert!(v1.ends_with(&leaf), "host memory cgroup {v1:?} is not the session's {leaf}");
    let dir = mcp_reaper::session::memcg_v1::dir_of_pid(mcp_reaper::ids::Pid::new(host).unwrap()).unwrap();
    dir.join("memory.limit_in_bytes")
}

#[test]
fn memory_max_is_applied_or_refused() {
    if !is_root() {
        return skip("memory_max_is_applied_or_refused", "needs root to make a cgroup");
    }
    let dir = TempDir::new("run-mem");
    let cfg = config(&dir);
    let (mut w, ready) =
        start_and_settle(&cfg, &["--grace", "0", "--memory-max", "256M"], &Spec::new(&["claude"]), dir);
    if !ready {
        // No memory controller in v2 nor v1: refused, never run without.
        let (st, err) = w.finish();
        assert_eq!(st.code(), Some(71), "{err}");
        assert!(err.contains("--memory-max") && err.contains("memory controller"), "{err}");
        return skip("memory_max_is_applied", &format!("refused as it should be here: {err}"));
    }
    let host = w.ready()[0].0;
    let file = limit_file(host, w.pid());
    let limit = std::fs::read_to_string(&file).unwrap();
    w.signal(Signal::TERM);
    let (st, err) = w.finish();
    assert_eq!(limit.trim(), (256u64 << 20).to_string(), "{}", file.display());
    assert_eq!(st.code(), Some(128 + 15), "{err}");
    // The session's cgroups are gone with it.
    assert!(!file.parent().unwrap().exists(), "{} was left: {err}", file.display());
    assert!(!err.contains("cannot remove"), "{err}");

    // The limit holds: a host that touches 128 MiB under a 32 MiB limit is
    // OOM-killed (no swap), or (swap) its cgroup counts the limit being hit.
    let greedy = Spec::new(&["claude"]).touch_mib(128);
    let dir = TempDir::new("run-mem-oom");
    let (mut w, ready) = start_and_settle(&cfg, &["--grace", "0", "--memory-max", "32M"], &greedy, dir);
    if ready {
        let file = limit_file(w.ready()[0].0, w.pid());
        let d = file.parent().unwrap();
        let hit = if file.ends_with("memory.max") {
            let events = std::fs::read_to_string(d.join("memory.events")).unwrap();
            events.lines().find_map(|l| l.strip_prefix("max ")).unwrap().trim().parse::<u64>().unwrap()
        } else {
            std::fs::read_to_string(d.join("memory.failcnt")).unwrap().trim().parse::<u64>().unwrap()
        };
        w.signal(Signal::TERM);
        let (_, err) = w.finish();
        assert!(hit > 0, "128 MiB touched under a 32 MiB limit never hit it: {err}");
    } else {
        let (st, err) = w.finish();
        assert_eq!(st.code(), Some(128 + 9), "the host was not OOM-killed: {err}");
    }
    // The same host without the limit runs: the limit, nothing else, ended it.
    let dir = TempDir::new("run-mem-free");
    let (mut w, ready) = start_and_settle(&cfg, &["--grace", "0"], &greedy, dir);
    w.signal(Signal::TERM);
    let (st, err) = w.finish();
    assert!(ready, "128 MiB cannot be touched here even without a limit: {st:?} {err}");
}

/// A machine on cgroup v1 alone (here: a mount namespace without the v2
/// mount): `--memory-max` is held by a v1 memory cgroup of the session's own.
#[test]
fn memory_max_on_cgroup_v1_alone() {
    let test = "memory_max_on_cgroup_v1_alone";
    if !is_root() || common::find_tool("unshare").is_none() {
        return skip(test, "needs root and unshare to hide the cgroup v2 mount");
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let (Some(v2), Some(_)) = (
        mcp_reaper::session::cgroup::Hierarchy::from_mountinfo(&mountinfo),
        mcp_reaper::session::memcg_v1::hierarchy(&mountinfo),
    ) else {
        return skip(test, "needs a hybrid machine: a v2 mount to hide and the v1 memory controller");
    };
    let dir = TempDir::new("run-mem-v1");
    let cfg = config(&dir);
    let hide = format!("umount -l '{}' && exec \"$@\"", v2.mount.display());
    let pre = ["unshare", "--mount", "--propagation", "private", "bash", "-c", &hide, "bash"];
    let args = ["--grace", "0", "--memory-max", "48M"];
    let mut w = Wrapped::start_prefixed(&pre, &cfg, &args, fakeproc_path(), &Spec::new(&["claude"]), dir);
    let settled =
        wait_until(Duration::from_secs(60), || !w.ready().is_empty() || w.child.try_wait().is_ok_and(|s| s.is_some()));
    assert!(settled && !w.ready().is_empty(), "the host did not start: {:?}", w.finish());
    let host = w.ready()[0].0;
    let cg = std::fs::read_to_string(format!("/proc/{host}/cgroup")).unwrap();
    let v1 = mcp_reaper::session::memcg_v1::memory_path(&cg).unwrap();
    assert!(v1.ends_with(&format!("/mcp-reaper-run-{}", w.pid())), "not the session's memory cgroup: {v1}");
    let dir = mcp_reaper::session::memcg_v1::dir_of_pid(mcp_reaper::ids::Pid::new(host).unwrap()).unwrap();
    let limit = std::fs::read_to_string(dir.join("memory.limit_in_bytes")).unwrap();
    w.signal(Signal::TERM);
    let (st, err) = w.finish();
    assert_eq!(limit.trim(), (48u64 << 20).to_string(), "{err}");
    assert_eq!(st.code(), Some(128 + 15), "{err}");
    assert!(err.contains("no cgroup v2 hierarchy is mounted") && err.contains("memory limit is held"), "{err}");
    assert!(!dir.exists(), "{} was left: {err}", dir.display());
}

/// A pid hopper (`perl -e`). It gives up by itself after 20 s: a bound,
/// should everything else fail.
const HOP: &str = "$SIG{TERM} = 'IGNORE'; $0 = 'pid-hopper'; my $end = time + 20; \
    while (time < $end) { my $p = fork; exit 0 if $p; select(undef, undef, undef, 0.001) }";

/// Ends whatever is still in a cgroup this test's wrapper made.
struct KillCgroupOnDrop(std::path::PathBuf);

impl Drop for KillCgroupOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
    }
}

/// A leftover that keeps changing its pid (forks, and the parent exits, a
/// thousand times a second, ignoring SIGTERM) is never there when a signal
/// comes: the SIGTERM → SIGKILL rounds miss it, and `cgroup.kill`, which
/// takes the whole cgroup at once, ends it.
#[test]
fn a_leftover_that_keeps_changing_its_pid_is_ended_by_cgroup_kill() {
    let test = "a_leftover_that_keeps_changing_its_pid_is_ended_by_cgroup_kill";
    if !is_root() {
        return skip(test, "needs root to make a cgroup");
    }
    let Some(perl) = common::find_tool("perl") else { return skip(test, "perl is missing") };
    let host = Spec::new(&["claude"]).child(Spec::new(&[perl.to_str().unwrap(), "-e", HOP]).real());
    let dir = TempDir::new("run-hop");
    let cfg = config(&dir);
    let mut w = Wrapped::start(&cfg, &["--grace", "0.2"], &host, dir);
    w.wait_ready(1);
    let host = w.pid_of("claude");
    let Some(dirs) = session_dirs(host, w.pid()) else { return skip(test, "no cgroup leaf for a session here") };
    // Should the wrapper fail, the hopper must still end with the test: it
    // would run (and fill the pid table with zombies) forever.
    let _guard = KillCgroupOnDrop(dirs[0].clone());
    let hopper = |p: i32| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.starts_with(b"pid-hopper"));
    let hoppers =
        || descendants_of(rustix::process::getpid().as_raw_nonzero().get()).into_iter().filter(|&p| hopper(p)).count();
    // Started: seen in the session's leaf, a list of a few pids (a walk of
    // all of /proc on a machine of thousands of processes is slower than a
    // hop: the pid it lists has changed when its command line is read).
    let in_leaf = || {
        let procs = std::fs::read_to_string(dirs[0].join("cgroup.procs")).unwrap_or_default();
        procs.split_whitespace().filter_map(|p| p.parse().ok()).any(hopper)
    };
    assert!(wait_until(Duration::from_secs(60), in_leaf), "the hopper did not start");
    w.signal(Signal::TERM);
    let (st, err) = w.finish();
    assert_eq!(st.code(), Some(128 + 15), "{err}");
    assert!(err.contains("cgroup.kill was needed"), "{err}");
    assert_eq!(hoppers(), 0, "the hopper outlived its session: {err}");
    assert!(!dirs[0].exists(), "the leaf {} was left: {err}", dirs[0].display());
}

#[test]
fn scan_names_a_leftover_an_orphan_of_its_session() {
    let dir = TempDir::new("run-scan");
    let cfg = config(&dir);
    // A long grace: the leftover waits while the scan looks.
    let mut w = Wrapped::start(&cfg, &["--grace", "60"], &forking_host(), dir);
    w.wait_ready(5);
    let daemonized = w.pid_of("node /x/daemon");
    assert!(wait_until(Duration::from_secs(60), || common::ppid_of(daemonized) == Some(w.pid())));
    let v = common::scan_json(&cfg, &["--scope", &s(w.pid())]);
    let t = common::tree_rooted_at(&v, daemonized);
    // stdio on /dev/null would make it "detached" anywhere else.
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    assert!(t["reason"].as_str().unwrap().contains("`reaperctl run` session"), "{t:#}");
    // A signal to the wrapper during the grace cuts it short.
    w.signal(Signal::TERM);
    let (st, err) = w.finish();
    assert_eq!(st.code(), Some(0), "{err}");
    assert!(err.contains("grace cut short"), "{err}");
    assert!(!alive(daemonized));
}

/// A server run by the wrapper itself is its host, never a leftover: the
/// wrapper shows which child is its host (the pidfd it holds).
#[test]
fn a_server_run_directly_is_the_sessions_host_and_kept() {
    let dir = TempDir::new("run-server");
    let cfg = config(&dir);
    // Through a symlink named like a server: its argv[0] is that name.
    let link = dir.path().join("mcp-server-memory");
    std::os::unix::fs::symlink(fakeproc_path(), &link).unwrap();
    let server = Spec::new(&["mcp-server-memory"]).child(Spec::new(&["node", "/x/helper.js"]));
    let mut w = Wrapped::start_program(&cfg, &["--grace", "0"], &link, &server, dir);
    w.wait_ready(2);
    let npm = w.pid_of("mcp-server-memory");
    let v = common::scan_json(&cfg, &["--scope", &s(w.pid())]);
    let t = common::tree_rooted_at(&v, npm);
    assert_eq!(t["verdict"], "live", "{t:#}");
    assert!(t["reason"].as_str().unwrap().contains("is the host `reaperctl run`"), "{t:#}");
    w.signal(Signal::TERM);
    let (st, err) = w.finish();
    assert_eq!(st.code(), Some(128 + 15), "{err}");
}

/// The daemon lists a session with its host, members and memory.
#[test]
fn status_lists_run_sessions() {
    let dir = TempDir::new("run-status-list");
    let cfg = config(&dir);
    let host = Spec::new(&["claude"])
        .child(Spec::new(&["npm", "exec", "@playwright/mcp@latest"]).child(Spec::new(&["node", "/x/playwright-mcp"])));
    let mut w = Wrapped::start(&cfg, &["--grace", "0"], &host, dir);
    w.wait_ready(3);
    let host = w.pid_of("claude");
    // Scoped to the wrapper, and signalling nothing.
    let d = Daemon::start_in(w.pid(), &cfg, w.dir.path(), &Launch::with_args(&["--dry-run"]));
    let st = d.status_until(Duration::from_secs(60), "the session listed", |st| {
        st["run_sessions"].as_array().is_some_and(|r| r.iter().any(|r| r["wrapper_pid"] == w.pid()))
    });
    let r = st["run_sessions"].as_array().unwrap().iter().find(|r| r["wrapper_pid"] == w.pid()).unwrap().clone();
    assert_eq!(r["host_pid"], host, "{r:#}");
    assert_eq!(r["members"], 3, "{r:#}");
    assert!(r["memory_bytes"].as_u64().unwrap() > 0, "{r:#}");
    if let Some(cg) = r["cgroup"].as_str() {
        assert!(cg.ends_with(&format!("mcp-reaper-run-{}", w.pid())), "{r:#}");
    }
    let human = d.ctl(&["status"]);
    assert!(text(&human.stdout).contains("run sessions:"), "{}", text(&human.stdout));
    drop(d);
    w.signal(Signal::TERM);
    let (st, err) = w.finish();
    assert_eq!(st.code(), Some(128 + 15), "{err}");
}

/// The session's cgroups of `host` (its v2 leaf, and its v1 memory cgroup
/// on a hybrid system), when they are `wrapper`'s: `None` where the session
/// has no cgroup of its own here.
fn session_dirs(host: i32, wrapper: i32) -> Option<Vec<std::path::PathBuf>> {
    let leaf = format!("/mcp-reaper-run-{wrapper}");
    let cg = std::fs::read_to_string(format!("/proc/{host}/cgroup")).ok()?;
    let v2 = cg.lines().find_map(|l| l.strip_prefix("0::")).filter(|p| p.ends_with(&leaf))?;
    let mut dirs = vec![mcp_reaper::session::cgroup::Hierarchy::find()?.dir_of(v2)?];
    if mcp_reaper::session::memcg_v1::memory_path(&cg).is_some_and(|p| p.ends_with(&leaf)) {
        dirs.push(mcp_reaper::session::memcg_v1::dir_of_pid(mcp_reaper::ids::Pid::new(host)?)?);
    }
    Some(dirs)
}

/// The tests that sweep, one at a time: each removes every stale session
/// cgroup old enough, the other's included, and checks what it reports.
static SWEEPING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How long ago `dir` was made (its inode's time; `None` once it is gone).
fn age(dir: &Path) -> Option<Duration> {
    std::fs::metadata(dir).and_then(|m| m.modified()).ok().map(|t| t.elapsed().unwrap_or_default())
}

/// Waits until every one of `dirs` is old enough for a sweep to remove it.
fn wait_old(dirs: &[std::path::PathBuf]) {
    let min = mcp_reaper::session::stale::MIN_AGE;
    let ok = wait_until(Duration::from_secs(60), || dirs.iter().all(|d| age(d).is_some_and(|a| a >= min)));
    assert!(ok, "{dirs:?} did not age");
}

fn holds_no_process(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|t| t.trim().is_empty())
}

/// A wrapper killed (SIGKILL) before it could remove its cgroups: the next
/// `--once` run removes the empty ones (never one still holding processes,
/// whose leftovers are judged as usual), the run after that the other.
#[test]
fn cgroups_of_a_killed_wrapper_are_removed_once_empty() {
    if !is_root() {
        return skip("cgroups_of_a_killed_wrapper_are_removed", "needs root to make a cgroup");
    }
    let _one = SWEEPING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = TempDir::new("run-stale");
    let cfg = config(&dir);
    let fake = s(fakeproc_path().display());
    let wrapper = |args: &[&str], host: &Spec| {
        let mut argv = vec![s(REAPERCTL), s("--config"), s(cfg.display()), s("run")];
        argv.extend(args.iter().map(s));
        argv.extend([s("--"), fake.clone()]);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        Spec::new(&argv).real().env("FAKEPROC", &host.to_json().to_string())
    };
    // A: a host alone, with a memory limit (a v1 memory cgroup too, on a
    // hybrid system). B: a host with a server that will outlive it.
    let mut sb = Sandbox::new(vec![
        wrapper(&["--grace", "0", "--memory-max", "256M"], &Spec::new(&["claude"])),
        wrapper(
            &["--grace", "0"],
            &Spec::new(&["gemini"]).child(Spec::new(&["npm", "exec", "@playwright/mcp@latest"])),
        ),
    ]);
    sb.wait_ready(6);
    let ready = sb.ready().to_vec();
    let (host_a, host_b, server) = (sb.pid_of("claude"), sb.pid_of("gemini"), sb.pid_of("npm exec"));
    let parent = |p: i32| ready.iter().find(|r| r.pid == p).unwrap().ppid;
    let (wrapper_a, wrapper_b) = (parent(host_a), parent(host_b));
    let (Some(dirs_a), Some(dirs_b)) = (session_dirs(host_a, wrapper_a), session_dirs(host_b, wrapper_b)) else {
        return skip("cgroups_of_a_killed_wrapper_are_removed", "no cgroup leaf for a session here");
    };
    // The wrappers die without cleaning up; then the hosts exit.
    for p in [wrapper_a, wrapper_b, host_a, host_b] {
        sb.kill_host(p);
    }
    assert!(
        wait_until(Duration::from_secs(60), || dirs_a.iter().all(|d| holds_no_process(d))),
        "session A's cgroups still hold processes: {dirs_a:?}"
    );
    assert!(dirs_a.iter().chain(&dirs_b).all(|d| d.is_dir()), "the killed wrappers' cgroups are there");

    // Young, they are left alone (a live wrapper's cgroup, in a PID
    // namespace other than the reaper's, is empty for a moment only). This
    // run is scoped to a sandbox with nothing in it: it judges nothing.
    let empty = Sandbox::new(vec![]);
    let made = std::fs::metadata(&dirs_a[0]).unwrap().modified().unwrap();
    let v = common::once_json(empty.scope_pid(), &cfg);
    let removed = |v: &serde_json::Value| -> Vec<String> {
        v["stale_cgroups_removed"].as_array().unwrap().iter().filter_map(|d| Some(d.as_str()?.to_string())).collect()
    };
    if made.elapsed().unwrap_or_default() < mcp_reaper::session::stale::MIN_AGE {
        assert!(dirs_a.iter().all(|d| d.is_dir()), "a young cgroup was removed: {v:#}");
        assert!(!removed(&v).iter().any(|d| dirs_a.iter().any(|a| a.to_str() == Some(d))), "{v:#}");
    }
    // Old enough: A (empty) is removed; B (still holding the server) is
    // left alone, and the server judged as usual (adopted by the scope, its
    // stdio gone with its host), its reason naming the session it was
    // started in.
    wait_old(&dirs_a);
    wait_old(&dirs_b);
    let v = common::once_json(sb.scope_pid(), &cfg);
    let gone = removed(&v);
    for d in &dirs_a {
        assert!(!d.exists(), "{} was not removed: {v:#}", d.display());
        assert!(gone.iter().any(|g| d.to_str() == Some(g)), "{} not reported: {v:#}", d.display());
    }
    assert!(dirs_b[0].is_dir(), "B's leaf, holding a process, was removed: {v:#}");
    assert!(!gone.iter().any(|d| d.ends_with(&format!("mcp-reaper-run-{wrapper_b}"))), "{v:#}");
    let o = v["outcomes"].as_array().unwrap().iter().find(|o| o["root"]["pid"] == server).expect("the server reaped");
    assert_eq!(o["verdict"], "orphan", "{o:#}");
    assert!(o["reason"].as_str().unwrap().contains(&format!("mcp-reaper-run-{wrapper_b}")), "{o:#}");
    assert!(wait_until(Duration::from_secs(60), || !alive(server)), "the server survived");

    // Now B is empty too: the next run removes it.
    assert!(wait_until(Duration::from_secs(60), || dirs_b.iter().all(|d| holds_no_process(d))));
    let v = common::once_json(sb.scope_pid(), &cfg);
    assert!(dirs_b.iter().all(|d| !d.exists()), "B's cgroups were not removed: {v:#}");
    sb.assert_alive(&[sb.scope_pid()]);
}

/// Writes a process into a fake `/proc`: `stat`, `status` and `cmdline`
/// modelled on the fixture's pid 2000 (tests/data/proc-basic).
fn fake_process(root: &Path, pid: i32, ppid: i32, argv: &[&str], cgroup: Option<&str>) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/proc-basic/2000");
    let dir = root.join(pid.to_string());
    std::fs::create_dir_all(&dir).unwrap();
    let comm: String = argv[0].rsplit('/').next().unwrap().chars().take(15).collect();
    let stat = std::fs::read_to_string(fixture.join("stat")).unwrap();
    let rest = stat.split_once(") S 1900 2000 1900 ").unwrap().1;
    std::fs::write(dir.join("stat"), format!("{pid} ({comm}) S {ppid} {pid} {pid} {rest}")).unwrap();
    let status = std::fs::read_to_string(fixture.join("status")).unwrap();
    let status = status.replace("2000", &pid.to_string()).replace("PPid:\t1900", &format!("PPid:\t{ppid}"));
    std::fs::write(dir.join("status"), status).unwrap();
    let cmdline: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::write(dir.join("cmdline"), cmdline).unwrap();
    if let Some(cg) = cgroup {
        std::fs::write(dir.join("cgroup"), cg).unwrap();
    }
}

/// The daemon lists sessions from the `/proc` it is given (`--proc-root`),
/// their cgroup and owner read there too, not from the real `/proc`.
#[test]
fn status_lists_run_sessions_from_the_proc_root() {
    let dir = TempDir::new("run-proc-root");
    let cfg = config(&dir);
    let root = dir.path().join("proc");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/proc-basic");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::copy(fixture.join("uptime"), root.join("uptime")).unwrap();
    // init and `systemd --user`, the wrapper's parent.
    for pid in ["1", "900"] {
        std::fs::create_dir_all(root.join(pid)).unwrap();
        for f in ["stat", "status", "cmdline"] {
            std::fs::copy(fixture.join(pid).join(f), root.join(pid).join(f)).unwrap();
        }
    }
    // Pids no test machine is likely to run as a wrapper: the real /proc
    // has nothing to say about them.
    let (wrapper, host, server) = (3_999_900, 3_999_901, 3_999_902);
    let leaf = format!("/test.slice/mcp-reaper-run-{wrapper}");
    fake_process(&root, wrapper, 900, &["/usr/bin/reaperctl", "run", "--", "claude"], None);
    fake_process(&root, host, wrapper, &["claude"], Some(&format!("4:memory:/\n0::{leaf}\n")));
    fake_process(&root, server, host, &["npm", "exec", "@playwright/mcp@latest"], Some(&format!("0::{leaf}\n")));
    // Dry run, scoped to the fake wrapper: nothing real is ever looked at
    // for signalling, let alone signalled.
    let how = Launch::with_args(&["--dry-run", "--no-events", "--proc-root", root.to_str().unwrap()]);
    let d = Daemon::start_in(wrapper, &cfg, dir.path(), &how);
    let st = d.status_until(Duration::from_secs(60), "the fake session listed", |st| {
        st["run_sessions"].as_array().is_some_and(|r| r.iter().any(|r| r["wrapper_pid"] == wrapper))
    });
    let r = st["run_sessions"].as_array().unwrap().iter().find(|r| r["wrapper_pid"] == wrapper).unwrap().clone();
    assert_eq!(r["host_pid"], host, "{r:#}");
    assert_eq!(r["members"], 2, "{r:#}");
    assert_eq!(r["cgroup"], leaf.as_str(), "the cgroup is read from the given /proc: {r:#}");
    let me = std::fs::metadata(&root).map(|m| std::os::unix::fs::MetadataExt::uid(&m)).unwrap();
    assert_eq!(r["uid"], me, "the owner of the given /proc's entry: {r:#}");
    assert_eq!(r["memory_source"], "rss", "no mountinfo in the given /proc: {r:#}");
}

/// The daemon removes them too (at its first cycle, then every minute).
#[test]
fn the_daemon_removes_cgroups_of_a_killed_wrapper() {
    if !is_root() {
        return skip("the_daemon_removes_cgroups_of_a_killed_wrapper", "needs root to make a cgroup");
    }
    let _one = SWEEPING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = TempDir::new("run-stale-daemon");
    let cfg = config(&dir);
    let argv = [REAPERCTL, "--config", &s(cfg.display()), "run", "--grace", "0", "--", &s(fakeproc_path().display())];
    let wrapper = Spec::new(&argv).real().env("FAKEPROC", &Spec::new(&["claude"]).to_json().to_string());
    let mut sb = Sandbox::new(vec![wrapper]);
    sb.wait_ready(3);
    let host = sb.pid_of("claude");
    let wrapper = sb.ready().iter().find(|r| r.pid == host).unwrap().ppid;
    let Some(dirs) = session_dirs(host, wrapper) else {
        return skip("the_daemon_removes_cgroups_of_a_killed_wrapper", "no cgroup leaf for a session here");
    };
    sb.kill_host(wrapper);
    sb.kill_host(host);
    assert!(wait_until(Duration::from_secs(60), || dirs.iter().all(|d| holds_no_process(d))));
    assert!(dirs.iter().all(|d| d.is_dir()));
    wait_old(&dirs);
    let d = Daemon::start_in(sb.scope_pid(), &cfg, dir.path(), &Launch::default());
    assert!(
        wait_until(Duration::from_secs(60), || dirs.iter().all(|d| !d.exists())),
        "the daemon left {dirs:?}:\n{}",
        d.log_text()
    );
    assert!(d.log_text().contains("removed the stale `reaperctl run` session cgroup"), "{}", d.log_text());
}
