//! Man pages and shell completions are generated from the clap definitions
//! (and `config/default.toml`) into committed files. This test fails when they
//! are stale; `UPDATE_DOCS=1 cargo test --test docs` rewrites them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `.TH NAME SECTION DATE SOURCE MANUAL`: the source and the manual name the
/// package, the date is this version's release date (below).
fn mangen(cmd: clap::Command, section: &str) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd).section(section).date(release_date()).source(source()).manual(MANUAL)
}

const MANUAL: &str = "mcp-reaper manual";

fn source() -> String {
    format!("mcp-reaper {}", env!("CARGO_PKG_VERSION"))
}

/// The date of this version's release, from the first entry of the Debian
/// changelog (`-- NAME <MAIL>  Thu, 26 Nov 2026 12:00:00 +0000`), as
/// YYYY-MM-DD: fixed for a version, so the pages do not change with the day
/// they are generated.
fn release_date() -> String {
    let log = std::fs::read_to_string(root().join("packaging/deb/changelog")).unwrap();
    let first = log.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("mcp-reaper ({}-", env!("CARGO_PKG_VERSION"))),
        "packaging/deb/changelog's first entry is not version {}: {first}",
        env!("CARGO_PKG_VERSION")
    );
    let trailer = log.lines().find_map(|l| l.strip_prefix(" -- ")).expect("a changelog trailer");
    let date = trailer.split("  ").nth(1).expect("the trailer's date");
    // "Thu, 26 Nov 2026 12:00:00 +0000"
    let f: Vec<&str> = date.split_whitespace().collect();
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = months.iter().position(|m| *m == f[2]).expect("a month name") + 1;
    format!("{}-{month:02}-{:0>2}", f[3], f[1])
}

/// `clap_mangen`'s SYNOPSIS names no option's argument (`[--config]`): each
/// option that takes one gets its value name (`[--config PATH]`).
fn synopsis(cmd: &clap::Command, m: &clap_mangen::Man) -> String {
    let mut s = part(|w| m.render_synopsis_section(w));
    for a in cmd.get_arguments().filter(|a| !a.is_positional() && !a.is_hide_set()) {
        let (Some(long), Some(names)) = (a.get_long(), a.get_value_names()) else { continue };
        if !a.get_num_args().is_some_and(|n| n.takes_values()) {
            continue;
        }
        let value = names.iter().map(|n| format!("\\fI{}\\fR", roff_text(n))).collect::<Vec<_>>().join(" ");
        let opt = format!("\\fB\\-\\-{}\\fR", roff_text(long));
        for close in ["]", ">"] {
            s = s.replace(&format!("{opt}{close}"), &format!("{opt} {value}{close}"));
        }
    }
    s
}

/// One of `clap_mangen`'s sections as roff text.
fn part(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    f(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Roff from help text written for a terminal: `code` in bold, not in backticks.
fn unmark(roff: &str) -> String {
    let mut o = String::new();
    let mut bold = false;
    for c in roff.chars() {
        if c == '`' {
            o.push_str(if bold { "\\fR" } else { "\\fB" });
            bold = !bold;
        } else {
            o.push(c);
        }
    }
    assert!(!bold, "an unpaired backtick in:\n{roff}");
    o
}

/// Plain text as roff: escaped, and no line starting with a control character.
fn roff_text(t: &str) -> String {
    let t = t.replace('\\', "\\\\").replace('-', "\\-");
    t.lines()
        .map(|l| if l.starts_with('.') || l.starts_with('\'') { format!("\\&{l}") } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
}

/// EXAMPLES: what each does, then the command as typed.
fn examples(items: &[(&str, &str)]) -> String {
    let mut o = ".SH EXAMPLES\n".to_string();
    for (what, command) in items {
        let _ = writeln!(o, ".PP\n{}:\n.RS\n.nf\n\\fB{}\\fR\n.fi\n.RE", unmark(&roff_text(what)), roff_text(command));
    }
    o
}

/// A tagged list: `.TP` per (tag, text).
fn tagged(name: &str, items: &[(&str, &str)]) -> String {
    let mut o = format!(".SH \"{name}\"\n");
    for (tag, text) in items {
        let _ = writeln!(o, ".TP\n\\fB{}\\fR\n{}", roff_text(tag), unmark(&roff_text(text)));
    }
    o
}

/// reaperctl(1): every subcommand with its options, on one page.
fn ctl_man() -> Vec<u8> {
    let mut cmd = mcp_reaper::ctl::Cli::command();
    cmd.build();
    let m = mangen(cmd.clone(), "1");
    let mut o = String::new();
    o.push_str(&part(|w| m.render_title(w)));
    o.push_str(&part(|w| m.render_name_section(w)));
    o.push_str(&synopsis(&cmd, &m));
    o.push_str(&unmark(&part(|w| m.render_description_section(w))));
    o.push_str(&unmark(&part(|w| m.render_options_section(w))));
    o.push_str(".SH COMMANDS\n");
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        let name = sub.get_name();
        let _ = writeln!(o, ".SS \"reaperctl {}\"", roff_text(name));
        let sm = mangen(sub.clone(), "1");
        let synopsis = synopsis(sub, &sm);
        // `reaperctl-scan [OPTIONS]` is `reaperctl scan [OPTIONS]`.
        let synopsis = synopsis.replacen(".SH SYNOPSIS\n", "", 1).replacen(
            &format!("reaperctl\\-{}", roff_text(name)),
            &format!("reaperctl {}", roff_text(name)),
            1,
        );
        o.push_str(&synopsis);
        let about = sub.get_long_about().or(sub.get_about()).map(ToString::to_string).unwrap_or_default();
        let _ = writeln!(o, ".PP\n{}", unmark(&roff_text(&about)));
        let opts = part(|w| sm.render_options_section(w));
        let opts: String = opts.lines().filter(|l| *l != ".SH OPTIONS").flat_map(|l| [l, "\n"]).collect();
        // The global options are described once, above.
        let opts = opts
            .split(".TP\n")
            .filter(|e| !e.contains("\\-\\-config") && !e.contains("\\-\\-socket") && !e.contains("\\-\\-help"))
            .collect::<Vec<_>>()
            .join(".TP\n");
        o.push_str(&unmark(&opts));
    }
    o.push_str(&tagged(
        "EXIT STATUS",
        &[
            ("0", "Success; for `scan` without `--exit-code`, also when trees would be reaped."),
            ("1", "`scan --exit-code`: a tree would be reaped now (as `git diff --exit-code` exits 1 on a difference)."),
            ("64", "Usage error."),
            ("69", "The daemon is not running, or is stopping; `doctor`: the reaper could not work here."),
            ("70", "Internal error."),
            ("71", "`run` cannot set up the session as asked."),
            ("72", "/proc cannot be read."),
            ("75", "The daemon is busy: try again."),
            ("76", "The daemon did not understand the request."),
            ("77", "Permission denied."),
            ("78", "Configuration error, or `validate` found problems."),
            ("other", "`run` exits with the host's status: 128 + the signal when a signal ended it, 127 when the host is not found, 126 when it cannot be run."),
        ],
    ));
    o.push_str(&tagged(
        "FILES",
        &[
            (
                "/etc/mcp-reaper/config.toml, /etc/mcp-reaper/config.d/*.toml",
                "The configuration (as root); ~/.config/mcp-reaper/ for a user. See mcp-reaper.toml(5).",
            ),
            (
                "/run/mcp-reaper/control.sock",
                "The system daemon's control socket; $XDG_RUNTIME_DIR/mcp-reaper/control.sock for a user's daemon.",
            ),
            (
                "/var/lib/mcp-reaper/state.json",
                "The grace clocks the daemon keeps; $XDG_STATE_HOME/mcp-reaper/ for a user.",
            ),
            (
                "/var/lib/mcp-reaper/history.json, /var/lib/mcp-reaper/history.jsonl",
                "The ledger of what was reaped and the journal of the newest reaps, both read by `history`.",
            ),
        ],
    ));
    o.push_str(&examples(&[
        ("Audit the machine without the daemon, signalling nothing", "reaperctl scan"),
        ("What was reaped in the last 30 days, and what it returned", "reaperctl history --since 30d"),
        ("The configuration in effect, each value with its file and line", "reaperctl config"),
        ("Run a host in a session of its own", "alias claude='reaperctl run -- claude'"),
    ]));
    o.push_str(".SH \"SEE ALSO\"\n\\fBmcp\\-reaperd\\fR(8), \\fBmcp\\-reaper.toml\\fR(5)\n");
    o.into_bytes()
}

/// mcp-reaperd(8).
fn daemon_man() -> Vec<u8> {
    let mut cmd = mcp_reaper::daemon::Args::command();
    cmd.build();
    let m = mangen(cmd.clone(), "8");
    let mut o = String::new();
    o.push_str(&part(|w| m.render_title(w)));
    o.push_str(&part(|w| m.render_name_section(w)));
    o.push_str(&synopsis(&cmd, &m));
    o.push_str(&unmark(&part(|w| m.render_description_section(w))));
    o.push_str(&unmark(&part(|w| m.render_options_section(w))));
    o.push_str(&tagged(
        "SIGNALS",
        &[
            ("SIGTERM, SIGINT", "Stop: the grace clocks are saved, the control socket removed. A termination under way is finished first."),
            ("SIGHUP", "Reload the configuration (as `reaperctl reload`). A configuration with errors is refused and the previous one kept; the errors are logged."),
        ],
    ));
    o.push_str(&tagged(
        "EXIT STATUS",
        &[
            ("0", "Stopped by a signal, or `--once` done (also when a tree could not be killed: that is reported)."),
            ("64", "Usage error."),
            ("70", "Internal error."),
            ("72", "/proc cannot be read."),
            ("73", "The state file cannot be written, or the socket's directory cannot be created."),
            ("75", "Another instance holds the socket's lock."),
            ("77", "Permission denied."),
            ("78", "Configuration error."),
        ],
    ));
    o.push_str(&tagged(
        "FILES",
        &[
            ("/etc/mcp-reaper/config.toml, /etc/mcp-reaper/config.d/*.toml", "The configuration (~/.config/mcp-reaper/ for a user's daemon); see mcp-reaper.toml(5)."),
            ("/run/mcp-reaper/control.sock", "The control socket (and control.lock beside it); $XDG_RUNTIME_DIR/mcp-reaper/ for a user's daemon."),
            ("/var/lib/mcp-reaper/state.json", "When each candidate tree was first seen, so a restart does not restart its grace ($XDG_STATE_HOME/mcp-reaper/ for a user)."),
            ("/var/lib/mcp-reaper/history.json", "The ledger of what was reaped (bounded) and the lifetime totals; `reaperctl history`."),
            ("/var/lib/mcp-reaper/history.jsonl", "The journal: each reap appended as a line, folded into the ledger past 256 KiB."),
        ],
    ));
    o.push_str(&tagged(
        "ENVIRONMENT",
        &[
            ("JOURNAL_STREAM", "Set by systemd: with `--log-target auto`, logs go to journald with REAPER_* fields."),
            (
                "NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID",
                "Set by systemd: readiness, status lines and watchdog pings (Type=notify).",
            ),
            (
                "XDG_RUNTIME_DIR, XDG_STATE_HOME, XDG_CONFIG_HOME, HOME",
                "Where a user's daemon keeps its socket, state and configuration.",
            ),
        ],
    ));
    o.push_str(&examples(&[
        ("Dry run first, in the foreground, reading what it would do", "mcp-reaperd --dry-run --log-target stderr"),
        ("One cycle from a timer, as the packaged mcp-reaper-once.service does", "mcp-reaperd --once"),
        ("Every reap in the journal", "journalctl -t mcp-reaperd REAPER_ACTION=reap"),
    ]));
    o.push_str(".SH \"SEE ALSO\"\n\\fBreaperctl\\fR(1), \\fBmcp\\-reaper.toml\\fR(5)\n");
    o.into_bytes()
}

/// mcp-reaper.toml(5): the annotated default config is the reference.
fn config_man() -> Vec<u8> {
    let text = mcp_reaper::config::DEFAULT_TOML;
    let esc = |l: &str| l.replace('\\', "\\\\").replace('-', "\\-");
    let mut o = String::new();
    writeln!(o, ".TH MCP-REAPER.TOML 5 {} \"{}\" \"{MANUAL}\"", release_date(), source()).unwrap();
    o.push_str(".SH NAME\nmcp-reaper.toml \\- configuration of mcp\\-reaperd and reaperctl\n");
    o.push_str(".SH SYNOPSIS\n/etc/mcp\\-reaper/config.toml, /etc/mcp\\-reaper/config.d/*.toml\n.br\n~/.config/mcp\\-reaper/config.toml, ~/.config/mcp\\-reaper/config.d/*.toml (a user's daemon and reaperctl)\n");
    let prose = |t: &str| unmark(&roff_text(t));
    o.push_str(".SH DESCRIPTION\n");
    o.push_str(&prose("TOML that configures `mcp-reaperd`(8) and `reaperctl`(1). The defaults, under DEFAULTS below, are embedded in the binaries: a file only needs the keys it changes, and an empty file (or none) means the defaults. Invalid files are refused with file:line:column and key path (exit 78); a running daemon keeps its previous configuration. Check a file with `reaperctl validate --config PATH`; `reaperctl config` prints the configuration in effect, each value with the file and line it came from."));
    o.push_str("\n.SH \"FILES AND PRECEDENCE\"\n");
    o.push_str(&prose(
        "Read in this order, each applied over the ones before it, key by key (the last one to set a key wins):",
    ));
    for (n, step) in [
        "The embedded default (DEFAULTS below).",
        "The main file: /etc/mcp-reaper/config.toml as root; $XDG_CONFIG_HOME/mcp-reaper/config.toml (~/.config/mcp-reaper/config.toml) for a user; or the file `--config PATH` names. A missing default file is not an error; a missing named one is.",
        "The drop-ins: every *.toml file in the directory config.d/ beside the main file, in name order (10-a.toml before 20-b.toml); other files there are ignored.",
    ]
    .iter()
    .enumerate()
    {
        let _ = write!(o, "\n.IP {}. 4\n{}", n + 1, prose(step));
    }
    o.push_str("\n.PP\n");
    o.push_str(&prose("A table that is set merges with the default table key by key; a list that is set replaces the default list (to add to one, copy it). `--config -` reads the embedded default alone, with no file and no drop-in. Root's and a user's files are separate: the system daemon never reads a user's file. The daemon reloads on SIGHUP and when the file or a drop-in changes."));
    o.push('\n');
    o.push_str(".SH DEFAULTS\n.nf\n");
    for line in text.lines() {
        let mut l = esc(line);
        // `code` in comments (whole-line or after a value) shows as bold, not in backticks.
        let comment = if l.trim_start().starts_with('#') { Some(0) } else { l.find(" # ") };
        if let Some(at) = comment
            && !l[..at].contains('`')
            && l[at..].matches('`').count() % 2 == 0
        {
            l = format!("{}{}", &l[..at], unmark(&l[at..]));
        }
        if l.starts_with('.') || l.starts_with('\'') {
            o.push_str("\\&");
        }
        o.push_str(&l);
        o.push('\n');
    }
    o.push_str(".fi\n");
    o.push_str(&config_examples());
    o.push_str(".SH SEE ALSO\n\\fBmcp\\-reaperd\\fR(8), \\fBreaperctl\\fR(1)\n");
    o.into_bytes()
}

/// mcp-reaper.toml(5)'s EXAMPLES: each a whole file (checked by
/// `every_toml_example_in_readme_docs_and_man_pages_validates`).
fn config_examples() -> String {
    let items: &[(&str, &str)] = &[
        (
            "A dry run first, as a drop-in beside the packaged file (remove it to enforce): /etc/mcp-reaper/config.d/00-dry-run.toml",
            "[reaper]\nmode = \"dry-run\"\n",
        ),
        (
            "A longer grace and no reaping of stale hosts, all else default: /etc/mcp-reaper/config.toml",
            "[reaper]\ngrace_secs = 300\nreap_stale_hosts = false\n",
        ),
        (
            "Metrics for node_exporter's textfile collector and a secret the defaults do not know, in a drop-in: /etc/mcp-reaper/config.d/50-site.toml",
            "[daemon]\nmetrics_textfile = \"/var/lib/node_exporter/textfile_collector/mcp_reaper.prom\"\n\n[redact]\nextra_patterns = ['--license (\\S+)']\n",
        ),
    ];
    let mut o = ".SH EXAMPLES\n".to_string();
    for (what, toml) in items {
        let _ =
            write!(o, ".PP\n{}\n.PP\n.RS\n.nf\n{}\n.fi\n.RE\n", unmark(&roff_text(what)), roff_text(toml.trim_end()));
    }
    o
}

fn completion(cmd: clap::Command, name: &str, shell: Shell) -> Vec<u8> {
    let mut cmd = cmd;
    let hidden = hidden_longs(&cmd);
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    strip_options(&String::from_utf8(out).unwrap(), &hidden).into_bytes()
}

/// The long options hidden from help (`--proc-root`, for tests), in any
/// subcommand: `clap_complete` offers them all the same.
fn hidden_longs(cmd: &clap::Command) -> Vec<String> {
    let mut out: Vec<String> =
        cmd.get_arguments().filter(|a| a.is_hide_set()).filter_map(|a| a.get_long().map(str::to_string)).collect();
    for sub in cmd.get_subcommands() {
        out.extend(hidden_longs(sub));
    }
    out.sort();
    out.dedup();
    out
}

/// A completion script without the options `longs`: bash's word lists and
/// `--x)` case arms, zsh's and fish's one line per option.
fn strip_options(text: &str, longs: &[String]) -> String {
    let mut out = String::new();
    let mut skip_arm = false;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if skip_arm {
            skip_arm = t != ";;";
            continue;
        }
        let mut line = line.to_string();
        for l in longs {
            let opt = format!("--{l}");
            if t == format!("{opt})") {
                skip_arm = true;
            }
            if t.starts_with(&format!("'{opt}="))
                || t.starts_with(&format!("'{opt}["))
                || t.contains(&format!(" -l {l} "))
            {
                line.clear();
            }
            line = line.replace(&format!(" {opt} "), " ").replace(&format!(" {opt}\""), "\"");
        }
        if !skip_arm {
            out.push_str(&line);
        }
    }
    out
}

fn expected() -> Vec<(PathBuf, Vec<u8>)> {
    let ctl = || mcp_reaper::ctl::Cli::command();
    let daemon = || mcp_reaper::daemon::Args::command();
    let mut files = vec![
        (PathBuf::from("man/reaperctl.1"), ctl_man()),
        (PathBuf::from("man/mcp-reaperd.8"), daemon_man()),
        (PathBuf::from("man/mcp-reaper.toml.5"), config_man()),
    ];
    for (name, cmd) in [("reaperctl", ctl()), ("mcp-reaperd", daemon())] {
        files.push((PathBuf::from(format!("completions/{name}.bash")), completion(cmd.clone(), name, Shell::Bash)));
        files.push((PathBuf::from(format!("completions/_{name}")), completion(cmd.clone(), name, Shell::Zsh)));
        files.push((PathBuf::from(format!("completions/{name}.fish")), completion(cmd, name, Shell::Fish)));
    }
    files
}

#[test]
fn generated_docs_are_up_to_date() {
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    let mut stale = Vec::new();
    for (rel, want) in expected() {
        let path: PathBuf = root().join(&rel);
        let have = std::fs::read(&path).unwrap_or_default();
        if have != want {
            if update {
                std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).unwrap();
                std::fs::write(&path, &want).unwrap();
            } else {
                stale.push(rel.display().to_string());
            }
        }
    }
    assert!(stale.is_empty(), "stale generated files {stale:?}: run `UPDATE_DOCS=1 cargo test --test docs` and commit");
}

#[test]
fn man_pages_name_every_subcommand() {
    let page = String::from_utf8(ctl_man()).unwrap();
    for sub in ["scan", "validate", "status", "reload", "reap\\-now", "metrics"] {
        assert!(page.contains(sub), "reaperctl.1 lacks {sub}");
    }
}

/// The daemon's messenger (`reaperctl desktop-notify`) is no user's
/// command: no completion offers it.
#[test]
fn completions_offer_no_internal_subcommand() {
    for (path, bytes) in expected() {
        let text = String::from_utf8(bytes).unwrap();
        assert!(!text.contains("desktop-notify"), "{} offers desktop-notify", path.display());
    }
}

/// The pages as `man -l` shows them (plain text; dashes as ASCII).
fn rendered(rel: &Path, bytes: &[u8]) -> Option<String> {
    let dir = std::env::temp_dir().join(format!("mcp-reaper-man-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(rel.file_name().unwrap());
    std::fs::write(&file, bytes).unwrap();
    let out = std::process::Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(&file)
        .env("LC_ALL", "C.UTF-8")
        .env("MANWIDTH", "120")
        .output()
        .ok()?;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "man -l {}: {}", rel.display(), String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "man -l {} warns: {}", rel.display(), String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8_lossy(&out.stdout).replace(['\u{2010}', '\u{2212}'], "-"))
}

/// Every `name(N)` a page points to must be one of ours or a system page.
fn references(text: &str) -> Vec<String> {
    let mut refs = Vec::new();
    for (i, _) in text.match_indices('(') {
        let after = &text[i + 1..];
        if !(after.len() > 1 && after.as_bytes()[0].is_ascii_digit() && after.as_bytes()[1] == b')') {
            continue;
        }
        let name: String = text[..i]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if !name.is_empty() {
            refs.push(format!("{name}({})", &after[..1]));
        }
    }
    refs
}

/// The pages a page may point to.
const OURS: [&str; 3] = ["reaperctl(1)", "mcp-reaperd(8)", "mcp-reaper.toml(5)"];

#[test]
fn man_pages_render_without_markdown_or_dangling_references() {
    if std::process::Command::new("man").arg("--version").output().is_err() {
        eprintln!("SKIPPED man_pages_render_without_markdown_or_dangling_references: man is not installed");
        return;
    }
    let mut pages = std::collections::HashMap::new();
    for (rel, bytes) in expected().into_iter().filter(|(p, _)| p.starts_with("man")) {
        let Some(text) = rendered(&rel, &bytes) else { return };
        for artefact in ["`", "EXTRA", "\\f", "\\-", ".RS", ".RE", "\\&"] {
            assert!(!text.contains(artefact), "{} shows {artefact:?}:\n{text}", rel.display());
        }
        for r in references(&text) {
            assert!(OURS.contains(&r.to_lowercase().as_str()), "{} points to {r}, which is not shipped", rel.display());
        }
        pages.insert(rel.file_name().unwrap().to_string_lossy().into_owned(), text);
    }
    let ctl = &pages["reaperctl.1"];
    let mut cmd = mcp_reaper::ctl::Cli::command();
    cmd.build();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        assert!(ctl.contains(&format!("reaperctl {}", sub.get_name())), "reaperctl(1) lacks {}", sub.get_name());
        for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                assert!(ctl.contains(&format!("--{long}")), "reaperctl(1) lacks {} --{long}", sub.get_name());
            }
        }
    }
    for h in ["EXIT STATUS", "FILES", "EXAMPLES", "COMMANDS"] {
        assert!(ctl.contains(&format!("\n{h}\n")), "reaperctl(1) lacks {h}");
    }
    let daemon = &pages["mcp-reaperd.8"];
    for h in ["SIGNALS", "FILES", "ENVIRONMENT", "EXIT STATUS", "EXAMPLES"] {
        assert!(daemon.contains(&format!("\n{h}\n")), "mcp-reaperd(8) lacks {h}");
    }
    let toml = &pages["mcp-reaper.toml.5"];
    for s in mcp_reaper::config::settings(&mcp_reaper::config::Config::embedded()) {
        assert!(toml.contains(&format!("[{}]", s.section)), "mcp-reaper.toml(5) lacks [{}]", s.section);
        assert!(toml.contains(&format!("{} =", s.key)), "mcp-reaper.toml(5) lacks {}.{}", s.section, s.key);
    }
}

// ---- The docs themselves (issue 25): every config example is one the real
// `reaperctl validate` accepts, every relative link leads somewhere, and the
// README opens with the two commands CI runs.

/// README.md and every `docs/*.md`, in name order.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The man pages in `man/` (sections 1, 5, 8).
fn man_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("man"))
        .expect("man/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "1" || x == "5" || x == "8"))
        .collect();
    pages.sort();
    pages
}

/// A fenced block: where it starts (1-based line of the fence) and its text.
struct Block {
    line: usize,
    info: String,
    text: String,
}

/// Every fenced code block (```` ```info ```` … ```` ``` ````) of a Markdown text.
fn fenced_blocks(md: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in md.lines().enumerate() {
        let t = line.trim_start();
        match open.as_mut() {
            None => {
                if let Some(info) = t.strip_prefix("```") {
                    open = Some(Block { line: i + 1, info: info.trim().to_string(), text: String::new() });
                }
            }
            Some(b) => {
                if t.trim_end() == "```" {
                    blocks.extend(open.take());
                } else {
                    b.text.push_str(line);
                    b.text.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "a code fence is never closed");
    blocks
}

/// Roff's escapes as the man pages here use them, undone.
fn unroff(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('-') => out.push('-'),
            Some('\\' | 'e') => out.push('\\'),
            Some('&') | None => {}
            Some('(') => {
                let name: String = chars.by_ref().take(2).collect();
                out.push_str(match name.as_str() {
                    "aq" => "'",
                    "dq" => "\"",
                    "ga" => "`",
                    "ti" => "~",
                    "ha" => "^",
                    _ => "?",
                });
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// The no-fill blocks (`.nf`…`.fi`, `.EX`…`.EE`) of a man page that hold a
/// TOML example: a line that is a `[table]` header.
fn man_toml_blocks(roff: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in roff.lines().enumerate() {
        match open.as_mut() {
            None if line == ".nf" || line == ".EX" => {
                open = Some(Block { line: i + 1, info: "roff".into(), text: String::new() });
            }
            None => {}
            Some(_) if line == ".fi" || line == ".EE" => blocks.extend(open.take()),
            Some(b) => {
                b.text.push_str(&unroff(line));
                b.text.push('\n');
            }
        }
    }
    blocks.retain(|b| {
        b.text.lines().any(|l| {
            let l = l.split('#').next().unwrap_or("").trim();
            l.len() > 2 && l.starts_with('[') && l.ends_with(']') && !l.contains(' ') && !l.contains('=')
        })
    });
    blocks
}

/// Runs the real `reaperctl validate --config FILE` on `text`: None when it
/// says ok (exit 0), else what it said.
fn validate(dir: &Path, name: &str, text: &str) -> Option<String> {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reaperctl"))
        .args(["validate", "--config"])
        .arg(&file)
        .output()
        .expect("run reaperctl validate");
    (!out.status.success()).then(|| {
        format!(
            "exit {:?}: {}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

#[test]
fn every_toml_example_in_readme_docs_and_man_pages_validates() {
    let dir = tempfile::tempdir().unwrap();
    // The check can fail: the configuration overview as the README once had it.
    let old = "[patterns]\nhosts = [...]             # AI clients\n";
    assert!(validate(dir.path(), "old.toml", old).is_some(), "validate accepted `hosts = [...]`");

    let mut examples: Vec<(String, String)> = Vec::new();
    for path in markdown_files() {
        let md = std::fs::read_to_string(&path).unwrap();
        for b in fenced_blocks(&md).into_iter().filter(|b| b.info == "toml") {
            examples.push((format!("{}:{}", rel(&path), b.line), b.text));
        }
    }
    let in_markdown = examples.len();
    for path in man_pages() {
        let roff = std::fs::read_to_string(&path).unwrap();
        for b in man_toml_blocks(&roff) {
            examples.push((format!("{}:{}", rel(&path), b.line), b.text));
        }
    }
    // The README's protect example, docs/configuration.md's overview and
    // mcp-reaper.toml(5)'s defaults at least: an extractor that finds
    // nothing must not pass.
    assert!(in_markdown >= 2, "found only {in_markdown} ```toml blocks in README.md and docs/");
    assert!(examples.len() > in_markdown, "found no TOML block in man/");

    let mut bad = Vec::new();
    for (i, (at, text)) in examples.iter().enumerate() {
        if let Some(why) = validate(dir.path(), &format!("example-{i}.toml"), text) {
            bad.push(format!("{at}: {why}"));
        }
    }
    println!("validated {} TOML examples ({in_markdown} in Markdown)", examples.len());
    assert!(bad.is_empty(), "TOML examples `reaperctl validate` refuses:\n{}", bad.join("\n"));
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to
/// hyphens; a repeated one gets `-1`, `-2`, ….
fn anchors(md: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut in_code = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let Some(title) = line.strip_prefix('#') else { continue };
        if in_code {
            continue;
        }
        let title = title.trim_start_matches('#').trim();
        let base: String = title
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                '-' | '_' => Some(c),
                c if c.is_alphanumeric() => Some(c.to_lowercase().next().unwrap_or(c)),
                _ => None,
            })
            .collect();
        let mut slug = base.clone();
        let mut n = 0;
        while seen.contains(&slug) {
            n += 1;
            slug = format!("{base}-{n}");
        }
        seen.push(slug);
    }
    seen
}

/// The targets of inline links `[text](target)` outside code, with their line.
fn link_targets(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (i, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Inline code spans are not links: drop them first.
        let text: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = text.as_str();
        while let Some(k) = rest.find("](") {
            let after = &rest[k + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_in_readme_and_docs_leads_to_a_file_and_heading() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for path in markdown_files() {
        let md = std::fs::read_to_string(&path).unwrap();
        for (line, target) in link_targets(&md) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, fragment) = target.split_once('#').map_or((target.as_str(), None), |(f, a)| (f, Some(a)));
            let dest = if file.is_empty() { path.clone() } else { path.parent().unwrap().join(file) };
            let at = format!("{}:{line}: ({target})", rel(&path));
            if !dest.exists() {
                bad.push(format!("{at}: no such file {}", dest.display()));
                continue;
            }
            if let Some(a) = fragment
                && dest.extension().is_some_and(|x| x == "md")
                && !anchors(&std::fs::read_to_string(&dest).unwrap()).iter().any(|h| h == a)
            {
                bad.push(format!("{at}: no heading #{a} in {}", rel(&dest)));
            }
        }
    }
    assert!(checked > 10, "found only {checked} relative links: the link finder is broken");
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

/// The README opens with the two commands: the daemon in dry run on the
/// embedded default config, then the tests, which `.ci/run` runs as they are.
#[test]
fn readme_opens_with_the_run_and_test_commands_ci_runs() {
    let md = std::fs::read_to_string(root().join("README.md")).unwrap();
    let first = fenced_blocks(&md).into_iter().next().expect("README has a code block");
    assert_eq!(first.info, "sh", "the README's first block is not the commands");
    let commands: Vec<&str> =
        first.text.lines().map(|l| l.split(" #").next().unwrap_or("").trim()).filter(|l| !l.is_empty()).collect();
    assert_eq!(commands.len(), 2, "the README's first block is not two commands: {commands:?}");
    assert!(
        commands[0].contains("mcp-reaperd") && commands[0].contains("--dry-run") && commands[0].contains("--config -"),
        "the first command does not run the daemon in dry run on the embedded config: {}",
        commands[0]
    );
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == commands[1]),
        "`.ci/run` does not run the README's test command `{}`",
        commands[1]
    );
}

/// Issue 36 item 10: `.TH NAME SECTION DATE SOURCE MANUAL` with all five;
/// SYNOPSIS names each option's argument; reaperctl(1) gives `scan
/// --exit-code`'s 1; mcp-reaper.toml(5) says where files are read from and in
/// what order, and has EXAMPLES; docs/commands.md names `--exit-code`.
#[test]
fn man_pages_have_a_full_title_argument_names_and_the_config_precedence() {
    let date = release_date();
    assert!(date.len() == 10 && date.as_bytes()[4] == b'-', "release date {date}");
    let version = env!("CARGO_PKG_VERSION");
    let pages =
        [("reaperctl", "1", ctl_man()), ("mcp-reaperd", "8", daemon_man()), ("MCP-REAPER.TOML", "5", config_man())];
    for (name, section, bytes) in &pages {
        let page = String::from_utf8(bytes.clone()).unwrap();
        let th = page.lines().find(|l| l.starts_with(".TH ")).unwrap();
        assert_eq!(
            th.trim_end(),
            format!(".TH {name} {section} {date} \"mcp-reaper {version}\" \"mcp-reaper manual\"")
        );
    }
    let ctl = String::from_utf8(ctl_man()).unwrap();
    let daemon = String::from_utf8(daemon_man()).unwrap();
    for (page, want) in [
        (&ctl, "[\\fB\\-\\-config\\fR \\fIPATH\\fR]"),
        (&ctl, "[\\fB\\-\\-socket\\fR \\fIPATH\\fR]"),
        (&ctl, "[\\fB\\-\\-scope\\fR \\fIPID\\fR]"),
        (&daemon, "[\\fB\\-\\-config\\fR \\fIPATH\\fR]"),
        (&daemon, "[\\fB\\-\\-state\\-file\\fR \\fIPATH\\fR]"),
    ] {
        assert!(page.contains(want), "a SYNOPSIS lacks {want}");
    }
    // No option in any SYNOPSIS that takes a value is shown without it.
    for (cmd, page) in [(mcp_reaper::ctl::Cli::command(), &ctl), (mcp_reaper::daemon::Args::command(), &daemon)] {
        let mut cmd = cmd;
        cmd.build();
        let mut all = vec![cmd.clone()];
        all.extend(cmd.get_subcommands().cloned());
        for c in all {
            for a in
                c.get_arguments().filter(|a| !a.is_hide_set() && a.get_num_args().is_some_and(|n| n.takes_values()))
            {
                let Some(long) = a.get_long() else { continue };
                let bare = format!("\\fB\\-\\-{}\\fR]", roff_text(long));
                assert!(!page.contains(&bare), "SYNOPSIS shows --{long} without its argument");
            }
        }
    }
    let exit = ctl.split(".SH \"EXIT STATUS\"").nth(1).unwrap().split(".SH").next().unwrap();
    assert!(
        exit.contains(".TP\n\\fB1\\fR\n") && exit.contains("\\-\\-exit\\-code"),
        "reaperctl(1) EXIT STATUS lacks 1:\n{exit}"
    );
    let commands = std::fs::read_to_string(root().join("docs/commands.md")).unwrap();
    assert!(commands.contains("--exit-code"), "docs/commands.md does not name scan --exit-code");
    let config = String::from_utf8(config_man()).unwrap();
    for want in [
        ".SH \"FILES AND PRECEDENCE\"",
        "/etc/mcp\\-reaper/config.toml",
        "$XDG_CONFIG_HOME/mcp\\-reaper/config.toml",
        "config.d/",
        "in name order",
        "only needs the keys it changes",
        ".SH EXAMPLES",
    ] {
        assert!(config.contains(want), "mcp-reaper.toml(5) lacks {want}");
    }
    let examples = config.split(".SH EXAMPLES").nth(1).unwrap();
    assert!(examples.matches(".nf\n").count() >= 2, "mcp-reaper.toml(5) EXAMPLES has fewer than two files");
}
