//! Stage 5: words and JSON. Nothing here decides or acts. This file: the
//! small units (bytes, ages) every view shares.

pub mod desktop;
pub mod generations;
pub mod generations_end;
pub mod generations_text;
pub mod human;
pub mod journal;
pub mod json;
pub mod log;
pub mod metrics;
pub mod outcome;
pub mod status;
mod status_parts;
pub mod status_text;

pub use crate::names::printable;

/// `612 MiB`, `1.2 GiB`, `800 KiB`.
pub fn bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f >= K * K * K {
        format!("{:.1} GiB", f / (K * K * K))
    } else if f >= K * K {
        format!("{:.0} MiB", f / (K * K))
    } else if f >= K {
        format!("{:.0} KiB", f / K)
    } else {
        format!("{n} B")
    }
}

/// Signed difference in MiB, for `MemAvailable` changes: `+598 MiB`.
pub fn signed_mib(delta: i64) -> String {
    format!("{:+} MiB", delta / (1024 * 1024))
}

/// `45s`, `12m`, `3h4m`, `2d3h`.
pub fn age(secs: f64) -> String {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // saturating, and not below 0
    let s = secs.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{}h", s / 86400, s % 86400 / 3600),
    }
}

/// `2026-11-26 13:35:02Z` (no time zone crate for one format: days to a
/// civil date is H. Hinnant's `civil_from_days`).
pub fn utc(unix: u64) -> String {
    let days = i64::try_from(unix / 86_400).unwrap_or(i64::MAX);
    let rem = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00Z");
        assert_eq!(utc(1_795_700_102), "2026-11-26 13:35:02Z");
    }

    #[test]
    fn units() {
        assert_eq!(bytes(612 * 1024 * 1024), "612 MiB");
        assert_eq!(bytes(1288490188), "1.2 GiB");
        assert_eq!(bytes(1000), "1000 B");
        assert_eq!(age(59.9), "59s");
        assert_eq!(age(3.0 * 86400.0 + 4.0 * 3600.0), "3d4h");
        assert_eq!(signed_mib(598 * 1024 * 1024), "+598 MiB");
        assert_eq!(signed_mib(-3 * 1024 * 1024), "-3 MiB");
    }
}
