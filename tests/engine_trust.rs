//! A root reaper trusts no user's word about containers (issue 22, items 1
//! and 2). A stand-in engine of the test's own (a root-owned unix socket
//! answering the few Docker API calls the reaper makes, recording every
//! request) and stand-in `docker run -i` clients running as nobody (65534),
//! orphaned below a root host stand-in; `mcp-reaperd --once` as root in
//! enforce mode, `--scope`d to the sandbox. Whatever such a client says
//! (`--name` of someone else's container, `DOCKER_HOST` at a socket only
//! root may reach, a `--cidfile` only root may read, a FIFO or a device as
//! its cidfile, a container created long after it started), no request
//! that changes anything reaches the engine, a FIFO or device is never
//! opened, and the reasons say why. A client whose container fits all the
//! evidence on an engine it may use still has it stopped (the control).
//!
//! Root only (a client of another uid, a root-owned socket, mknod); skipped
//! with the reason otherwise. Signals only the sandbox's processes.

mod common;

use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use common::{Sandbox, Spec, TempDir, alive, fakeproc_path, is_root, reaperctl, s, skip, text, wait_until};
use serde_json::Value;

const NOBODY: u32 = 65534;
const IMAGE: &str = "mcp/x";

/// A container the stand-in engine holds.
#[derive(Clone)]
struct Box_ {
    id: String,
    name: String,
    created: SystemTime,
    running: bool,
    exists: bool,
}

/// The stand-in engine: its socket, its containers, every request it got.
struct FakeEngine {
    state: Arc<Mutex<(Vec<Box_>, Vec<String>)>>,
}

impl FakeEngine {
    /// Serves `socket` (mode `mode`, owned by root) until the test ends.
    fn serve(socket: &Path, mode: u32) -> FakeEngine {
        let l = UnixListener::bind(socket).unwrap_or_else(|e| panic!("binding {}: {e}", socket.display()));
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(mode)).unwrap();
        let state: Arc<Mutex<(Vec<Box_>, Vec<String>)>> = Arc::default();
        let st = Arc::clone(&state);
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let line = text(&req).lines().next().unwrap_or_default().to_string();
                let mut w = line.split(' ');
                let (method, path) = (w.next().unwrap_or_default(), w.next().unwrap_or_default());
                let (status, body) = answer(&mut st.lock().unwrap(), method, path);
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        FakeEngine { state }
    }

    fn add(&self, id: &str, name: &str, created: SystemTime) {
        let b = Box_ { id: id.into(), name: name.into(), created, running: true, exists: true };
        self.state.lock().unwrap().0.push(b);
    }

    fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().1.clone()
    }

    /// Requests that would change something (anything but a GET).
    fn changes(&self) -> Vec<String> {
        self.requests().into_iter().filter(|r| !r.starts_with("GET ")).collect()
    }
}

fn answer(st: &mut (Vec<Box_>, Vec<String>), method: &str, path: &str) -> (&'static str, String) {
    st.1.push(format!("{method} {path}"));
    let bare = path.split('?').next().unwrap_or(path);
    if method == "GET" && bare == "/containers/json" {
        let items: Vec<String> =
            st.0.iter()
                .filter(|b| b.running)
                .map(|b| format!(r#"{{"Id":"{}","Created":{}}}"#, b.id, secs(b.created)))
                .collect();
        return ("200 OK", format!("[{}]", items.join(",")));
    }
    let parts: Vec<&str> = bare.split('/').collect();
    // ["", "containers", REF, ...]
    let Some(b) = (parts.len() >= 3 && parts[1] == "containers")
        .then(|| st.0.iter_mut().find(|b| b.exists && (b.id == parts[2] || b.name == parts[2])))
        .flatten()
    else {
        return ("404 Not Found", r#"{"message":"no such container"}"#.into());
    };
    match (method, parts.get(3).copied()) {
        ("GET", Some("json")) => {
            let body = format!(
                r#"{{"Id":"{}","Name":"/{}","Created":"{}","Config":{{"Image":"{IMAGE}","Cmd":["serve"],"OpenStdin":true,"AttachStdin":true,"AttachStdout":true}},"State":{{"Running":{},"Pid":0,"ExitCode":0}},"HostConfig":{{"AutoRemove":false}}}}"#,
                b.id,
                b.name,
                rfc3339(b.created),
                b.running
            );
            ("200 OK", body)
        }
        ("POST", Some("stop" | "kill")) => {
            b.running = false;
            ("204 No Content", String::new())
        }
        ("DELETE", None) => {
            b.exists = false;
            ("204 No Content", String::new())
        }
        _ => ("404 Not Found", "{}".into()),
    }
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs()
}

/// `2026-11-23T02:10:13.482919541Z`.
fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap();
    let days = i64::try_from(d.as_secs() / 86_400).unwrap();
    let rem = d.as_secs() % 86_400;
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_nanos()
    )
}

/// When `pid` started, as the reaper computes it (its start ticks against
/// the uptime).
fn started_at(pid: i32) -> SystemTime {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let ticks: f64 = after_comm.split(' ').nth(19).unwrap().parse().unwrap();
    let uptime: f64 = std::fs::read_to_string("/proc/uptime").unwrap().split(' ').next().unwrap().parse().unwrap();
    let hz = rustix::param::clock_ticks_per_second() as f64;
    SystemTime::now() - Duration::from_secs_f64(uptime - ticks / hz)
}

/// Whether this test can run: root, and a fakeproc nobody may run.
fn can_run(test: &str) -> bool {
    if !is_root() {
        skip(test, "needs root (clients of another uid, a root-owned engine socket)");
        return false;
    }
    if !common::world_executable(fakeproc_path()) {
        skip(test, &format!("{} is not reachable by other users", fakeproc_path().display()));
        return false;
    }
    true
}

/// A root host stand-in `claude TAG` with a `docker …` client running as nobody.
fn host_with(tag: &str, client: Spec) -> Spec {
    Spec::new(&["claude", tag]).child(client.uid(NOBODY))
}

fn docker(args: &[&str]) -> Spec {
    let mut argv = vec!["docker", "run", "-i", "--rm"];
    argv.extend_from_slice(args);
    argv.extend([IMAGE, "serve"]);
    // nobody's home (the passwd entry's), not the test's: no docker config of root's.
    Spec::new(&argv).env("HOME", "/nonexistent")
}

/// A directory anyone may search (its files' own modes decide).
fn public_dir(tag: &str) -> TempDir {
    let d = TempDir::new(tag);
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Orphans the clients (their hosts killed), runs `reaperctl scan --json`,
/// `reaperctl scan` and `mcp-reaperd --once --json` (enforcing, scoped),
/// checks every client was reaped, and returns (scan JSON, scan's words,
/// once JSON).
fn orphan_and_reap(sb: &Sandbox, hosts: &[&str], containers: &str) -> (Value, String, Value) {
    let clients: Vec<i32> = hosts
        .iter()
        .map(|h| {
            let host = sb.pid_of(&format!("claude {h}"));
            sb.ready().iter().find(|r| r.ppid == host).unwrap().pid
        })
        .collect();
    for h in hosts {
        sb.kill_host(sb.pid_of(&format!("claude {h}")));
    }
    let cfg = sb.dir().config_with(
        0,
        "term_timeout_secs = 1",
        &format!("[containers]\nstop_containers = true\n{containers}"),
    );
    let scan = common::scan_json(&cfg, &["--scope", &s(sb.scope_pid())]);
    let human = text(&reaperctl(["scan", "--scope", &s(sb.scope_pid()), "--config", cfg.to_str().unwrap()]).stdout);
    let (once, out) = common::once_output(Some(sb.scope_pid()), &cfg, &[]);
    eprintln!("reaper stderr:\n{}", text(&out.stderr));
    for c in clients {
        assert!(wait_until(Duration::from_secs(10), || !alive(c)), "client {c} survived: {once:#}");
    }
    (scan, human, once)
}

/// The reason of the outcome whose root is `client`, and its scan tree's container plan.
fn why(scan: &Value, once: &Value, client: i32) -> (String, String) {
    let outs = once["outcomes"].as_array().unwrap_or_else(|| panic!("no outcomes: {once:#}"));
    let o =
        outs.iter().find(|o| o["root"]["pid"] == client).unwrap_or_else(|| panic!("no outcome of {client}: {once:#}"));
    assert_eq!(o["containers"][0]["ended"], "not_stopped", "{o:#}");
    let trees = scan["trees"].as_array().unwrap();
    let t = trees.iter().find(|t| t["root"] == client).unwrap_or_else(|| panic!("no tree of {client}: {scan:#}"));
    (o["reason"].as_str().unwrap().to_string(), t["containers"][0]["plan"].as_str().unwrap_or_default().to_string())
}

const ID: &str = "5e0c1d6f0b4c4a8f9e2d7c6b5a4938271605f4e3d2c1b0a99887766554433221";

#[test]
fn a_user_cannot_name_a_container_on_an_engine_only_root_may_use() {
    let test = "a_user_cannot_name_a_container_on_an_engine_only_root_may_use";
    if !can_run(test) {
        return;
    }
    // Root's engine: a socket root alone may connect to (0660 root:root).
    let dir = public_dir("root-engine");
    let sock = dir.path().join("docker.sock");
    let sb = Sandbox::new(vec![host_with("a", docker(&["--name", "prod-db"]))]);
    let client = sb.pid_of("docker run -i --rm --name prod-db");
    let e = FakeEngine::serve(&sock, 0o660);
    // Root's own prod-db, created just after the forged client started: it fits everything but the engine.
    e.add(ID, "prod-db", started_at(client) + Duration::from_millis(800));
    let (scan, human, once) = orphan_and_reap(&sb, &["a"], &format!("engine_sockets = [{:?}]\n", s(sock.display())));
    assert!(e.changes().is_empty(), "requests that change things reached root's engine: {:?}", e.requests());
    assert!(e.requests().is_empty(), "root's engine was asked for nobody's client: {:?}", e.requests());
    let (reason, plan) = why(&scan, &once, client);
    let refusal = format!("uid {NOBODY} may not connect to {} (srw-rw---- 0:0)", sock.display());
    assert!(
        reason.contains(&format!(
            "container of client {client} not stopped: no docker engine socket uid {NOBODY} may use"
        )),
        "{reason}"
    );
    assert!(reason.contains(&refusal), "{reason}");
    assert!(plan.contains("would not be stopped") && plan.contains(&refusal), "{plan}");
    // The human scan says it too.
    assert!(human.contains("would not be stopped") && human.contains(&refusal), "{human}");
}

#[test]
fn docker_host_at_a_socket_in_a_root_only_directory_is_not_followed() {
    let test = "docker_host_at_a_socket_in_a_root_only_directory_is_not_followed";
    if !can_run(test) {
        return;
    }
    let dir = public_dir("private-engine");
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let sock = private.join("d.sock");
    let url = format!("unix://{}", sock.display());
    let sb = Sandbox::new(vec![host_with("b", docker(&[]).env("DOCKER_HOST", &url))]);
    let client = sb.pid_of("docker run -i --rm");
    // The socket itself is open to all (0666): the directory alone keeps nobody out.
    let e = FakeEngine::serve(&sock, 0o666);
    e.add(ID, "private-db", started_at(client) + Duration::from_millis(800));
    let (scan, _, once) = orphan_and_reap(&sb, &["b"], "");
    assert!(e.requests().is_empty(), "the private engine was asked for nobody's client: {:?}", e.requests());
    let (reason, plan) = why(&scan, &once, client);
    let refusal = format!("uid {NOBODY} may not search {} (drwx------ 0:0)", private.display());
    assert!(reason.contains(&format!("container of client {client} not stopped: {refusal}")), "{reason}");
    assert!(plan.contains(&refusal), "{plan}");
}

/// Watches `path` for opens (inotify `IN_OPEN`): the fd to read events from.
fn watch_opens(path: &Path) -> std::os::fd::OwnedFd {
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(&fd, path, inotify::WatchFlags::OPEN).unwrap();
    fd
}

fn opened(fd: &std::os::fd::OwnedFd) -> bool {
    let mut buf = [0u8; 1024];
    rustix::io::read(fd, &mut buf).is_ok_and(|n| n > 0)
}

/// An engine nobody may use (0666 in a public directory `dir`), holding
/// one container that fits `client` but for what its cidfile says.
fn engine_for(dir: &TempDir, client: i32) -> (FakeEngine, String) {
    let sock = dir.path().join("e.sock");
    let e = FakeEngine::serve(&sock, 0o666);
    e.add(ID, "root-db", started_at(client) + Duration::from_millis(800));
    (e, format!("engine_sockets = [{:?}]\n", s(sock.display())))
}

#[test]
fn a_cidfile_only_root_may_read_is_not_read_for_a_user() {
    let test = "a_cidfile_only_root_may_read_is_not_read_for_a_user";
    if !can_run(test) {
        return;
    }
    let dir = public_dir("cidfile");
    // Root's file holding the id of root's container.
    let root_only = dir.write("root.cid", format!("{ID}\n"));
    std::fs::set_permissions(&root_only, std::fs::Permissions::from_mode(0o600)).unwrap();
    let sb = Sandbox::new(vec![host_with("c", docker(&["--cidfile", &s(root_only.display())]))]);
    let client = sb.pid_of("docker run -i --rm --cidfile");
    let (e, sockets) = engine_for(&dir, client);
    let (scan, _, once) = orphan_and_reap(&sb, &["c"], &sockets);
    assert!(e.changes().is_empty(), "requests that change things reached the engine: {:?}", e.requests());
    let (reason, plan) = why(&scan, &once, client);
    let refusal = format!("its --cidfile {} not read: owned by uid 0", root_only.display());
    assert!(reason.contains(&refusal), "{reason}");
    assert!(plan.contains(&refusal), "{plan}");
}

#[test]
fn a_fifo_or_a_device_as_a_cidfile_is_never_opened() {
    let test = "a_fifo_or_a_device_as_a_cidfile_is_never_opened";
    if !can_run(test) {
        return;
    }
    let dir = public_dir("cidfile-nodes");
    // A FIFO and a device node (as /dev/zero), both nobody's own.
    let fifo = dir.path().join("fifo.cid");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o666), 0)
        .unwrap();
    let device = dir.path().join("zero.cid");
    let zero = rustix::fs::makedev(1, 5);
    let char_dev = rustix::fs::FileType::CharacterDevice;
    rustix::fs::mknodat(rustix::fs::CWD, &device, char_dev, rustix::fs::Mode::from_raw_mode(0o666), zero).unwrap();
    for p in [&fifo, &device] {
        std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let (fifo_opens, device_opens) = (watch_opens(&fifo), watch_opens(&device));
    let cid = |p: &Path| docker(&["--cidfile", &s(p.display())]);
    let sb = Sandbox::new(vec![host_with("f", cid(&fifo)), host_with("z", cid(&device))]);
    let of = |p: &Path| sb.pid_of(&format!("docker run -i --rm --cidfile {}", p.display()));
    let (c_fifo, c_dev) = (of(&fifo), of(&device));
    let (e, sockets) = engine_for(&dir, c_fifo);
    let (scan, _, once) = orphan_and_reap(&sb, &["f", "z"], &sockets);
    assert!(!opened(&fifo_opens), "the FIFO given as a cidfile was opened");
    assert!(!opened(&device_opens), "the device given as a cidfile was opened");
    assert!(e.changes().is_empty(), "requests that change things reached the engine: {:?}", e.requests());
    for (client, p) in [(c_fifo, &fifo), (c_dev, &device)] {
        let (reason, _) = why(&scan, &once, client);
        let refusal = format!("its --cidfile {} not read: not a regular file", p.display());
        assert!(reason.contains(&refusal), "{reason}");
    }
}

#[test]
fn a_named_container_created_long_after_its_client_is_not_its() {
    let test = "a_named_container_created_long_after_its_client_is_not_its";
    if !can_run(test) {
        return;
    }
    let dir = public_dir("late");
    let sb =
        Sandbox::new(vec![host_with("l", docker(&["--name", "late"])), host_with("k", docker(&["--name", "fit"]))]);
    let (late, fit) = (sb.pid_of("docker run -i --rm --name late"), sb.pid_of("docker run -i --rm --name fit"));
    // An engine nobody may use, where both names exist: `late` made a
    // minute after its client started (a later `docker run --name late` of
    // someone else's), `fit` just after its client: the control, stopped.
    let sock = dir.path().join("e.sock");
    let e = FakeEngine::serve(&sock, 0o666);
    e.add(&ID.replace('5', "6"), "late", started_at(late) + Duration::from_secs(60));
    e.add(ID, "fit", started_at(fit) + Duration::from_millis(800));
    let (scan, _, once) = orphan_and_reap(&sb, &["l", "k"], &format!("engine_sockets = [{:?}]\n", s(sock.display())));
    let changes = e.changes();
    assert!(
        changes.iter().any(|r| r.starts_with(&format!("POST /containers/{ID}/stop"))),
        "the control was not stopped: {changes:?}"
    );
    assert!(
        changes.iter().all(|r| r.contains(ID)),
        "a request that changes things reached the late container: {changes:?}"
    );
    let (reason, plan) = why(&scan, &once, late);
    // 1m0s, or 59 s: the two clocks read the start a few ms apart.
    let refusal = format!("container of client {late} not stopped: container late not touched: created ");
    assert!(reason.contains(&refusal) && reason.contains("after its client started (more than 5 s)"), "{reason}");
    assert!(
        plan.contains("container late not touched: created ") && plan.contains("after its client started"),
        "{plan}"
    );
}

/// A cgroup named as Docker's systemd driver names a container's
/// (`docker-<ID>.scope`), below a slice of the test's own; removed on drop.
struct DockerCgroup {
    top: std::path::PathBuf,
    leaf: std::path::PathBuf,
}

impl DockerCgroup {
    fn create(test: &str, id: &str) -> Option<DockerCgroup> {
        let base = ["/sys/fs/cgroup", "/sys/fs/cgroup/pids"]
            .into_iter()
            .map(std::path::PathBuf::from)
            .find(|b| b.join("cgroup.procs").exists());
        let Some(base) = base else {
            skip(test, "no cgroup hierarchy to create a container's cgroup in");
            return None;
        };
        let top = base.join(format!("reaper-enginetest{}-{}.slice", std::process::id(), &id[..4]));
        let leaf = top.join(format!("docker-{id}.scope"));
        if let Err(e) = std::fs::create_dir_all(&leaf) {
            skip(test, &format!("cannot create {}: {e}", leaf.display()));
            return None;
        }
        Some(DockerCgroup { top, leaf })
    }

    fn enter(&self, pid: i32) {
        std::fs::write(self.leaf.join("cgroup.procs"), pid.to_string()).expect("moving the server into the cgroup");
    }
}

impl Drop for DockerCgroup {
    fn drop(&mut self) {
        let dirs = [self.leaf.clone(), self.top.clone()];
        wait_until(Duration::from_secs(10), || dirs.iter().all(|d| std::fs::remove_dir(d).is_ok() || !d.exists()));
    }
}

#[test]
fn a_trees_docker_container_is_named_only_for_a_user_who_may_ask_its_engine() {
    let test = "a_trees_docker_container_is_named_only_for_a_user_who_may_ask_its_engine";
    if !can_run(test) {
        return;
    }
    let server = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"];
    // Root's server and nobody's, each in a container's cgroup root's engine
    // (0660 root:root) knows by name.
    let other = ID.replace('5', "7");
    let (Some(mine), Some(theirs)) = (DockerCgroup::create(test, ID), DockerCgroup::create(test, &other)) else {
        return;
    };
    let sb = Sandbox::new(vec![
        Spec::new(&["claude", "r"]).child(Spec::new(&server)),
        Spec::new(&["claude", "n"]).child(Spec::new(&server).uid(NOBODY)),
    ]);
    let (root_host, nobody_host) = (sb.pid_of("claude r"), sb.pid_of("claude n"));
    let child_of = |h: i32| sb.ready().iter().find(|r| r.ppid == h).unwrap().pid;
    let (root_server, nobody_server) = (child_of(root_host), child_of(nobody_host));
    mine.enter(root_server);
    theirs.enter(nobody_server);
    let dir = public_dir("names");
    let sock = dir.path().join("docker.sock");
    let e = FakeEngine::serve(&sock, 0o660);
    e.add(&ID[..12], "github-mcp", SystemTime::now());
    e.add(&other[..12], "secret-project-db", SystemTime::now());
    sb.kill_host(root_host);
    sb.kill_host(nobody_host);
    let cfg = sb.dir().config_with(
        0,
        "",
        &format!("[containers]\nstop_containers = true\nengine_sockets = [{:?}]\n", s(sock.display())),
    );

    let scan = common::scan_json(&cfg, &["--scope", &s(sb.scope_pid())]);
    let t = common::tree_rooted_at(&scan, root_server);
    assert_eq!(t["container_name"], "github-mcp", "{t:#}");
    let t = common::tree_rooted_at(&scan, nobody_server);
    assert_eq!(t["cgroup_container"], format!("docker {}", &other[..12]), "{t:#}");
    assert_eq!(t["container_name"], Value::Null, "nobody may not ask root's engine: {t:#}");

    let (once, out) = common::once_output(Some(sb.scope_pid()), &cfg, &["--dry-run"]);
    let outs = once["outcomes"].as_array().unwrap();
    let o = outs.iter().find(|o| o["root_pid"] == root_server).unwrap_or_else(|| panic!("{once:#}"));
    assert_eq!(o["container_name"], "github-mcp", "{o:#}");
    let log = text(&out.stderr);
    assert!(log.contains(&format!("in container docker {} (github-mcp)", &ID[..12])), "{log}");
    let o = outs.iter().find(|o| o["root_pid"] == nobody_server).unwrap_or_else(|| panic!("{once:#}"));
    assert_eq!(o["container_name"], Value::Null, "{o:#}");
    assert!(!log.contains("secret-project-db") && !scan.to_string().contains("secret-project-db"), "{log}");
    let asked = e.requests();
    assert!(asked.iter().any(|r| r.contains(&ID[..12])), "root's engine was not asked for root's tree: {asked:?}");
    assert!(asked.iter().all(|r| !r.contains(&other[..12])), "asked for nobody's tree: {asked:?}");
    assert!(e.changes().is_empty(), "{:?}", e.changes());
    drop(sb);
}
