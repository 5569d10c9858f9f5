//! The devcontainer Feature (`deploy/devcontainer/mcp-reaper`, issue 33).
//!
//! Any user: `install.sh` into a temporary root (`DESTDIR`), from `bin/`
//! beside it and from a release tarball, and its refusals.
//!
//! Root with docker (a `dockerd` of the test's own, as tests/docker.rs runs
//! it; containers with `--network none`, an image imported from busybox and
//! the libraries the binaries load): the Feature is built into an image as
//! the devcontainer CLI builds one (its options as `devcontainer-features.env`
//! sourced before `install.sh`, as root) and the image started as the CLI
//! starts it: the CLI's `/bin/sh -c "echo Container started … exec \"$@\";
//! while sleep 1 …"` as PID 1 running the Feature's `entrypoint`, and the
//! same below docker-init (`"init": true`). The daemon the entrypoint
//! started answers `reaperctl status`, `reaperctl doctor` names the platform,
//! and a crashed host's server is reaped while a live host's is kept.
//!
//! Safety: the daemon runs in enforce mode only inside the test's containers
//! (PID namespaces of their own: it sees nothing else). The test signals
//! processes only inside its containers (`docker exec … kill`) and the
//! dockerd it started, by its pid.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{Spec, TempDir, find_tool, is_root, skip, text, wait_until};
use serde_json::Value;

fn feature_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/devcontainer/mcp-reaper")
}

fn bins() -> [(&'static str, PathBuf); 2] {
    [
        ("mcp-reaperd", PathBuf::from(env!("CARGO_BIN_EXE_mcp-reaperd"))),
        ("reaperctl", PathBuf::from(env!("CARGO_BIN_EXE_reaperctl"))),
    ]
}

/// A copy of the Feature's folder in `dir`, with the built binaries in its
/// `bin/` when `with_bins` (as a local Feature is set up: docs/install.md).
fn feature_copy(dir: &Path, with_bins: bool) -> PathBuf {
    let to = dir.join("mcp-reaper");
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(feature_dir()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    if with_bins {
        std::fs::create_dir_all(to.join("bin")).unwrap();
        for (name, path) in bins() {
            std::fs::copy(path, to.join("bin").join(name)).unwrap();
        }
    }
    to
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(feature_dir().join("devcontainer-feature.json")).unwrap();
    serde_json::from_str(&text).expect("devcontainer-feature.json is JSON")
}

/// The spec's option resolution: an option's id as its variable's name.
fn option_var(id: &str) -> String {
    let word: String = id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    let trimmed = word.trim_start_matches(|c: char| c.is_ascii_digit() || c == '_');
    let lead = if trimmed.len() < word.len() { "_" } else { "" };
    format!("{lead}{}", trimmed.to_ascii_uppercase())
}

/// `devcontainer-features.env` as the CLI writes it: every option, the
/// user's value or the default.
fn features_env(overrides: &[(&str, &str)]) -> String {
    let m = manifest();
    let mut out = String::new();
    for (id, opt) in m["options"].as_object().expect("options") {
        let value = overrides.iter().find(|(k, _)| k == id).map_or_else(
            || match &opt["default"] {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            },
            |(_, v)| (*v).to_string(),
        );
        let _ = writeln!(out, "{}=\"{value}\"", option_var(id));
    }
    out
}

/// `install.sh` with `env`, into `dest`.
fn install(feature: &Path, dest: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(feature.join("install.sh"));
    cmd.env("DESTDIR", dest).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("running install.sh")
}

#[test]
fn the_manifest_follows_the_features_spec() {
    let m = manifest();
    assert_eq!(m["id"], "mcp-reaper", "the id is the folder's name");
    assert_eq!(feature_dir().file_name().unwrap(), "mcp-reaper");
    for key in ["version", "name"] {
        assert!(m[key].is_string(), "{key} is required: {m:#}");
    }
    assert_eq!(m["options"]["mode"]["enum"], serde_json::json!(["dry-run", "enforce"]));
    assert_eq!(m["options"]["mode"]["default"], "dry-run", "a new install audits first");
    assert_eq!(m["entrypoint"], "/usr/local/share/mcp-reaper/start.sh");
    assert!(m["capAdd"].as_array().unwrap().contains(&Value::from("SYS_PTRACE")), "{m:#}");
    for script in ["install.sh", "start.sh"] {
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(feature_dir().join(script)).unwrap().permissions(),
        );
        assert!(mode & 0o111 != 0, "{script} must be executable");
    }
    assert_eq!(option_var("minUid"), "MINUID");
    assert_eq!(option_var("cargo-install"), "CARGO_INSTALL");
}

#[test]
fn install_sh_installs_from_bin_or_a_release_tarball_into_a_root() {
    let dir = TempDir::new("feature");
    let feature = feature_copy(dir.path(), true);
    let dest = dir.path().join("root");
    let out = install(&feature, &dest, &[("MODE", "enforce"), ("MINUID", "0")]);
    assert!(out.status.success(), "install.sh: {}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("installed mcp-reaperd"), "{}", text(&out.stdout));
    for (name, built) in bins() {
        let got = dest.join("usr/local/bin").join(name);
        assert_eq!(std::fs::read(&got).unwrap(), std::fs::read(built).unwrap(), "{}", got.display());
    }
    let start = dest.join("usr/local/share/mcp-reaper/start.sh");
    assert_eq!(std::fs::read(&start).unwrap(), std::fs::read(feature.join("start.sh")).unwrap());
    let dropin = std::fs::read_to_string(dest.join("etc/mcp-reaper/config.d/50-devcontainer-feature.toml")).unwrap();
    assert!(dropin.contains("mode = \"enforce\"\nmin_uid = 0\n"), "{dropin}");
    // The config the daemon will read says so.
    let shown = common::reaperctl(["config", "--config", dest.join("etc/mcp-reaper/config.toml").to_str().unwrap()]);
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    let shown = text(&shown.stdout);
    assert!(shown.lines().any(|l| l.contains("min_uid = 0") && l.contains("50-devcontainer-feature.toml")), "{shown}");

    // A user's main file survives a rebuild; the defaults go back in.
    let main = dest.join("etc/mcp-reaper/config.toml");
    std::fs::write(&main, "[reaper]\ngrace_secs = 300\n").unwrap();
    let out = install(&feature, &dest, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&main).unwrap(), "[reaper]\ngrace_secs = 300\n");
    let dropin = std::fs::read_to_string(dest.join("etc/mcp-reaper/config.d/50-devcontainer-feature.toml")).unwrap();
    assert!(dropin.contains("mode = \"dry-run\"\nmin_uid = 1000\n"), "{dropin}");

    // A release tarball (the binaries in a directory of it), named by a
    // path with {version}; no bin/ beside install.sh.
    let release = dir.path().join("release/mcp-reaper-9.8.7");
    std::fs::create_dir_all(&release).unwrap();
    for (name, built) in bins() {
        std::fs::copy(built, release.join(name)).unwrap();
    }
    let tarball = dir.path().join("mcp-reaper-9.8.7.tar.gz");
    let tar = Command::new("tar")
        .arg("-C")
        .arg(dir.path().join("release"))
        .arg("-czf")
        .arg(&tarball)
        .arg("mcp-reaper-9.8.7")
        .status()
        .expect("running tar");
    assert!(tar.success());
    let bare = feature_copy(&dir.path().join("bare"), false);
    let dest = dir.path().join("root2");
    let url = dir.path().join("mcp-reaper-{version}.tar.gz");
    let out = install(&bare, &dest, &[("VERSION", "9.8.7"), ("URL", url.to_str().unwrap())]);
    assert!(out.status.success(), "install.sh: {}{}", text(&out.stdout), text(&out.stderr));
    assert!(dest.join("usr/local/bin/mcp-reaperd").is_file() && dest.join("usr/local/bin/reaperctl").is_file());
}

#[test]
fn install_sh_refuses_bad_options_and_missing_binaries() {
    let dir = TempDir::new("feature-refusals");
    let feature = feature_copy(dir.path(), true);
    let bare = feature_copy(&dir.path().join("bare"), false);
    let dest = dir.path().join("root");
    for (feature, env, says) in [
        (&feature, vec![("MODE", "reap")], "mode must be dry-run or enforce, not 'reap'"),
        (&feature, vec![("MINUID", "vscode")], "minUid must be a number, not 'vscode'"),
        (
            &bare,
            vec![],
            "no binaries: set url (a release tarball) or cargoInstall, or put mcp-reaperd and reaperctl in",
        ),
        (&bare, vec![("URL", "/nonexistent/mcp-reaper.tar.gz")], "url names no file: /nonexistent/mcp-reaper.tar.gz"),
    ] {
        let out = install(feature, &dest, &env);
        assert_eq!(out.status.code(), Some(1), "{env:?}: {}", text(&out.stdout));
        assert!(text(&out.stderr).contains(says), "{env:?}: {}", text(&out.stderr));
    }
    assert!(!dest.join("usr/local/bin/mcp-reaperd").exists(), "a refused install wrote binaries");
}

// ------------------------------------------------------------ in a container

const BASE: &str = "feature-base";
const BUILT: &str = "feature-built";
/// Where the test's helper (examples/fakeproc.rs) is mounted.
const FAKEPROC: &str = "/opt/test/fakeproc";

/// A dockerd of the test's own, stopped (by its pid) on drop.
struct Engine {
    dockerd: Child,
    sock: PathBuf,
    docker: PathBuf,
    dir: TempDir,
}

impl Engine {
    fn start(test: &str) -> Option<Engine> {
        if !is_root() {
            skip(test, "needs root (runs a dockerd of its own)");
            return None;
        }
        let (Some(dockerd), Some(docker)) = (find_tool("dockerd"), find_tool("docker")) else {
            skip(test, "docker is not installed (Debian: apt-get install docker.io)");
            return None;
        };
        let Some(busybox) = find_tool("busybox") else {
            skip(test, "busybox is not installed (Debian: apt-get install busybox-static)");
            return None;
        };
        let dir = TempDir::new("feature-dockerd");
        let (dockerd, sock) = common::spawn_dockerd(&dockerd, &dir);
        let mut e = Engine { dockerd, sock, docker, dir };
        let up = wait_until(Duration::from_secs(60), || {
            matches!(e.dockerd.try_wait(), Ok(None)) && e.docker(&["version"]).status.success()
        });
        if !up {
            let log = std::fs::read_to_string(e.dir.path().join("engine.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(8).collect();
            skip(test, &format!("dockerd did not start: {}", tail.join(" | ")));
            return None;
        }
        e.import(&busybox);
        let probe = e.docker(&["run", "--rm", "--network", "none", BASE, "true"]);
        if !probe.status.success() {
            skip(test, &format!("the engine cannot run a container: {}", text(&probe.stderr).trim()));
            return None;
        }
        Some(e)
    }

    /// An image of busybox (every applet) and the shared libraries the
    /// binaries and fakeproc load, at the paths they load them from.
    fn import(&self, busybox: &Path) {
        let root = self.dir.path().join("rootfs");
        for d in ["bin", "etc", "tmp", "var/log", "run", "proc", "sys", "dev", "root"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::set_permissions(root.join("tmp"), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
        std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
        std::fs::copy(busybox, root.join("bin/busybox")).unwrap();
        let list = Command::new(busybox).arg("--list").output().expect("busybox --list");
        for applet in text(&list.stdout).lines().filter(|a| *a != "busybox") {
            let _ = std::os::unix::fs::symlink("busybox", root.join("bin").join(applet));
        }
        let mut exes: Vec<PathBuf> = bins().into_iter().map(|(_, p)| p).collect();
        exes.push(common::fakeproc_path().to_path_buf());
        let ldd = Command::new("ldd").args(&exes).output().expect("running ldd");
        for lib in text(&ldd.stdout).lines().filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            match words.as_slice() {
                [_, "=>", path, ..] if path.starts_with('/') => Some((*path).to_string()),
                [path, ..] if path.starts_with('/') && !path.ends_with(':') => Some((*path).to_string()),
                _ => None,
            }
        }) {
            let to = root.join(lib.trim_start_matches('/'));
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&lib, &to).unwrap_or_else(|e| panic!("copying {lib}: {e}"));
        }
        let tar = self.dir.path().join("rootfs.tar");
        let st = Command::new("tar").arg("-C").arg(&root).arg("-cf").arg(&tar).arg(".").status().expect("tar");
        assert!(st.success(), "tar of the rootfs failed");
        let out = self.docker(&["import", tar.to_str().unwrap(), BASE]);
        assert!(out.status.success(), "docker import: {}", text(&out.stderr));
    }

    fn docker(&self, args: &[&str]) -> Output {
        Command::new(&self.docker)
            .arg("-H")
            .arg(format!("unix://{}", self.sock.display()))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("running docker")
    }

    /// `docker` that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.docker(args);
        assert!(out.status.success(), "docker {args:?}: {}{}", text(&out.stdout), text(&out.stderr));
        text(&out.stdout)
    }

    fn exec(&self, container: &str, argv: &[&str]) -> Output {
        self.docker(&[&["exec", container], argv].concat())
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let all = self.docker(&["ps", "-aq"]);
        for id in text(&all.stdout).lines() {
            let _ = self.docker(&["rm", "-f", id]);
        }
        let pid = rustix::process::Pid::from_raw(self.dockerd.id().cast_signed()).expect("dockerd pid");
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        if !wait_until(Duration::from_secs(60), || !matches!(self.dockerd.try_wait(), Ok(None))) {
            let _ = self.dockerd.kill();
        }
        let _ = self.dockerd.wait();
    }
}

/// Builds the Feature into `BUILT` as the devcontainer CLI does: the
/// folder (binaries in bin/) at hand, its options in
/// `devcontainer-features.env`, sourced with `set -a` before `install.sh`
/// runs as root; then a drop-in of the test's (no grace, a short interval).
fn build(e: &Engine, options: &[(&str, &str)]) {
    let feature = feature_copy(e.dir.path(), true);
    std::fs::write(feature.join("devcontainer-features.env"), features_env(options)).unwrap();
    let script = "cd /tmp/build/mcp-reaper && set -a && . ./devcontainer-features.env && set +a && ./install.sh \
                  && printf '[reaper]\\ngrace_secs = 0\\ninterval_secs = 1\\nterm_timeout_secs = 1.0\\n' \
                  > /etc/mcp-reaper/config.d/90-test.toml";
    let mount = format!("{}:/tmp/build/mcp-reaper:ro", feature.display());
    let out =
        e.docker(&["run", "--name", "feature-build", "--network", "none", "-v", &mount, BASE, "sh", "-c", script]);
    assert!(out.status.success(), "building the Feature: {}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("mcp-reaper feature: installed mcp-reaperd"), "{}", text(&out.stdout));
    e.ok(&["commit", "feature-build", BUILT]);
    e.ok(&["rm", "feature-build"]);
}

/// The devcontainer CLI's entrypoint script around the Feature's entrypoint
/// (`exec "$@"` with no command: the `sleep` loop stays PID 1's work).
fn cli_entrypoint() -> String {
    let ep = manifest()["entrypoint"].as_str().unwrap().to_string();
    format!("echo Container started\ntrap \"exit 0\" 15\n{ep}\nexec \"$@\"\nwhile sleep 1 & wait $!; do :; done")
}

/// Starts `BUILT` as the CLI does, `--init` when `init`; its name.
fn start(e: &Engine, name: &str, init: bool) -> String {
    let caps: Vec<String> =
        manifest()["capAdd"].as_array().unwrap().iter().map(|c| format!("--cap-add={}", c.as_str().unwrap())).collect();
    let fakeproc = format!("{}:{FAKEPROC}:ro", common::fakeproc_path().display());
    let mut args: Vec<&str> = vec!["run", "-d", "--name", name, "--network", "none", "-v", &fakeproc];
    args.extend(caps.iter().map(String::as_str));
    if init {
        args.push("--init");
    }
    let script = cli_entrypoint();
    args.extend(["--entrypoint", "/bin/sh", BUILT, "-c", &script, "-"]);
    e.ok(&args);
    name.to_string()
}

/// `reaperctl status --json` in the container, once the daemon answers.
fn status_when(e: &Engine, c: &str, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let mut last = String::new();
    let mut found = None;
    let ok = wait_until(Duration::from_secs(90), || {
        let out = e.exec(c, &["/usr/local/bin/reaperctl", "status", "--json"]);
        last = format!("{}{}", text(&out.stdout), text(&out.stderr));
        found = serde_json::from_slice::<Value>(&out.stdout).ok().filter(|v| cond(v));
        found.is_some()
    });
    if !ok {
        let log = e.exec(c, &["cat", "/var/log/mcp-reaper.log"]);
        panic!("{c}: {what}: not within 90 s; last status:\n{last}\ndaemon log:\n{}", text(&log.stdout));
    }
    found.unwrap()
}

/// The ready lines of a fakeproc tree in the container: (pid, ppid, argv).
fn ready(e: &Engine, c: &str, file: &str, total: usize) -> Vec<(i32, i32, String)> {
    let mut lines = Vec::new();
    let ok = wait_until(Duration::from_secs(60), || {
        let out = e.exec(c, &["cat", file]);
        lines = text(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut it = l.splitn(3, ' ');
                Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?, it.next()?.to_string()))
            })
            .collect();
        lines.len() >= total
    });
    assert!(ok, "{c}: only {} of {total} processes ready: {lines:?}", lines.len());
    lines
}

/// Whether `pid` runs in the container (a zombie does not).
fn runs(e: &Engine, c: &str, pid: i32) -> bool {
    let out = e.exec(c, &["cat", &format!("/proc/{pid}/stat")]);
    let stat = text(&out.stdout);
    out.status.success() && stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z'))
}

/// In a started container: the daemon is up, says where it runs, reaps a
/// crashed host's server and keeps everything else.
fn daemon_started_by_the_entrypoint_reaps_only_the_orphan(e: &Engine, c: &str, pid1: &str) {
    let st = status_when(e, c, "the daemon answers", |_| true);
    assert_eq!(st["mode"], "enforce", "{st:#}");
    let daemon = i32::try_from(st["pid"].as_i64().unwrap()).unwrap();
    let comm = text(&e.exec(c, &["cat", "/proc/1/comm"]).stdout);
    assert_eq!(comm.trim(), pid1, "PID 1");

    // Started again (a postStartCommand): the one daemon answering is kept.
    let again = e.exec(c, &["/usr/local/share/mcp-reaper/start.sh"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let pids = text(&e.exec(c, &["pidof", "mcp-reaperd"]).stdout);
    assert_eq!(pids.split_whitespace().collect::<Vec<_>>(), [daemon.to_string()], "one daemon");

    let doctor = text(&e.exec(c, &["/usr/local/bin/reaperctl", "doctor"]).stdout);
    let platform = doctor.lines().find(|l| l.starts_with("ok       platform")).unwrap_or_else(|| panic!("{doctor}"));
    assert!(platform.contains(&format!("container (docker), PID 1 {pid1}")), "{doctor}");
    assert!(platform.contains("from /.dockerenv"), "{doctor}");
    let adoption = doctor.lines().find(|l| l.contains(" adoption ")).unwrap_or_else(|| panic!("{doctor}"));
    assert!(adoption.contains(&format!("orphans go to PID 1 ({pid1})")), "{doctor}");
    assert!(doctor.lines().any(|l| l.starts_with("ok       daemon") && l.contains("mode enforce")), "{doctor}");

    // Two hosts with a stdio server each, started from outside (docker exec:
    // their parent is not in the container); one crashes.
    let tree = |tag: &str| {
        Spec::new(&["claude", "--resume", tag])
            .child(Spec::new(&["npm", "exec", "@playwright/mcp@latest"]).child(Spec::new(&["node", "playwright-mcp"])))
    };
    let spec = Spec::new(&["fakeproc-root"]).child(tree("crashes")).child(tree("lives"));
    let env = format!("FAKEPROC={}", spec.to_json());
    e.ok(&["exec", "-d", "-e", &env, "-e", "FAKEPROC_READY=/tmp/ready", c, FAKEPROC]);
    let procs = ready(e, c, "/tmp/ready", 7);
    let pid_of = |prefix: &str| procs.iter().find(|p| p.2.starts_with(prefix)).map(|p| p.0).unwrap();
    let (crashes, lives) = (pid_of("claude --resume crashes"), pid_of("claude --resume lives"));
    let server_of = |host: i32| procs.iter().find(|p| p.1 == host).map(|p| p.0).unwrap();
    let (orphan, kept) = (server_of(crashes), server_of(lives));
    let below = |parent: i32| procs.iter().find(|p| p.1 == parent).map(|p| p.0).unwrap();
    let (orphan_node, kept_node) = (below(orphan), below(kept));
    let root = pid_of("fakeproc-root");
    status_when(e, c, "both trees are seen live", |st| {
        st["trees"]
            .as_array()
            .is_some_and(|t| [orphan, kept].iter().all(|s| t.iter().any(|t| t["root"] == *s && t["verdict"] == "live")))
    });

    e.ok(&["exec", c, "kill", "-9", &crashes.to_string()]);
    let st = status_when(e, c, "the orphan is reaped", |st| st["totals"]["trees_reaped"].as_u64().unwrap_or(0) >= 1);
    assert!(wait_until(Duration::from_secs(60), || !runs(e, c, orphan) && !runs(e, c, orphan_node)), "{st:#}");
    let recent = st["recent"].as_array().unwrap();
    assert!(
        recent.iter().any(|r| r["root"] == orphan && r["reason"].as_str().unwrap().starts_with("adopted by PID 1")),
        "{st:#}"
    );
    for (pid, what) in [(1, "PID 1"), (daemon, "the daemon"), (root, "the trees' parent"), (lives, "the live host")] {
        assert!(runs(e, c, pid), "{what} ({pid}) is gone:\n{st:#}");
    }
    for pid in [kept, kept_node] {
        assert!(runs(e, c, pid), "the live host's server {pid} was reaped:\n{st:#}");
    }
    let log = text(&e.exec(c, &["cat", "/var/log/mcp-reaper.log"]).stdout);
    assert!(log.contains(&orphan.to_string()), "the log at /var/log/mcp-reaper.log:\n{log}");
}

#[test]
fn the_feature_builds_into_an_image_and_its_entrypoint_starts_a_daemon_that_reaps_there() {
    let test = "the_feature_builds_into_an_image_and_its_entrypoint_starts_a_daemon_that_reaps_there";
    let Some(e) = Engine::start(test) else { return };
    build(&e, &[("mode", "enforce"), ("minUid", "0")]);
    // PID 1: the CLI's script (`sh`), or docker-init with the script below it.
    let c = start(&e, "feature-sh", false);
    daemon_started_by_the_entrypoint_reaps_only_the_orphan(&e, &c, "sh");
    let c = start(&e, "feature-init", true);
    daemon_started_by_the_entrypoint_reaps_only_the_orphan(&e, &c, "docker-init");
}
