//! A periodic wake-up that costs one wake-up: a `timerfd` in the reactor.
//!
//! Why not `tokio::time::interval`: on the daemon's one thread, each tick
//! of a 200 ms interval woke it three times (measured with `strace`, idle
//! pidfd mode): tokio's timer wheel reaches a deadline 200 ms away through
//! its 64 ms slots (two `epoll_wait` returns), and re-arming the interval
//! after a tick moves the driver's next wake-up earlier, which the driver
//! hears of through its eventfd (a `write` and one more return). The kernel's
//! own periodic timer wakes the thread once per tick, at the tick.
//!
//! Where `timerfd_create` is refused (a seccomp filter, an old kernel), the
//! tokio interval stands in: the same ticks, dearer.

use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};
use tokio::io::unix::AsyncFd;

pub(crate) enum Ticker {
    Kernel(AsyncFd<OwnedFd>),
    Tokio(tokio::time::Interval),
}

impl Ticker {
    /// Ticks every `every`, the first one `every` from now. Ticks missed
    /// while the daemon was busy are not made up: the next one is the next
    /// period's.
    pub(crate) fn every(every: Duration) -> Ticker {
        match timerfd(every) {
            Ok(fd) => Ticker::Kernel(fd),
            Err(e) => {
                tracing::debug!("timerfd: {e}; ticking with tokio's timer");
                let start = tokio::time::Instant::now() + every;
                let mut timer = tokio::time::interval_at(start, every);
                timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                Ticker::Tokio(timer)
            }
        }
    }

    pub(crate) async fn tick(&mut self) {
        match self {
            Ticker::Tokio(t) => {
                t.tick().await;
            }
            Ticker::Kernel(fd) => loop {
                let Ok(mut ready) = fd.readable().await else {
                    return std::future::pending().await;
                };
                let mut expirations = [0u8; 8];
                match rustix::io::read(ready.get_inner(), &mut expirations) {
                    Ok(_) => return,
                    Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
                    // A timerfd read fails only with EAGAIN (or ECANCELED for
                    // absolute timers, which this is not): never tick again
                    // rather than spin.
                    Err(_) => return std::future::pending().await,
                }
            },
        }
    }
}

fn timerfd(every: Duration) -> std::io::Result<AsyncFd<OwnedFd>> {
    let fd = rustix::time::timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC)?;
    let period = Timespec {
        tv_sec: i64::try_from(every.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(every.subsec_nanos()),
    };
    rustix::time::timerfd_settime(
        &fd,
        TimerfdTimerFlags::empty(),
        &Itimerspec { it_interval: period, it_value: period },
    )?;
    crate::sys::async_fd(fd)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn ticks_about_every_period_and_not_before() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let mut t = Ticker::every(Duration::from_millis(20));
            assert!(matches!(t, Ticker::Kernel(_)), "timerfd refused here");
            let start = Instant::now();
            for _ in 0..5 {
                t.tick().await;
            }
            // Never early; late only as late as this machine is busy.
            assert!(start.elapsed() >= Duration::from_millis(100), "{:?}", start.elapsed());
        });
    }
}
