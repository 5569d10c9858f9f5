//! `reaperctl hosts`: what the hosts' own MCP configs name (see
//! [`crate::hostcfg`]), per user, host family and file.

use std::fmt::Write;
use std::process::ExitCode;

use super::{Cli, ScanArgs, assess_now};
use crate::exit;
use crate::hostcfg::{self, Report};
use crate::stdout::{out, outln};

pub(super) fn hosts(cli: &Cli, args: &ScanArgs) -> ExitCode {
    if let Err(code) = assess_now(cli, args) {
        return code;
    }
    let r = hostcfg::report();
    if args.json {
        outln!("{}", crate::names::printable_json(&serde_json::to_string_pretty(&r).expect("report serializes")));
    } else {
        out!("{}", crate::names::printable_lines(&render(&r, &crate::report::human::user_names())));
    }
    ExitCode::from(exit::OK)
}

fn render(r: &Report, users: &std::collections::HashMap<u32, String>) -> String {
    let mut out = String::new();
    let mut uids: Vec<u32> = r.files.iter().map(|f| f.uid).chain(r.hosts.iter().map(|h| h.uid)).collect();
    uids.sort_unstable();
    uids.dedup();
    if uids.is_empty() {
        out.push_str("no host config files found (a root reaper reads those of users with a live host)\n");
        out.push_str(&looked_for());
    }
    // Everything here but the numbers comes from a user: the host's
    // working directory, its config's path, keys, commands and arguments.
    let p = |s: &str| crate::names::printable(s).into_owned();
    for uid in uids {
        let name = p(&users.get(&uid).cloned().unwrap_or_else(|| uid.to_string()));
        let _ = writeln!(out, "{name} (uid {uid})");
        for h in r.hosts.iter().filter(|h| h.uid == uid) {
            let _ = writeln!(out, "  host {} [{}] in {}", p(&h.program), h.pid, p(h.cwd.as_deref().unwrap_or("?")));
        }
        for f in r.files.iter().filter(|f| f.uid == uid) {
            match (&f.error, f.servers) {
                (Some(e), _) => {
                    let _ = writeln!(out, "  {} ({}): skipped: {}", p(&f.path), f.host, p(e));
                }
                (None, n) => {
                    let n = n.unwrap_or(0);
                    let _ = writeln!(out, "  {} ({}): {n} server{}", p(&f.path), f.host, if n == 1 { "" } else { "s" });
                }
            }
            for s in r.servers.iter().filter(|s| s.uid == uid && s.file == f.path) {
                let weak = if s.weak { ", only below a live host" } else { "" };
                let command: Vec<String> = s.command.iter().map(|a| p(a)).collect();
                let _ = writeln!(out, "    {}: {} (program {}{weak})", p(&s.key), command.join(" "), p(&s.program));
            }
        }
    }
    out
}

/// The files `hosts` looks for: in each home, and in a live host's working
/// directory (its project).
fn looked_for() -> String {
    use crate::hostcfg::files::{PROJECT, USER};
    let home: Vec<String> = USER.iter().map(|s| format!("~/{}", s.rel)).collect();
    let project: Vec<&str> = PROJECT.iter().map(|s| s.rel).collect();
    format!(
        "looked for, in each home: {}\nand in a live host's working directory: {}\n",
        home.join(", "),
        project.join(", ")
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_files_found_names_the_files_looked_for() {
        let text = super::render(&crate::hostcfg::Report::default(), &std::collections::HashMap::new());
        assert!(text.starts_with("no host config files found"), "{text}");
        assert!(text.contains("~/.claude.json") && text.contains("~/.codex/config.toml"), "{text}");
        assert!(text.contains("working directory: .mcp.json"), "{text}");
    }
}
