//! The plan's part for containers: for each tree to reap, the container of
//! each `docker|podman run` client in it, asked of the engine (read-only
//! calls). What is found travels in the order; `reap` ends it. A client whose
//! container cannot be tied to it costs one log line, and its tree's reason
//! says why; the tree is reaped as ever.

use std::time::{Duration, SystemTime};

use crate::access::Cred;
use crate::config::Config;
use crate::engine::{self, Client, RunArgs};
use crate::ids::Identity;
use crate::program::Via;
use crate::reap::{ContainerPlan, Order};
use crate::scan::{ProcFs, Snapshot};

/// Fills `containers` of every order with a run client among its members.
pub fn attach(orders: &mut [Order], snap: &Snapshot, procfs: &ProcFs, cfg: &Config) {
    if !cfg.containers.stop {
        return;
    }
    let mut asks: Vec<(usize, Client, Result<Vec<engine::Engine>, String>)> = Vec::new();
    for (i, o) in orders.iter().enumerate() {
        for id in &o.members {
            let Some(p) = snap.get(id.pid).filter(|p| p.id == *id && p.program.via == Via::Image) else { continue };
            let Some(run) = read_run(procfs, *id) else { continue };
            let age = Duration::from_secs_f64(snap.age_secs(p));
            let started = snap.taken_at.unwrap_or_else(SystemTime::now) - age;
            let cwd = std::fs::read_link(procfs.root().join(format!("{}/cwd", id.pid))).ok();
            let kind = run.engine.unwrap_or(engine::EngineKind::Docker);
            // Everything is judged as the client's user: the engine they could
            // use, the files they could read.
            let user = client_user(procfs, *id);
            let engines = user.as_ref().map_err(Clone::clone).and_then(|user| {
                named_engine(procfs, *id, &run, kind, user, cwd.as_deref())
                    .and_then(|named| engine::sockets(kind, named, &cfg.containers.engine_sockets, user))
            });
            let Ok(user) = user else {
                // Reported through `engines`' error; a user no one knows reads nothing.
                let nobody = Cred { uid: u32::MAX, gid: u32::MAX, groups: Vec::new() };
                asks.push((i, Client { pid: id.pid.get(), started, run, cwd, user: nobody }, engines));
                continue;
            };
            asks.push((i, Client { pid: id.pid.get(), started, run, cwd, user }, engines));
        }
    }
    if asks.is_empty() {
        return;
    }
    // All clients at once: a frozen engine costs its 2 s once, not per client.
    let jobs: Vec<_> = asks.iter().map(|(_, c, e)| (c.clone(), e.clone())).collect();
    let found = engine::block_on(async move {
        let mut set = tokio::task::JoinSet::new();
        for (k, (client, engines)) in jobs.into_iter().enumerate() {
            set.spawn(async move {
                match engines {
                    Ok(e) => (k, engine::find(&client, &e).await),
                    Err(why) => (k, Err(why)),
                }
            });
        }
        let mut out = vec![Err("the engine query did not finish".to_string()); set.len()];
        while let Some(r) = set.join_next().await {
            if let Ok((k, f)) = r {
                out[k] = f;
            }
        }
        out
    });
    for ((i, client, _), found) in asks.into_iter().zip(found) {
        let o = &mut orders[i];
        if let Err(why) = &found {
            tracing::warn!(
                reaper_action = "container",
                reaper_root_pid = o.root.pid.get(),
                "container of client {} ({}) will not be stopped: {why}",
                client.pid,
                client.run.image
            );
            o.reason = format!("{}; container of client {} not stopped: {why}", o.reason, client.pid);
        }
        let client_pid = o.members.iter().find(|m| m.pid.get() == client.pid).map(|m| m.pid);
        if let Some(pid) = client_pid {
            o.containers.push(ContainerPlan { client: pid, image: client.run.image, found });
        }
    }
}

/// Names the Docker/Podman container each order's cgroups name
/// (`docker 0123456789ab`), as its engine knows it; see [`container_names`].
pub fn name(orders: &mut [Order], procfs: &ProcFs, cfg: &Config) {
    let wanted: Vec<(Identity, String)> = orders
        .iter()
        .filter(|o| o.container_name.is_none())
        .filter_map(|o| Some((o.root, o.cgroup_container.clone()?)))
        .collect();
    let names = container_names(&wanted, procfs, cfg);
    let mut names = names.into_iter();
    for o in orders.iter_mut().filter(|o| o.container_name.is_none() && o.cgroup_container.is_some()) {
        o.container_name = names.next().flatten();
        if let (Some(c), Some(n)) = (&o.cgroup_container, &o.container_name) {
            o.reason = reason_with_name(&o.reason, c, n);
        }
    }
}

/// The policy's reason (`… in container docker 0123456789ab`) with the
/// engine's name after the container, where it names the container; the
/// policy judges from the scan alone and never asks an engine.
pub fn reason_with_name(reason: &str, container: &str, name: &str) -> String {
    let at = format!("container {container}");
    let named = format!("{at} ({})", crate::names::printable(name));
    if reason.contains(&named) { reason.to_string() } else { reason.replacen(&at, &named, 1) }
}

/// The names engines give the containers of `wanted` (a tree's root and
/// the container its cgroups name, `docker 0123456789ab`), in order; `None`
/// where unknown. Read-only (`GET /containers/ID/json`), only of an engine
/// the root's user could connect to (as [`attach`] asks for clients: a
/// root reaper reveals no name the tree's own user could not read), only
/// with `[containers] stop` on (the switch for talking to engines at all),
/// all asked at once (2 s per call), cached per user and container in the
/// [`ProcFs`] (a container keeps its name while it runs). Never fatal.
pub fn container_names(wanted: &[(Identity, String)], procfs: &ProcFs, cfg: &Config) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = vec![None; wanted.len()];
    if !cfg.containers.stop {
        return out;
    }
    let mut asks = Vec::new();
    for (k, (root, container)) in wanted.iter().enumerate() {
        let kind = match container.split_once(' ') {
            Some(("docker", _)) => engine::EngineKind::Docker,
            Some(("podman", _)) => engine::EngineKind::Podman,
            _ => continue,
        };
        let Some((_, id)) = container.split_once(' ') else { continue };
        let Ok(user) = client_user(procfs, *root) else { continue };
        if let Some(hit) = procfs.engine_name(user.uid, id) {
            out[k] = hit;
            continue;
        }
        let Ok(engines) = engine::sockets(kind, None, &cfg.containers.engine_sockets, &user) else {
            procfs.remember_engine_name(user.uid, id, None);
            continue;
        };
        asks.push((k, user.uid, id.to_string(), engines));
    }
    if asks.is_empty() {
        return out;
    }
    let jobs: Vec<_> = asks.iter().map(|(k, _, id, e)| (*k, id.clone(), e.clone())).collect();
    let found = engine::block_on(async move {
        let mut set = tokio::task::JoinSet::new();
        for (k, id, engines) in jobs {
            set.spawn(async move {
                for e in engines {
                    if let Ok(Some(i)) = e.inspect(&id).await {
                        return (k, Some(i.name().to_string()));
                    }
                }
                (k, None)
            });
        }
        let mut got = Vec::new();
        while let Some(r) = set.join_next().await {
            got.extend(r.ok());
        }
        got
    });
    for (k, name) in found {
        if let Some((_, uid, id, _)) = asks.iter().find(|a| a.0 == k) {
            procfs.remember_engine_name(*uid, id, name.clone());
        }
        out[k] = name;
    }
    out
}

/// For `reaperctl scan`: the containers of each tree it would reap, by
/// judgement index (the same finding as a cycle's plan; nothing is ended).
pub fn plans_for_scan(a: &super::Assessment, procfs: &ProcFs, cfg: &Config) -> Vec<(usize, Vec<ContainerPlan>)> {
    let snap = &a.snapshot;
    let (mut at, mut orders) = (Vec::new(), Vec::new());
    for (i, j) in a.judgements.iter().enumerate().filter(|(_, j)| j.reap) {
        let members: Vec<_> = j.members.iter().map(|&(m, _)| &snap.procs[m]).collect();
        at.push(i);
        orders.push(Order::new(j.verdict, String::new(), &snap.procs[j.root], &members));
    }
    attach(&mut orders, snap, procfs, cfg);
    at.into_iter().zip(orders).filter(|(_, o)| !o.containers.is_empty()).map(|(i, o)| (i, o.containers)).collect()
}

/// The socket of the engine the client names ([`engine::context`]: its
/// argv, its environment, the docker CLI's current context); `Err` when that
/// engine is not on a local socket or its context cannot be read.
fn named_engine(
    procfs: &ProcFs,
    id: Identity,
    run: &RunArgs,
    kind: engine::EngineKind,
    user: &Cred,
    cwd: Option<&std::path::Path>,
) -> Result<Option<std::path::PathBuf>, String> {
    let dir = procfs.root().join(id.pid.to_string());
    let environ = engine::read_environ(&dir).unwrap_or_default();
    let view = engine::context::ClientView { run, kind, environ: &environ, cwd, user };
    let Some((address, from)) = engine::context::address(&view)? else { return Ok(None) };
    // The reason reads "container of client N not stopped: engine at tcp://… (DOCKER_HOST) is not a local socket".
    engine::local_socket(&address)
        .map(Some)
        .ok_or_else(|| format!("engine at {address} ({from}) is not a local socket"))
}

/// The client's user, from its `/proc/PID/status`, if the pid is still the
/// process judged; why not, for the reason.
fn client_user(procfs: &ProcFs, id: Identity) -> Result<Cred, String> {
    let cred = Cred::of_process(&procfs.root().join(id.pid.to_string()))
        .map_err(|e| format!("the client's user is not known: {e}"))?;
    let still = procfs.stat(id.pid).is_some_and(|st| st.start_time == id.start_time.0);
    if still { Ok(cred) } else { Err("the client exited while it was looked at".into()) }
}

/// The client's argv as the kernel holds it (NUL-separated), if the pid is
/// still the process judged.
fn read_run(procfs: &ProcFs, id: Identity) -> Option<RunArgs> {
    let raw = std::fs::read(procfs.root().join(format!("{}/cmdline", id.pid))).ok()?;
    let argv: Vec<String> =
        raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let still = procfs.stat(id.pid).is_some_and(|st| st.start_time == id.start_time.0);
    still.then(|| RunArgs::parse(&argv)).flatten()
}

/// The plan's words for scan and dry-run lines: `would stop container NAME (image)`.
pub fn describe(p: &ContainerPlan) -> String {
    match &p.found {
        Ok(c) => format!("would stop container {} ({})", c.name, c.image),
        Err(why) => format!("container of client {} ({}) would not be stopped: {why}", p.client, p.image),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::ids::{Pid, StartTime};

    const ID: &str = "0123456789ab";

    fn identity(procfs: &ProcFs, pid: u32) -> Identity {
        let pid = Pid::parse(&pid.to_string()).unwrap();
        Identity { pid, start_time: StartTime(procfs.stat(pid).unwrap().start_time) }
    }

    /// An engine naming container [`ID`] `github-mcp`, counting requests.
    fn engine(dir: &std::path::Path) -> (std::path::PathBuf, Arc<AtomicUsize>) {
        let asked = Arc::new(AtomicUsize::new(0));
        let count = asked.clone();
        let sock = crate::engine::fake::serve(dir, move |_, path| {
            count.fetch_add(1, Ordering::SeqCst);
            if path == format!("/containers/{ID}/json") {
                let body = r#"{"Id":"0123456789abcdef","Name":"/github-mcp","Created":"2026-01-01T00:00:00Z",
                    "Config":{"Image":"mcp/github","Cmd":["serve"],"OpenStdin":true},"State":{"Running":true,"Pid":0},
                    "HostConfig":{"AutoRemove":false}}"#;
                ("200 OK", body.to_string())
            } else {
                ("404 Not Found", "{}".to_string())
            }
        });
        (sock, asked)
    }

    fn config(sock: &std::path::Path) -> Config {
        let mut cfg = Config::embedded();
        cfg.containers.stop = true;
        cfg.containers.engine_sockets = vec![sock.to_path_buf()];
        cfg
    }

    #[test]
    fn a_docker_container_is_named_by_its_engine_once_per_user_and_container() {
        let dir = std::env::temp_dir().join(format!("reaper-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (sock, asked) = engine(&dir);
        let procfs = ProcFs::new("/proc");
        let me = identity(&procfs, std::process::id());
        let wanted = [
            (me, format!("docker {ID}")),
            (me, format!("containerd {ID}")), // a CRI container: no engine API to ask
            (me, "podman ffffffffffff".to_string()),
        ];
        let mut cfg = config(&sock);
        cfg.containers.stop = false;
        assert_eq!(container_names(&wanted, &procfs, &cfg), vec![None, None, None], "engines switched off");
        assert_eq!(asked.load(Ordering::SeqCst), 0);
        let cfg = config(&sock);
        let want = vec![Some("github-mcp".to_string()), None, None];
        assert_eq!(container_names(&wanted, &procfs, &cfg), want);
        let n = asked.load(Ordering::SeqCst);
        assert!(n >= 2, "{n} requests");
        assert_eq!(container_names(&wanted, &procfs, &cfg), want);
        assert_eq!(asked.load(Ordering::SeqCst), n, "asked again: not cached");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_reason_names_the_container_after_its_id() {
        let r = "orphan: adopted by init in container docker 0123456789ab";
        let named = reason_with_name(r, "docker 0123456789ab", "github-mcp");
        assert_eq!(named, "orphan: adopted by init in container docker 0123456789ab (github-mcp)");
        assert_eq!(reason_with_name(&named, "docker 0123456789ab", "github-mcp"), named);
        assert_eq!(reason_with_name("orphan", "docker 0123456789ab", "x"), "orphan");
        assert_eq!(reason_with_name(r, "docker 0123456789ab", "a\nb"), format!("{r} (a\\nb)"));
    }

    #[test]
    fn a_tree_whose_user_may_not_use_the_engine_gets_no_name_from_it() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: needs root (a tree of another uid)");
            return;
        }
        let dir = std::env::temp_dir().join(format!("reaper-names-denied-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let (sock, asked) = engine(&dir);
        let mut child = std::os::unix::process::CommandExt::uid(&mut std::process::Command::new("sleep"), 65534)
            .arg("60")
            .spawn()
            .unwrap();
        let procfs = ProcFs::new("/proc");
        let nobody = identity(&procfs, child.id());
        let me = identity(&procfs, std::process::id());
        let got =
            container_names(&[(nobody, format!("docker {ID}")), (me, format!("docker {ID}"))], &procfs, &config(&sock));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(got, vec![None, Some("github-mcp".to_string())], "uid 65534 may not enter {}", dir.display());
        assert_eq!(asked.load(Ordering::SeqCst), 1, "the engine was asked for uid 65534");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
