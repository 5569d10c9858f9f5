//! The grace state file: read at start, written atomically after each cycle.
//! A missing, unreadable or corrupt file means "start empty" — which can only
//! make the reaper wait longer, never reap early.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use crate::policy::GraceBook;

/// Reads the state. The warning, if any, says why it starts empty.
pub fn load(path: &Path) -> (GraceBook, Option<String>) {
    loaded(path, read(path))
}

fn loaded(path: &Path, read: Read) -> (GraceBook, Option<String>) {
    match read {
        Read::Book(b) => (b, None),
        Read::Missing | Read::OtherBoot => (GraceBook::default(), None),
        Read::Corrupt(e) => {
            (GraceBook::default(), Some(format!("state file {} is corrupt ({e}); starting empty", path.display())))
        }
        Read::Failed(e) => (GraceBook::default(), Some(unreadable(path, &e))),
    }
}

/// [`load`] for the one who writes the file (the daemon, `--once`): a
/// corrupt file is moved aside to `NAME.corrupt`, so the next save does not
/// destroy what someone may want to look at, and the next start does not
/// warn about it again.
pub fn load_for_writer(path: &Path) -> (GraceBook, Option<String>) {
    match read(path) {
        Read::Corrupt(e) => {
            let mut aside = path.as_os_str().to_owned();
            aside.push(".corrupt");
            let aside = std::path::PathBuf::from(aside);
            let moved = match std::fs::rename(path, &aside) {
                Ok(()) => format!("moved it to {}", aside.display()),
                Err(m) => format!("could not move it to {}: {m}", aside.display()),
            };
            (
                GraceBook::default(),
                Some(format!("state file {} is corrupt ({e}); {moved}; starting empty", path.display())),
            )
        }
        other => loaded(path, other),
    }
}

enum Read {
    Book(GraceBook),
    Missing,
    /// Written before the last boot, or by a version that did not say which
    /// boot: its (pid, start time) keys may name new processes now.
    OtherBoot,
    Corrupt(String),
    Failed(io::Error),
}

/// Far more than any real grace book (a few hundred bytes per tree): a
/// bigger file is not ours, and is not read into memory whole.
const MAX_SIZE: u64 = 16 << 20;

fn read(path: &Path) -> Read {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Read::Missing,
        Err(e) => return Read::Failed(e),
    };
    let mut bytes = Vec::new();
    if let Err(e) = io::Read::read_to_end(&mut io::Read::take(file, MAX_SIZE + 1), &mut bytes) {
        return Read::Failed(e);
    }
    if bytes.len() as u64 > MAX_SIZE {
        return Read::Corrupt(format!("larger than {} MiB", MAX_SIZE >> 20));
    }
    let Ok(text) = String::from_utf8(bytes) else { return Read::Corrupt("not UTF-8 text".to_string()) };
    if let Some(now) = boot_id()
        && serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .is_some_and(|v| v.get("boot_id").and_then(serde_json::Value::as_str) != Some(now.as_str()))
    {
        return Read::OtherBoot;
    }
    match GraceBook::from_json(&text) {
        Ok(b) => {
            restore_lineage(&text);
            Read::Book(b)
        }
        Err(e) => Read::Corrupt(e),
    }
}

/// The servers seen below their hosts ([`crate::hostcfg::lineage`]), kept
/// in the member `lineage` that older files lack and older readers ignore.
fn restore_lineage(text: &str) {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        crate::hostcfg::restore_lineage(v.get("lineage").unwrap_or(&serde_json::Value::Null));
    }
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`): identities are
/// (pid, start time since boot), so they hold within one boot only.
pub fn boot_id() -> Option<String> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = text.trim();
    (id.len() == 36 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')).then(|| id.to_string())
}

fn to_json(book: &GraceBook) -> String {
    let text = book.to_json();
    let lineage = crate::hostcfg::lineage_json();
    let boot = boot_id();
    if lineage.as_array().is_none_or(Vec::is_empty) && boot.is_none() {
        return text;
    }
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&text) else { return text };
    if let Some(b) = boot {
        v["boot_id"] = b.into();
    }
    if !lineage.as_array().is_none_or(Vec::is_empty) {
        v["lineage"] = lineage;
    }
    serde_json::to_string_pretty(&v).unwrap_or(text)
}

fn unreadable(path: &Path, e: &io::Error) -> String {
    if e.raw_os_error() == Some(libc::EISDIR) {
        format!("state file {} is a directory; starting empty, and grace times will not be kept", path.display())
    } else {
        format!("cannot read state file {}: {e}; starting empty", path.display())
    }
}

/// Writes the state atomically ([`crate::atomic`]): a crash leaves either the
/// old or the new file, never half of one.
pub fn save(path: &Path, book: &GraceBook) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    crate::atomic::write(path, to_json(book).as_bytes(), 0o600)
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
        assert_eq!(load(&path), (b.clone(), None));
        std::fs::write(&path, "{not json").unwrap();
        let (empty, warn) = load(&path);
        assert!(empty.is_empty());
        assert!(warn.unwrap().contains("corrupt"));
        assert!(path.exists(), "a reader leaves a corrupt file alone");
        std::fs::write(&path, b"\xff\xfe{garbage").unwrap();
        let (empty, warn) = load_for_writer(&path);
        assert!(empty.is_empty());
        let warn = warn.unwrap();
        assert!(warn.contains("corrupt (not UTF-8 text)") && warn.contains("moved it to"), "{warn}");
        assert!(!path.exists());
        assert_eq!(std::fs::read(dir.join("sub/state.json.corrupt")).unwrap(), b"\xff\xfe{garbage");
        assert_eq!(load(&dir.join("missing.json")), (GraceBook::default(), None));
        // Another boot's file (or one that does not say): its identities may
        // be new processes now, so it starts empty, without a warning.
        if let Some(now) = boot_id() {
            save(&path, &b).unwrap();
            assert!(std::fs::read_to_string(&path).unwrap().contains(&format!("\"boot_id\": \"{now}\"")));
            let other = std::fs::read_to_string(&path).unwrap().replace(&now, "00000000-0000-0000-0000-000000000000");
            std::fs::write(&path, other).unwrap();
            assert_eq!(load(&path), (GraceBook::default(), None));
            std::fs::write(&path, b.to_json()).unwrap();
            assert_eq!(load(&path), (GraceBook::default(), None), "no boot id: from before this version");
        }
        let (_, warn) = load_for_writer(&dir.join("sub"));
        assert!(warn.unwrap().contains("is a directory"));
        assert!(dir.join("sub").is_dir());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
