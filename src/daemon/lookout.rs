//! Pidfd mode's looks for new processes, kept off the loop: a thread of
//! its own reads the pid counter (`loadavg`, one `pread`) and wakes the
//! loop only when it moved, and once more a little later, when the pids it
//! counted are looked at (see [`super::births`]). A look that finds
//! nothing new is then a sleep and a read, with no wake of the loop's
//! runtime.
//!
//! Why a thread (issue 37): woken by a `timerfd` five times a second, the
//! loop spent ~80 µs a look at 5,000 processes (perf, idle pidfd mode):
//! the runtime's park and `epoll_wait`, the `select!` polling its twelve
//! branches and re-arming its `Sleep`, for a read that found the counter
//! where it was nearly every time on a machine at rest.
//!
//! Why two paces: on a virtual machine the wake-up is the cost, not the
//! read (here, KVM: ~83 µs of CPU for a 200 ms sleep and a `pread`, 1.7 µs
//! for the `pread` alone), so a machine at rest is looked at every
//! [`Pace::resting`], and the first move brings a look [`Pace::follow`]
//! later: a new pid is still looked at within `resting` + `follow` of its
//! birth, as within two looks of [`Pace::busy`] before. While the counter
//! moves (churn), looks are `busy` apart, each at the pids the one before
//! counted, as before: most of those are gone by then, which is cheaper
//! than reading them (see [`super::births`]).
//!
//! Where no thread can be started (a task limit), the [`Ticker`] wakes the
//! loop every `busy` period as before: the same looks, dearer.

use std::fs::File;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::births::Census;
use super::ticker::Ticker;

/// The stack of the look thread: it reads into a buffer of 128 bytes and
/// parses a number; it never allocates (no malloc arena of its own).
const STACK: usize = 64 * 1024;

/// How far apart the looks are.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pace {
    /// While the counter moves.
    pub(crate) busy: Duration,
    /// While it stands still.
    pub(crate) resting: Duration,
    /// After the first move that ends a rest: the look at what it counted.
    pub(crate) follow: Duration,
}

pub(crate) enum Lookout {
    /// Not needed yet (event mode), or not started yet.
    Idle {
        pace: Pace,
        loadavg: Option<Arc<File>>,
    },
    Thread(Arc<Notify>),
    Ticker(Ticker),
}

impl Lookout {
    /// Looks at the counter in `loadavg` (the loop's own fd: see
    /// `Births::loadavg`) at `pace`, once first asked.
    pub(crate) fn new(pace: Pace, loadavg: Option<Arc<File>>) -> Lookout {
        Lookout::Idle { pace, loadavg }
    }

    /// Resolves when the counter moved since the previous look, or a look
    /// after it did. The thread starts at the first call (event mode never
    /// makes one; a fallback to pidfds does).
    pub(crate) async fn moved(&mut self) {
        if let Lookout::Idle { pace, loadavg } = self {
            *self = start(*pace, loadavg.take());
        }
        match self {
            Lookout::Thread(wake) => wake.notified().await,
            Lookout::Ticker(t) => t.tick().await,
            Lookout::Idle { .. } => unreachable!("started above"),
        }
    }
}

fn start(pace: Pace, loadavg: Option<Arc<File>>) -> Lookout {
    let wake = Arc::new(Notify::new());
    let theirs = Arc::clone(&wake);
    let spawned = std::thread::Builder::new()
        .name("births".into())
        .stack_size(STACK)
        .spawn(move || look(pace, loadavg.as_deref(), &theirs));
    match spawned {
        Ok(_) => Lookout::Thread(wake),
        Err(e) => {
            tracing::debug!("cannot start the births thread ({e}): the loop looks itself");
            Lookout::Ticker(Ticker::every(pace.busy))
        }
    }
}

/// The thread: until the loop is gone, the counter at `pace`; the loop
/// is woken when it moved, and for the look at what it counted then.
/// Without `loadavg` every look wakes the loop, which then reads the
/// counter its own way.
fn look(pace: Pace, loadavg: Option<&File>, wake: &Arc<Notify>) {
    let read = || loadavg.and_then(Census::read).map(Census::last_pid);
    let mut last = read();
    let mut moved_before = false;
    // The loop holds the other reference; alone, the thread has no one to wake.
    while Arc::strong_count(wake) > 1 {
        std::thread::sleep(if moved_before { pace.busy } else { pace.resting });
        let now = read();
        let moved = now.is_none() || now != last;
        last = now;
        if moved || moved_before {
            wake.notify_one();
        }
        if moved && !moved_before {
            // The end of a rest: what was counted is looked at soon.
            std::thread::sleep(pace.follow);
            wake.notify_one();
            let then = read();
            // Counted at that look: looked at by the next, `busy` later.
            moved_before = then.is_none() || then != last;
            last = then;
        } else {
            moved_before = moved;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use std::path::Path;

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
            let pace = Pace { busy: every, resting: every * 2, follow: every / 2 };
            let kept = File::open(dir.path().join("loadavg")).ok().map(Arc::new);
            let mut lookout = Lookout::new(pace, kept);
            // Started at the first ask; the counter stands still: no wake
            // in 30 looks.
            assert!(!woke(&mut lookout, every * 30).await, "woken with nothing new");
            assert!(matches!(lookout, Lookout::Thread(_)));
            fake(dir.path(), 101);
            let t = Instant::now();
            assert!(woke(&mut lookout, Duration::from_secs(30)).await, "not woken by a new pid");
            // The follow-up look, for the pids counted at the first.
            assert!(woke(&mut lookout, Duration::from_secs(30)).await, "no follow-up look");
            assert!(t.elapsed() >= pace.follow / 2, "the follow-up came later");
            // Then quiet again: at most one wake stored before it stood still.
            let _ = woke(&mut lookout, every * 3).await;
            assert!(!woke(&mut lookout, every * 30).await, "woken again with nothing new");
        });
    }
}
