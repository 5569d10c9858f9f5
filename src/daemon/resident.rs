//! Rare paths not resident (issue 37). Most of the daemon's file-backed
//! memory is pages of its own binary: the kernel maps them on first touch,
//! and with fault-around (a fault maps the 64 KiB around it that the page
//! cache holds) an idle daemon keeps most of its text mapped: start-up's
//! (argument and config parsing, regex compilation), the rare paths' (D-Bus
//! notifications, the engines' HTTP, the metrics listener) and, in one
//! binary built with fat LTO, much that merely sits beside hot code.
//!
//! After a cycle or a wake-up between cycles (since the quiet period, an
//! idle daemon can go two minutes without a cycle while its wake-ups map
//! pages back: 240 s side by side at 5,000 extra processes, mean RSS 4,464
//! → 3,533 KiB in event mode, 4,451 → 3,711 in pidfd mode, for ~0.01 % of a
//! core more), at most once per [`AFTER_CYCLE`] ([`AFTER_WAKE`] after a
//! wake-up; one put off meanwhile on a timer of its own), those pages leave
//! the page tables (`MADV_DONTNEED` on the read-only segments of the
//! executable and of the libraries loaded with it, libc's ~1.3 MiB among
//! them, [`crate::sys::drop_own_read_only_pages`]); the page cache keeps them,
//! and the next cycle maps back what it runs with minor faults. Measured
//! side by side with 5,000 extra processes (event mode, 30 s): `RssFile`
//! 5,252 → 4,012 KiB for the binary's pages; about 43 minor faults more a
//! cycle, 3.6 µs each (64 KiB of fault-around), and 48 µs for a drop of the
//! whole binary: ~0.2 ms a cycle. The libraries' too (1,000 extra
//! processes, 40 s): RSS 4,772 → 3,768 KiB in event mode, 4,388 → 3,096 in
//! pidfd mode.
//! The pages dropped are not freed (the page cache still holds them, shared
//! with any other mapping of the binary); unmapped, they are the cheapest
//! memory the kernel can reclaim under pressure.

use std::ops::Range;
use std::time::{Duration, Instant};

/// After a cycle, at most one drop per this long: an idle daemon (a cycle
/// per `interval_secs`, 10 s by default) drops after each cycle, one under
/// churn (cycles soon after each exec or exit) no more than every 5 s.
pub(super) const AFTER_CYCLE: Duration = Duration::from_secs(5);

/// After a wake-up between cycles, at most one drop per this long. A
/// wake-up maps back only the few pages it runs (a new process read and
/// classified), and each drop has the next wake-up fault them in again:
/// with two processes born every 5 s (pidfd mode, 5,000 extra processes,
/// quiet otherwise; 370 s side by side) the daemon used 0.055 % of a core
/// dropping after each wake-up (every birth then faulted them in again),
/// 0.049 % with this, for a mean RSS of 4,640 against 4,659 KiB (issue 37).
pub(super) const AFTER_WAKE: Duration = Duration::from_secs(60);

/// What was dropped and when, kept by the loop from cycle to cycle.
#[derive(Default)]
pub(super) struct Resident {
    /// Found at the first drop, not at start-up: the libraries the first
    /// cycle loaded (glibc's NSS modules, say) are then among them.
    ranges: Option<Vec<Range<usize>>>,
    last: Option<Instant>,
    /// A drop put off by the pace above: work since the last one mapped
    /// pages back, and nothing may come to drop them for a quiet period (a
    /// cycle a moment after a drop kept what it ran mapped until the next:
    /// the daemon bench's idle window, 4,700 KiB mean RSS where 3,500 was
    /// measured when the drop before happened to be older).
    due: Option<Instant>,
}

impl Resident {
    /// After a cycle or a wake-up: drops the binary's read-only pages from
    /// the page tables, when the last drop is `every` old (or there was
    /// none); otherwise once it is ([`Resident::due`]).
    pub(super) fn after_work(&mut self, every: Duration) {
        if let Some(t) = self.last.filter(|t| t.elapsed() < every) {
            let at = t + every;
            self.due = Some(self.due.map_or(at, |d| d.min(at)));
            return;
        }
        self.drop_pages();
    }

    /// Resolves when a drop put off is due (never when none is).
    pub(super) async fn due(&self) {
        match self.due {
            Some(t) => tokio::time::sleep_until(t.into()).await,
            None => std::future::pending().await,
        }
    }

    /// The drop put off, now.
    pub(super) fn drop_pages(&mut self) {
        self.due = None;
        self.last = Some(Instant::now());
        let ranges = self.ranges.get_or_insert_with(crate::sys::own_read_only_pages);
        let bytes = crate::sys::drop_own_read_only_pages(ranges);
        tracing::trace!("{bytes} bytes of the binary's read-only pages left the page tables");
        if tracing::enabled!(tracing::Level::DEBUG) {
            let (used, free, apart) = crate::sys::heap_figures();
            tracing::debug!(
                "heap: {} KiB in use, {} KiB free in it, {} KiB mapped apart",
                used >> 10,
                free >> 10,
                apart >> 10
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drop_put_off_by_the_pace_is_due_when_the_pace_allows_not_lost() {
        let mut r = Resident::default();
        r.after_work(AFTER_CYCLE);
        let first = r.last.expect("dropped at once: none before");
        assert!(r.due.is_none());
        // A cycle a moment later: not now, but at the pace's end.
        r.after_work(AFTER_CYCLE);
        assert_eq!(r.last, Some(first), "not dropped again yet");
        assert_eq!(r.due, Some(first + AFTER_CYCLE), "put off, not lost");
        // A wake-up meanwhile does not put it later.
        r.after_work(AFTER_WAKE);
        assert_eq!(r.due, Some(first + AFTER_CYCLE));
        r.drop_pages();
        assert!(r.due.is_none() && r.last > Some(first), "dropped; nothing due until more work");
    }
}
