//! `reaperctl generations --end HOST_PID`: what was ended of one host's
//! copies (or, in a dry run, would be), each copy with the reason it ended
//! or stayed, the memory given back, and whether the host started new
//! copies right after (issue 35 item 4). JSON fields are only ever added.

use std::fmt::Write as _;

use serde::Serialize;

use super::{bytes, printable};

#[derive(Clone, Debug, Serialize)]
pub struct EndReport {
    pub host_pid: i32,
    pub host_start_time: u64,
    pub host_cmd: String,
    pub dry_run: bool,
    /// Where the evidence of idleness comes from, in words.
    pub evidence: String,
    /// The idle window the copies were judged by.
    pub idle_secs: u64,
    pub keep_newest: usize,
    /// Every copy of every server the host holds, oldest first per command.
    pub copies: Vec<EndCopy>,
    /// Copies ended (in a dry run: that would end).
    pub ended: usize,
    /// PSS + `SwapPss` of what ended (in a dry run: of what would).
    pub reclaimed_bytes: u64,
    /// How long the host was watched after the endings (0: not watched).
    pub watched_secs: u64,
    /// Copies of an ended command the host started meanwhile.
    pub restarted: Vec<Restarted>,
    /// The closing sentence.
    pub sentence: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct EndCopy {
    pub pid: i32,
    pub start_time: u64,
    pub command: String,
    /// The plan's word: end it.
    pub end: bool,
    /// Gone after the signals (always false in a dry run).
    pub ended: bool,
    pub why: String,
    /// Of an ending copy: its memory given back (dry run: that would be).
    pub reclaimed_bytes: Option<u64>,
    /// Signal failures, and members that would not go.
    pub errors: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Restarted {
    pub pid: i32,
    pub command: String,
}

/// The closing sentence for `r` (its other fields filled in).
pub fn sentence(r: &EndReport) -> String {
    let n = r.ended;
    let copies = if n == 1 { "copy" } else { "copies" };
    let mut s = if r.dry_run {
        format!("{n} {copies} would end, {} would be given back; nothing was signalled", bytes(r.reclaimed_bytes))
    } else {
        format!("ended {n} {copies}, {} given back", bytes(r.reclaimed_bytes))
    };
    if r.watched_secs > 0 {
        if r.restarted.is_empty() {
            let _ = write!(s, "; the host started no new copy of them in {}s", r.watched_secs);
        } else {
            let _ = write!(
                s,
                "; the host restarts what it loses: it started {} new {} of them within {}s",
                r.restarted.len(),
                if r.restarted.len() == 1 { "copy" } else { "copies" },
                r.watched_secs
            );
        }
    }
    s
}

pub fn render(r: &EndReport) -> String {
    let mut out = format!(
        "HOST {} (pid {}) · idle by {}, window {}s · the newest {} per command kept\n",
        printable(&r.host_cmd),
        r.host_pid,
        r.evidence,
        r.idle_secs,
        r.keep_newest
    );
    for c in &r.copies {
        let word = match (c.end, c.ended, r.dry_run) {
            (true, _, true) => "would end",
            (true, true, false) => "ended",
            (true, false, false) => "NOT ended",
            (false, ..) => "kept",
        };
        let mem = c.reclaimed_bytes.map_or_else(String::new, |b| format!(" · {}", bytes(b)));
        let mut line = format!("  {word:<9} pid {} · {}{mem} · {}", c.pid, printable(&c.command), printable(&c.why));
        for e in &c.errors {
            let _ = write!(line, " · {}", printable(e));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&printable(&r.sentence));
    out.push('\n');
    out
}
