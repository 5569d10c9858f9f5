//! Beyond one machine: the metrics over HTTP (`[metrics] listen`) of a real
//! daemon, and the container image (`Containerfile`) run by a real engine.
//!
//! Safety: every daemon is `--scope`d to its test's sandbox and runs in
//! `--dry-run` unless it is inside the image test's own container, itself
//! scoped to the test's sandbox; signals only ever go to sandbox processes
//! and to daemons these tests started.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{Daemon, Launch, Sandbox, Spec, alive, text, wait_until};

const CLAUDE: &[&str] = &["claude", "--resume"];
const SERVER: &[&str] = &["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"];
const BYSTANDER: &[&str] = &["sleep", "600"];

/// One HTTP/1.1 request (`Connection: close`): status code, headers, body.
fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connecting to the metrics address");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: reaper\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("reading the answer");
    let raw = text(&raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no header end in {raw:?}"));
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("status line: {head}"));
    (code, head.to_string(), body.to_string())
}

/// The address the daemon's log says it serves metrics on.
fn served_on(d: &Daemon) -> SocketAddr {
    let mut addr = None;
    let found = wait_until(Duration::from_secs(20), || {
        addr = d.log_text().lines().find_map(|l| {
            let rest = l.split_once("metrics served on http://")?.1;
            rest.split_once("/metrics")?.0.parse().ok()
        });
        addr.is_some()
    });
    assert!(found, "no 'metrics served on' line:\n{}", d.log_text());
    addr.unwrap()
}

/// A sample's value in an exposition text, through a real parser.
fn sample(exposition: &str, name: &str, label: Option<(&str, &str)>) -> Option<f64> {
    let scrape =
        prometheus_parse::Scrape::parse(exposition.lines().map(|l| Ok(l.to_string()))).expect("valid exposition");
    scrape.samples.iter().find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v))).map(|s| {
        match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
            _ => f64::NAN,
        }
    })
}

#[test]
fn metrics_and_healthz_over_http_on_an_ephemeral_loopback_port() {
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(SERVER)),
        Spec::new(CLAUDE).child(Spec::new(SERVER)),
        Spec::new(BYSTANDER),
    ]);
    let hosts: Vec<i32> = sb.ready().iter().filter(|r| r.cmd == CLAUDE.join(" ")).map(|r| r.pid).collect();
    let servers: Vec<i32> = sb.ready().iter().filter(|r| r.cmd == SERVER.join(" ")).map(|r| r.pid).collect();
    let bystander = sb.pid_of("sleep");
    // Port 0: the kernel picks a free one, and the log says which.
    let cfg = sb.dir().config_with(0, "interval_secs = 1", "[metrics]\nlisten = \"127.0.0.1:0\"\n");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(&["--dry-run"]));
    let addr = served_on(&d);
    assert!(addr.ip().is_loopback(), "{addr}");

    let (code, head, body) = http(addr, "GET", "/healthz");
    assert_eq!(code, 200, "{head}\n{body}");
    assert!(body.starts_with("ok "), "{body}");

    sb.kill_host(hosts[0]);
    let mut last = String::new();
    let seen = wait_until(Duration::from_secs(30), || {
        let (code, _, body) = http(addr, "GET", "/metrics");
        last = body;
        code == 200
            && sample(&last, "mcp_reaper_trees", Some(("verdict", "orphan"))) == Some(1.0)
            && sample(&last, "mcp_reaper_trees", Some(("verdict", "live"))) == Some(1.0)
    });
    assert!(seen, "no orphan and live tree in /metrics:\n{last}\nlog:\n{}", d.log_text());
    let (_, head, body) = http(addr, "GET", "/metrics");
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
    assert!(sample(&body, "mcp_reaper_scans_total", None).is_some_and(|n| n >= 1.0), "{body}");
    // The same series as `reaperctl metrics` (values move between the two reads).
    let names = |t: &str| t.lines().filter(|l| l.starts_with("# TYPE")).map(str::to_string).collect::<Vec<_>>();
    let ctl = text(&d.ctl(&["metrics"]).stdout);
    assert_eq!(names(&body), names(&ctl), "HTTP and reaperctl metrics differ");

    assert_eq!(http(addr, "HEAD", "/healthz").0, 200);
    assert_eq!(http(addr, "GET", "/nothing").0, 404);
    assert_eq!(http(addr, "POST", "/metrics").0, 405);
    // One client (a uid on this machine) holds at most 4 connections, each
    // until its request head is 2 s late: its next ones are closed
    // unanswered, and once its silent ones are cut off it is answered again
    // (tests/metrics_listener.rs: another uid is answered meanwhile).
    let silent: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let mut ninth = TcpStream::connect(addr).unwrap();
    ninth.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = ninth.write_all(b"GET /healthz HTTP/1.1\r\nHost: reaper\r\n\r\n");
    let mut got = Vec::new();
    let _ = ninth.read_to_end(&mut got);
    assert!(got.is_empty(), "a 9th connection was served: {}", text(&got));
    for mut c in silent {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut sink = Vec::new();
        let _ = c.read_to_end(&mut sink); // the server's deadline closes it
    }
    assert_eq!(http(addr, "GET", "/healthz").0, 200);
    // A dry run: the orphan is counted, never signalled.
    assert!(d.count("would reap") >= 1, "{}", d.log_text());
    sb.assert_alive(&[servers[0], servers[1], hosts[1], bystander]);
    assert!(alive(servers[0]));
}

// ------------------------------------------------------------------ the image

/// A dockerd of the test's own (data, exec root and socket in a temp dir; no
/// iptables, no bridge), stopped by its pid on drop with every container it ran.
struct Engine {
    dockerd: std::process::Child,
    docker: std::path::PathBuf,
    sock: std::path::PathBuf,
    dir: common::TempDir,
}

impl Engine {
    /// `None` (the skip printed) when not root, without docker and dockerd,
    /// or when it does not come up.
    fn start(test: &str) -> Option<Engine> {
        if !common::is_root() {
            common::skip(test, "needs root (runs a dockerd of its own, and the reaper as root in it)");
            return None;
        }
        let (Some(dockerd), Some(docker)) = (common::find_tool("dockerd"), common::find_tool("docker")) else {
            common::skip(test, "docker is not installed (Debian: apt-get install docker.io)");
            return None;
        };
        let dir = common::TempDir::new("fleet-dockerd");
        let (dockerd, sock) = common::spawn_dockerd(&dockerd, &dir);
        let mut e = Engine { dockerd, docker, sock, dir };
        let up = wait_until(Duration::from_secs(60), || {
            matches!(e.dockerd.try_wait(), Ok(None)) && e.docker(&["version"]).status.success()
        });
        if !up {
            let log = std::fs::read_to_string(e.dir.path().join("engine.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(8).collect();
            common::skip(test, &format!("dockerd did not start: {}", tail.join(" | ")));
            return None;
        }
        Some(e)
    }

    fn docker(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(&self.docker)
            .arg("-H")
            .arg(format!("unix://{}", self.sock.display()))
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("running docker")
    }

    /// The image as the README builds it: `deploy/container/rootfs.sh`
    /// from the binaries under test (this build's, not a release build:
    /// the same code), then `docker build -f Containerfile`, offline.
    fn build_image(&self, tag: &str) {
        let bindir = std::path::Path::new(env!("CARGO_BIN_EXE_mcp-reaperd")).parent().unwrap();
        let root = self.dir.path().join("rootfs");
        let repo = env!("CARGO_MANIFEST_DIR");
        let st = std::process::Command::new("bash")
            .arg(format!("{repo}/deploy/container/rootfs.sh"))
            .arg(bindir)
            .arg(&root)
            .status()
            .expect("running rootfs.sh");
        assert!(st.success(), "deploy/container/rootfs.sh failed");
        let out =
            self.docker(&["build", "-q", "-f", &format!("{repo}/Containerfile"), "-t", tag, root.to_str().unwrap()]);
        assert!(out.status.success(), "docker build failed: {}{}", text(&out.stdout), text(&out.stderr));
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let all = self.docker(&["ps", "-aq"]);
        for id in text(&all.stdout).lines() {
            let _ = self.docker(&["rm", "-f", id]);
        }
        if let Some(p) = rustix::process::Pid::from_raw(self.dockerd.id().cast_signed()) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
        }
        if !wait_until(Duration::from_secs(30), || !matches!(self.dockerd.try_wait(), Ok(None))) {
            let _ = self.dockerd.kill();
        }
        let _ = self.dockerd.wait();
    }
}

/// The capabilities the `DaemonSet` adds (its `add: [...]` line), as
/// `docker run` options: the test grants exactly what the manifest does.
fn manifest_capabilities() -> Vec<String> {
    let ds = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kubernetes/daemonset.yaml")).unwrap();
    let line =
        ds.lines().find_map(|l| l.trim().strip_prefix("add: [")).expect("an `add: [...]` line in daemonset.yaml");
    let caps: Vec<String> =
        line.trim_end_matches(']').split(',').map(|c| c.trim().trim_matches('"').to_string()).collect();
    assert!(caps.iter().any(|c| c == "KILL"), "{caps:?}");
    caps.iter().flat_map(|c| ["--cap-add".to_string(), c.clone()]).collect()
}

/// `docker run` of the image as the `DaemonSet` runs it: the node's PID
/// namespace, a read-only root, every capability dropped but the manifest's,
/// the config mounted read-only, tmpfs for the socket and the state; the
/// host's network (the test reaches `/metrics` on its loopback); scoped to
/// `scope`. `opts` go before the image, `args` to the daemon.
fn reaper_run(opts: &[&str], cfg: &std::path::Path, scope: i32, args: &[&str]) -> Vec<String> {
    let mount = format!("{}:/etc/mcp-reaper/config.toml:ro", cfg.display());
    let mut run: Vec<String> = vec!["run".into()];
    run.extend(opts.iter().map(ToString::to_string));
    run.extend(["--pid=host", "--network=host", "--read-only", "--cap-drop", "ALL"].map(String::from));
    run.extend(["--security-opt", "no-new-privileges"].map(String::from));
    run.extend(manifest_capabilities());
    run.extend(["-v", &mount, "--tmpfs", "/run/mcp-reaper", "--tmpfs", "/var/lib/mcp-reaper"].map(String::from));
    run.extend(["mcp-reaper-under-test".to_string(), "--scope".to_string(), scope.to_string()]);
    run.extend(args.iter().map(ToString::to_string));
    run
}

#[test]
fn the_image_with_the_manifests_capabilities_reaps_an_orphan_keeps_the_rest_and_serves_metrics() {
    const TEST: &str = "the_image_with_the_manifests_capabilities_reaps_an_orphan_keeps_the_rest_and_serves_metrics";
    // Its stand-ins run as uid 65534, which cannot reach a clone in a 0700
    // directory (root's home).
    if !common::world_executable(common::fakeproc_path()) {
        let why = format!("{} is not reachable by uid 65534", common::fakeproc_path().display());
        return common::skip(TEST, &why);
    }
    let Some(engine) = Engine::start(TEST) else { return };
    engine.build_image("mcp-reaper-under-test");

    // Another user's trees: signalling them takes CAP_KILL, reading their
    // stdio CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH.
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).uid(65534).child(Spec::new(SERVER).uid(65534)),
        Spec::new(&["codex"]).uid(65534).child(Spec::new(SERVER).uid(65534)),
        Spec::new(BYSTANDER),
    ]);
    let (doomed_host, live_host, bystander) = (sb.pid_of("claude"), sb.pid_of("codex"), sb.pid_of("sleep"));
    let server_of = |host: i32| sb.ready().iter().find(|r| r.ppid == host).map(|r| r.pid).unwrap();
    let (orphan, live) = (server_of(doomed_host), server_of(live_host));
    let cfg = sb.dir().write(
        "config.toml",
        "[reaper]\nmode = \"enforce\"\ngrace_secs = 0\ninterval_secs = 1\nmin_uid = 0\nreap_other_pid_namespaces = true\n\
         [metrics]\nlisten = \"127.0.0.1:0\"\n[pressure]\nenabled = false\n[hosts]\nread_configs = false\n",
    );
    let run = reaper_run(&["-d", "--name", "reaper"], &cfg, sb.scope_pid(), &["--log-level", "debug"]);
    let out = engine.docker(&run.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "docker run failed: {}", text(&out.stderr));
    let logs = || {
        let o = engine.docker(&["logs", "reaper"]);
        text(&o.stdout) + &text(&o.stderr)
    };

    let mut addr = None;
    let found = wait_until(Duration::from_secs(60), || {
        addr = logs()
            .lines()
            .find_map(|l| l.split_once("metrics served on http://")?.1.split_once("/metrics")?.0.parse().ok());
        addr.is_some()
    });
    assert!(found, "the reaper in the image serves no metrics:\n{}", logs());
    let addr: SocketAddr = addr.unwrap();
    let mut last = String::new();
    let seen = wait_until(Duration::from_secs(60), || {
        last = http(addr, "GET", "/metrics").2;
        sample(&last, "mcp_reaper_trees", Some(("verdict", "live"))) == Some(2.0)
    });
    assert!(seen, "two live trees not seen:\n{last}\n{}", logs());

    sb.kill_host(doomed_host);
    let gone = wait_until(Duration::from_secs(60), || !alive(orphan));
    assert!(gone, "the orphan {orphan} survived 60 s:\n{}", logs());
    sb.assert_alive(&[live_host, live, bystander, sb.scope_pid()]);
    let reaped = wait_until(Duration::from_secs(30), || {
        last = http(addr, "GET", "/metrics").2;
        sample(&last, "mcp_reaper_reaped_trees_total", None) == Some(1.0)
    });
    assert!(reaped, "the reap is not counted in /metrics:\n{last}");
    let (code, _, body) = http(addr, "GET", "/healthz");
    assert_eq!(code, 200, "{body}");
    let log = logs();
    assert!(log.contains(&format!("reaped orphan tree root={orphan}")), "{log}");
    assert!(!log.contains("Operation not permitted"), "a signal or read was refused:\n{log}");

    in_another_pid_namespace(&engine);
}

/// The image (`--once`, scoped to an `unshare --pid` standing for another
/// container) reaps the orphan that namespace's PID 1 adopted, and keeps
/// that PID 1 and what it started itself (as tests/namespaces.rs, here
/// from inside the image with the manifest's capabilities).
fn in_another_pid_namespace(engine: &Engine) {
    const TEST: &str = "the_image_with_the_manifests_capabilities_reaps_an_orphan_keeps_the_rest_and_serves_metrics";
    let Some(unshare) = common::pid_namespace_tool(TEST, "a PID namespace to stand for another container") else {
        return;
    };
    let init = Spec::new(&["sleep", "infinity"])
        .subreaper()
        .child(Spec::new(CLAUDE).setsid().child(Spec::new(SERVER)))
        .child(Spec::new(&["node", "/home/u/src/app/node_modules/.bin/tsc", "--watch"]).stdio_null());
    let c = common::PidNamespace::start(&unshare, &init);
    let (pid1, host, server, watcher) =
        (c.pid_of("sleep infinity"), c.pid_of("claude"), c.pid_of("npx"), c.pid_of("node "));
    common::sigkill(host);
    assert!(
        wait_until(Duration::from_secs(10), || common::ppid_of(server) == Some(pid1)),
        "the host's server was not adopted by the namespace's PID 1"
    );
    let cfg = c.dir.config_with(0, "reap_other_pid_namespaces = true", "[hosts]\nread_configs = false\n");
    let out = engine.docker(
        &reaper_run(
            &["--rm"],
            &cfg,
            c.scope(),
            &["--once", "--json", "--state-file", "/var/lib/mcp-reaper/state.json"],
        )
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>(),
    );
    assert!(out.status.success(), "the image's --once failed: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}\n{}", text(&out.stdout), text(&out.stderr)));
    let outcomes = v["outcomes"].as_array().unwrap();
    assert_eq!(outcomes.len(), 1, "{v:#}");
    assert_eq!(outcomes[0]["root"]["pid"], server, "{v:#}");
    assert!(outcomes[0]["reason"].as_str().unwrap().contains("PID 1 of its PID namespace"), "{v:#}");
    assert!(wait_until(Duration::from_secs(10), || !alive(server)), "the namespace's orphan survived: {v:#}");
    for p in [pid1, watcher] {
        assert!(alive(p), "{p} must live: {v:#}");
    }
}

// ------------------------------------------------------------------ pods named

/// A cgroup shaped like the kubelet's (systemd driver): `kubepods-…/
/// kubepods-besteffort-pod<UID>.slice/cri-containerd-<ID>.scope`, in the
/// unified hierarchy or, on a v1 machine, the pids one; removed on drop
/// (the test's processes gone first).
struct PodCgroup {
    top: std::path::PathBuf,
    leaf: std::path::PathBuf,
}

const POD_UID: &str = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d";
const CONTAINER_ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

impl PodCgroup {
    fn create(test: &str) -> Option<PodCgroup> {
        if !common::is_root() {
            common::skip(test, "needs root (creates a cgroup)");
            return None;
        }
        let base = ["/sys/fs/cgroup", "/sys/fs/cgroup/pids"]
            .into_iter()
            .map(std::path::PathBuf::from)
            .find(|b| b.join("cgroup.procs").exists());
        let Some(base) = base else {
            common::skip(test, "no cgroup hierarchy to create a pod's cgroup in");
            return None;
        };
        let top = base.join(format!("kubepods-fleettest{}.slice", std::process::id()));
        let leaf = top
            .join(format!("kubepods-besteffort-pod{}.slice", POD_UID.replace('-', "_")))
            .join(format!("cri-containerd-{CONTAINER_ID}.scope"));
        if let Err(e) = std::fs::create_dir_all(&leaf) {
            common::skip(test, &format!("cannot create {}: {e}", leaf.display()));
            return None;
        }
        Some(PodCgroup { top, leaf })
    }

    fn enter(&self, pid: i32) {
        std::fs::write(self.leaf.join("cgroup.procs"), pid.to_string())
            .expect("moving the server into the pod's cgroup");
    }
}

impl Drop for PodCgroup {
    fn drop(&mut self) {
        let dirs: Vec<std::path::PathBuf> =
            self.leaf.ancestors().take_while(|d| d.starts_with(&self.top)).map(Into::into).collect();
        wait_until(Duration::from_secs(10), || dirs.iter().all(|d| std::fs::remove_dir(d).is_ok() || !d.exists()));
    }
}

#[test]
fn a_tree_in_a_kubernetes_pods_cgroup_names_its_pod_and_container() {
    const TEST: &str = "a_tree_in_a_kubernetes_pods_cgroup_names_its_pod_and_container";
    let Some(pod) = PodCgroup::create(TEST) else { return };
    let sb = Sandbox::new(vec![Spec::new(CLAUDE).child(Spec::new(SERVER)), Spec::new(BYSTANDER)]);
    let (host, server, bystander) = (sb.pid_of("claude"), sb.pid_of("npx"), sb.pid_of("sleep"));
    pod.enter(server);
    sb.kill_host(host);
    let cfg = sb.dir().config(0, "");
    let scope = sb.scope_pid().to_string();

    // No runtime state names the pod: its UID stands for it.
    let empty = common::TempDir::new("no-runtime");
    let no_runtime = empty.path().to_str().unwrap();
    let v = common::scan_json(&cfg, &["--scope", &scope, "--runtime-root", no_runtime]);
    let t = common::tree_rooted_at(&v, server);
    assert_eq!(t["pod_uid"], POD_UID, "{t:#}");
    assert_eq!(t["cgroup_container"], "containerd 0123456789ab", "{t:#}");
    assert_eq!(t["pod_namespace"], serde_json::Value::Null, "{t:#}");

    // containerd's bundle for the container names the pod and the container.
    let runtime = common::TempDir::new("runtime");
    let bundle = runtime.path().join("run/containerd/io.containerd.runtime.v2.task/k8s.io").join(CONTAINER_ID);
    std::fs::create_dir_all(&bundle).unwrap();
    let annotations = serde_json::json!({"ociVersion": "1.1.0", "process": {"env": ["TOKEN=secret"]}, "annotations": {
        "io.kubernetes.cri.container-type": "container",
        "io.kubernetes.cri.container-name": "agent",
        "io.kubernetes.cri.sandbox-name": "session-7f9c",
        "io.kubernetes.cri.sandbox-namespace": "agents",
        "io.kubernetes.cri.sandbox-uid": POD_UID}});
    std::fs::write(bundle.join("config.json"), annotations.to_string()).unwrap();
    let runtime_root = runtime.path().to_str().unwrap();
    let v = common::scan_json(&cfg, &["--scope", &scope, "--runtime-root", runtime_root]);
    let t = common::tree_rooted_at(&v, server);
    assert_eq!(
        (&t["pod_namespace"], &t["pod_name"], &t["container_name"]),
        (&"agents".into(), &"session-7f9c".into(), &"agent".into()),
        "{t:#}"
    );
    assert_eq!(t["pod_uid"], POD_UID, "{t:#}");
    assert!(!v.to_string().contains("secret"), "the bundle's environment shown: {v:#}");

    let (v, out) = common::once_output(Some(sb.scope_pid()), &cfg, &["--runtime-root", runtime_root, "--dry-run"]);
    let o = v["outcomes"].as_array().unwrap().iter().find(|o| o["root_pid"] == server).expect("the orphan to reap");
    assert_eq!(o["pod_uid"], POD_UID, "{o:#}");
    assert_eq!(o["cgroup_container"], "containerd 0123456789ab", "{o:#}");
    assert_eq!(
        (&o["pod_namespace"], &o["pod_name"], &o["container_name"]),
        (&"agents".into(), &"session-7f9c".into(), &"agent".into()),
        "{o:#}"
    );
    let log = text(&out.stderr);
    assert!(log.contains("in pod agents/session-7f9c, container containerd 0123456789ab (agent)"), "{log}");

    // The daemon reaps it and counts it by the pod's namespace (scoped, enforcing).
    let cfg = sb.dir().config_with(0, "interval_secs = 1", "");
    let d =
        Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(&["--runtime-root", runtime_root]));
    d.status_until(Duration::from_secs(30), "the reap counted by namespace", |st| {
        st["totals"]["reaped_by_namespace"]["agents"] == 1
    });
    let metrics = text(&d.ctl(&["metrics"]).stdout);
    assert_eq!(
        sample(&metrics, "mcp_reaper_reaped_trees_by_namespace_total", Some(("k8s_namespace", "agents"))),
        Some(1.0),
        "{metrics}"
    );
    assert!(d.log_text().contains("in pod agents/session-7f9c"), "{}", d.log_text());
    assert!(wait_until(Duration::from_secs(10), || !alive(server)), "the orphan survived");
    sb.assert_alive(&[bystander]);
    drop(sb);
}
