//! Pidfd mode's looks for new processes, kept off the loop: a thread of
//! its own reads the pid counter (`loadavg`, one `pread`) every period and
//! wakes the loop only when it moved, and once more a period later, when
//! the pids it counted are looked at (see [`super::births`]). A look that
//! finds nothing new is then a sleep and a read, with no wake of the
//! loop's runtime.
//!
//! Why a thread (issue 37): woken by a `timerfd` five times a second, the
//! loop spent ~80 µs a look at 5,000 processes (perf, idle pidfd mode):
//! the runtime's park and `epoll_wait`, the `select!` polling its twelve
//! branches and re-arming its `Sleep`, for a read that found the counter
//! where it was nearly every time on a machine at rest.
//!
//! Where no thread can be started (a task limit), the [`Ticker`] wakes the
//! loop every period as before: the same looks, dearer.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::ticker::Ticker;

/// The stack of the look thread: it reads into a buffer of 128 bytes and
/// parses a number; it never allocates (no malloc arena of its own).
const STACK: usize = 64 * 1024;

pub(crate) enum Lookout {
    /// Not needed yet (event mode), or not started yet.
    Idle {
        every: Duration,
        loadavg: std::path::PathBuf,
    },
    Thread(Arc<Notify>),
    Ticker(Ticker),
}

impl Lookout {
    /// Looks every `every` at the counter in `loadavg`, once first asked.
    pub(crate) fn new(every: Duration, loadavg: &Path) -> Lookout {
        Lookout::Idle { every, loadavg: loadavg.to_path_buf() }
    }

    /// Resolves when the counter moved since the previous look, or a look
    /// after it did. The thread starts at the first call (event mode never
    /// makes one; a fallback to pidfds does).
    pub(crate) async fn moved(&mut self) {
        if let Lookout::Idle { every, loadavg } = self {
            *self = start(*every, loadavg);
        }
        match self {
            Lookout::Thread(wake) => wake.notified().await,
            Lookout::Ticker(t) => t.tick().await,
            Lookout::Idle { .. } => unreachable!("started above"),
        }
    }
}

fn start(every: Duration, loadavg: &Path) -> Lookout {
    let wake = Arc::new(Notify::new());
    let file = std::fs::File::open(loadavg).ok();
    let theirs = Arc::clone(&wake);
    let spawned = std::thread::Builder::new()
        .name("births".into())
        .stack_size(STACK)
        .spawn(move || look(every, file.as_ref(), &theirs));
    match spawned {
        Ok(_) => Lookout::Thread(wake),
        Err(e) => {
            tracing::debug!("cannot start the births thread ({e}): the loop looks itself");
            Lookout::Ticker(Ticker::every(every))
        }
    }
}

/// The thread: until the loop is gone, every `every` the counter; the
/// loop is woken when it moved and a look later. Without `loadavg` every
/// look wakes the loop, which then reads the counter its own way.
fn look(every: Duration, loadavg: Option<&std::fs::File>, wake: &Arc<Notify>) {
    let mut last = loadavg.and_then(last_pid);
    let mut moved_before = false;
    // The loop holds the other reference; alone, the thread has no one to wake.
    while Arc::strong_count(wake) > 1 {
        std::thread::sleep(every);
        let now = loadavg.and_then(last_pid);
        let moved = now.is_none() || now != last;
        if moved || moved_before {
            wake.notify_one();
        }
        (last, moved_before) = (now, moved);
    }
}

/// `loadavg`'s fifth field, read from its start without allocating.
fn last_pid(file: &std::fs::File) -> Option<i32> {
    let mut buf = [0u8; 128];
    let n = file.read_at(&mut buf, 0).ok()?;
    crate::scan::parse::parse_loadavg(std::str::from_utf8(&buf[..n]).ok()?).map(|(last, _)| last)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// A `loadavg` stand-in whose counter the test moves.
    fn fake(dir: &Path, last: i32) {
        std::fs::write(dir.join("loadavg"), format!("0.00 0.01 0.05 1/100 {last}\n")).unwrap();
    }

    async fn woke(l: &mut Lookout, within: Duration) -> bool {
        tokio::time::timeout(within, l.moved()).await.is_ok()
    }

    #[test]
    fn wakes_when_the_counter_moved_and_once_more_then_sleeps() {
        let dir = tempfile::tempdir().unwrap();
        fake(dir.path(), 100);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let every = Duration::from_millis(10);
            let mut lookout = Lookout::new(every, &dir.path().join("loadavg"));
            // Started at the first ask; the counter stands still: no wake
            // in 30 looks.
            assert!(!woke(&mut lookout, every * 30).await, "woken with nothing new");
            assert!(matches!(lookout, Lookout::Thread(_)));
            fake(dir.path(), 101);
            let t = Instant::now();
            assert!(woke(&mut lookout, Duration::from_secs(30)).await, "not woken by a new pid");
            // The follow-up look, for the pids counted at the first.
            assert!(woke(&mut lookout, Duration::from_secs(30)).await, "no follow-up look");
            assert!(t.elapsed() >= every / 2, "the follow-up came a look later");
            // Then quiet again: at most one wake stored before it stood still.
            let _ = woke(&mut lookout, every * 3).await;
            assert!(!woke(&mut lookout, every * 30).await, "woken again with nothing new");
        });
    }
}
