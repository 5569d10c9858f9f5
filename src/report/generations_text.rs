//! `reaperctl generations`: the human view of [`super::generations`]. A
//! runaway host holds hundreds of copies: what is listed is bounded (the
//! rest counted), and every line is cut to [`MAX_COLUMNS`].

use std::fmt::Write as _;

use super::generations::{CopyOut, GenerationsReport};
use super::{age, bytes, printable};

/// Server commands listed at most (the biggest piles come first).
pub const MAX_SERVERS: usize = 20;
/// Generations listed per command at most: the newest, which a host most
/// likely still uses, and the oldest, most likely left behind.
pub const MAX_GENERATIONS: usize = 6;
/// Copies listed per generation at most.
pub const MAX_COPIES: usize = 8;
/// No line is longer, whatever a command line holds.
pub const MAX_COLUMNS: usize = 200;

pub fn render(r: &GenerationsReport) -> String {
    let mut out = String::new();
    if r.hosts.is_empty() {
        out.push_str("no live host holds an MCP server\n");
        return out;
    }
    let mut listed = 0;
    for h in &r.hosts {
        // Bounded by commands listed, hosts included: a machine of many
        // hosts must not print a header for each past the bound.
        if listed == MAX_SERVERS {
            break;
        }
        line(
            &mut out,
            0,
            &format!(
                "HOST {} (pid {}) · {} {} · {}",
                printable(&h.host_cmd),
                h.host_pid,
                h.copies,
                if h.copies == 1 { "copy" } else { "copies" },
                bytes(h.memory_bytes)
            ),
        );
        for s in &h.servers {
            if listed == MAX_SERVERS {
                break;
            }
            listed += 1;
            line(&mut out, 2, &printable(&s.sentence));
            let named: Vec<String> = s
                .sessions
                .iter()
                .filter_map(|x| x.session.as_ref().map(|id| format!("{} ({})", printable(id), x.copies)))
                .collect();
            if !named.is_empty() {
                line(&mut out, 4, &format!("sessions: {}", named.join(", ")));
            }
            let n = s.generations.len();
            let shown: Vec<usize> = if n <= MAX_GENERATIONS {
                (0..n).collect()
            } else {
                let half = MAX_GENERATIONS / 2;
                (0..half).chain(n - half..n).collect()
            };
            for (k, &i) in shown.iter().enumerate() {
                if k > 0 && shown[k - 1] + 1 != i {
                    line(&mut out, 4, &format!("… {} generations between", i - shown[k - 1] - 1));
                }
                let g = &s.generations[i];
                let mut head = format!(
                    "generation {} · started {} ago · {} {} · {}",
                    i + 1,
                    age(g.age_secs),
                    g.copies.len(),
                    if g.copies.len() == 1 { "copy" } else { "copies" },
                    bytes(g.memory_bytes)
                );
                if let Some(id) = &g.session {
                    let _ = write!(head, " · session {}", printable(id));
                }
                line(&mut out, 4, &head);
                for c in g.copies.iter().take(MAX_COPIES) {
                    line(&mut out, 6, &copy_line(c));
                }
                if g.copies.len() > MAX_COPIES {
                    line(&mut out, 6, &format!("… and {} more copies", g.copies.len() - MAX_COPIES));
                }
            }
        }
    }
    let hidden: usize = r.hosts.iter().map(|h| h.servers.len()).sum::<usize>().saturating_sub(listed);
    if hidden > 0 {
        line(&mut out, 0, &format!("… and {hidden} more server commands (--json lists all)"));
    }
    let s = &r.summary;
    line(
        &mut out,
        0,
        &format!(
            "{} {} of {} {} under {} live {} in {} {}, {}; idle: {}",
            s.copies,
            if s.copies == 1 { "copy" } else { "copies" },
            s.commands,
            if s.commands == 1 { "server command" } else { "server commands" },
            s.hosts,
            if s.hosts == 1 { "host" } else { "hosts" },
            s.generations,
            if s.generations == 1 { "generation" } else { "generations" },
            bytes(s.memory_bytes),
            r.idle
        ),
    );
    out
}

fn copy_line(c: &CopyOut) -> String {
    let cpu = c.cpu_secs.map_or_else(|| "?".into(), |s| format!("{s:.1}s"));
    let io = match (c.rchar, c.wchar) {
        (Some(r), Some(w)) => format!("read {} written {}", bytes(r), bytes(w)),
        _ => "I/O unreadable".into(),
    };
    let held = match c.host_holds_transport {
        Some(true) => "host holds its transport",
        Some(false) => "host no longer holds its transport",
        None => "transport holder unknown",
    };
    let mem = if c.memory_source == "pss+swappss" {
        bytes(c.memory_bytes)
    } else {
        format!("{} ({})", bytes(c.memory_bytes), c.memory_source)
    };
    let verdict = if c.verdict == crate::policy::Verdict::Live { String::new() } else { format!(" · {}", c.verdict) };
    // The daemon's samples, where it has this copy's: idle since, and what
    // its policy would do (the reason is in `--json`).
    let idle = match (c.idle_secs, c.policy_end) {
        (Some(i), Some(true)) => format!(" · idle {} · the policy ends it", age(i as f64)),
        (Some(i), _) => format!(" · idle {}", age(i as f64)),
        (None, _) => String::new(),
    };
    format!(
        "pid {} · age {} · {} {} · {mem} · cpu {cpu} · {io} · {held}{idle}{verdict}",
        c.pid,
        age(c.age_secs),
        c.members,
        if c.members == 1 { "process" } else { "processes" },
    )
}

/// One line, indented and cut to [`MAX_COLUMNS`].
fn line(out: &mut String, indent: usize, text: &str) {
    let mut s = format!("{:indent$}{text}", "");
    crate::names::cut(&mut s, MAX_COLUMNS);
    out.push_str(&s);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::generations::{GenerationOut, HostCopies, ServerCopies, Summary};

    fn copy(pid: i32) -> CopyOut {
        CopyOut {
            pid,
            start_time: 1,
            age_secs: 60.0,
            members: 2,
            memory_bytes: 1 << 20,
            memory_source: "pss+swappss".into(),
            cpu_secs: Some(0.5),
            rchar: Some(10),
            wchar: Some(20),
            io_unreadable_members: 0,
            host_holds_transport: Some(true),
            session: None,
            verdict: crate::policy::Verdict::Live,
            idle_secs: None,
            watched_secs: None,
            policy_end: None,
            policy_why: None,
        }
    }

    #[test]
    fn a_runaway_host_is_listed_within_bounds() {
        let gens: Vec<GenerationOut> = (0..50)
            .map(|g| GenerationOut {
                session: Some("\u{1b}[2J".into()),
                age_secs: 10.0,
                memory_bytes: 1,
                copies: (0..30).map(|k| copy(g * 100 + k)).collect(),
            })
            .collect();
        let server = ServerCopies {
            command: format!("evil\u{202e}{}", "x".repeat(500)),
            copies: 1500,
            generation_count: 50,
            memory_bytes: 1,
            idle_copies: None,
            idle_secs: None,
            sentence: format!("host h holds 1500 copies of evil\u{202e}{} in 50 generations, 1 B", "x".repeat(500)),
            sessions: Vec::new(),
            generations: gens,
        };
        let r = GenerationsReport {
            window_secs: 3,
            idle: super::super::generations::IDLE_UNKNOWN.into(),
            hosts: vec![HostCopies {
                host_pid: 5,
                host_start_time: 1,
                host_cmd: "claude".into(),
                copies: 1500,
                memory_bytes: 1,
                servers: vec![server; 30],
            }],
            summary: Summary { hosts: 1, commands: 30, copies: 45_000, generations: 1500, memory_bytes: 1 },
        };
        let text = render(&r);
        assert!(text.lines().all(|l| l.chars().count() <= MAX_COLUMNS), "{text}");
        assert!(!text.contains('\u{1b}') && !text.contains('\u{202e}'), "escaped");
        let bound = MAX_SERVERS * (2 + MAX_GENERATIONS * (2 + MAX_COPIES + 1)) + 3;
        assert!(text.lines().count() <= bound, "{} lines", text.lines().count());
        assert!(text.contains("… and 22 more copies"), "{text}");
        assert!(text.contains("… 44 generations between"), "{text}");
        assert!(text.contains("… and 10 more server commands"), "{text}");
        assert!(text.contains("idle: needs the daemon's samples"), "{text}");

        let mut many = r.clone();
        let one = many.hosts[0].clone();
        many.hosts = (0..500)
            .map(|k| HostCopies { host_pid: k, servers: vec![one.servers[0].clone()], ..one.clone() })
            .collect();
        let text = render(&many);
        assert_eq!(text.lines().filter(|l| l.starts_with("HOST ")).count(), MAX_SERVERS, "one header per listed host");
        assert!(text.contains("… and 480 more server commands"), "{text}");
    }
}
