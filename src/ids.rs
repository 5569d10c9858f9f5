//! Identities. A bare pid names a slot in the kernel's table, not a process: the
//! slot is reused. Everything that acts on a process carries its [`Identity`].

use std::fmt;
use std::num::NonZeroI32;

use serde::{Deserialize, Deserializer, Serialize};

/// A process id as the reaper's PID namespace sees it. Always positive.
/// Kept as a `NonZeroI32`: an `Option<Pid>` (a parent, a group, a session
/// of each process of a snapshot) then takes 4 bytes, not 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Pid(NonZeroI32);

impl Pid {
    /// PID 1 of the namespace.
    pub const INIT: Pid = Pid(NonZeroI32::new(1).expect("1 is not 0"));

    pub fn new(raw: i32) -> Option<Pid> {
        if raw > 0 { NonZeroI32::new(raw).map(Pid) } else { None }
    }

    pub fn get(self) -> i32 {
        self.0.get()
    }

    pub fn parse(s: &str) -> Option<Pid> {
        s.parse::<i32>().ok().and_then(Pid::new)
    }
}

/// Read back (the state file) as written: a positive number, else an error,
/// as [`Pid::new`] would refuse it.
impl<'de> Deserialize<'de> for Pid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Pid, D::Error> {
        let raw = i32::deserialize(d)?;
        Pid::new(raw).ok_or_else(|| serde::de::Error::custom(format!("not a process id: {raw}")))
    }
}

/// A `--scope PID` argument, for clap in both binaries.
pub fn parse_pid(s: &str) -> Result<Pid, String> {
    Pid::parse(s).ok_or_else(|| format!("not a process id: {s:?}"))
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Start time of a process in clock ticks since boot (`/proc/PID/stat` field 22).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StartTime(pub u64);

/// `(pid, start_time)`: the only safe way to name a process across two reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Identity {
    pub pid: Pid,
    pub start_time: StartTime,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.pid, self.start_time.0)
    }
}

/// A real user id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Uid(pub u32);

impl Uid {
    pub const ROOT: Uid = Uid(0);
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_rejects_zero_and_negatives() {
        assert_eq!(Pid::new(0), None);
        assert_eq!(Pid::new(-5), None);
        assert_eq!(Pid::parse("42").map(Pid::get), Some(42));
        assert_eq!(Pid::parse("4x"), None);
    }

    #[test]
    fn pid_reads_back_only_positive() {
        assert_eq!(serde_json::from_str::<Pid>("42").ok().map(Pid::get), Some(42));
        assert!(serde_json::from_str::<Pid>("0").is_err());
        assert!(serde_json::from_str::<Pid>("-3").is_err());
        assert_eq!(serde_json::to_string(&Pid::INIT).ok().as_deref(), Some("1"));
        assert_eq!(std::mem::size_of::<Option<Pid>>(), 4);
    }
}
