//! What was seen while a host lived: per server identity, the host it was a
//! child of (and the host's session id, where its marker gives one), and the
//! configured entry it matched. After the host dies the tree is judged by
//! this, not guessed again from files that may have changed or projects no
//! live host points to any more. The daemon keeps it in memory; `--once`
//! in its state file (member `lineage`, absent in older files).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::ids::{Identity, Pid, StartTime};

/// One server as seen below its host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub pid: i32,
    pub start_time: u64,
    pub uid: u32,
    pub host_pid: i32,
    pub host_start_time: u64,
    /// The host's program (`claude`, `gemini`).
    pub host: String,
    /// `CLAUDE_CODE_SESSION_ID` of the server's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Where it was configured, as shown (`~/.claude.json`).
    pub file: String,
    pub key: String,
}

impl Seen {
    pub fn id(&self) -> Option<Identity> {
        Some(Identity { pid: Pid::new(self.pid)?, start_time: StartTime(self.start_time) })
    }
}

/// Every server seen below a live host, by identity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lineage {
    pub seen: HashMap<Identity, Seen>,
}

impl Lineage {
    /// Forgets what no longer runs.
    pub fn retain_live(&mut self, live: impl Fn(Identity) -> bool) {
        self.seen.retain(|id, _| live(*id));
    }

    pub fn to_json(&self) -> serde_json::Value {
        let mut v: Vec<&Seen> = self.seen.values().collect();
        v.sort_unstable_by_key(|s| (s.pid, s.start_time));
        serde_json::to_value(v).unwrap_or_default()
    }

    /// The entries of a state file's `lineage` member; bad ones are skipped.
    pub fn from_json(v: &serde_json::Value) -> Lineage {
        let seen = v
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| serde_json::from_value::<Seen>(e.clone()).ok())
            .filter_map(|s| Some((s.id()?, s)))
            .collect();
        Lineage { seen }
    }
}
