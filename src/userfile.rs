//! Reading a file a user controls, as a reaper that may be root: a host's
//! MCP config, a docker CLI's config and contexts, a `--cidfile`. The path
//! is resolved as that user ([`crate::access`]: search permission on every
//! directory, symlinks walked the same way), the file must be a regular
//! file they own and may read, at most `max` bytes; only then is it opened
//! (`O_NOFOLLOW | O_NONBLOCK | O_NOCTTY`, through the checked directory)
//! and checked again once open: the same inode, still regular, still within
//! `max`. A device or FIFO is never opened (as root, opening one can block
//! or act: `/dev/watchdog`). Callers parse the bytes and keep only the
//! fields they need; no other content reaches a log line or a reason.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, Stat};

use crate::access::{self, Cred, Denied};

/// The bytes of `path`, a regular file `cred`'s user owns and may read, of
/// at most `max` bytes.
pub fn read_as(path: &Path, cred: &Cred, max: u64) -> Result<Vec<u8>, Denied> {
    let r = access::resolve(path, cred)?;
    read_resolved(&r, cred, max).map(|(bytes, _)| bytes)
}

/// One version of a file, as a cache of what was read from it on a user's
/// behalf keys it (beside that user's uid). The change time is in: a
/// `chmod` or `chown` changes only it, and a file its user may no longer
/// read, or no longer owns, must not keep what was read while they could.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileId {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileId {
    pub fn of(st: &Stat) -> FileId {
        FileId {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size,
            mtime: (st.st_mtime, i64::try_from(st.st_mtime_nsec).unwrap_or(0)),
            ctime: (st.st_ctime, i64::try_from(st.st_ctime_nsec).unwrap_or(0)),
        }
    }

    /// (device, inode): the file, whatever its version.
    pub fn inode(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }
}

/// The bytes of the file `r` resolved for `cred` ([`read_as`]), and the
/// identity of the version read: the opened file's own `fstat`, not the
/// resolution's (the file may change between the two).
pub fn read_resolved(r: &access::Resolved, cred: &Cred, max: u64) -> Result<(Vec<u8>, FileId), Denied> {
    check(&r.stat, cred, max, r.acl)?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&r.dir, &r.name, flags, Mode::empty()).map_err(|e| refused(&e.into()))?;
    let m = rustix::fs::fstat(&fd).map_err(|e| refused(&e.into()))?;
    check(&m, cred, max, r.acl)?;
    if (m.st_dev, m.st_ino) != (r.stat.st_dev, r.stat.st_ino) {
        return Err(Denied::Refused("replaced while being read".into()));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd).take(max + 1).read_to_end(&mut bytes).map_err(|e| refused(&e))?;
    if bytes.len() as u64 > max {
        return Err(Denied::Refused(too_large(max)));
    }
    Ok((bytes, FileId::of(&m)))
}

/// The names in directory `path` (at most `max`), if `cred`'s user may
/// list it.
pub fn list_dir(path: &Path, cred: &Cred, max: usize) -> Result<Vec<OsString>, Denied> {
    let r = access::resolve(path, cred)?;
    if FileType::from_raw_mode(r.stat.st_mode) != FileType::Directory {
        return Err(Denied::Missing(format!("{} is not a directory", r.shown.display())));
    }
    if !cred.may(&r.stat, access::READ | access::SEARCH, r.acl) {
        let why = format!("uid {} may not list {} ({})", cred.uid, r.shown.display(), access::describe(&r.stat));
        return Err(Denied::Refused(why));
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&r.dir, &r.name, flags, Mode::empty()).map_err(|e| refused(&e.into()))?;
    let m = rustix::fs::fstat(&fd).map_err(|e| refused(&e.into()))?;
    if (m.st_dev, m.st_ino) != (r.stat.st_dev, r.stat.st_ino) {
        return Err(Denied::Refused("replaced while being read".into()));
    }
    let dir = rustix::fs::Dir::read_from(&fd).map_err(|e| refused(&e.into()))?;
    Ok(dir
        .filter_map(Result::ok)
        .map(|e| std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string())
        .filter(|n| n != "." && n != "..")
        .take(max)
        .collect())
}

fn refused(e: &std::io::Error) -> Denied {
    Denied::Refused(failure(e))
}

/// An I/O error in words.
pub fn failure(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ELOOP) => "a symlink loop".into(),
        Some(libc::EACCES) => "permission denied".into(),
        _ => e.to_string(),
    }
}

fn check(m: &Stat, cred: &Cred, max: u64, acl: bool) -> Result<(), Denied> {
    if FileType::from_raw_mode(m.st_mode) != FileType::RegularFile {
        return Err(Denied::Refused("not a regular file".into()));
    }
    if m.st_uid != cred.uid {
        return Err(Denied::Refused(format!("owned by uid {}, not by the home's owner {}", m.st_uid, cred.uid)));
    }
    if u64::try_from(m.st_size).unwrap_or(u64::MAX) > max {
        return Err(Denied::Refused(too_large(max)));
    }
    if !cred.may(m, access::READ, acl) {
        return Err(Denied::Refused(format!("uid {} may not read it ({})", cred.uid, access::describe(m))));
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_users_file_is_read_with_that_users_rights() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let me = rustix::process::geteuid().as_raw();
        let cred = Cred::of_user(me);
        let f = dir.path().join("c.json");
        std::fs::write(&f, "{}").unwrap();
        assert_eq!(read_as(&f, &cred, 16).unwrap(), b"{}");
        assert_eq!(read_as(&f, &cred, 1).unwrap_err().to_string(), "larger than 0 KiB");
        assert!(matches!(read_as(&dir.path().join("none"), &cred, 16), Err(Denied::Missing(_))));
        // Not readable by its owner: not read, whoever the reaper is.
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o200)).unwrap();
        if me != 0 {
            assert!(read_as(&f, &cred, 16).unwrap_err().to_string().contains("may not read it"));
        }
        // A FIFO and a device are never opened, only looked at.
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::from_raw_mode(0o666)).unwrap();
        assert_eq!(read_as(&fifo, &cred, 16).unwrap_err().to_string(), "not a regular file");
        assert_eq!(
            read_as(Path::new("/dev/zero"), &Cred::of_user(0), 16).unwrap_err().to_string(),
            "not a regular file"
        );
        let names = list_dir(dir.path(), &cred, 10).unwrap();
        assert!(names.contains(&OsString::from("fifo")) && names.len() == 2, "{names:?}");
    }
}
