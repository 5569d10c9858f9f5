//! Atomic file replacement: the one way the state and metrics files are
//! written. A temporary file with an unpredictable name, created exclusively
//! (`O_CREAT | O_EXCL`, which follows no symlink) in the target's directory,
//! is written, synced, renamed over the target, and the directory synced: a
//! crash leaves the old file or the new one, never half of one, and a symlink
//! planted at a name someone could guess redirects nothing.
//!
//! Hand-written, not the `tempfile` crate it used (now a test dependency
//! only): these dozen lines are all of it this binary needs, and the crate
//! and its `getrandom` and `fastrand` were 6,384 bytes of the 4 MB the binary
//! may weigh (issue 37). The name's randomness is a `SipHash` keyed by std's
//! per-process random keys (`RandomState`, from the kernel's `getrandom`).

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, RandomState};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes`, the new file with `mode` (before umask).
pub fn write(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let (mut file, tmp) = create_unique(dir, name, mode)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all()).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    File::open(dir)?.sync_all()
}

/// A new file `.NAME.RANDOM.tmp` in `dir`, never one that existed.
fn create_unique(dir: &Path, name: &str, mode: u32) -> io::Result<(File, PathBuf)> {
    let keys = RandomState::new();
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for attempt in 0u32..16 {
        let tmp = dir.join(format!(".{name}.{:016x}.tmp", keys.hash_one((std::process::id(), attempt))));
        match OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp) {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, "old").unwrap();
        write(&path, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["state.json"]);
    }

    #[test]
    fn a_symlink_planted_at_a_guessable_name_redirects_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let path = dir.path().join("state.json");
        // The names the old writer used: `.NAME.tmp.PID` and `.NAME.PID.tmp`.
        let pid = std::process::id();
        for guess in [format!(".state.json.tmp.{pid}"), format!(".state.json.{pid}.tmp")] {
            std::os::unix::fs::symlink(&victim, dir.path().join(guess)).unwrap();
        }
        write(&path, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a directory: the rename fails.
        let path = dir.path().join("metrics.prom");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("keep"), "x").unwrap();
        assert!(write(&path, b"new", 0o644).is_err());
        assert!(path.join("keep").exists());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["metrics.prom"], "no temporary file left behind");
    }
}
