//! `reaperctl run` under a real systemd: the host in a transient scope made
//! by the system manager (root) or by the caller's user manager, its
//! leftovers ended, `systemd-run` failing and the wrapper carrying on.
//!
//! The machine these tests run on need not boot with systemd, so each test
//! boots its own: `/lib/systemd/systemd` as PID 1 of new PID, mount, cgroup,
//! UTS and IPC namespaces, with a private `/run`, a cgroup2 mount rooted at a
//! cgroup of the test's own, and `SYSTEMD_UNIT_PATH` naming a directory of
//! three units written here: nothing of the machine's (no tmpfiles, no
//! sysctl, no mounts) is started. A user manager is `systemd --user` as a
//! service of that PID 1, for uid 65534. The hybrid boot mounts each of the
//! machine's v1 hierarchies, rooted at a cgroup made for it, beside cgroup2
//! at `unified`; systemd mounts the v1 controllers the machine left
//! unmounted itself (inside the namespace; the empty cgroups it makes in
//! them are not removed).
//!
//! Safety: everything runs inside the new PID namespace, whose PID 1 is this
//! test's grandchild; the end of each test SIGKILLs that PID 1 (by pid), which
//! ends the whole namespace. The reaper is never started unscoped.
//! Root only; skipped with a reason without systemd or util-linux's tools.

mod common;

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Spec, TempDir, fakeproc_path, find_tool, is_root, skip, text, wait_until};
use serde_json::Value;

const REAPERCTL: &str = env!("CARGO_BIN_EXE_reaperctl");
const SYSTEMD: &str = "/lib/systemd/systemd";
/// The user whose manager the user tests ask (`nobody`).
const USER: u32 = 65534;

const TARGET_UNIT: &str = "[Unit]\nDescription=mcp-reaper test target\n";
const SLICE_UNIT: &str = "[Unit]\nDescription=test slice\nDefaultDependencies=no\n";
const USER_MANAGER_UNIT: &str = "[Unit]\nDescription=test user manager %i\nDefaultDependencies=no\n\
    [Service]\nUser=%i\nType=notify\nExecStart=/lib/systemd/systemd --user\n\
    Environment=XDG_RUNTIME_DIR=/run/user/%i\nSlice=user.slice\nDelegate=yes\nKillMode=mixed\n";

/// Systemds booted by this test binary (their cgroups are named by it).
static BOOTS: AtomicUsize = AtomicUsize::new(0);

/// A systemd booted as PID 1 of namespaces of its own.
struct Systemd {
    /// `unshare`, whose child is systemd.
    unshare: Child,
    /// systemd's pid, as this test sees it.
    pid: i32,
    /// The cgroups the namespace's cgroup mounts are rooted at (v2 first).
    cgroups: Vec<PathBuf>,
    dir: TempDir,
}

impl Systemd {
    /// Boots it on the unified layout (cgroup v2 alone), or says why not
    /// (and the test skips).
    fn boot(test: &str) -> Option<Systemd> {
        Systemd::boot_on(test, false)
    }

    /// Boots it on the unified layout, or (`hybrid`) on the hybrid one:
    /// the machine's v1 hierarchies (the memory controller among them) and
    /// cgroup2 at `unified`, each rooted at a cgroup made for this boot.
    fn boot_on(test: &str, hybrid: bool) -> Option<Systemd> {
        if !is_root() {
            skip(test, "booting systemd in namespaces of its own needs root");
            return None;
        }
        if !Path::new(SYSTEMD).is_file() || find_tool("systemd-run").is_none() || find_tool("systemctl").is_none() {
            skip(test, "systemd is not installed");
            return None;
        }
        for tool in ["unshare", "nsenter", "setpriv"] {
            if find_tool(tool).is_none() {
                skip(test, &format!("{tool} (util-linux) is missing"));
                return None;
            }
        }
        let n = BOOTS.fetch_add(1, Ordering::Relaxed);
        let name = format!("mcp-reaper-test-systemd-{}-{n}", std::process::id());
        let Some(cgroup) = own_cgroup_dir().map(|d| d.join(name)) else {
            skip(test, "no cgroup v2 hierarchy is mounted");
            return None;
        };
        let v1 = if hybrid { v1_hierarchies(cgroup.file_name().unwrap().to_str().unwrap()) } else { Vec::new() };
        if hybrid && !v1.iter().any(|h| h.options.split(',').any(|o| o == "memory")) {
            skip(test, "no cgroup v1 memory hierarchy here to boot a hybrid systemd on");
            return None;
        }
        fs::create_dir(&cgroup).expect("a cgroup for the namespace");
        let mut cgroups = vec![cgroup.clone()];
        for h in &v1 {
            fs::create_dir(&h.dir).expect("a v1 cgroup for the namespace");
            // A new v1 cpuset has no cpus nor mems: nothing could join it.
            for f in ["cpuset.cpus", "cpuset.mems"] {
                if let Ok(v) = fs::read_to_string(h.dir.parent().unwrap().join(f)) {
                    fs::write(h.dir.join(f), v).unwrap();
                }
            }
            cgroups.push(h.dir.clone());
        }
        let dir = TempDir::new("systemd");
        let units = dir.path().join("units");
        fs::create_dir(&units).unwrap();
        fs::write(units.join("reaper-test.target"), TARGET_UNIT).unwrap();
        fs::write(units.join("system.slice"), SLICE_UNIT).unwrap();
        fs::write(units.join("user.slice"), SLICE_UNIT).unwrap();
        fs::write(units.join("reaper-user@.service"), USER_MANAGER_UNIT).unwrap();
        // Inside: a private /run, the cgroup mounts rooted at the new cgroup
        // namespace (unified: cgroup2 alone, a hybrid machine's v1 mounts
        // hidden), then systemd.
        let mounts = if hybrid {
            let mut m = String::from("mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup; ");
            for h in &v1 {
                let _ = write!(
                    m,
                    "mkdir /sys/fs/cgroup/{0}; mount -t cgroup -o {1} cgroup /sys/fs/cgroup/{0}; ",
                    h.name, h.options
                );
            }
            m + "mkdir /sys/fs/cgroup/unified; mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified;"
        } else {
            String::from("mount -t cgroup2 cgroup2 /sys/fs/cgroup;")
        };
        let inner = format!(
            "set -e; mount -t tmpfs -o mode=755 tmpfs /run; \
             umount -R /sys/fs/cgroup 2>/dev/null || umount -l /sys/fs/cgroup; {mounts} \
             export container=mcp-reaper-test SYSTEMD_UNIT_PATH={units}; \
             exec {SYSTEMD} --system --unit=reaper-test.target --log-target=null --show-status=no",
            units = units.display()
        );
        let mut join = String::new();
        for d in &cgroups {
            let _ = write!(join, "echo $$ > {} && ", d.join("cgroup.procs").display());
        }
        let outer = format!(
            "{join}exec unshare --pid --fork --kill-child --mount --cgroup --uts --ipc --mount-proc bash -c '{inner}'"
        );
        let unshare = Command::new("bash")
            .args(["-c", &outer])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning unshare");
        let mut sd = Systemd { pid: 0, unshare, cgroups, dir };
        let unshare_pid = sd.unshare.id().cast_signed();
        let found = wait_until(Duration::from_secs(60), || {
            sd.pid = common::descendants_of(unshare_pid).into_iter().find(|&p| comm(p) == "systemd").unwrap_or(0);
            sd.pid != 0
        });
        assert!(found, "systemd did not start");
        let mut state = String::new();
        let up = wait_until(Duration::from_secs(60), || {
            state = text(&sd.run_as_root("", &["systemctl", "is-system-running"]).stdout).trim().to_string();
            state == "running" || state == "degraded"
        });
        assert!(up, "systemd in the namespace is {state:?}");
        Some(sd)
    }

    /// `nsenter` into every namespace, then `shell` (a bash snippet run
    /// first, as root) and `argv`.
    fn command(&self, shell: &str, argv: &[&str]) -> Command {
        let mut c = Command::new("nsenter");
        c.args(["-t", &self.pid.to_string(), "-a", "bash", "-c", &format!("{shell} exec \"$@\""), "bash"]);
        c.args(argv);
        c.stdin(Stdio::null());
        c
    }

    fn run_as_root(&self, shell: &str, argv: &[&str]) -> Output {
        self.command(shell, argv).output().expect("nsenter")
    }

    /// Starts uid 65534's manager; the shell snippet that then runs a
    /// command as that user, from `caller` (a cgroup below the namespace's
    /// root: inside the manager's delegated tree, or not).
    fn user_manager(&self) {
        let out = self.run_as_root(
            &format!(
                "mkdir -p /run/user/{USER} && chown {USER}:{USER} /run/user/{USER} && chmod 700 /run/user/{USER};"
            ),
            &["systemctl", "start", &format!("reaper-user@{USER}.service")],
        );
        assert!(out.status.success(), "the user manager did not start: {}", text(&out.stderr));
        let socket = format!("/run/user/{USER}/systemd/private");
        let up =
            wait_until(Duration::from_secs(60), || self.run_as_root("", &["test", "-S", &socket]).status.success());
        assert!(up, "the user manager's socket did not appear");
    }

    /// A bash snippet: move into `cgroup` (made, owned by `owner`), then
    /// drop to the user with their runtime directory.
    fn as_user_from(cgroup: &str, owner: u32) -> String {
        format!(
            "d=/sys/fs/cgroup/{cgroup}; mkdir -p $d; chown {owner} $d $d/cgroup.procs; echo $$ > $d/cgroup.procs; \
             set -- setpriv --reuid {USER} --regid {USER} --clear-groups env XDG_RUNTIME_DIR=/run/user/{USER} \"$@\";"
        )
    }

    /// The pids, as this test sees them, of the namespace's processes
    /// whose command line starts with `prefix`.
    fn pids_of(&self, prefix: &str) -> Vec<i32> {
        let ns = fs::read_link(format!("/proc/{}/ns/pid", self.pid)).ok();
        let mut out = Vec::new();
        for e in fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            if fs::read_link(format!("/proc/{pid}/ns/pid")).ok() != ns {
                continue;
            }
            let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.starts_with(prefix) && common::stat_of(pid).is_some_and(|(st, _)| st != 'Z') {
                out.push(pid);
            }
        }
        out
    }
}

impl Drop for Systemd {
    fn drop(&mut self) {
        // The namespace's PID 1: its end ends every process in it.
        if self.pid > 0 {
            common::sigkill(self.pid);
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
        // systemd's cgroups, deepest first, once their processes are gone.
        for d in &self.cgroups {
            wait_until(Duration::from_secs(60), || remove_tree(d).is_ok());
        }
        let _ = &self.dir;
    }
}

/// `pid`'s pid in its own (innermost) PID namespace.
fn inner_pid(pid: i32) -> i32 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:")).unwrap();
    line.split_whitespace().last().unwrap().parse().unwrap()
}

/// SIGTERM to a process of this test's namespace.
fn terminate(pid: i32) {
    let p = rustix::process::Pid::from_raw(pid).unwrap();
    rustix::process::kill_process(p, rustix::process::Signal::TERM).unwrap();
}

/// A cgroup path of a systemd scope unit.
fn is_scope(cgroup: &str) -> bool {
    Path::new(cgroup).extension().is_some_and(|e| e == "scope")
}

fn comm(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim_end().to_string()
}

/// A cgroup v1 hierarchy of this machine, as a hybrid boot mounts it.
struct V1 {
    /// The mount point's last component (`memory`, `systemd`, `cpu`).
    name: String,
    /// The mount's options that name the hierarchy (`memory`, `none,name=systemd`).
    options: String,
    /// The cgroup made for the boot below this process's own.
    dir: PathBuf,
}

/// Every v1 hierarchy mounted here, with a cgroup `name` below this
/// process's own in each.
fn v1_hierarchies(name: &str) -> Vec<V1> {
    let mi = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut out = Vec::new();
    for l in mi.lines() {
        let Some((pre, post)) = l.split_once(" - ") else { continue };
        let post: Vec<&str> = post.split(' ').collect();
        if post.first() != Some(&"cgroup") || post.len() < 3 {
            continue;
        }
        let pre: Vec<&str> = pre.split(' ').collect();
        let (root, point) = (pre[3], pre[4]);
        // The hierarchy's own options: its controllers, or a `name=`.
        let opts: Vec<&str> =
            post[2].split(',').filter(|o| !matches!(*o, "rw" | "ro") && !o.starts_with("release_agent")).collect();
        let key: Vec<&str> = opts.iter().copied().filter(|o| *o != "none" && *o != "clone_children").collect();
        let Some(path) = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
            let mut a: Vec<&str> = ctl.split(',').collect();
            let mut b = key.clone();
            a.sort_unstable();
            b.sort_unstable();
            (a == b).then_some(path)
        }) else {
            continue;
        };
        let Some(rest) = path.strip_prefix(root.trim_end_matches('/')) else { continue };
        let mut options = opts.join(",");
        if key.iter().any(|k| k.starts_with("name=")) && !opts.contains(&"none") {
            options = format!("none,{options}");
        }
        out.push(V1 {
            name: Path::new(point).file_name().unwrap().to_string_lossy().into_owned(),
            options,
            dir: Path::new(point).join(rest.trim_start_matches('/')).join(name),
        });
    }
    out
}

/// This process's cgroup v2 directory.
fn own_cgroup_dir() -> Option<PathBuf> {
    let mi = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (root, point) = mi.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        post.starts_with("cgroup2 ").then(|| {
            let f: Vec<&str> = pre.split(' ').collect();
            (f[3].to_string(), f[4].to_string())
        })
    })?;
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_string();
    let rest = own.strip_prefix(root.trim_end_matches('/'))?;
    Some(Path::new(&point).join(rest.trim_start_matches('/')))
}

fn remove_tree(d: &Path) -> std::io::Result<()> {
    if !d.exists() {
        return Ok(());
    }
    for e in fs::read_dir(d)?.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&e.path())?;
        }
    }
    fs::remove_dir(d)
}

/// Files the stand-ins report to, open to the user too, and the programs
/// they run, where the user can reach them.
struct Reports {
    dir: TempDir,
    /// `reaperctl` and `fakeproc`: the built ones, or, when uid 65534
    /// cannot reach those (a clone in a 0700 directory such as `/root`),
    /// links or copies of them in `dir`.
    reaperctl: String,
    fakeproc: String,
}

impl Reports {
    fn new() -> Reports {
        let dir = TempDir::new("systemd-run");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        for f in ["ready", "notes"] {
            let p = dir.write(f, "");
            fs::set_permissions(&p, fs::Permissions::from_mode(0o666)).unwrap();
        }
        let cfg = dir.config_with(0, "term_timeout_secs = 1", "");
        fs::set_permissions(&cfg, fs::Permissions::from_mode(0o644)).unwrap();
        let reaperctl = reachable(&dir, Path::new(REAPERCTL));
        let fakeproc = reachable(&dir, fakeproc_path());
        Reports { dir, reaperctl, fakeproc }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    fn lines(&self, name: &str) -> Vec<String> {
        fs::read_to_string(self.dir.path().join(name)).unwrap_or_default().lines().map(str::to_string).collect()
    }

    /// `reaperctl run ARGS -- fakeproc` with `host` as the spec.
    fn wrap(&self, sd: &Systemd, shell: &str, args: &[&str], host: &Spec) -> Command {
        let mut argv = vec![self.reaperctl.as_str(), "--config"];
        let cfg = self.config();
        argv.push(cfg.to_str().unwrap());
        argv.push("run");
        argv.extend_from_slice(args);
        argv.push("--");
        argv.push(&self.fakeproc);
        let mut c = sd.command(shell, &argv);
        c.env("FAKEPROC", host.to_json().to_string())
            .env("FAKEPROC_READY", self.dir.path().join("ready"))
            .env("FAKEPROC_NOTES", self.dir.path().join("notes"));
        c
    }
}

/// `program` as a path any user can run: itself when uid 65534 can reach
/// it, else a hard link (or, across file systems, a copy) in `dir`'s `bin`.
fn reachable(dir: &TempDir, program: &Path) -> String {
    if common::world_executable(program) {
        return program.to_str().unwrap().to_string();
    }
    let bin = dir.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    let to = bin.join(program.file_name().unwrap());
    if fs::hard_link(program, &to).is_err() {
        fs::copy(program, &to).unwrap_or_else(|e| panic!("copying {} to {}: {e}", program.display(), to.display()));
    }
    fs::set_permissions(&to, fs::Permissions::from_mode(0o755)).unwrap();
    to.to_str().unwrap().to_string()
}

/// A host that starts two servers and exits at once: one setsid, one
/// double-forked onto /dev/null. Both ignore SIGTERM, noting it.
fn forking_host() -> Spec {
    Spec::new(&["claude", "--print"])
        .exit_after_spawn()
        .child(Spec::new(&["npm", "exec", "@playwright/mcp@latest"]).setsid().note_term())
        .child(
            Spec::new(&["sh", "-c", "daemonize"])
                .exit_after_spawn()
                .child(Spec::new(&["node", "/x/daemon-mcp"]).setsid().stdio_null().note_term()),
        )
}

/// The scope (`.../mcp-reaper-run-N.scope`) the leftover `prefix` ran in,
/// read while it runs: `reaperctl run` started with a long grace, the scope
/// looked at, then the wrapper told to end (a signal cuts the grace short).
fn run_and_end(sd: &Systemd, shell: &str, reports: &Reports) -> (String, Output) {
    let mut child = reports
        .wrap(sd, shell, &["--grace", "60"], &forking_host())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ok = wait_until(Duration::from_secs(60), || reports.lines("ready").len() >= 4);
    assert!(ok, "the stand-ins did not start: {:?}", reports.lines("ready"));
    let leftover = *sd.pids_of("node /x/daemon-mcp").first().expect("the daemonized server runs");
    let cgroup = fs::read_to_string(format!("/proc/{leftover}/cgroup")).unwrap();
    let cgroup = cgroup.lines().find_map(|l| l.strip_prefix("0::")).unwrap().to_string();
    // The wrapper, as nsenter's child: SIGTERM cuts its grace short.
    let wrapper = sd.pids_of(&reports.reaperctl);
    assert_eq!(wrapper.len(), 1, "one wrapper: {wrapper:?}");
    terminate(wrapper[0]);
    let out = wait_out(&mut child);
    (cgroup, out)
}

fn wait_out(child: &mut Child) -> Output {
    let ok = wait_until(Duration::from_secs(60), || child.try_wait().ok().flatten().is_some());
    assert!(ok, "reaperctl run did not end within 30 s");
    let mut err = Vec::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_end(&mut e, &mut err);
    }
    Output { status: child.wait().unwrap(), stdout: Vec::new(), stderr: err }
}

/// Every leftover got SIGTERM and is gone; the scope went with it.
fn assert_ended(sd: &Systemd, reports: &Reports, cgroup: &str, out: &Output) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the host's status: {err}");
    assert!(err.contains("left 2 processes behind; ended all 2"), "{err}");
    assert_eq!(reports.lines("notes").len(), 2, "both leftovers noted SIGTERM: {err}");
    for p in ["npm exec", "node /x/daemon-mcp", "claude"] {
        assert!(sd.pids_of(p).is_empty(), "{p} survived: {err}");
    }
    assert_eq!(reports.lines("ready").len(), 4, "the host ran once");
    // systemd collects the scope once it is empty.
    let name = cgroup.rsplit('/').next().unwrap().to_string();
    let gone = wait_until(Duration::from_secs(60), || {
        let o = sd.run_as_root("", &["systemctl", "list-units", "--all", "--no-legend", &name]);
        !text(&o.stdout).contains(&name)
    });
    assert!(gone, "the scope {name} was not collected");
}

/// The forking host run from `shell` lands in a scope whose cgroup path
/// has `within`; its leftovers are ended and the scope collected.
fn runs_in_a_scope(sd: &Systemd, shell: &str, within: &str) {
    let reports = Reports::new();
    let (cgroup, out) = run_and_end(sd, shell, &reports);
    assert!(
        cgroup.contains(&format!("{within}/mcp-reaper-run-")) && is_scope(&cgroup),
        "not in a scope in {within}: {cgroup} ({})",
        text(&out.stderr)
    );
    assert_ended(sd, &reports, &cgroup, &out);
}

#[test]
fn as_root_the_host_runs_in_a_transient_system_scope() {
    let Some(sd) = Systemd::boot("as_root_the_host_runs_in_a_transient_system_scope") else { return };
    runs_in_a_scope(&sd, "", "/system.slice");
}

#[test]
fn a_user_gets_a_scope_from_their_user_manager() {
    let Some(sd) = Systemd::boot("a_user_gets_a_scope_from_their_user_manager") else { return };
    sd.user_manager();
    // A terminal of the user's own: inside the manager's delegated tree.
    let shell = Systemd::as_user_from(&format!("user.slice/reaper-user@{USER}.service/terminal"), USER);
    runs_in_a_scope(&sd, &shell, &format!("/reaper-user@{USER}.service/app.slice"));
}

/// A user manager may not move a process from a cgroup it does not own (an
/// ssh session on a machine without a system bus): `systemd-run` fails
/// before the host runs, and the wrapper starts it once, without systemd.
#[test]
fn when_systemd_run_cannot_make_the_scope_the_host_still_runs_once() {
    let Some(sd) = Systemd::boot("when_systemd_run_cannot_make_the_scope_the_host_still_runs_once") else { return };
    sd.user_manager();
    let reports = Reports::new();
    let shell = Systemd::as_user_from("ssh-session", 0);
    let (cgroup, out) = run_and_end(&sd, &shell, &reports);
    let err = text(&out.stderr);
    assert!(err.contains("systemd-run could not make a scope"), "{err}");
    assert!(!cgroup.contains("mcp-reaper-run-"), "{cgroup}");
    assert!(err.contains("Falling back to a subreaper session"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("left 2 processes behind; ended all 2"), "{err}");
    for p in ["npm exec", "node /x/daemon-mcp"] {
        assert!(sd.pids_of(p).is_empty(), "{p} survived: {err}");
    }
    assert_eq!(reports.lines("ready").len(), 4, "the host ran once: {:?}", reports.lines("ready"));
}

/// `--memory-max` through systemd: read back from the scope where the v2
/// hierarchy has the memory controller; where it has not (this namespace
/// shows only the v2 hierarchy, and a hybrid machine binds memory to v1),
/// refused before the host starts.
#[test]
fn memory_max_in_a_scope_is_applied_or_refused() {
    let Some(sd) = Systemd::boot("memory_max_in_a_scope_is_applied_or_refused") else { return };
    let reports = Reports::new();
    let controllers = text(&sd.run_as_root("", &["cat", "/sys/fs/cgroup/cgroup.controllers"]).stdout);
    let host = Spec::new(&["claude"]);
    let mut child = reports
        .wrap(&sd, "", &["--memory-max", "96M"], &host)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if controllers.split_whitespace().any(|c| c == "memory") {
        assert!(wait_until(Duration::from_secs(60), || !reports.lines("ready").is_empty()));
        let pid = sd.pids_of(&reports.fakeproc)[0];
        let cg = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let cg = cg.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
        assert!(is_scope(cg), "{cg}");
        let max = sd.run_as_root("", &["cat", &format!("/sys/fs/cgroup{cg}/memory.max")]);
        let inner = cg.split_once("/system.slice/").map(|(_, s)| format!("/system.slice/{s}")).unwrap();
        let max = if max.status.success() {
            max
        } else {
            sd.run_as_root("", &["cat", &format!("/sys/fs/cgroup{inner}/memory.max")])
        };
        assert_eq!(text(&max.stdout).trim(), (96u64 << 20).to_string());
        common::sigkill(pid);
        let out = wait_out(&mut child);
        assert_eq!(out.status.code(), Some(128 + 9), "{}", text(&out.stderr));
    } else {
        let out = wait_out(&mut child);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(71), "{err}");
        assert!(err.contains("--memory-max") && err.contains("memory"), "{err}");
        assert!(reports.lines("ready").is_empty(), "the host ran without its limit: {err}");
    }
}

/// On a hybrid machine (the memory controller bound to v1) the system
/// manager applies `MemoryMax=` to the scope's v1 memory cgroup; the
/// wrapper reads it back there before it lets the host run on.
#[test]
fn memory_max_in_a_scope_on_a_hybrid_machine() {
    let test = "memory_max_in_a_scope_on_a_hybrid_machine";
    let Some(sd) = Systemd::boot_on(test, true) else { return };
    let reports = Reports::new();
    let host = Spec::new(&["claude"]);
    let mut child = reports
        .wrap(&sd, "", &["--memory-max", "80M"], &host)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ran = wait_until(Duration::from_secs(60), || {
        !reports.lines("ready").is_empty() || child.try_wait().ok().flatten().is_some()
    });
    assert!(ran && !reports.lines("ready").is_empty(), "the host did not run: {}", text(&wait_out(&mut child).stderr));
    // The host's command line is the one the wrapper ran (fakeproc's path).
    let Some(&pid) = sd.pids_of(&reports.fakeproc).first() else {
        panic!("the host is gone: {}", text(&wait_out(&mut child).stderr));
    };
    let cg = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let memory = cg.lines().find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string())).unwrap();
    assert!(memory.contains("/system.slice/mcp-reaper-run-") && is_scope(&memory), "{memory}");
    let inner = memory.split_once("/system.slice/").map(|(_, s)| format!("/system.slice/{s}")).unwrap();
    let limit = sd.run_as_root("", &["cat", &format!("/sys/fs/cgroup/memory{inner}/memory.limit_in_bytes")]);
    assert_eq!(text(&limit.stdout).trim(), (80u64 << 20).to_string(), "{}", text(&limit.stderr));
    common::sigkill(pid);
    let out = wait_out(&mut child);
    assert_eq!(out.status.code(), Some(128 + 9), "{}", text(&out.stderr));
}

/// `reaperctl scan` in the namespace names a leftover of a scope session an
/// orphan of that session.
#[test]
fn scan_attributes_a_leftover_to_its_scope_session() {
    let Some(sd) = Systemd::boot("scan_attributes_a_leftover_to_its_scope_session") else { return };
    let reports = Reports::new();
    let mut child = reports
        .wrap(&sd, "", &["--grace", "60"], &forking_host())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(60), || reports.lines("ready").len() >= 4));
    let cfg = reports.config();
    // Pids as the namespace sees them: the scan's scope is the wrapper.
    let wrapper = inner_pid(sd.pids_of(&reports.reaperctl)[0]);
    let leftover = inner_pid(sd.pids_of("node /x/daemon-mcp")[0]);
    let out = sd.run_as_root(
        "",
        &[REAPERCTL, "--config", cfg.to_str().unwrap(), "scan", "--json", "--scope", &wrapper.to_string()],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    let t = common::tree_rooted_at(&v, leftover);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    assert!(t["reason"].as_str().unwrap().contains("`reaperctl run` session"), "{t:#}");
    terminate(sd.pids_of(&reports.reaperctl)[0]);
    let out = wait_out(&mut child);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// The daemon in the namespace lists a scope session in `status`: its
/// host, members, the scope as its cgroup.
#[test]
fn status_lists_a_scope_session() {
    let Some(sd) = Systemd::boot("status_lists_a_scope_session") else { return };
    let reports = Reports::new();
    let host = Spec::new(&["claude"]).child(Spec::new(&["npm", "exec", "@playwright/mcp@latest"]));
    let mut wrapper =
        reports.wrap(&sd, "", &["--grace", "0"], &host).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    assert!(wait_until(Duration::from_secs(60), || reports.lines("ready").len() >= 2));
    let inner = inner_pid(sd.pids_of(&reports.reaperctl)[0]);
    let cfg = reports.config();
    let socket = reports.dir.path().join("d.sock");
    let daemon_argv = [
        env!("CARGO_BIN_EXE_mcp-reaperd"),
        "--dry-run",
        "--config",
        cfg.to_str().unwrap(),
        "--scope",
        &inner.to_string(),
        "--socket",
        socket.to_str().unwrap(),
        "--state-file",
        &reports.dir.path().join("d.state").display().to_string(),
        "--log-target",
        "stderr",
    ];
    let mut daemon = sd.command("", &daemon_argv).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let mut st = Value::Null;
    let listed = wait_until(Duration::from_secs(60), || {
        let out = sd.run_as_root("", &[REAPERCTL, "--socket", socket.to_str().unwrap(), "status", "--json"]);
        st = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        st["run_sessions"].as_array().is_some_and(|r| r.iter().any(|r| r["wrapper_pid"] == inner))
    });
    let _ = daemon.kill();
    let _ = daemon.wait();
    if let Some(&d) = sd.pids_of(env!("CARGO_BIN_EXE_mcp-reaperd")).first() {
        common::sigkill(d);
    }
    assert!(listed, "the session was not listed: {st:#}");
    let r = st["run_sessions"].as_array().unwrap().iter().find(|r| r["wrapper_pid"] == inner).unwrap();
    assert_eq!(r["members"], 2, "{r:#}");
    let cgroup = r["cgroup"].as_str().unwrap_or_default();
    assert!(cgroup.starts_with("/system.slice/mcp-reaper-run-") && is_scope(cgroup), "{r:#}");
    terminate(sd.pids_of(&reports.reaperctl)[0]);
    let out = wait_out(&mut wrapper);
    assert_eq!(out.status.code(), Some(128 + 15), "{}", text(&out.stderr));
}

/// A host that exits at once (`--version`, a typo) gives its status back and
/// no warning: it ran in the scope, even if it was gone before it was seen
/// there (an exited process's cgroup reads as the root).
#[test]
fn a_host_that_exits_at_once_gives_its_status_and_no_warning() {
    let Some(sd) = Systemd::boot("a_host_that_exits_at_once_gives_its_status_and_no_warning") else { return };
    let reports = Reports::new();
    let cfg = reports.config();
    for _ in 0..5 {
        let out =
            sd.run_as_root("", &[REAPERCTL, "--config", cfg.to_str().unwrap(), "run", "--", "sh", "-c", "exit 3"]);
        assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
        assert_eq!(text(&out.stderr), "", "a warning for a host that ran");
    }
}
