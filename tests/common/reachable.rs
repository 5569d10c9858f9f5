//! Programs that tests run as another uid, put where that uid can reach
//! them. A clone in a 0700 directory (as `/root` is) builds its binaries
//! where no other uid may enter: a `fakeproc` that starts a child as uid
//! 65534, or a daemon run as nobody, then fails with EACCES at exec. So
//! the harness itself hands out a path every uid can run, and no test has
//! to remember to.
//!
//! The copies live in `$TMPDIR/mcp-reaper-test-bins-<euid>/` (or `/tmp`'s),
//! one directory per build, each holding the program under its own name
//! (the kernel names a process after its executable's file: the tests'
//! comm checks stay true). A hard link where the file system allows, else a
//! copy; builds of the same path older than a day are removed.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// `path` when every uid can reach and run it, else such a copy of it.
/// Panics, saying why, when there is no directory every uid can reach.
pub fn reachable(path: &Path) -> PathBuf {
    static DONE: Mutex<Option<HashMap<PathBuf, PathBuf>>> = Mutex::new(None);
    if super::world_executable(path) {
        return path.to_path_buf();
    }
    let mut done = DONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(p) = done.get_or_insert_with(HashMap::new).get(path) {
        return p.clone();
    }
    let copy = place(path).unwrap_or_else(|e| panic!("making {} runnable by other uids: {e}", path.display()));
    assert!(super::world_executable(&copy), "{} is still not reachable by other uids", copy.display());
    done.get_or_insert_with(HashMap::new).insert(path.to_path_buf(), copy.clone());
    copy
}

fn place(path: &Path) -> Result<PathBuf, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let name = path.file_name().ok_or("no file name")?.to_string_lossy().into_owned();
    let base = base()?;
    // One directory per source path and build: another clone's program of
    // the same name, or an older build, is never taken for this one.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut h);
    let source = h.finish();
    (meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ino()).hash(&mut h);
    let prefix = format!("{name}-{source:016x}-");
    let dir = base.join(format!("{prefix}{:016x}", h.finish()));
    let to = dir.join(&name);
    if !to.is_file() {
        let tmp = base.join(format!(".{name}-{}-{:x}", std::process::id(), h.finish()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::DirBuilder::new().mode(0o755).create(&tmp).map_err(|e| format!("creating {}: {e}", tmp.display()))?;
        let file = tmp.join(&name);
        if std::fs::hard_link(path, &file).is_err() {
            std::fs::copy(path, &file).map_err(|e| format!("copying to {}: {e}", file.display()))?;
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
        // Another test process may have placed the same build meanwhile:
        // then its directory stays and this one goes.
        if std::fs::rename(&tmp, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        prune(&base, &prefix, &dir);
    }
    if to.is_file() { Ok(to) } else { Err(format!("{} did not appear", to.display())) }
}

/// Removes other builds of the same source older than a day (a run that
/// still uses one started before it was replaced; none runs that long).
fn prune(base: &Path, prefix: &str, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    let day_ago = SystemTime::now() - Duration::from_secs(24 * 3600);
    for e in entries.flatten() {
        let p = e.path();
        let old = e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t < day_ago);
        if p != keep && old && e.file_name().to_string_lossy().starts_with(prefix) {
            let _ = std::fs::remove_dir_all(&p);
        }
    }
}

/// `mcp-reaper-test-bins-<euid>` in the first temporary directory every uid
/// can reach, made here (0755) or checked to be ours and writable by us
/// alone: root runs what it finds there.
fn base() -> Result<PathBuf, String> {
    let euid = rustix::process::geteuid().as_raw();
    let mut tried = Vec::new();
    for tmp in [std::env::temp_dir(), PathBuf::from("/tmp"), PathBuf::from("/var/tmp")] {
        if !super::world_executable(&tmp) {
            tried.push(format!("{} is not reachable by other uids", tmp.display()));
            continue;
        }
        let base = tmp.join(format!("mcp-reaper-test-bins-{euid}"));
        let _ = std::fs::DirBuilder::new().mode(0o755).create(&base);
        let meta = std::fs::symlink_metadata(&base).map_err(|e| format!("{}: {e}", base.display()))?;
        if !meta.is_dir() || meta.uid() != euid || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} is not a directory of uid {euid} that only it may write to (uid {}, mode {:o}): remove it",
                base.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ));
        }
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
        return Ok(base);
    }
    Err(format!("no temporary directory every uid can reach: {}", tried.join("; ")))
}
