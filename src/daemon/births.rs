//! New processes without the proc connector (pidfd mode): five times a
//! second, the last allocated pid of the namespace says whether anything was
//! created since the last look, and the pids in between are the only ones
//! read. A host or server among them is scanned soon, so its host is watched
//! (or its orphans found) long before the next periodic scan.

use std::time::Duration;

use crate::ids::Pid;
use crate::scan::ProcFs;

/// How often to look: a host born and dead within one interval is still
/// seen within this, plus the spacing of scans. Scans are few under churn
/// (the exits of hosts not watched yet are not heard): this bounds how late
/// such a host's orphans are found. A look costs a read of `loadavg`; the
/// new pids are read once whatever the period.
const EVERY: Duration = Duration::from_millis(200);
/// More new pids than this in one look (a fork storm, a wrapped counter):
/// scan instead of reading them one by one.
const MAX_READ: i32 = 2048;

/// What was created since the last look.
pub(crate) enum Born {
    Nothing,
    Pids(Vec<Pid>),
    /// Too many to read one by one.
    Many,
}

pub(crate) struct Births {
    last: Option<i32>,
    timer: tokio::time::Interval,
}

impl Births {
    pub(crate) fn new() -> Births {
        let mut timer = tokio::time::interval(EVERY);
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Births { last: None, timer }
    }

    /// Resolves at the next look; never while `active` is false (event mode
    /// hears of every exec from the kernel).
    pub(crate) async fn ready(&mut self, active: bool) {
        if active {
            self.timer.tick().await;
        } else {
            std::future::pending::<()>().await;
        }
    }

    /// The pids allocated since the last look.
    pub(crate) fn since(&mut self, procfs: &ProcFs) -> Born {
        let Some(now) = procfs.last_pid() else { return Born::Nothing };
        let Some(last) = self.last.replace(now) else { return Born::Nothing };
        if now == last {
            Born::Nothing
        } else if now < last || now - last > MAX_READ {
            Born::Many
        } else {
            Born::Pids(((last + 1)..=now).filter_map(Pid::new).collect())
        }
    }
}
