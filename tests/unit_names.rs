//! Every unit of ours that the docs, alerts, man pages, packaging and
//! program texts tell an operator to `systemctl …` or `journalctl -u …`
//! is a unit systemd/ ships: an alert that says `journalctl -u
//! mcp-reaperd` (the program, not the unit `mcp-reaper.service`) sends its
//! reader to an empty log (issue 36, item 4).

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Text files below `rel` (or `rel` itself), recursively.
fn files(rel: &str) -> Vec<PathBuf> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p).unwrap().map(|e| e.unwrap().path()).collect();
            entries.sort();
            for e in entries {
                walk(&e, out);
            }
        } else if p.is_file() {
            out.push(p.to_path_buf());
        }
    }
    let mut out = Vec::new();
    walk(&root().join(rel), &mut out);
    out
}

/// A unit a command names: its name as written and whether `--user` asked
/// for the user manager.
#[derive(Debug, PartialEq)]
struct Named {
    unit: String,
    user: bool,
}

/// Units of `systemctl VERB UNIT…` and `journalctl -u UNIT` (`--unit`,
/// `--user-unit`) in `text`, a command to a line; man pages' `\-` and
/// font escapes are undone first.
fn named_units(text: &str) -> Vec<Named> {
    let text = text.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "");
    let mut found = Vec::new();
    for line in text.lines() {
        for (tool, rest) in ["systemctl", "journalctl"].iter().flat_map(|t| commands(line, t).map(move |r| (*t, r))) {
            // A command ends where the prose or the shell goes on.
            let end = rest.find(['`', '"', '\'', ';', '|', '&', ')', '#']).unwrap_or(rest.len());
            let words: Vec<&str> =
                rest[..end].split_whitespace().map(|w| w.trim_end_matches([',', '.', ':'])).collect();
            let user = words.iter().any(|w| *w == "--user" || w.starts_with("--user-unit"));
            let mut units: Vec<&str> = Vec::new();
            if tool == "systemctl" {
                // The verb, then its units.
                units.extend(words.iter().filter(|w| !w.starts_with('-')).skip(1));
            } else {
                let mut it = words.iter();
                while let Some(w) = it.next() {
                    if let Some(u) = w.strip_prefix("--unit=").or_else(|| w.strip_prefix("--user-unit=")) {
                        units.push(u);
                    } else if ["-u", "--unit", "--user-unit"].contains(w) {
                        units.extend(it.next());
                    }
                }
            }
            found.extend(
                units.into_iter().filter(|u| u.starts_with("mcp")).map(|u| Named { unit: u.to_string(), user }),
            );
        }
    }
    found
}

/// What follows each `tool` that stands as a word in `line`.
fn commands<'a>(line: &'a str, tool: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    line.match_indices(tool).filter_map(move |(i, _)| {
        let before = line[..i].chars().next_back();
        let after = &line[i + tool.len()..];
        let word = before.is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_' || c == '/'));
        (word && after.starts_with(char::is_whitespace)).then_some(after)
    })
}

/// The file in systemd/ that `named` means, if there is one.
fn shipped(named: &Named) -> Option<PathBuf> {
    let file = if named.unit.contains('.') { named.unit.clone() } else { format!("{}.service", named.unit) };
    let dir = if named.user { root().join("systemd/user") } else { root().join("systemd") };
    Some(dir.join(file)).filter(|p| p.is_file())
}

#[test]
fn the_parser_finds_units_and_a_wrong_one_is_caught() {
    let text = "Check `systemctl status mcp-reaperd` and `journalctl -u mcp-reaperd`.\n\
                sudo systemctl enable --now mcp-reaper-once.timer # every 5 min\n\
                \\fBsystemctl \\-\\-user reload mcp\\-reaper\\fR\n\
                journalctl --unit=mcp-reaper -f; journalctl -t mcp-reaperd REAPER_ACTION=reap\n\
                systemctl daemon-reload; systemctl restart docker\n";
    let named = named_units(text);
    let names: Vec<(&str, bool)> = named.iter().map(|n| (n.unit.as_str(), n.user)).collect();
    assert_eq!(
        names,
        [
            ("mcp-reaperd", false),
            ("mcp-reaperd", false),
            ("mcp-reaper-once.timer", false),
            ("mcp-reaper", true),
            ("mcp-reaper", false)
        ]
    );
    let missing: Vec<&str> = named.iter().filter(|n| shipped(n).is_none()).map(|n| n.unit.as_str()).collect();
    assert_eq!(missing, ["mcp-reaperd", "mcp-reaperd"]);
}

#[test]
fn every_unit_an_operator_is_told_to_use_ships_in_systemd() {
    let mut paths = Vec::new();
    for rel in
        ["README.md", "SECURITY.md", "Containerfile", "docs", "packaging", "man", "systemd", "deploy", "config", "src"]
    {
        paths.extend(files(rel));
    }
    let mut wrong = Vec::new();
    let mut checked = 0;
    for p in &paths {
        // Binary files (none are expected) hold no instructions.
        let Ok(text) = std::fs::read_to_string(p) else { continue };
        for named in named_units(&text) {
            checked += 1;
            if shipped(&named).is_none() {
                let rel = p.strip_prefix(root()).unwrap().display().to_string();
                wrong.push(format!("{rel}: {}{}", if named.user { "--user " } else { "" }, named.unit));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "units named but not in systemd/ (the system unit is mcp-reaper.service):\n{}",
        wrong.join("\n")
    );
    // The docs name our units often: a parser that found none would pass
    // for nothing.
    assert!(checked >= 15, "only {checked} unit names found in {} files", paths.len());
}
