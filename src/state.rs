//! The grace state file: read at start, written atomically after each cycle.
//! A missing, unreadable or corrupt file means "start empty" — which can only
//! make the reaper wait longer, never reap early.

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use crate::policy::GraceBook;

/// Reads the state. The warning, if any, says why it starts empty.
pub fn load(path: &Path) -> (GraceBook, Option<String>) {
    match std::fs::read_to_string(path) {
        Ok(text) => match GraceBook::from_json(&text) {
            Ok(b) => (b, None),
            Err(e) => {
                (GraceBook::default(), Some(format!("state file {} is corrupt ({e}); starting empty", path.display())))
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => (GraceBook::default(), None),
        Err(e) => {
            (GraceBook::default(), Some(format!("cannot read state file {}: {e}; starting empty", path.display())))
        }
    }
}

/// Writes the state through a temporary file and a rename, so a crash leaves
/// either the old or the new file, never half of one.
pub fn save(path: &Path, book: &GraceBook) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("state"),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        f.write_all(book.to_json().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Identity, Pid, StartTime};
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn round_trip_and_corruption() {
        let dir = std::env::temp_dir().join(format!("mcp-reaper-state-{}", std::process::id()));
        let path = dir.join("sub/state.json");
        let mut b = GraceBook::default();
        b.insert(
            Identity { pid: Pid::new(42).unwrap(), start_time: StartTime(7) },
            UNIX_EPOCH + Duration::from_secs(5),
        );
        save(&path, &b).unwrap();
        assert_eq!(load(&path), (b, None));
        std::fs::write(&path, "{not json").unwrap();
        let (empty, warn) = load(&path);
        assert!(empty.is_empty());
        assert!(warn.unwrap().contains("corrupt"));
        assert_eq!(load(&dir.join("missing.json")), (GraceBook::default(), None));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
