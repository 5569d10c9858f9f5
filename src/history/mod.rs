//! The ledger of what was reaped, kept beside the state file
//! (`history.json`): one entry per tree acted on (when, the tree's root and
//! programs, verdict and reason, memory returned, containers), and lifetime
//! totals that outlive restarts and upgrades. A cycle that acted appends
//! its entries to a journal beside it ([`journal`]); the journal is folded
//! into the ledger, written atomically ([`crate::atomic`]), once it passes
//! [`journal::FOLD_BYTES`]. Bounded to [`MAX_ENTRIES`] and [`MAX_BYTES`]
//! as read (the oldest go first; the totals keep counting). Fields are only
//! ever added: an older reader skips what it does not know, a newer one
//! takes what is missing as empty.
//!
//! Dry runs write nothing here: the ledger says what was done, not planned.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod journal;
pub use journal::Writer;

use crate::policy::Verdict;
use crate::reap::{ContainerOutcome, Outcome};
use crate::report::status::Totals;

pub const FILE_NAME: &str = "history.json";
/// About 500 bytes each: a ledger of a few MiB, rewritten only after a
/// cycle that reaped, holds months of a busy desktop's reaps.
pub const MAX_ENTRIES: usize = 5000;
/// The ledger as written, whatever users named their processes: the
/// oldest entries go first past it (issue 34: a user's 3 KB `argv[0]`s
/// grew it by 360 KB a tree, until it passed the read limit, was declared
/// corrupt and the lifetime totals reset).
pub const MAX_BYTES: usize = 4 << 20;
/// Far more than [`MAX_BYTES`]: a bigger file (or journal) is not ours. Above it only
/// because ledgers written before the bound may be larger; they are cut to
/// the bounds at their next write.
const MAX_SIZE: u64 = 64 << 20;
/// An entry keeps this many of its members' programs by name, each cut to
/// [`NAME_WIDTH`] characters; the rest are counted and digested.
pub const MAX_PROGRAMS: usize = 8;
pub const NAME_WIDTH: usize = 64;
/// Texts of an entry that carry what users chose (a reason names their
/// processes, a container its image, an error a path).
const TEXT_WIDTH: usize = 1024;
const MAX_LIST: usize = 16;
const VERSION: u32 = 1;

/// The ledger beside a state file.
pub fn beside(state_file: &Path) -> PathBuf {
    state_file.with_file_name(FILE_NAME)
}

/// One tree acted on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub at_unix: u64,
    pub verdict: Verdict,
    pub reason: String,
    pub root_pid: i32,
    pub root_start_time: u64,
    pub root_cmd: String,
    /// The programs of its members, each once, in tree order: the first
    /// [`MAX_PROGRAMS`], each cut to [`NAME_WIDTH`].
    #[serde(default)]
    pub programs: Vec<String>,
    /// Distinct programs beyond those named.
    #[serde(default)]
    pub programs_more: usize,
    /// FNV-1a (64-bit, hex) of those programs' names, in tree order: two
    /// entries with the same digest ended the same programs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programs_digest: Option<String>,
    /// Owner of the root.
    #[serde(default)]
    pub uid: Option<u32>,
    /// Processes in the tree at the signal (those that joined included).
    #[serde(default)]
    pub members: usize,
    /// Processes ended.
    #[serde(default)]
    pub processes: usize,
    #[serde(default)]
    pub signals: Vec<String>,
    #[serde(default)]
    pub escalated: bool,
    /// Something was ended and nothing was left unkillable.
    #[serde(default)]
    pub reaped: bool,
    /// No member left unkillable and no signal failed.
    #[serde(default)]
    pub ok: bool,
    /// Memory (PSS + swap) of the members that are gone.
    #[serde(default)]
    pub reclaimed_bytes: u64,
    /// `MemAvailable` after minus before, when both were read.
    #[serde(default)]
    pub mem_available_delta: Option<i64>,
    #[serde(default)]
    pub containers: Vec<ContainerOutcome>,
    #[serde(default)]
    pub errors: Vec<String>,
    /// Its number in the ledger, counting from the first entry written
    /// with one (entries written before the journal have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

impl Entry {
    /// The entry for one outcome; `programs` and `uid` come from the
    /// judgement the outcome's order came from.
    pub fn new(o: &Outcome, programs: Vec<String>, uid: Option<u32>, at_unix: u64) -> Entry {
        let e = Entry {
            at_unix,
            verdict: o.verdict,
            reason: o.reason.clone(),
            root_pid: o.root.pid.get(),
            root_start_time: o.root.start_time.0,
            root_cmd: o.root_cmd.clone(),
            programs,
            uid,
            members: o.members + o.joined,
            processes: o.gone,
            signals: o.signals.iter().map(ToString::to_string).collect(),
            escalated: o.escalated,
            reaped: o.reaped(),
            ok: o.success(),
            reclaimed_bytes: o.reclaimed.total(),
            mem_available_delta: o.mem_available_delta,
            containers: o.containers.clone(),
            errors: o.errors.clone(),
            programs_more: 0,
            programs_digest: None,
            seq: None,
        };
        e.bounded()
    }

    /// The entry within its bounds, whatever users named their processes,
    /// containers and images: a few programs by name (the rest counted and
    /// digested), texts cut, lists cut. Applied to what is read too, so a
    /// ledger written before the bounds is cut at its next write.
    pub fn bounded(mut self) -> Entry {
        if self.programs.len() > MAX_PROGRAMS {
            let rest = self.programs.split_off(MAX_PROGRAMS);
            self.programs_more += rest.len();
            let digest = rest.iter().fold(FNV_OFFSET, |h, name| fnv1a(fnv1a(h, name.as_bytes()), &[0]));
            self.programs_digest = Some(format!("{digest:016x}"));
        }
        for p in &mut self.programs {
            crate::names::cut(p, NAME_WIDTH);
        }
        for t in [&mut self.reason, &mut self.root_cmd] {
            crate::names::cut(t, TEXT_WIDTH);
        }
        self.signals.truncate(MAX_LIST);
        self.errors.truncate(MAX_LIST);
        self.containers.truncate(MAX_LIST);
        for e in &mut self.errors {
            crate::names::cut(e, TEXT_WIDTH);
        }
        for c in &mut self.containers {
            c.bound(TEXT_WIDTH);
        }
        self
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The entries for a cycle's outcomes; `a` is the judgement their orders
/// came from (the members' programs, the root's owner).
pub fn entries(a: &crate::policy::Assessment, outcomes: &[Outcome], at_unix: u64) -> Vec<Entry> {
    let snap = &a.snapshot;
    outcomes
        .iter()
        .map(|o| {
            let mut programs: Vec<String> = Vec::new();
            if let Some(j) = a.judgements.iter().find(|j| j.root_id(snap) == o.root) {
                for &(m, _) in &j.members {
                    let p = &snap.procs[m];
                    let name = crate::redact::redact(p.program.name(&p.cmdline)).into_owned();
                    let name = crate::names::printable(&name).into_owned();
                    if !name.is_empty() && !programs.contains(&name) {
                        programs.push(name);
                    }
                }
            }
            let uid = snap.get(o.root.pid).filter(|p| p.id == o.root).and_then(crate::scan::Process::uid).map(|u| u.0);
            Entry::new(o, programs, uid, at_unix)
        })
        .collect()
}

/// The totals since the ledger began.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Lifetime {
    /// When the first entry was written (unix seconds; `None`: never).
    #[serde(default)]
    pub since_unix: Option<u64>,
    #[serde(default)]
    pub totals: Totals,
    /// Entries dropped to keep the ledger bounded (still in the totals).
    #[serde(default)]
    pub dropped: u64,
}

/// The file: the fields of [`Lifetime`] at its top level (they are not a
/// `#[serde(flatten)]` field: that buffers what it reads through serde's
/// `Content` and cost more of the binary than these lines).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Ledger {
    pub version: u32,
    #[serde(default)]
    pub since_unix: Option<u64>,
    #[serde(default)]
    pub totals: Totals,
    #[serde(default)]
    pub dropped: u64,
    /// Oldest first.
    #[serde(default)]
    pub entries: Vec<Entry>,
    /// The last entry of the journal folded in: the journal's entries up to
    /// it are in `entries` and the totals already.
    #[serde(default)]
    pub seq: u64,
    /// Lines of the journal that could not be read (a write cut short).
    #[serde(skip)]
    pub skipped: usize,
}

impl Ledger {
    /// The totals since the ledger began.
    pub fn lifetime(&self) -> Lifetime {
        Lifetime { since_unix: self.since_unix, totals: self.totals.clone(), dropped: self.dropped }
    }

    /// Adds entries (and counts them), dropping the oldest beyond the
    /// bounds: [`MAX_ENTRIES`], and [`MAX_BYTES`] as written.
    pub fn push(&mut self, entries: impl IntoIterator<Item = Entry>) {
        for e in entries {
            let e = e.bounded();
            self.since_unix.get_or_insert(e.at_unix);
            self.totals.add(&e);
            self.entries.push(e);
        }
        let mut over = self.entries.len().saturating_sub(MAX_ENTRIES);
        // Newest first: what the newest `keep` entries take as written.
        let mut bytes = 256;
        let keep = self.entries[over..]
            .iter()
            .rev()
            .take_while(|e| {
                bytes += written_len(e).map_or(MAX_BYTES, |n| n + 1);
                bytes <= MAX_BYTES
            })
            .count();
        over = self.entries.len() - keep;
        if over > 0 {
            self.entries.drain(..over);
            self.dropped += over as u64;
        }
    }

    /// Entries at or after `since_unix`, oldest first.
    pub fn since(&self, since_unix: u64) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(move |e| e.at_unix >= since_unix)
    }
}

/// How many bytes `e` takes as written, counted as it is serialized (the
/// ledger's bound is checked at every push: nothing is allocated for it).
fn written_len(e: &Entry) -> Option<usize> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    serde_json::to_writer(&mut n, e).ok().map(|()| n.0)
}

/// What `reaperctl history` shows, from the file or from the daemon.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct View {
    /// The ledger file.
    pub path: String,
    /// Entries at or after this time (unix seconds); `None`: all.
    pub since_unix: Option<u64>,
    /// The entries shown, counted.
    pub window: Totals,
    pub lifetime: Lifetime,
    /// Oldest first.
    pub entries: Vec<Entry>,
    /// Set when the daemon showed a user only the trees of that user.
    #[serde(default)]
    pub filtered_for_uid: Option<u32>,
    /// Why the ledger could not be read, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl View {
    /// The view of `ledger` (none yet: empty) from `since_unix` on, of the
    /// trees `uid` owns (`None`: every tree).
    pub fn new(path: &Path, ledger: Option<&Ledger>, since_unix: Option<u64>, uid: Option<u32>) -> View {
        let entries: Vec<Entry> = ledger
            .map(|l| l.since(since_unix.unwrap_or(0)).filter(|e| uid.is_none() || e.uid == uid).cloned().collect())
            .unwrap_or_default();
        let mut window = Totals::default();
        for e in &entries {
            window.add(e);
        }
        let skipped = ledger.map_or(0, |l| l.skipped);
        View {
            path: path.display().to_string(),
            since_unix,
            window,
            lifetime: ledger.map(Ledger::lifetime).unwrap_or_default(),
            entries,
            filtered_for_uid: uid,
            note: (skipped > 0).then(|| format!("{skipped} unreadable lines of the journal were skipped")),
        }
    }
}

/// Why a ledger could not be read.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    Corrupt(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Corrupt(why) => write!(f, "corrupt ({why})"),
        }
    }
}

/// Reads the ledger with its journal: `None` when there is neither yet.
pub fn load(path: &Path) -> Result<Option<Ledger>, ReadError> {
    let base = load_base(path)?;
    let journal = journal::read(&journal::of(path))?;
    if base.is_none() && journal.is_none() {
        return Ok(None);
    }
    let mut ledger = base.unwrap_or_default();
    if let Some(j) = journal {
        ledger.skipped = j.skipped;
        let new: Vec<Entry> = j.entries.into_iter().filter(|e| e.seq.is_none_or(|s| s > ledger.seq)).collect();
        ledger.seq = new.iter().filter_map(|e| e.seq).fold(ledger.seq, u64::max);
        ledger.push(new);
    }
    Ok(Some(ledger))
}

/// The ledger's file or its journal (`what`, for the error), as `opened`,
/// read whole: `None` when there is none, refused past [`MAX_SIZE`].
fn read_capped(opened: io::Result<std::fs::File>, what: &str) -> Result<Option<Vec<u8>>, ReadError> {
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ReadError::Io(e)),
    };
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut io::Read::take(file, MAX_SIZE + 1), &mut bytes).map_err(ReadError::Io)?;
    if bytes.len() as u64 > MAX_SIZE {
        return Err(ReadError::Corrupt(format!("{what}larger than {} MiB", MAX_SIZE >> 20)));
    }
    Ok(Some(bytes))
}

/// Reads the ledger file alone.
fn load_base(path: &Path) -> Result<Option<Ledger>, ReadError> {
    let Some(bytes) = read_capped(std::fs::File::open(path), "")? else { return Ok(None) };
    let mut ledger: Ledger = serde_json::from_slice(&bytes).map_err(|e| ReadError::Corrupt(e.to_string()))?;
    drop(bytes);
    ledger.entries = std::mem::take(&mut ledger.entries).into_iter().map(Entry::bounded).collect();
    if ledger.version != VERSION {
        return Err(ReadError::Corrupt(format!("unsupported history version {}", ledger.version)));
    }
    Ok(Some(ledger))
}

/// Appends entries to the ledger at `path` (its journal); returns the
/// lifetime totals now, and a warning when a corrupt ledger was moved
/// aside ([`Writer::open`]). One call reads the whole ledger: the daemon
/// keeps a [`Writer`] instead.
pub fn append(path: &Path, entries: Vec<Entry>) -> io::Result<(Lifetime, Option<String>)> {
    let (mut w, warning) = Writer::open(path)?;
    w.append(entries)?;
    Ok((w.lifetime().clone(), warning))
}

#[cfg(test)]
mod tests;
