//! Reading a file a user controls, as a reaper that may be root: a host's
//! MCP config, a docker CLI's config and contexts. What the path names is
//! checked before it is opened (as root, opening a device or FIFO a user's
//! symlink points to could block or have effects), opened without blocking,
//! and checked again once open: a regular file, owned by `owner`, at most
//! `max` bytes, the same inode as checked.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The file's bytes, or why it was not read (in words for a log line).
pub fn read(path: &Path, owner: u32, max: u64) -> Result<Vec<u8>, String> {
    let before = std::fs::metadata(path).map_err(|e| failure(&e))?;
    check(&before, owner, max)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| failure(&e))?;
    let m = f.metadata().map_err(|e| failure(&e))?;
    check(&m, owner, max)?;
    if (m.dev(), m.ino()) != (before.dev(), before.ino()) {
        return Err("replaced while being read".into());
    }
    let mut bytes = Vec::new();
    f.take(max + 1).read_to_end(&mut bytes).map_err(|e| failure(&e))?;
    if bytes.len() as u64 > max {
        return Err(too_large(max));
    }
    Ok(bytes)
}

/// An I/O error in words.
pub fn failure(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ELOOP) => "a symlink loop".into(),
        Some(libc::EACCES) => "permission denied".into(),
        _ => e.to_string(),
    }
}

fn check(m: &std::fs::Metadata, owner: u32, max: u64) -> Result<(), String> {
    if !m.is_file() {
        return Err("not a regular file".into());
    }
    if m.uid() != owner {
        return Err(format!("owned by uid {}, not by the home's owner {owner}", m.uid()));
    }
    if m.size() > max {
        return Err(too_large(max));
    }
    Ok(())
}

fn too_large(max: u64) -> String {
    if max >= 1 << 20 { format!("larger than {} MiB", max >> 20) } else { format!("larger than {} KiB", max >> 10) }
}

/// `uid`'s home directory in the passwd database (`/etc/passwd`).
pub fn passwd_home(uid: u32) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[2].parse() == Ok(uid)).then(|| PathBuf::from(f[5])).filter(|h| h.is_absolute())
    })
}
