//! The human view of `reaperctl scan`: trees grouped by verdict, drawn like
//! `ps --forest`, a reason per tree and a summary line.

use std::collections::HashMap;
use std::fmt::Write;

use crate::policy::Assessment;
use crate::policy::Verdict;
use crate::report::{age, bytes, json};

/// uid → user name, from /etc/passwd (no NSS: this is a display nicety).
pub fn user_names() -> HashMap<u32, String> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let uid = f.nth(1)?.parse().ok()?;
            Some((uid, name.to_string()))
        })
        .collect()
}

/// Width of the terminal on stdout, or `None` when stdout is not one.
pub fn terminal_width() -> Option<usize> {
    let out = std::io::stdout();
    rustix::termios::tcgetwinsize(&out).ok().map(|w| w.ws_col as usize).filter(|&w| w >= 40)
}

/// Columns a line is cut to when stdout is not a terminal: a pipe or a file
/// gets every tree, but not a user's 3 KB command line in full (`--json`
/// has it).
const PIPE_WIDTH: usize = 200;
/// Members listed per tree; the rest are counted (`--json` lists them).
const MAX_MEMBERS: usize = 40;
/// A container plan's characters at most.
const MAX_PLAN: usize = 1000;

fn cut(s: &str, width: Option<usize>, used: usize) -> String {
    let mut out = s.to_string();
    crate::names::cut(&mut out, width.unwrap_or(PIPE_WIDTH).saturating_sub(used));
    out
}

/// `s` in full, broken at spaces into lines of at most `width` (a terminal;
/// `None` for a pipe: one line), the first line after `used` columns, the
/// others indented by `indent`. A word longer than a line stays whole.
/// The reason is the point of a scan: never cut like a command line.
fn wrap(s: &str, width: Option<usize>, used: usize, indent: usize) -> String {
    let Some(w) = width else { return s.to_string() };
    let mut out = String::new();
    let mut col = used;
    let mut line_start = true;
    for word in s.split(' ') {
        let n = word.chars().count();
        if !line_start && col + 1 + n > w {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', indent));
            col = indent;
            line_start = true;
        }
        if !line_start {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += n;
        line_start = false;
    }
    out
}

/// Renders the scan. `width`: cut lines to it (a terminal), or `None` (a pipe).
#[allow(clippy::implicit_hasher)] // one caller, one map
/// The scan's text, from its report (`json::build_with`: with container plans).
pub fn render_report(
    a: &Assessment,
    report: &json::ScanReport,
    users: &HashMap<u32, String>,
    width: Option<usize>,
) -> String {
    let snap = &a.snapshot;
    let mut out = String::new();
    if report.trees.is_empty() {
        let _ = writeln!(out, "No MCP server trees found among {} processes.", snap.len());
    }
    for verdict in Verdict::ALL {
        let trees: Vec<usize> = (0..report.trees.len()).filter(|&i| report.trees[i].verdict == verdict).collect();
        if trees.is_empty() {
            continue;
        }
        let procs: usize = trees.iter().map(|&i| report.trees[i].members.len()).sum();
        let mem: u64 = trees.iter().map(|&i| report.trees[i].memory_bytes).sum();
        let _ = writeln!(
            out,
            "{} · {} tree{} · {} process{} · {}",
            verdict.as_str().to_uppercase(),
            trees.len(),
            if trees.len() == 1 { "" } else { "s" },
            procs,
            if procs == 1 { "" } else { "es" },
            bytes(mem)
        );
        for &i in &trees {
            let t = &report.trees[i];
            let action = if t.reap { "reap" } else { "keep" };
            let head = format!("  tree {} [{action}]: ", t.root);
            let reason = wrap(&super::printable(&t.reason), width, head.chars().count(), 8);
            let _ = writeln!(out, "{head}{reason}");
            if let Some(s) = &t.suspect {
                let head = "    suspect, kept: ";
                let _ = writeln!(out, "{head}{}", wrap(&super::printable(s), width, head.chars().count(), 8));
            }
            let _ = writeln!(
                out,
                "    {:>7} {:<9} {:>6} {:>8}  {:<28}  COMMAND",
                "PID", "USER", "AGE", "RSS+SWAP", "ROLE:PROGRAM"
            );
            let depths: Vec<usize> = t.members.iter().map(|m| m.depth).collect();
            for (k, m) in t.members.iter().enumerate().take(MAX_MEMBERS) {
                let user =
                    m.uid.map_or_else(|| "?".into(), |u| users.get(&u).cloned().unwrap_or_else(|| u.to_string()));
                let user: String = user.chars().take(9).collect();
                let mem = if m.state == "Z" { "zombie".to_string() } else { bytes(m.rss_bytes + m.swap_bytes) };
                let prog = if m.role == "other" {
                    "-".to_string()
                } else {
                    let p: String = super::printable(&m.program).chars().take(27 - m.role.len().min(12)).collect();
                    format!("{}:{p}", m.role)
                };
                let line =
                    format!("    {:>7} {:<9} {:>6} {:>8}  {prog:<28}  ", m.pid, user, age(m.age_secs as f64), mem);
                let cmd = format!("{}{}", branch(&depths, k), super::printable(&m.cmdline));
                let used = line.chars().count();
                let _ = writeln!(out, "{line}{}", cut(&cmd, width, used));
                if m.configured.is_some()
                    && let Some(rule) = &m.role_rule
                {
                    // Why a process with no MCP-like name is a server.
                    let _ = writeln!(out, "    {:>7} ↳ {}", m.pid, cut(&super::printable(rule), width, 14));
                }
            }
            if let Some(rest) = t.members.get(MAX_MEMBERS..).filter(|r| !r.is_empty()) {
                let mem: u64 = rest.iter().map(|m| m.rss_bytes + m.swap_bytes).sum();
                let _ = writeln!(
                    out,
                    "    … and {} more process(es) in this tree, {} (`reaperctl scan --json` lists them all)",
                    rest.len(),
                    bytes(mem)
                );
            }
            for c in &t.containers {
                // Why a container would or would not be stopped: the point,
                // like the reason, so wrapped whole; only a user's very long
                // names in it are cut.
                let mut plan = super::printable(&c.plan).into_owned();
                crate::names::cut(&mut plan, MAX_PLAN);
                let _ = writeln!(out, "    {}", wrap(&plan, width, 4, 8));
            }
        }
        out.push('\n');
    }
    duplicates(&mut out, report, width);
    let s = &report.summary;
    let counts: Vec<String> = Verdict::ALL
        .iter()
        .filter_map(|v| s.by_verdict.get(v.as_str()).filter(|&&n| n > 0).map(|n| format!("{n} {v}")))
        .collect();
    let _ =
        write!(out, "{} tree{} among {} processes", s.trees, if s.trees == 1 { "" } else { "s" }, s.processes_scanned);
    if !counts.is_empty() {
        let _ = write!(out, " ({})", counts.join(", "));
    }
    let _ = writeln!(
        out,
        " · reaping now would end {} process{} in {} tree{} and return about {} · scanned in {:.0} ms",
        s.reap_processes,
        if s.reap_processes == 1 { "" } else { "es" },
        s.reap_trees,
        if s.reap_trees == 1 { "" } else { "s" },
        bytes(s.reap_memory_bytes),
        s.scan_ms
    );
    out
}

/// The `│  ├─ ` prefix of member `k` in a depth-first list of depths.
fn branch(depths: &[usize], k: usize) -> String {
    let d = depths[k];
    if d == 0 {
        return String::new();
    }
    // Is the node at `level` on the path to k the last of its siblings?
    let is_last = |pos: usize, level: usize| -> bool {
        depths[pos + 1..].iter().find(|&&x| x <= level).is_none_or(|&x| x < level)
    };
    let mut s = String::new();
    for level in 1..d {
        // Find the ancestor of k at `level`.
        let anc = (0..k).rev().find(|&p| depths[p] == level).unwrap_or(k);
        s.push_str(if is_last(anc, level) { "   " } else { "│  " });
    }
    s.push_str(if is_last(k, d) { "└─ " } else { "├─ " });
    s
}

/// Server commands running more than once under one live host.
fn duplicates(out: &mut String, report: &json::ScanReport, width: Option<usize>) {
    if report.duplicates.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "DUPLICATES · the same server command more than once under one live host (kept; reaperctl generations shows each copy)"
    );
    for d in &report.duplicates {
        let roots: Vec<String> = d.root_pids.iter().map(ToString::to_string).collect();
        let line = format!(
            "  {}× {} under host {} ({}) in {} generation{}, {} RSS: trees {}",
            d.count,
            super::printable(&d.command),
            d.host_pid,
            super::printable(&d.host_cmd),
            d.generation_count,
            if d.generation_count == 1 { "" } else { "s" },
            super::bytes(d.rss_bytes),
            roots.join(", ")
        );
        let _ = writeln!(out, "{}", cut(&line, width, 0));
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::{branch, wrap};

    #[test]
    fn a_reason_is_wrapped_whole_never_cut() {
        let reason = "adopted by systemd --user (pid 812) after its host exited; server @playwright/mcp (pid 4242) \
                      has its stdio on a pipe";
        let text = wrap(reason, Some(40), 20, 8);
        assert_eq!(text.split_whitespace().collect::<Vec<_>>(), reason.split_whitespace().collect::<Vec<_>>());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() > 2, "{text}");
        assert!(lines[0].chars().count() + 20 <= 40, "{text}");
        assert!(lines[1..].iter().all(|l| l.starts_with("        ") && l.chars().count() <= 40), "{text}");
        assert_eq!(wrap(reason, None, 20, 8), reason, "a pipe gets one line");
    }

    #[test]
    fn forest_branches() {
        let d = [0, 1, 2, 2, 1, 2];
        let drawn: Vec<String> = (0..d.len()).map(|k| branch(&d, k)).collect();
        assert_eq!(drawn, ["", "├─ ", "│  ├─ ", "│  └─ ", "└─ ", "   └─ "]);
    }
}
