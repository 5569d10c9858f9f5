//! The few Docker Engine API answers the reaper reads (Podman's compatible
//! API answers the same shape). Unknown fields are ignored; a missing field
//! the reaper needs makes the answer garbage.

use std::time::{Duration, SystemTime};

use serde::Deserialize;

/// `GET /containers/json`: one running container.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Summary {
    pub id: String,
    /// Unix seconds.
    #[serde(default)]
    pub created: i64,
}

/// `GET /containers/{id}/json`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Inspect {
    pub id: String,
    /// `/name`.
    #[serde(default)]
    pub name: String,
    /// RFC 3339 with nanoseconds.
    pub created: String,
    pub config: Config,
    pub state: State,
    #[serde(default)]
    pub host_config: HostConfig,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
#[allow(clippy::struct_excessive_bools)] // the engine's own flags
pub struct Config {
    #[serde(default)]
    pub image: String,
    #[serde(default)]
    pub cmd: Option<Vec<String>>,
    #[serde(default)]
    pub open_stdin: bool,
    /// Docker sets these for a `run` that attaches (no `-d`); Podman's
    /// compatible API answers false for every container.
    #[serde(default)]
    pub attach_stdin: bool,
    #[serde(default)]
    pub attach_stdout: bool,
    #[serde(default)]
    pub attach_stderr: bool,
}

impl Config {
    pub fn attached(&self) -> bool {
        self.attach_stdin || self.attach_stdout || self.attach_stderr
    }
}

/// `GET /libpod/containers/{id}/json` (Podman only): the argv that created it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct LibpodInspect {
    #[serde(default)]
    pub config: LibpodConfig,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct LibpodConfig {
    #[serde(default)]
    pub create_command: Option<Vec<String>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct State {
    #[serde(default)]
    pub running: bool,
    #[serde(default)]
    pub pid: i64,
    #[serde(default)]
    pub exit_code: i64,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct HostConfig {
    #[serde(default)]
    pub auto_remove: bool,
}

impl Inspect {
    pub fn name(&self) -> &str {
        self.name.strip_prefix('/').unwrap_or(&self.name)
    }

    pub fn created_at(&self) -> Option<SystemTime> {
        rfc3339(&self.created)
    }
}

/// `2026-11-23T02:10:13.482919541Z` or `…+01:00` as a time.
pub fn rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse().ok() };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    let mut i = 19;
    let mut nanos: u32 = 0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let frac = s.get(start..i)?;
        let digits: String = frac.chars().chain(std::iter::repeat('0')).take(9).collect();
        nanos = digits.parse().ok()?;
    }
    let offset = match b.get(i)? {
        b'Z' | b'z' => 0,
        c @ (b'+' | b'-') => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            let o = oh * 3600 + om * 60;
            if *c == b'+' { o } else { -o }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_with_nanos_and_offsets() {
        let t = rfc3339("2026-11-23T02:10:13.482919541Z").unwrap();
        let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(d, Duration::new(1_795_399_813, 482_919_541));
        let same = rfc3339("2026-11-23T03:10:13.482919541+01:00").unwrap();
        assert_eq!(t, same);
        assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Some(SystemTime::UNIX_EPOCH));
        assert_eq!(rfc3339("garbage"), None);
        assert_eq!(rfc3339("2026-11-23T02:10:13"), None);
    }

    #[test]
    fn inspect_reads_docker_and_ignores_the_rest() {
        let v: Inspect = serde_json::from_str(
            r#"{"Id":"abc","Name":"/srv","Created":"2026-11-23T02:10:13.4Z","Extra":1,
                "Config":{"Image":"t14img","Cmd":["cat"],"OpenStdin":true},
                "State":{"Running":true,"Pid":42,"ExitCode":0},"HostConfig":{"AutoRemove":true}}"#,
        )
        .unwrap();
        assert_eq!((v.name(), v.state.pid, v.host_config.auto_remove), ("srv", 42, true));
        assert!(serde_json::from_str::<Inspect>(r#"{"Id":"abc"}"#).is_err());
    }
}
