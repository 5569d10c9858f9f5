//! Memory pressure for the daemon and `--once`: the PSI file, read once per
//! cycle (the figure the policy weighs), and in the daemon a PSI trigger that
//! wakes the loop when stalls rise, so young trees need not wait for the next
//! periodic scan while the machine is short of memory.
//!
//! The trigger (`some T 2000000` written to the file, then `POLLPRI`) is
//! armed only on procfs and cgroup2 files: a test's stand-in file is only
//! read. Its 2 s window is the one an unprivileged daemon may use (Linux ≥
//! 6.5; root may use any). Where a trigger is refused, the per-cycle read is
//! all there is. A file that cannot be read turns the feature off, said once.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::config::PressureSettings;
use crate::report::status::PressureStatus;
use crate::scan::Pressure;
use crate::scan::pressure;

/// The trigger's window, in µs: the shortest an unprivileged process may use.
const WINDOW_US: u64 = 2_000_000;

/// How pressure is being watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watch {
    /// A PSI trigger wakes the daemon; the file is read every cycle too.
    Trigger,
    /// The file is read every cycle.
    EachCycle,
    /// Disabled, or the file could not be read.
    Off,
}

pub struct PressureWatch {
    settings: PressureSettings,
    /// The file to read; `None` when off.
    file: Option<PathBuf>,
    trigger: Option<AsyncFd<OwnedFd>>,
    last: Option<(Pressure, u64)>,
    /// Why it is off (or why there is no trigger).
    note: Option<String>,
    triggers: u64,
}

impl PressureWatch {
    /// Watching as `settings` say; nothing is read or armed yet.
    pub fn new(settings: &PressureSettings) -> PressureWatch {
        let file = settings.file();
        let note = file.is_none().then(|| "disabled (pressure.enabled = false)".to_string());
        PressureWatch { settings: settings.clone(), file, trigger: None, last: None, note, triggers: 0 }
    }

    /// The daemon's watch: the file read once (a missing or unreadable one
    /// turns the feature off, said once), then the trigger armed.
    pub fn started(settings: &PressureSettings) -> PressureWatch {
        let mut w = PressureWatch::new(settings);
        if w.read_now().is_some() {
            w.arm();
        }
        w
    }

    /// Whether `settings` differ from the ones watched (a reload).
    pub fn differs(&self, settings: &PressureSettings) -> bool {
        &self.settings != settings
    }

    /// The file a cycle reads, when on.
    pub fn file(&self) -> Option<PathBuf> {
        self.file.clone()
    }

    /// Reads the file now and records the result: what `--once` does, once.
    pub fn read_now(&mut self) -> Option<Pressure> {
        let read = self.file.as_deref().map(pressure::read);
        self.record(read)
    }

    /// Records a cycle's read of [`Self::file`]; the reading, when there is
    /// one. A failed read turns the feature off with one log line: no
    /// pressure is ever assumed, so the grace then always holds.
    pub fn record(&mut self, read: Option<io::Result<Pressure>>) -> Option<Pressure> {
        match read? {
            Ok(p) => {
                self.last = Some((p, super::board::unix_now()));
                Some(p)
            }
            Err(e) => {
                if e.kind() == io::ErrorKind::NotFound {
                    self.off(&format!("{} does not exist (kernel without PSI, or psi=0)", self.path_text()), false);
                } else {
                    self.off(&format!("cannot read {}: {e}", self.path_text()), true);
                }
                None
            }
        }
    }

    /// Turns the feature off, said once: a warning when the file is there
    /// but unreadable (`trouble`), a note when the kernel has none.
    fn off(&mut self, why: &str, trouble: bool) {
        let line = format!("memory pressure: {why}; pressure monitoring is off, the grace is never cut short");
        if trouble {
            tracing::warn!(reaper_action = "error", "{line}");
        } else {
            tracing::info!("{line}");
        }
        self.note = Some(why.to_string());
        self.file = None;
        self.trigger = None;
        self.last = None;
    }

    fn path_text(&self) -> String {
        self.settings.file().map(|p| p.display().to_string()).unwrap_or_default()
    }

    /// Arms the PSI trigger where the file allows one (the daemon, at start
    /// and after a reload); says once why not.
    pub fn arm(&mut self) {
        self.trigger = None;
        let Some(path) = self.file.clone() else { return };
        let threshold_us = threshold_us(self.settings.some_avg10_percent);
        match open_trigger(&path, threshold_us) {
            Ok(Some(fd)) => {
                tracing::info!(
                    "memory pressure: PSI trigger on {} (some {threshold_us} µs per {} s); read every cycle too",
                    path.display(),
                    WINDOW_US / 1_000_000
                );
                self.trigger = Some(fd);
                self.note = None;
            }
            Ok(None) => self.note = Some("not a kernel PSI file: read every cycle, no trigger".into()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.off(&format!("{} does not exist (kernel without PSI, or psi=0)", path.display()), false);
            }
            Err(e) => {
                let why = format!("no PSI trigger on {} ({e}): read every cycle", path.display());
                tracing::info!("memory pressure: {why}");
                self.note = Some(why);
            }
        }
    }

    /// Resolves when the trigger fires; never without one. A trigger that
    /// reports an error (its cgroup removed) is dropped, said once.
    pub async fn triggered(&mut self) {
        let Some(fd) = &self.trigger else { return std::future::pending().await };
        let failed = match fd.ready(Interest::PRIORITY).await {
            Ok(mut guard) => {
                let ready = guard.ready();
                guard.clear_ready();
                ready.is_error() || ready.is_read_closed()
            }
            Err(_) => true,
        };
        if failed {
            tracing::warn!("memory pressure: the PSI trigger failed; reading the file every cycle instead");
            self.trigger = None;
            self.note = Some("the PSI trigger failed: read every cycle".into());
        } else {
            self.triggers += 1;
        }
    }

    /// What `status` and the metrics show.
    pub fn status(&self) -> PressureStatus {
        let watch = match (self.file.is_some(), self.trigger.is_some()) {
            (false, _) => Watch::Off,
            (true, true) => Watch::Trigger,
            (true, false) => Watch::EachCycle,
        };
        let last = self.last.map(|(p, _)| p);
        PressureStatus {
            watch: match watch {
                Watch::Trigger => "trigger",
                Watch::EachCycle => "each-cycle",
                Watch::Off => "off",
            }
            .into(),
            path: self.settings.file().map(|p| p.display().to_string()),
            threshold_percent: self.settings.some_avg10_percent,
            some_avg10: last.map(|p| p.some_avg10),
            some_avg60: last.map(|p| p.some_avg60),
            some_avg300: last.map(|p| p.some_avg300),
            full_avg10: last.and_then(|p| p.full_avg10),
            read_at_unix: self.last.map(|(_, t)| t),
            above: crate::policy::pressure_skips_grace(&self.settings, last.as_ref()).is_some(),
            triggers: self.triggers,
            note: self.note.clone(),
        }
    }
}

/// The stall per window that the threshold amounts to: at least 1 µs, less
/// than the window (the kernel refuses a threshold of the whole window).
fn threshold_us(percent: f64) -> u64 {
    // At most 100 % of 2 s: far below 2^52, exact in f64.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let us = (WINDOW_US as f64 * percent / 100.0).round() as u64;
    us.clamp(1, WINDOW_US - 1)
}

/// Opens `path` as a PSI trigger; `None` when it is no kernel PSI file
/// (procfs or cgroup2), which is then never written to.
fn open_trigger(path: &Path, threshold_us: u64) -> io::Result<Option<AsyncFd<OwnedFd>>> {
    use rustix::fs::{Mode, OFlags};
    const CGROUP2_SUPER_MAGIC: rustix::fs::FsWord = 0x6367_7270;
    let fs = rustix::fs::statfs(path)?;
    if fs.f_type != rustix::fs::PROC_SUPER_MAGIC && fs.f_type != CGROUP2_SUPER_MAGIC {
        return Ok(None);
    }
    let fd = rustix::fs::open(path, OFlags::RDWR | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty())?;
    // With its NUL: the kernel overwrites the last byte written with one.
    let spec = format!("some {threshold_us} {WINDOW_US}\0");
    rustix::io::write(&fd, spec.as_bytes())?;
    Ok(Some(crate::sys::async_fd_with(fd, Interest::PRIORITY)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_is_a_share_of_the_window() {
        assert_eq!(threshold_us(10.0), 200_000);
        assert_eq!(threshold_us(0.1), 2_000);
        assert_eq!(threshold_us(100.0), WINDOW_US - 1);
    }

    #[test]
    fn a_plain_file_is_read_never_armed() {
        let dir = std::env::temp_dir().join(format!("mcp-reaper-psi-arm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("memory");
        let text = "some avg10=50.00 avg60=10.00 avg300=2.00 total=99\n";
        std::fs::write(&f, text).unwrap();
        assert!(open_trigger(&f, 1000).unwrap().is_none());
        assert_eq!(std::fs::read_to_string(&f).unwrap(), text, "nothing written into it");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
