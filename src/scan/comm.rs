//! A process's `comm` without a heap allocation of its own (issue 37). The
//! kernel's task name is at most 15 bytes; `stat` shows a kernel worker's
//! with its workqueue appended (`kworker/u8:1-events_unbound`, up to 63).
//! A snapshot holds one per process, each read from every `stat` parsed:
//! as a `String` that was 24 bytes plus a 32-byte heap block, one
//! allocation per `stat` read. Here names of up to [`INLINE`] bytes sit in
//! the 24 bytes themselves; longer ones are boxed.
//!
//! Hand-written rather than a small-string crate: forty lines without
//! `unsafe` (the inline bytes are checked as UTF-8 when shown, which they
//! always are, having been copied from a `&str`), and no dependency for a
//! root daemon to carry.

use std::fmt;

/// The longest name kept inline: with the length byte and the enum's tag,
/// the type is as large as the `String` it replaces.
const INLINE: usize = 22;

/// A `comm` as read (lossily decoded: a process may name itself anything).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Comm(Repr);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    /// The bytes after `len` are zero, so equal names compare equal.
    Inline {
        len: u8,
        buf: [u8; INLINE],
    },
    Long(Box<str>),
}

impl Comm {
    /// Decodes the bytes of `stat`'s field 2 (invalid UTF-8 replaced).
    pub fn from_bytes(raw: &[u8]) -> Comm {
        Comm::from(&*String::from_utf8_lossy(raw))
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, buf } => std::str::from_utf8(&buf[..usize::from(*len)]).unwrap_or_default(),
            Repr::Long(s) => s,
        }
    }
}

impl From<&str> for Comm {
    fn from(s: &str) -> Comm {
        match u8::try_from(s.len()) {
            Ok(len) if s.len() <= INLINE => {
                let mut buf = [0u8; INLINE];
                buf[..s.len()].copy_from_slice(s.as_bytes());
                Comm(Repr::Inline { len, buf })
            }
            _ => Comm(Repr::Long(s.into())),
        }
    }
}

impl Default for Comm {
    fn default() -> Comm {
        Comm::from("")
    }
}

impl std::ops::Deref for Comm {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for Comm {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Comm {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_names_read_back() {
        assert_eq!(std::mem::size_of::<Comm>(), std::mem::size_of::<String>());
        for name in ["", "sleep", "npm exec @playwri", "exactly-22-bytes-long!", "kworker/u8:1-events_unbound"] {
            let c = Comm::from(name);
            assert_eq!(c.as_str(), name);
            assert_eq!(c, Comm::from(name));
            assert_eq!(c.to_string(), name);
        }
        assert!(matches!(Comm::from("exactly-22-bytes-long!").0, Repr::Inline { .. }));
        assert!(matches!(Comm::from("exactly-23-bytes-long!!").0, Repr::Long(_)));
        assert_ne!(Comm::from("a"), Comm::from("b"));
    }

    #[test]
    fn invalid_bytes_are_replaced() {
        // Five invalid bytes become five U+FFFD (15 bytes): still inline.
        let c = Comm::from_bytes(b"\xff\xfe\xfd\xfc\xfb");
        assert_eq!(c.as_str(), "\u{fffd}".repeat(5));
        // Fifteen become 45 bytes: boxed, whole.
        let c = Comm::from_bytes(&[0xff; 15]);
        assert_eq!(c.as_str(), "\u{fffd}".repeat(15));
    }
}
