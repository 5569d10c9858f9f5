//! A program's own file (a Go binary, a jar) read in bounded pieces, as the
//! user who runs it. Unlike [`crate::userfile::read_as`] (a config, read whole)
//! the file need not be the user's own — `/usr/local/bin/github-mcp-server`
//! is root's and is still that process's program — nor small: what is
//! bounded is what is read ([`Budget`]), never the file's size. The path is
//! resolved as the user ([`crate::access::resolve`]: search on every
//! directory, symlinks walked the same way), must be a regular file they may
//! read, is opened `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY` through the checked
//! directory and checked again once open (same inode, still regular). No
//! byte of it reaches a reason but the names the callers look for.

use std::os::unix::fs::FileExt as _;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};

use crate::access::{self, Cred, Denied};
use crate::userfile::FileId;

/// An open program file and what was read of it.
pub struct Binary {
    file: std::fs::File,
    pub size: u64,
    /// The version opened (its `fstat`): with the reader's uid, the cache key.
    pub id: FileId,
    budget: u64,
    /// Bytes read so far (for the measurements in the tests).
    pub read: u64,
}

impl Binary {
    /// Opens `path` for `cred`'s user, allowing at most `budget` bytes read.
    pub fn open(path: &Path, cred: &Cred, budget: u64) -> Result<Binary, Denied> {
        let r = access::resolve(path, cred)?;
        let regular = |m: &rustix::fs::Stat| FileType::from_raw_mode(m.st_mode) == FileType::RegularFile;
        if !regular(&r.stat) {
            return Err(Denied::Refused("not a regular file".into()));
        }
        if !cred.may(&r.stat, access::READ, r.acl) {
            return Err(Denied::Refused(format!("uid {} may not read it ({})", cred.uid, access::describe(&r.stat))));
        }
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&r.dir, &r.name, flags, Mode::empty())
            .map_err(|e| Denied::Refused(crate::userfile::failure(&e.into())))?;
        let m = rustix::fs::fstat(&fd).map_err(|e| Denied::Refused(crate::userfile::failure(&e.into())))?;
        if !regular(&m) || (m.st_dev, m.st_ino) != (r.stat.st_dev, r.stat.st_ino) {
            return Err(Denied::Refused("replaced while being read".into()));
        }
        let size = u64::try_from(m.st_size).unwrap_or(0);
        Ok(Binary { file: fd.into(), size, id: FileId::of(&m), budget, read: 0 })
    }

    /// Up to `len` bytes at `off` (fewer at the end of the file); `None`
    /// past the end, on an error, or once the budget is spent.
    pub fn read_at(&mut self, off: u64, len: u64) -> Option<Vec<u8>> {
        let len = len.min(self.size.checked_sub(off)?);
        if self.read + len > self.budget {
            return None;
        }
        let mut buf = vec![0; usize::try_from(len).ok()?];
        self.file.read_exact_at(&mut buf, off).ok()?;
        self.read += len;
        Some(buf)
    }
}

/// Little-endian integers of `b` at `at`, `None` past its end.
pub fn u16le(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?)))
}

pub fn u32le(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?)))
}

pub fn u64le(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}
