//! When each candidate tree was first seen, by its root's identity: the
//! memory that makes `grace_secs` hold across scans and daemon restarts.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::lineage::Lineage;
use crate::ids::Identity;

#[derive(Clone, Debug, Default)]
pub struct GraceBook {
    first_seen: HashMap<Identity, SystemTime>,
    /// Roots that get no grace, and why (their host ended its session on
    /// purpose: `reaperctl session-end`). Held by the daemon, never saved.
    waived: HashMap<Identity, String>,
    /// The parents the daemon saw change ([`Lineage`]). Held in memory,
    /// never saved, and no change to save.
    pub lineage: Lineage,
    /// A scan's book, which keeps no clock: its own first sight of a tree
    /// is no evidence about it, so a tree no daemon has seen is judged by
    /// its evidence, its grace said in words (issue 36).
    observer: bool,
}

/// Equal when what is saved, and the waivers, are: the lineage changes at
/// every scan and is never written.
impl PartialEq for GraceBook {
    fn eq(&self, other: &GraceBook) -> bool {
        self.first_seen == other.first_seen && self.waived == other.waived
    }
}

#[derive(Serialize, Deserialize)]
struct Entry {
    pid: i32,
    start_time: u64,
    first_seen_unix_ms: u64,
}

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    trees: Vec<Entry>,
}

impl GraceBook {
    /// The book of a look that reaps nothing and keeps no clock
    /// (`reaperctl scan`): what a daemon or its state file says, nothing
    /// more.
    #[must_use]
    pub fn observing(mut self) -> GraceBook {
        self.observer = true;
        self
    }

    pub fn observes(&self) -> bool {
        self.observer
    }

    pub fn get(&self, root: Identity) -> Option<SystemTime> {
        self.first_seen.get(&root).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.first_seen.is_empty()
    }

    /// Keeps exactly the given candidate roots: new ones start now, known
    /// ones keep their time, roots no longer candidates are forgotten.
    pub fn retain_candidates(&mut self, candidates: impl IntoIterator<Item = Identity>, now: SystemTime) {
        let mut next = HashMap::new();
        for id in candidates {
            let t = self.first_seen.get(&id).copied().unwrap_or(now);
            // A clock that stepped back must not make a tree older than it is.
            next.insert(id, t.min(now));
        }
        self.first_seen = next;
    }

    /// Lets the tree rooted at `root` be reaped without grace, saying why.
    pub fn waive(&mut self, root: Identity, why: String) {
        self.waived.insert(root, why);
    }

    pub fn waiver(&self, root: Identity) -> Option<&str> {
        self.waived.get(&root).map(String::as_str)
    }

    /// Keeps the waivers `keep` says yes to.
    pub fn retain_waived(&mut self, mut keep: impl FnMut(Identity) -> bool) {
        self.waived.retain(|&id, _| keep(id));
    }

    pub fn insert(&mut self, root: Identity, first_seen: SystemTime) {
        self.first_seen.insert(root, first_seen);
    }

    pub fn to_json(&self) -> String {
        let mut trees: Vec<Entry> = self
            .first_seen
            .iter()
            .map(|(id, t)| Entry {
                pid: id.pid.get(),
                start_time: id.start_time.0,
                first_seen_unix_ms: u64::try_from(t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis())
                    .unwrap_or(u64::MAX),
            })
            .collect();
        trees.sort_unstable_by_key(|e| (e.pid, e.start_time));
        serde_json::to_string_pretty(&File { version: 1, trees }).expect("plain data serializes")
    }

    pub fn from_json(text: &str) -> Result<GraceBook, String> {
        let f: File = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if f.version != 1 {
            return Err(format!("unsupported state version {}", f.version));
        }
        let mut book = GraceBook::default();
        for e in f.trees {
            let Some(pid) = crate::ids::Pid::new(e.pid) else { continue };
            let id = Identity { pid, start_time: crate::ids::StartTime(e.start_time) };
            book.insert(id, UNIX_EPOCH + Duration::from_millis(e.first_seen_unix_ms));
        }
        Ok(book)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Pid, StartTime};

    fn id(p: i32) -> Identity {
        Identity { pid: Pid::new(p).unwrap(), start_time: StartTime(p as u64 * 10) }
    }

    #[test]
    fn keeps_first_seen_and_forgets_gone_roots() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1000);
        let mut b = GraceBook::default();
        b.retain_candidates([id(1), id(2)], t0);
        b.retain_candidates([id(2), id(3)], t0 + Duration::from_secs(5));
        assert_eq!(b.get(id(1)), None);
        assert_eq!(b.get(id(2)), Some(t0));
        assert_eq!(b.get(id(3)), Some(t0 + Duration::from_secs(5)));
        let back = GraceBook::from_json(&b.to_json()).unwrap();
        assert_eq!(back, b);
        assert!(GraceBook::from_json("{").is_err());
    }
}
