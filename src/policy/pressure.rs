//! Memory pressure against `[pressure]`: whether orphan and stale trees skip
//! the rest of their grace. The daemon measures ([`crate::scan::pressure`]);
//! this decides.

use crate::config::PressureSettings;
use crate::scan::Pressure;

/// Why the grace is skipped ("memory pressure some avg10=23.4% ≥ 10%"), or
/// `None` when it is not: disabled, nothing read, or below the threshold.
pub fn skips_grace(cfg: &PressureSettings, seen: Option<&Pressure>) -> Option<String> {
    let p = seen.filter(|_| cfg.enabled)?;
    let threshold = cfg.some_avg10_percent;
    (p.some_avg10 >= threshold)
        .then(|| format!("memory pressure some avg10={:.1}% \u{2265} {threshold}%", p.some_avg10))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(enabled: bool, pct: f64) -> PressureSettings {
        PressureSettings { enabled, some_avg10_percent: pct, path: None }
    }

    fn seen(avg10: f64) -> Pressure {
        Pressure { some_avg10: avg10, some_avg60: 1.0, some_avg300: 0.5, full_avg10: Some(0.0) }
    }

    #[test]
    fn at_or_above_the_threshold_skips_with_the_figure() {
        let why = skips_grace(&settings(true, 10.0), Some(&seen(23.44))).unwrap();
        assert_eq!(why, "memory pressure some avg10=23.4% \u{2265} 10%");
        assert!(skips_grace(&settings(true, 10.0), Some(&seen(10.0))).is_some(), "the threshold itself counts");
        assert_eq!(
            skips_grace(&settings(true, 12.5), Some(&seen(50.0))).unwrap(),
            "memory pressure some avg10=50.0% \u{2265} 12.5%"
        );
    }

    /// A 3600 s grace under `avg10` percent of pressure: the verdict and reason.
    fn judged(w: super::super::tests::World, avg10: f64) -> (crate::policy::Verdict, String) {
        let mut w = w.cfg("[reaper]\ngrace_secs = 3600\n[pressure]\nsome_avg10_percent = 10.0\n");
        w.pressure = Some(seen(avg10));
        let (v, _, _, reason) = w.one();
        (v, reason)
    }

    #[test]
    fn orphan_and_stale_trees_skip_their_grace_under_pressure() {
        use super::super::tests::{World, playwright_under, tty};
        use crate::policy::Verdict;
        let orphan = || {
            let mut w = World::new();
            playwright_under(&mut w, 1);
            w
        };
        let (v, reason) = judged(orphan(), 50.0);
        assert_eq!(v, Verdict::Orphan, "{reason}");
        assert!(
            reason.ends_with("memory pressure some avg10=50.0% \u{2265} 10%: grace skipped (3600s of 3600s left)"),
            "{reason}"
        );
        let (v, reason) = judged(orphan(), 9.9);
        assert_eq!(v, Verdict::Young, "{reason}");
        assert!(!reason.contains("pressure"), "{reason}");
        let stale = || {
            let mut w = World::new();
            tty(w.add(100, 1, "claude"), "/dev/pts/4 (deleted)");
            playwright_under(&mut w, 100);
            w
        };
        let (v, reason) = judged(stale(), 10.0);
        assert_eq!(v, Verdict::Stale, "{reason}");
        assert!(reason.contains("grace skipped"), "{reason}");
        assert_eq!(judged(stale(), 0.0).0, Verdict::Young);
    }

    #[test]
    fn pressure_never_makes_a_kept_tree_a_target() {
        use super::super::tests::{World, playwright_under};
        use crate::policy::Verdict;
        let mut w = World::new();
        w.add(100, 1, "claude");
        playwright_under(&mut w, 100);
        assert_eq!(judged(w, 100.0).0, Verdict::Live);
    }

    #[test]
    fn below_disabled_or_unread_keeps_the_grace() {
        assert_eq!(skips_grace(&settings(true, 10.0), Some(&seen(9.99))), None);
        assert_eq!(skips_grace(&settings(false, 10.0), Some(&seen(90.0))), None);
        assert_eq!(skips_grace(&settings(true, 10.0), None), None);
    }
}
