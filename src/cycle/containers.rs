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
