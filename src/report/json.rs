//! The stable JSON of `reaperctl scan --json` (documented in docs/json.md), and
//! the small facts about a tree (memory, role rule) other views share.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::Role;
use crate::policy::Assessment;
use crate::policy::{Judgement, Verdict};
use crate::scan::{Details, FdKind, Holder, Process, Snapshot, StdinEnd};

#[derive(Serialize)]
pub struct ScanReport {
    pub trees: Vec<Tree>,
    pub summary: Summary,
    /// What the hosts' own MCP configs name (`reaperctl hosts --json`), where
    /// the caller adds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<crate::hostcfg::Report>,
    /// Server commands running more than once under one live host.
    pub duplicates: Vec<super::status::DuplicateServers>,
}

#[derive(Serialize)]
pub struct Tree {
    pub verdict: Verdict,
    pub reap: bool,
    pub reason: String,
    /// The root's pid (the same as `root_pid`).
    pub root: i32,
    /// The root's identity, under the names every tree and outcome shares.
    pub root_pid: i32,
    pub root_start_time: u64,
    pub host: Option<ProcRef>,
    pub owner: Option<ProcRef>,
    pub servers: Vec<i32>,
    pub members: Vec<Member>,
    /// Processes in the tree (the length of `members`).
    pub member_count: usize,
    /// RSS + swap of the live members.
    pub memory_bytes: u64,
    pub first_seen_unix: Option<u64>,
    pub grace_left_secs: Option<f64>,
    /// For a tree to reap: the containers of its `docker|podman run`
    /// clients that would be stopped, or why not (filled by `reaperctl scan`).
    pub containers: Vec<ScanContainer>,
    /// Kept, but a stricter rule would have taken it on circumstantial
    /// evidence (a dead terminal of a windowed host, a pipeline's closed
    /// stdin under an IDE): what that evidence is.
    pub suspect: Option<String>,
    /// The Kubernetes pod (its UID) and the container (engine and short
    /// id) the members' cgroups name, where their details were read.
    pub pod_uid: Option<String>,
    pub cgroup_container: Option<String>,
    /// The pod's namespace and name and the container's name, where the
    /// container runtime's state on the node names them.
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    pub container_name: Option<String>,
}

/// One run client's container as `reaperctl scan` sees it.
#[derive(Serialize)]
pub struct ScanContainer {
    pub client_pid: i32,
    pub id: Option<String>,
    pub name: Option<String>,
    pub image: String,
    /// `would stop container NAME (image)`, or why it would not be stopped.
    pub plan: String,
}

impl ScanContainer {
    pub fn new(p: &crate::reap::ContainerPlan) -> ScanContainer {
        let (id, name, image) = match &p.found {
            Ok(c) => (Some(c.id.clone()), Some(c.name.clone()), c.image.clone()),
            Err(_) => (None, None, p.image.clone()),
        };
        ScanContainer { client_pid: p.client.get(), id, name, image, plan: crate::cycle::describe_container(p) }
    }
}

#[derive(Serialize)]
pub struct ProcRef {
    pub pid: i32,
    pub cmdline: String,
}

#[derive(Serialize)]
pub struct Member {
    pub pid: i32,
    pub start_time: u64,
    pub ppid: Option<i32>,
    pub pgid: Option<i32>,
    pub sid: Option<i32>,
    pub uid: Option<u32>,
    pub state: String,
    pub depth: usize,
    pub role: &'static str,
    pub age_secs: u64,
    pub cmdline: String,
    pub rss_bytes: u64,
    pub swap_bytes: u64,
    /// What it runs (see `program` in docs/json.md): the name role patterns see.
    pub program: String,
    /// How the program was reached: exec, script, inline, package, image, runner, shell.
    pub via: &'static str,
    /// Why it has its role: the pattern, `built-in …`, or `configured in
    /// FILE (KEY)`; `None` for other.
    pub role_rule: Option<String>,
    /// The host config that names it, when that made it a server.
    pub configured: Option<ConfiguredIn>,
    /// What its own program declares, when that made it a server: `kind`
    /// (`imports`: its entry imports an MCP SDK's server half; `declares`:
    /// its project depends on the SDK and it is the project's entry),
    /// `found` (`mcp.server.fastmcp`) and `file`.
    pub sdk: Option<crate::hostcfg::sdk::Evidence>,
    /// The facts the verdict rests on.
    pub evidence: Evidence,
}

/// Where a server was configured, and the host it was seen below.
#[derive(Serialize)]
pub struct ConfiguredIn {
    pub file: String,
    pub key: String,
    pub host: Option<String>,
    pub host_pid: Option<i32>,
    pub session: Option<String>,
}

fn configured_in(a: &Assessment, m: usize) -> Option<ConfiguredIn> {
    let o = a.forest.origins.get(&m)?;
    let below = o.seen_below.as_ref();
    Some(ConfiguredIn {
        file: o.file.clone(),
        key: o.key.clone(),
        host: below.map(|b| b.0.clone()),
        host_pid: below.map(|b| b.1),
        session: below.and_then(|b| b.2.clone()),
    })
}

/// Stdio and service-manager facts of one member (read for the processes a
/// decision is about; `unreadable` where they could not be read).
#[derive(Serialize)]
pub struct Evidence {
    pub fd0: &'static str,
    pub fd1: &'static str,
    /// The innermost systemd `.service` or `.scope` of its cgroup.
    pub unit: Option<String>,
    /// Whether it is that unit's main process (its oldest).
    pub unit_main: Option<bool>,
    /// Whether anyone can still write to its stdin, where that was looked at.
    pub stdin: Option<String>,
    /// The fds its stdio transport runs over (`input`, `output`): 0 and 1,
    /// or the pipes the Python SDK 2.x keeps above fd 2; `None`: no pipe or
    /// socket carries one (or its fds are unreadable).
    pub transport: Option<crate::scan::Transport>,
}

/// The program of a process as shown: masked like its command line.
pub fn program_name(p: &Process) -> String {
    crate::redact::redact(p.program.name(&p.cmdline)).into_owned()
}

fn evidence(p: &Process) -> Evidence {
    let d = p.details.as_deref();
    let kind = |fd| d.map_or(FdKind::Unknown, |d| d.fd_kind(fd)).as_str();
    let unit = d.and_then(|d| d.unit.as_ref());
    Evidence {
        fd0: kind(0),
        fd1: kind(1),
        unit: unit.map(|u| u.name.clone()),
        unit_main: unit.and_then(|u| u.main),
        stdin: d.and_then(|d| d.stdin.as_ref()).map(stdin_words),
        transport: d.and_then(Details::transport_fds),
    }
}

fn stdin_words(end: &StdinEnd) -> String {
    match end {
        StdinEnd::Open(Holder::NotAsked) => "open".into(),
        StdinEnd::Open(Holder::Expected) => "open, held by its owner".into(),
        StdinEnd::Open(Holder::Other(_)) => "open, held by another process".into(),
        StdinEnd::Open(Holder::Unknown) => "open (poll of a duplicate of its fd 0; holder not known)".into(),
        StdinEnd::Gone(why) => format!("gone: {why}"),
        StdinEnd::Unknown(why) => format!("unknown: {why}"),
    }
}

/// Why a process has its role, in words.
pub fn role_rule(a: &Assessment, m: usize) -> Option<String> {
    let r = a.forest.roles[m];
    let p = &a.snapshot.procs[m];
    if let Some(o) = a.forest.origins.get(&m) {
        return Some(o.describe());
    }
    if let Some(e) = a.forest.sdk.get(&m) {
        return Some(e.describe());
    }
    match (r.role, r.pattern) {
        (Role::Other, _) => None,
        (role, Some(i)) => Some(format!("{} pattern '{}'", role.as_str(), a.matcher.pattern_text(role, i))),
        (Role::Server, None) => Some("built-in: docker|podman run -i (the container is the server)".into()),
        (Role::Launcher, None) => Some(format!("built-in: runs its program as a {}", p.program.via.as_str())),
        (role, None) => Some(format!("built-in {}", role.as_str())),
    }
}

#[derive(Serialize)]
pub struct Summary {
    pub processes_scanned: usize,
    pub trees: usize,
    pub by_verdict: BTreeMap<&'static str, usize>,
    pub reap_trees: usize,
    pub reap_processes: usize,
    /// RSS + swap of the trees that would be reaped now.
    pub reap_memory_bytes: u64,
    pub scan_ms: f64,
    pub scope: Option<i32>,
    /// Copies of a server command beyond the first under one live host.
    pub duplicate_servers: usize,
    /// Trees kept whose evidence a stricter rule would have acted on.
    pub suspect_trees: usize,
}

/// Live members' RSS + swap. Zombies hold no memory worth counting.
pub fn tree_memory(snap: &Snapshot, j: &Judgement) -> u64 {
    j.members
        .iter()
        .map(|&(m, _)| &snap.procs[m])
        .filter(|p| !p.state.is_zombie())
        .map(|p| p.rss_bytes() + p.swap_bytes())
        .sum()
}

fn proc_ref(p: &Process) -> ProcRef {
    ProcRef { pid: p.pid().get(), cmdline: p.display_cmd().into_owned() }
}

/// [`build`], with the container plans of trees to reap (by judgement index).
pub fn build_with(a: &Assessment, containers: Vec<(usize, Vec<crate::reap::ContainerPlan>)>) -> ScanReport {
    let mut r = build(a);
    for (i, plans) in containers {
        if let Some(t) = r.trees.get_mut(i) {
            t.containers = plans.iter().map(ScanContainer::new).collect();
        }
    }
    r
}

pub fn build(a: &Assessment) -> ScanReport {
    let snap = &a.snapshot;
    let trees: Vec<Tree> = a
        .judgements
        .iter()
        .map(|j| {
            let root = &snap.procs[j.root];
            let w = crate::names::workload(j.members.iter().map(|&(m, _)| &snap.procs[m]));
            Tree {
                verdict: j.verdict,
                reap: j.reap,
                reason: j.reason.clone(),
                root: root.pid().get(),
                root_pid: root.pid().get(),
                root_start_time: root.id.start_time.0,
                host: j.host.map(|h| proc_ref(&snap.procs[h])),
                owner: j.owner.map(|o| proc_ref(&snap.procs[o])),
                servers: j.servers.iter().map(|&s| snap.procs[s].pid().get()).collect(),
                members: j
                    .members
                    .iter()
                    .map(|&(m, depth)| {
                        let p = &snap.procs[m];
                        Member {
                            pid: p.pid().get(),
                            start_time: p.id.start_time.0,
                            ppid: p.ppid.map(super::super::ids::Pid::get),
                            pgid: p.pgid.map(super::super::ids::Pid::get),
                            sid: p.sid.map(super::super::ids::Pid::get),
                            uid: p.uid().map(|u| u.0),
                            state: p.state.as_char().to_string(),
                            depth,
                            role: a.forest.role(m).as_str(),
                            // Saturating float-to-int: ages are never negative.
                            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                            age_secs: snap.age_secs(p) as u64,
                            cmdline: p.display_cmd().into_owned(),
                            rss_bytes: p.rss_bytes(),
                            swap_bytes: p.swap_bytes(),
                            program: program_name(p),
                            via: p.program.via.as_str(),
                            role_rule: role_rule(a, m),
                            configured: configured_in(a, m),
                            sdk: a.forest.sdk.get(&m).map(|e| (**e).clone()),
                            evidence: evidence(p),
                        }
                    })
                    .collect(),
                member_count: j.members.len(),
                memory_bytes: tree_memory(snap, j),
                first_seen_unix: j
                    .first_seen
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_secs()),
                grace_left_secs: j.grace_left.map(|d| d.as_secs_f64()),
                containers: Vec::new(),
                suspect: j.suspect.clone(),
                pod_namespace: w.pod.as_ref().map(|p| p.namespace.clone()),
                pod_name: w.pod.as_ref().map(|p| p.name.clone()),
                container_name: w.pod.and_then(|p| p.container),
                pod_uid: w.pod_uid,
                cgroup_container: w.cgroup_container,
            }
        })
        .collect();
    let mut by_verdict: BTreeMap<&'static str, usize> = Verdict::ALL.iter().map(|v| (v.as_str(), 0)).collect();
    for t in &trees {
        *by_verdict.entry(t.verdict.as_str()).or_default() += 1;
    }
    let reaped = trees.iter().filter(|t| t.reap);
    let duplicates: Vec<_> = a.duplicates.iter().map(|d| super::status::DuplicateServers::new(snap, d)).collect();
    let summary = Summary {
        duplicate_servers: super::status::DuplicateServers::extra(&duplicates),
        suspect_trees: trees.iter().filter(|t| t.suspect.is_some()).count(),
        processes_scanned: snap.len(),
        trees: trees.len(),
        by_verdict,
        reap_trees: reaped.clone().count(),
        reap_processes: reaped.clone().map(|t| t.members.len()).sum(),
        reap_memory_bytes: reaped.map(|t| t.memory_bytes).sum(),
        scan_ms: a.scan_duration.as_secs_f64() * 1000.0,
        scope: a.scope.map(super::super::ids::Pid::get),
    };
    ScanReport { trees, summary, hosts: None, duplicates }
}
