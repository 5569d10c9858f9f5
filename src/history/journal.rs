//! The ledger's journal (`history.jsonl` beside `history.json`): each
//! cycle that acted appends one JSON line, the array of its entries, each
//! numbered (`seq`), and the ledger is rewritten only when the journal
//! passes [`FOLD_BYTES`]. (An array, not a line per entry: it parses through
//! the ledger's own code for its entries, where one entry a line took 4 KB
//! more of the binary.) Rewriting the whole ledger at every reap cost a read,
//! a parse and a write of up to [`super::MAX_BYTES`] each time, growing with
//! the ledger. (The `RssAnon` creep once put on it was glibc's thread cache:
//! `sys::exec_without_thread_cache`.)
//!
//! A fold writes the ledger atomically with the last `seq` it took, then
//! removes the journal: a crash between the two leaves lines the ledger
//! already holds, and readers skip them by their number. A line cut short
//! by a crash is skipped and counted: each append begins with a newline,
//! so it never joins the next.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{Entry, Ledger, Lifetime, ReadError, VERSION};

/// The journal is folded into the ledger past this size: a few hundred
/// entries, months of a desktop's reaps, and the cost of a fold spread
/// over them.
pub const FOLD_BYTES: u64 = 256 << 10;

/// The journal beside the ledger at `ledger`.
pub fn of(ledger: &Path) -> PathBuf {
    let mut name = ledger.as_os_str().to_owned();
    name.push("l");
    PathBuf::from(name)
}

/// A journal as read.
pub struct Lines {
    /// In the order written, each within its bounds.
    pub entries: Vec<Entry>,
    /// Lines (a cycle's entries each) that did not parse.
    pub skipped: usize,
}

/// Reads the journal at `path`: `None` when there is none.
pub fn read(path: &Path) -> Result<Option<Lines>, ReadError> {
    let opened = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path);
    let Some(bytes) = super::read_capped(opened, "journal ")? else { return Ok(None) };
    let mut lines = Lines { entries: Vec::new(), skipped: 0 };
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<Vec<Entry>>(line) {
            Ok(es) => lines.entries.extend(es.into_iter().map(Entry::bounded)),
            Err(_) => lines.skipped += 1,
        }
    }
    Ok(Some(lines))
}

/// Appends to one ledger, keeping its lifetime totals and the journal's
/// size between appends so that an append reads nothing.
pub struct Writer {
    path: PathBuf,
    lifetime: Lifetime,
    seq: u64,
    journal_bytes: u64,
}

impl Writer {
    /// Reads the ledger at `path` once. A corrupt one is moved aside to
    /// `NAME.corrupt`, its journal with it (which of its lines the ledger
    /// held is lost with it), said in the warning, and a new one begun, so
    /// one bad write never stops the history for good.
    pub fn open(path: &Path) -> io::Result<(Writer, Option<String>)> {
        let (ledger, warning) = match super::load(path) {
            Ok(l) => (l.unwrap_or_default(), None),
            Err(ReadError::Io(e)) => return Err(e),
            Err(ReadError::Corrupt(why)) => {
                for p in [path.to_path_buf(), of(path)] {
                    let mut to = p.as_os_str().to_owned();
                    to.push(".corrupt");
                    match std::fs::rename(&p, &to) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                        _ => {}
                    }
                }
                let w = format!(
                    "history {} is corrupt ({why}); moved it and its journal to NAME.corrupt; starting anew",
                    path.display()
                );
                (Ledger::default(), Some(w))
            }
        };
        let journal_bytes = std::fs::metadata(of(path)).map_or(0, |m| m.len());
        Ok((Writer { path: path.to_path_buf(), lifetime: ledger.lifetime(), seq: ledger.seq, journal_bytes }, warning))
    }

    /// The lifetime totals, the appended entries counted.
    pub fn lifetime(&self) -> &Lifetime {
        &self.lifetime
    }

    /// Appends `entries` to the journal and syncs it; folds the journal
    /// into the ledger once it is past [`FOLD_BYTES`].
    pub fn append(&mut self, entries: Vec<Entry>) -> io::Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let entries: Vec<Entry> = entries
            .into_iter()
            .map(|e| {
                let mut e = e.bounded();
                self.seq += 1;
                e.seq = Some(self.seq);
                self.lifetime.since_unix.get_or_insert(e.at_unix);
                self.lifetime.totals.add(&e);
                e
            })
            .collect();
        let mut text = vec![b'\n'];
        serde_json::to_writer(&mut text, &entries).map_err(io::Error::other)?;
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        let (mut f, len) = open_for_append(&of(&self.path))?;
        f.write_all(&text)?;
        f.sync_data()?;
        if len == 0 {
            // A new name survives a crash only once its directory is synced.
            File::open(dir)?.sync_all()?;
        }
        self.journal_bytes = len + text.len() as u64;
        if self.journal_bytes >= FOLD_BYTES { self.fold() } else { Ok(()) }
    }

    /// Writes the ledger with the journal in it, then removes the journal.
    fn fold(&mut self) -> io::Result<()> {
        let mut ledger = match super::load(&self.path) {
            Ok(l) => l.unwrap_or_default(),
            Err(ReadError::Io(e)) => return Err(e),
            Err(ReadError::Corrupt(why)) => return Err(io::Error::other(format!("corrupt ({why})"))),
        };
        ledger.version = VERSION;
        let text = serde_json::to_vec(&ledger).map_err(io::Error::other)?;
        crate::atomic::write(&self.path, &text, 0o600)?;
        match std::fs::remove_file(of(&self.path)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        self.seq = self.seq.max(ledger.seq);
        self.lifetime = ledger.lifetime();
        self.journal_bytes = 0;
        Ok(())
    }
}

/// The journal opened to append, and its length; refused unless it is a
/// regular file of this user's: its name is known, and the directory is
/// the only guard.
fn open_for_append(path: &Path) -> io::Result<(File, u64)> {
    let f = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let m = f.metadata()?;
    if !m.file_type().is_file() || m.uid() != rustix::process::geteuid().as_raw() {
        return Err(io::Error::other(format!("{} is not a regular file of this user's", path.display())));
    }
    Ok((f, m.len()))
}
