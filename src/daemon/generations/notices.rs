//! Telling the user (issue 35 item 2): when one host's copies of one server
//! reach `notify_copies`, or `notify_memory_mib` of memory, a log line and
//! (with `[notify] desktop`) a desktop notification, once per host, command
//! and threshold, with the command that shows them.

use std::collections::HashSet;

use crate::config::GenerationSettings;
use crate::ids::Identity;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Threshold {
    Copies,
    Memory,
}

/// One thing to tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// The desktop notification's title and the log line's start.
    pub summary: String,
    pub body: String,
}

#[derive(Debug, Default)]
pub struct Notices {
    told: HashSet<(Identity, String, Threshold)>,
}

impl Notices {
    /// What crossed a threshold in this group, not told before.
    pub fn check(
        &mut self,
        cfg: &GenerationSettings,
        host: Identity,
        sentence: &str,
        command: &str,
        copies: usize,
        memory: u64,
    ) -> Option<Notice> {
        let copies_over = cfg.notify_copies > 0 && copies as u64 >= cfg.notify_copies;
        let memory_over = cfg.notify_memory_mib > 0 && memory >= cfg.notify_memory_mib << 20;
        let mut new = false;
        for (over, t) in [(copies_over, Threshold::Copies), (memory_over, Threshold::Memory)] {
            if over {
                new |= self.told.insert((host, command.to_string(), t));
            }
        }
        new.then(|| Notice {
            summary: format!("MCP servers piling up: {sentence}"),
            body: format!("`reaperctl generations` shows each copy (host pid {}), idle or not.", host.pid),
        })
    }

    /// Forgets what was told of piles that are gone (their host exited, or
    /// fewer than two copies are left): the book holds no more than the
    /// piles there are, and a pile that builds up again is told again.
    pub fn retain_piles(&mut self, piles: &HashSet<(Identity, &str)>) {
        self.told.retain(|(h, c, _)| piles.contains(&(*h, c.as_str())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Pid, StartTime};

    fn cfg() -> GenerationSettings {
        GenerationSettings { notify_copies: 10, notify_memory_mib: 100, ..GenerationSettings::default() }
    }

    #[test]
    fn each_threshold_is_told_once_per_host_and_command() {
        let mut n = Notices::default();
        let h = Identity { pid: Pid::new(5).unwrap(), start_time: StartTime(9) };
        assert_eq!(n.check(&cfg(), h, "s", "x", 9, 0), None);
        let first = n.check(&cfg(), h, "host c holds 10 copies", "x", 10, 0).unwrap();
        assert!(first.summary.contains("10 copies") && first.body.contains("host pid 5"), "{first:?}");
        assert_eq!(n.check(&cfg(), h, "s", "x", 12, 0), None, "told");
        assert!(n.check(&cfg(), h, "s", "x", 12, 100 << 20).is_some(), "memory is another threshold");
        assert!(n.check(&cfg(), h, "s", "y", 12, 0).is_some(), "another command");
        let piles = HashSet::from([(h, "y")]);
        n.retain_piles(&piles);
        assert_eq!(n.check(&cfg(), h, "s", "y", 12, 0), None, "a pile still there stays told");
        assert!(n.check(&cfg(), h, "s", "x", 12, 0).is_some(), "a pile gone and built up again is told again");
        let off = GenerationSettings::default();
        assert_eq!(Notices::default().check(&off, h, "s", "x", 1000, u64::MAX), None, "0 is off");
    }
}
