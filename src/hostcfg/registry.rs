//! The process-wide [`Registry`] behind a mutex: the cached config files,
//! homes, live hosts and markers, the configured servers of the last read,
//! and the lineage. One per process: reads are cached by file, and the
//! daemon's cycles run one at a time.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::files::{self, FileCache, Source};
use super::lineage::Lineage;
use super::matching;
use super::places::Places;
use super::{Configured, FileReport, LiveHost, RECENT, markers};
use crate::config::{Config, Role};
use crate::ids::Identity;
use crate::scan::{ProcFs, Process, Snapshot};
use crate::tree::Forest;

mod classify;

/// Everything read, kept across cycles (one per process: reads are cached
/// by file, and the daemon's cycles run one at a time).
#[derive(Default)]
pub struct Registry {
    files: FileCache,
    pub(super) homes: HashMap<u32, Option<PathBuf>>,
    /// Live hosts: uid and working directory, read once per identity.
    hosts: HashMap<Identity, (u32, Option<PathBuf>)>,
    /// Live hosts' environments (see [`places`]), read once per identity.
    host_places: HashMap<Identity, Option<Places>>,
    /// Live hosts' config files named on their command line (`cn --config F`).
    host_files: HashMap<Identity, Option<PathBuf>>,
    recent: HashMap<u32, Instant>,
    /// The environments and named files of hosts alive lately, by user.
    pub(super) recent_places: HashMap<(u32, Places), Instant>,
    recent_files: HashMap<(u32, PathBuf), Instant>,
    pub lineage: Lineage,
    /// Counts changes of `lineage`: the daemon saves its state file when it moved.
    pub(super) lineage_changes: u64,
    markers: HashMap<Identity, Option<markers::Markers>>,
    pub(super) configured: Vec<Configured>,
    pub(super) report: Vec<FileReport>,
    pub(super) live: Vec<LiveHost>,
    /// The users and projects last read, and when: a cycle applies the
    /// configs up to four times (once per round of details), files are
    /// looked at (one `stat` each) at most once per [`LOOK`].
    pub(super) last: Option<LastRead>,
    /// Program evidence read so far ([`super::sdk`]).
    sdk: super::sdk::SdkCache,
}

/// What the last read looked at: users, projects, host environments and
/// named files, and when.
pub(super) type LastRead = (Vec<u32>, Vec<Project>, Vec<(u32, Places)>, Vec<(u32, PathBuf)>, Instant);

/// A live host's working directory, with its uid.
type Project = (u32, PathBuf);

/// How often unchanged users and projects have their files looked at.
const LOOK: Duration = Duration::from_secs(1);

/// What one read found: the servers, the files, the paths to keep cached.
#[derive(Default)]
struct Found {
    configured: Vec<Configured>,
    report: Vec<FileReport>,
    keep: HashSet<PathBuf>,
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(Mutex::default);

/// The registry, locked (a panic while it was held leaves it usable).
pub(super) fn lock() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

fn proc_dir(procfs: &ProcFs, p: &Process) -> PathBuf {
    procfs.root().join(p.pid().get().to_string())
}

fn uid_of(procfs: &ProcFs, p: &Process) -> Option<u32> {
    p.uid().map(|u| u.0).or_else(|| std::fs::metadata(proc_dir(procfs, p)).ok().map(|m| m.uid()))
}

fn cwd_of(procfs: &ProcFs, p: &Process) -> Option<PathBuf> {
    let c = std::fs::read_link(proc_dir(procfs, p).join("cwd")).ok()?;
    (c.is_absolute() && !c.to_string_lossy().ends_with(" (deleted)")).then_some(c)
}

/// A user's home when no host's own environment says: the reaper's own
/// from `$HOME` (as for any program, and what lets tests point it at a
/// fixture), anyone else's from the passwd database.
fn home_of(uid: u32, self_uid: u32) -> Option<PathBuf> {
    if uid == self_uid
        && let Some(h) = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute())
    {
        return Some(h);
    }
    crate::userfile::passwd_home(uid)
}

/// Host environments (or named files) kept per user: a user running many
/// hosts with differing values costs at most this many sets of `stat`s a
/// look; the most recently seen are kept.
const PER_USER: usize = 16;

fn bound<K: Clone + Eq + std::hash::Hash + KeyUid>(m: &mut HashMap<K, Instant>) {
    let mut by_uid: HashMap<u32, Vec<(Instant, K)>> = HashMap::new();
    for (k, t) in m.iter() {
        by_uid.entry(k.uid()).or_default().push((*t, k.clone()));
    }
    for (_, mut v) in by_uid.into_iter().filter(|(_, v)| v.len() > PER_USER) {
        v.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        for (_, k) in v.into_iter().skip(PER_USER) {
            m.remove(&k);
        }
    }
}

/// The user a kept entry belongs to.
trait KeyUid {
    fn uid(&self) -> u32;
}

impl<T> KeyUid for (u32, T) {
    fn uid(&self) -> u32 {
        self.0
    }
}

/// A user's file as shown: `~/…` below the home, else its path.
fn shown(path: &Path, home: Option<&Path>) -> String {
    match home.and_then(|h| path.strip_prefix(h).ok()) {
        Some(rel) if !rel.as_os_str().is_empty() => format!("~/{}", rel.display()),
        _ => path.display().to_string(),
    }
}

/// The config file a live host's command line names: Continue's
/// `cn --config FILE` (a hub slug such as `org/assistant` is no file).
/// A relative path is the host's working directory's.
fn named_config(p: &Process, cwd: Option<&Path>) -> Option<PathBuf> {
    if !matches!(p.program.name(&p.cmdline), "cn" | "@continuedev/cli") {
        return None;
    }
    let mut words = p.program.args(&p.cmdline).split_whitespace();
    let mut value = None;
    while let Some(w) = words.next() {
        if w == "--config" {
            value = words.next();
        } else if let Some(v) = w.strip_prefix("--config=") {
            value = Some(v);
        }
    }
    let v = Path::new(value?);
    let ext = v.extension().and_then(|e| e.to_str());
    if !matches!(ext, Some("yaml" | "yml")) {
        return None;
    }
    let path = if v.is_absolute() { v.to_path_buf() } else { cwd?.join(v) };
    Some(matching::normalize(&path))
}

impl Registry {
    /// Servers by their own program's SDK, among this reaper's users.
    pub(super) fn apply_sdk(&mut self, procfs: &ProcFs, cfg: &Config, snap: &Snapshot, forest: &mut Forest) {
        let self_uid = snap.ctx.self_uid.map_or_else(|| rustix::process::getuid().as_raw(), |u| u.0);
        let eligible = |u: u32| if self_uid == 0 { u >= cfg.min_uid } else { u == self_uid };
        self.sdk.apply(procfs, cfg, snap, forest, &eligible);
    }

    pub(super) fn apply(&mut self, procfs: &ProcFs, cfg: &Config, snap: &Snapshot, forest: &mut Forest) {
        let self_uid = snap.ctx.self_uid.map_or_else(|| rustix::process::getuid().as_raw(), |u| u.0);
        let eligible = |u: u32| if self_uid == 0 { u >= cfg.min_uid } else { u == self_uid };
        let now = Instant::now();

        // Live hosts in scope, with their uid and project directory.
        let mut live_hosts = Vec::new();
        for (i, p) in snap.procs.iter().enumerate() {
            if forest.role(i) != Role::Host || !forest.in_scope(i) || p.state.is_zombie() {
                continue;
            }
            let known = if let Some(k) = self.hosts.get(&p.id) {
                k.clone()
            } else {
                let Some(uid) = uid_of(procfs, p) else { continue };
                let k = (uid, cwd_of(procfs, p));
                self.hosts.insert(p.id, k.clone());
                k
            };
            if eligible(known.0) {
                self.recent.insert(known.0, now);
                let home = self.homes.entry(known.0).or_insert_with(|| home_of(known.0, self_uid)).clone();
                let dir = proc_dir(procfs, p);
                let env = self.host_places.entry(p.id).or_insert_with(|| Places::of_process(&dir, home.as_deref()));
                if let Some(env) = env.clone() {
                    self.recent_places.insert((known.0, env), now);
                }
                let named = self.host_files.entry(p.id).or_insert_with(|| named_config(p, known.1.as_deref()));
                if let Some(f) = named.clone() {
                    self.recent_files.insert((known.0, f), now);
                }
                live_hosts.push((i, known));
            }
        }
        self.live = live_hosts
            .iter()
            .map(|(i, (uid, cwd))| {
                let p = &snap.procs[*i];
                LiveHost {
                    pid: p.pid().get(),
                    program: p.program.name(&p.cmdline).to_string(),
                    uid: *uid,
                    cwd: cwd.as_ref().map(|c| c.display().to_string()),
                }
            })
            .collect();
        let live: HashSet<Identity> = live_hosts.iter().map(|&(i, _)| snap.procs[i].id).collect();
        self.hosts.retain(|id, _| live.contains(id));
        self.host_places.retain(|id, _| live.contains(id));
        self.host_files.retain(|id, _| live.contains(id));
        self.recent.retain(|_, t| now.duration_since(*t) < RECENT);
        self.recent_places.retain(|_, t| now.duration_since(*t) < RECENT);
        self.recent_files.retain(|_, t| now.duration_since(*t) < RECENT);
        bound(&mut self.recent_places);
        bound(&mut self.recent_files);

        // Users with a host alive lately, or with servers seen below one
        // (a `--once` timer learns those from its state file).
        let mut uids: Vec<u32> = self.recent.keys().copied().collect();
        uids.extend(self.lineage.seen.values().map(|s| s.uid).filter(|&u| eligible(u)));
        if eligible(self_uid) {
            uids.push(self_uid);
        }
        uids.sort_unstable();
        uids.dedup();
        self.read(&uids, self_uid, &live_hosts);
        self.classify(procfs, cfg, snap, forest, &live_hosts);
    }

    /// Reads (or takes from the cache) every file of `uids` and of the
    /// live hosts' projects, into `configured` and `report`.
    pub(super) fn read(&mut self, uids: &[u32], self_uid: u32, live_hosts: &[(usize, (u32, Option<PathBuf>))]) {
        let mut projects: Vec<Project> = live_hosts.iter().filter_map(|(_, (u, c))| Some((*u, c.clone()?))).collect();
        projects.sort_unstable();
        projects.dedup();
        let mut envs: Vec<(u32, Places)> =
            self.recent_places.keys().filter(|(u, _)| uids.contains(u)).cloned().collect();
        envs.sort_unstable();
        let mut named: Vec<(u32, PathBuf)> =
            self.recent_files.keys().filter(|(u, _)| uids.contains(u)).cloned().collect();
        named.sort_unstable();
        let now = Instant::now();
        if let Some((u, p, e, n, at)) = &self.last
            && u == uids
            && *p == projects
            && *e == envs
            && *n == named
            && now.duration_since(*at) < LOOK
        {
            return;
        }
        self.last = Some((uids.to_vec(), projects.clone(), envs.clone(), named.clone(), now));
        let mut out = Found::default();
        for &uid in uids {
            let home = self.homes.entry(uid).or_insert_with(|| home_of(uid, self_uid)).clone();
            // The home alone first (its files shown as `~/…`), then where
            // each of the user's hosts' environments points.
            let mut all: Vec<Places> = home.iter().cloned().map(Places::of_home).collect();
            all.extend(envs.iter().filter(|(u, _)| *u == uid).map(|(_, p)| p.clone()));
            for env in &all {
                for s in files::USER {
                    let path = env.dir(s.base).join(s.rel);
                    if out.keep.contains(&path) {
                        continue;
                    }
                    let shown = shown(&path, home.as_deref());
                    self.one(uid, s, &path, &shown, None, &mut out);
                }
            }
            for (_, path) in named.iter().filter(|(u, _)| *u == uid) {
                if !out.keep.contains(path) {
                    let shown = shown(path, home.as_deref());
                    self.one(uid, &files::CONTINUE_ARG, path, &shown, None, &mut out);
                }
            }
        }
        for (uid, dir) in &projects {
            if !uids.contains(uid) {
                continue;
            }
            for s in files::PROJECT {
                let path = dir.join(s.rel);
                if out.keep.contains(&path) {
                    continue; // a host started in the home: read as the user's
                }
                let shown = path.display().to_string();
                self.one(*uid, s, &path, &shown, Some(dir), &mut out);
            }
        }
        self.files.retain(&out.keep);
        self.configured = out.configured;
        self.report = out.report;
    }

    /// One file of `uid` (shown as `shown`), of a project or of the home.
    fn one(&mut self, uid: u32, s: &Source, path: &Path, shown: &str, project: Option<&PathBuf>, out: &mut Found) {
        out.keep.insert(path.to_path_buf());
        let Some(read) = self.files.get(path, s.format, uid) else { return };
        let (servers, error) = match &read {
            Ok(d) => (Some(d.len()), None),
            Err(e) => (None, Some(e.clone())),
        };
        out.report.push(FileReport { uid, host: s.host, path: shown.to_string(), servers, error });
        let Ok(decls) = read else { return };
        for d in decls.iter() {
            // A relative `cwd` is the host's: the project's, or unknown.
            let cwd = match (&d.cwd, project) {
                (Some(c), _) if Path::new(c).is_absolute() => Some(PathBuf::from(c)),
                (Some(c), Some(p)) => Some(p.join(c)),
                (None, Some(p)) => Some(p.clone()),
                _ => None,
            };
            let Some(pattern) = matching::compile(&d.argv, cwd.as_deref()) else { continue };
            out.configured.push(Configured {
                uid,
                host: s.host,
                file: shown.to_string(),
                key: d.key.clone(),
                command: d.argv.iter().map(|a| crate::redact::redact(a).into_owned()).collect(),
                program: pattern.name.clone(),
                weak: pattern.weak,
                pattern,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_host_environments_are_bounded_keeping_the_latest() {
        let t0 = Instant::now();
        let mut m: HashMap<(u32, PathBuf), Instant> = HashMap::new();
        for n in 0..40u64 {
            m.insert((1000, PathBuf::from(format!("/h/{n}"))), t0 + Duration::from_millis(n));
        }
        m.insert((1001, PathBuf::from("/other")), t0);
        bound(&mut m);
        assert_eq!(m.keys().filter(|k| k.0 == 1000).count(), PER_USER);
        assert!(m.contains_key(&(1000, PathBuf::from("/h/39"))) && !m.contains_key(&(1000, PathBuf::from("/h/0"))));
        assert!(m.contains_key(&(1001, PathBuf::from("/other"))));
    }
}
