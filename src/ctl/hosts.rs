//! `reaperctl hosts`: what the hosts' own MCP configs name (see
//! [`crate::hostcfg`]), per user, host family and file.

use std::fmt::Write;
use std::process::ExitCode;

use super::{Cli, ScanArgs, assess_now};
use crate::exit;
use crate::hostcfg::{self, Report};

pub(super) fn hosts(cli: &Cli, args: &ScanArgs) -> ExitCode {
    if let Err(code) = assess_now(cli, args) {
        return code;
    }
    let r = hostcfg::report();
    if args.json {
        println!("{}", crate::names::printable_json(&serde_json::to_string_pretty(&r).expect("report serializes")));
    } else {
        print!("{}", crate::names::printable_lines(&render(&r, &crate::report::human::user_names())));
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
