//! `reaperctl history`: what was reaped, when, and what it returned, from
//! the ledger beside the state file ([`crate::history`]). Read from the file
//! when this user can; else the running daemon is asked (a user then sees
//! their own trees); `--socket` asks that daemon first; `--state-file` reads
//! the ledger beside that state file and nothing else.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Cli, ask, load_config, proto, sources};
use crate::exit;
use crate::history::{self, View};
use crate::report::{bytes, utc};

#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// Only what was reaped in the last DURATION: a number and a unit,
    /// s, m, h, d or w (`30d`, `12h`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub since: Option<Duration>,
    /// Print the ledger as JSON (entries, their totals, the lifetime totals).
    #[arg(long)]
    pub json: bool,
    /// Read the ledger beside this state file (`history.json` in its
    /// directory), as a daemon started with `mcp-reaperd --state-file PATH`
    /// writes it; the daemon is not asked.
    #[arg(long, value_name = "PATH")]
    pub state_file: Option<std::path::PathBuf>,
}

/// `30d`, `12h`, `90m`, `45s`, `2w`: one number, one unit. (Hand-written:
/// one unit per value is all `--since` takes, not worth a crate.)
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("not a duration: {s:?} (e.g. 30d, 12h, 90m)"))?;
    let secs = match unit {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(format!("unknown unit {unit:?} in {s:?}: use s, m, h, d or w")),
    };
    n.checked_mul(secs).map(Duration::from_secs).ok_or_else(|| format!("{s:?} is too long"))
}

pub fn run(cli: &Cli, args: &HistoryArgs) -> ExitCode {
    let cfg = match load_config(&sources(&cli.config), "reaperctl") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let since_unix = args.since.map(|d| now.saturating_sub(d.as_secs()));
    let named = args.state_file.as_deref();
    let path = history::beside(&crate::paths::state_file(named.or(cfg.state_file.as_deref())));
    let local = if cli.socket.is_some() && named.is_none() { None } else { Some(history::load(&path)) };
    let view = match local {
        // A state file named here: that ledger, or why not; no daemon asked.
        Some(Ok(None)) if named.is_some() => View::new(&path, None, since_unix, None),
        Some(Err(history::ReadError::Io(e))) if named.is_some() => {
            crate::say_err!("reaperctl: cannot read the history {}: {e}", path.display());
            return ExitCode::from(exit::NOPERM);
        }
        Some(Ok(Some(ledger))) => View::new(&path, Some(&ledger), since_unix, None),
        Some(Err(history::ReadError::Corrupt(why))) => {
            crate::say_err!("reaperctl: the history {} is corrupt ({why})", path.display());
            return ExitCode::from(exit::SOFTWARE);
        }
        // None here, or not ours to read (root's, for a user): the daemon's.
        other => {
            let daemon_there = cli.socket.is_some() || super::socket_path(cli, Some(&cfg)).exists();
            match other {
                Some(Ok(None)) if !daemon_there => View::new(&path, None, since_unix, None),
                Some(Err(history::ReadError::Io(e))) if !daemon_there => {
                    crate::say_err!("reaperctl: cannot read the history {}: {e}", path.display());
                    crate::say_err!("hint: run as root, or ask a running daemon (`reaperctl history --socket PATH`)");
                    return ExitCode::from(exit::NOPERM);
                }
                _ => match from_daemon(cli, since_unix) {
                    Ok(v) => v,
                    Err(code) => return code,
                },
            }
        }
    };
    if let Some(note) = &view.note {
        crate::say_err!("reaperctl: {note}");
    }
    if args.json {
        crate::stdout::outln!(
            "{}",
            crate::names::printable_json(&serde_json::to_string_pretty(&view).expect("history serializes"))
        );
    } else {
        crate::stdout::out!("{}", crate::names::printable_lines(&render(&view, args.since)));
    }
    ExitCode::from(exit::OK)
}

fn from_daemon(cli: &Cli, since_unix: Option<u64>) -> Result<View, ExitCode> {
    let reply = ask(cli, proto::Command::History { since_unix }, super::SHORT)?;
    reply.history.ok_or_else(|| {
        crate::say_err!("reaperctl: the daemon sent no history");
        ExitCode::from(exit::SOFTWARE)
    })
}

/// The human view: one entry in two lines, then the window's and the lifetime's totals.
pub fn render(v: &View, since: Option<Duration>) -> String {
    let mut o = String::new();
    for e in &v.entries {
        let what = if e.ok {
            "reaped"
        } else if e.processes == 0 {
            "FAILED"
        } else {
            "PARTLY"
        };
        let more = if e.programs_more == 0 { String::new() } else { format!(", +{} more", e.programs_more) };
        let programs =
            if e.programs.is_empty() { String::new() } else { format!(" [{}{more}]", e.programs.join(", ")) };
        let _ = writeln!(o, "{}  {what} {} root={} {}{programs}", utc(e.at_unix), e.verdict, e.root_pid, e.root_cmd);
        let mut detail = format!(
            "{} process(es), {} returned, signals {}",
            e.processes,
            bytes(e.reclaimed_bytes),
            if e.signals.is_empty() { "-".to_string() } else { e.signals.join(",") }
        );
        for c in &e.containers {
            let _ = write!(detail, "; {}", c.words());
        }
        if !e.errors.is_empty() {
            let _ = write!(detail, "; errors: {}", e.errors.join("; "));
        }
        let _ = writeln!(o, "    {detail}\n    {}", e.reason);
    }
    let span = match since {
        Some(d) => format!("in the last {}", duration_words(d)),
        None => "in the ledger".to_string(),
    };
    let _ = writeln!(o, "{span}: {}", crate::report::status_text::totals_words(&v.window));
    let l = &v.lifetime;
    match l.since_unix {
        Some(t) => {
            let _ = writeln!(o, "since {}: {}", utc(t), crate::report::status_text::totals_words(&l.totals));
        }
        None => {
            let _ = writeln!(o, "nothing reaped yet ({})", v.path);
        }
    }
    if l.dropped > 0 {
        let _ = writeln!(o, "({} older entries dropped from the ledger; counted in the totals)", l.dropped);
    }
    if let Some(uid) = v.filtered_for_uid {
        let _ = writeln!(o, "(showing only trees of uid {uid}; the totals count every tree)");
    }
    o
}

/// A duration as `--since` takes it: `30d`, `1h`, `90m`.
fn duration_words(d: Duration) -> String {
    let secs = d.as_secs();
    let unit = [(7 * 86_400, "w"), (86_400, "d"), (3600, "h"), (60, "m")]
        .into_iter()
        .find(|&(n, _)| secs >= n && secs.is_multiple_of(n));
    match unit {
        Some((n, u)) => format!("{}{u}", secs / n),
        None => format!("{secs}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert!(parse_duration("d").is_err());
        assert!(parse_duration("3y").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("99999999999999999999w").is_err());
        assert_eq!(duration_words(Duration::from_secs(3600)), "1h");
        assert_eq!(duration_words(Duration::from_secs(30 * 86_400)), "30d");
        assert_eq!(duration_words(Duration::from_secs(90)), "90s");
    }
}
