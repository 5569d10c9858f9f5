//! Which processes the configured commands (or the lineage) make servers,
//! and what is seen below a live host: the [`Registry`]'s matching half,
//! over what its reading half found.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::{Registry, cwd_of, proc_dir, uid_of};
use crate::config::{Config, Role, RoleMatch};
use crate::hostcfg::lineage::Seen;
use crate::hostcfg::matching::Running;
use crate::hostcfg::{Origin, markers};
use crate::ids::Identity;
use crate::scan::{ProcFs, Process, Snapshot};
use crate::tree::Forest;

impl Registry {
    /// Makes servers of the processes the configured commands (or the
    /// lineage) name; records what is seen below a live host.
    pub(super) fn classify(
        &mut self,
        procfs: &ProcFs,
        cfg: &Config,
        snap: &Snapshot,
        forest: &mut Forest,
        live_hosts: &[(usize, (u32, Option<PathBuf>))],
    ) {
        if self.configured.is_empty() && self.lineage.seen.is_empty() {
            self.markers.clear();
            return; // nothing to match: the common case costs nothing
        }
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (k, c) in self.configured.iter().enumerate() {
            by_name.entry(c.pattern.name.clone()).or_default().push(k);
        }
        let host_idx: HashMap<usize, u32> = live_hosts.iter().map(|&(i, (u, _))| (i, u)).collect();
        let mut found: Vec<(usize, Origin, Option<Seen>)> = Vec::new();
        for (i, p) in snap.procs.iter().enumerate() {
            if p.kernel_thread || p.cmdline.is_empty() || p.state.is_zombie() || !forest.in_scope(i) {
                continue;
            }
            if !matches!(forest.role(i), Role::Other | Role::Launcher) {
                continue;
            }
            let remembered = self.lineage.seen.get(&p.id).cloned();
            let candidates = by_name.get(p.program.name(&p.cmdline)).cloned().unwrap_or_default();
            if candidates.is_empty() && remembered.is_none() {
                continue;
            }
            if cfg.matcher.is_bystander(crate::tree::subject(p)) {
                continue;
            }
            // The nearest live host above, if any.
            let host = forest.ancestors(i).into_iter().find(|a| host_idx.contains_key(a));
            let host_uid = host.map(|h| host_idx[&h]);
            let hit = self.first_hit(procfs, snap, p, &candidates, host, host_uid);
            let (origin, seen) = match (hit, remembered) {
                (Some(k), remembered) => {
                    let c = &self.configured[k];
                    let origin = Origin { file: c.file.clone(), key: c.key.clone(), seen_below: None };
                    let seen = self.seen(procfs, snap, p, k, host).or(remembered);
                    (origin, seen)
                }
                (None, Some(s)) => (Origin { file: s.file.clone(), key: s.key.clone(), seen_below: None }, Some(s)),
                (None, None) => continue,
            };
            found.push((i, origin, seen));
        }
        for (i, mut origin, seen) in found {
            if let Some(s) = seen {
                origin.seen_below = Some((s.host.clone(), s.host_pid, s.session.clone()));
                if let Some(id) = s.id()
                    && self.lineage.seen.get(&id) != Some(&s)
                {
                    self.lineage.seen.insert(id, s);
                    self.lineage_changes += 1;
                }
            }
            let protect = forest.roles[i].protect;
            forest.roles[i] = RoleMatch { role: Role::Server, pattern: None, protect };
            forest.origins.insert(i, Arc::new(origin));
        }
        let present: HashSet<Identity> = snap.procs.iter().map(|p| p.id).collect();
        let before = self.lineage.seen.len();
        self.lineage.retain_live(|id| present.contains(&id));
        if self.lineage.seen.len() != before {
            self.lineage_changes += 1;
        }
        self.markers.retain(|id, _| present.contains(id));
    }

    /// The first configured command of `p`'s user that `p` runs. A weak
    /// one counts only below a live host of that user, for a child carrying
    /// the host's marker.
    fn first_hit(
        &mut self,
        procfs: &ProcFs,
        snap: &Snapshot,
        p: &Process,
        candidates: &[usize],
        host: Option<usize>,
        host_uid: Option<u32>,
    ) -> Option<usize> {
        if candidates.is_empty() {
            return None;
        }
        let uid = uid_of(procfs, p)?;
        let running = Running { cmdline: &p.cmdline, program: p.program };
        let mut cwd = None;
        for &k in candidates {
            let (cuid, pattern) = (self.configured[k].uid, self.configured[k].pattern.clone());
            if cuid != uid || pattern.weak && host_uid != Some(uid) {
                continue;
            }
            if !pattern.matches(&running, || cwd.get_or_insert_with(|| cwd_of(procfs, p)).clone()) {
                continue;
            }
            if !pattern.weak || self.marked(procfs, snap, p, host) {
                return Some(k);
            }
        }
        None
    }

    /// `p`, matching configured entry `k`, as seen below live host `host`:
    /// if it is that host's stdio child (fd 0 a pipe or socket, or not yet
    /// known; one on /dev/null or a terminal was started to run on its own).
    fn seen(&mut self, procfs: &ProcFs, snap: &Snapshot, p: &Process, k: usize, host: Option<usize>) -> Option<Seen> {
        let stdio = p.details.as_ref().is_none_or(|d| {
            let kind = d.fd_kind(0);
            kind.is_link() || kind == crate::scan::FdKind::Unknown
        });
        let hp = &snap.procs[host.filter(|_| stdio)?];
        let session = self.markers_of(procfs, p).and_then(|m| m.session);
        let c = &self.configured[k];
        Some(Seen {
            pid: p.pid().get(),
            start_time: p.id.start_time.0,
            uid: c.uid,
            host_pid: hp.pid().get(),
            host_start_time: hp.id.start_time.0,
            host: hp.program.name(&hp.cmdline).to_string(),
            session,
            file: c.file.clone(),
            key: c.key.clone(),
        })
    }

    fn markers_of(&mut self, procfs: &ProcFs, p: &Process) -> Option<markers::Markers> {
        self.markers.entry(p.id).or_insert_with(|| markers::read(&proc_dir(procfs, p))).clone()
    }

    /// Whether `p` carries the marker of the host family above it.
    fn marked(&mut self, procfs: &ProcFs, snap: &Snapshot, p: &Process, host: Option<usize>) -> bool {
        let Some(h) = host else { return false };
        let hp = &snap.procs[h];
        let family = markers::family(hp.program.name(&hp.cmdline));
        family == markers::Family::Unmarked || self.markers_of(procfs, p).is_some_and(|m| m.fit(family))
    }
}
