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

fn man(cmd: clap::Command, section: &str) -> Vec<u8> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .section(section)
        .date("")
        .source(format!("mcp-reaper {}", env!("CARGO_PKG_VERSION")))
        .render(&mut out)
        .unwrap();
    out
}

/// mcp-reaper.toml(5): the annotated default config is the reference.
fn config_man() -> Vec<u8> {
    let text = mcp_reaper::config::DEFAULT_TOML;
    let esc = |l: &str| l.replace('\\', "\\\\").replace('-', "\\-");
    let mut o = String::new();
    writeln!(o, ".TH MCP-REAPER.TOML 5 \"\" \"mcp-reaper {}\" \"File Formats\"", env!("CARGO_PKG_VERSION")).unwrap();
    o.push_str(".SH NAME\nmcp-reaper.toml \\- configuration of mcp\\-reaperd and reaperctl\n");
    o.push_str(".SH SYNOPSIS\n/etc/mcp\\-reaper/config.toml, /etc/mcp\\-reaper/config.d/*.toml\n.br\n~/.config/mcp\\-reaper/config.toml (user daemon)\n");
    o.push_str(".SH DESCRIPTION\nThe defaults below are embedded in the binaries. A config file only needs the keys it changes; drop\\-ins in config.d/ are applied after it in name order; a list that is set replaces the default list. Invalid files are refused with file:line:column and key path (exit 78); a running daemon keeps its previous configuration. Check a file with \\fBreaperctl validate \\-\\-config\\fR \\fIPATH\\fR.\n");
    o.push_str(".SH DEFAULTS\n.nf\n");
    for line in text.lines() {
        let l = esc(line);
        if l.starts_with('.') || l.starts_with('\'') {
            o.push_str("\\&");
        }
        o.push_str(&l);
        o.push('\n');
    }
    o.push_str(".fi\n.SH SEE ALSO\n\\fBmcp\\-reaperd\\fR(8), \\fBreaperctl\\fR(1)\n");
    o.into_bytes()
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
        (PathBuf::from("man/reaperctl.1"), man(ctl(), "1")),
        (PathBuf::from("man/mcp-reaperd.8"), man(daemon(), "8")),
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
    let page = String::from_utf8(man(mcp_reaper::ctl::Cli::command(), "1")).unwrap();
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
