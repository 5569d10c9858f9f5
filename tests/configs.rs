//! Broken configs (issue #6): every case of `tests/data/bad-configs/` (plus a
//! few generated here: non-UTF-8, a byte order mark, a control character, a
//! file over the size cap) is refused by `reaperctl validate` with
//! `file:line:col` and its message, and a running daemon asked to reload it
//! keeps its last good config. Also: large but valid configs, regexes that
//! only look catastrophic, drop-in order, a config reached through
//! symlinks being watched through them, and the fallback socket directory
//! (`$TMPDIR/mcp-reaper-UID`) refused when it is not ours alone.
//!
//! A case is one file, or a directory holding `config.toml` and `config.d/`.
//! Each file starts with comment lines; `# expect: LINE:COL TEXT` says that
//! an error at that position of that file contains TEXT. Several lines may
//! name one position; every position is one error, and there must be no other.
//!
//! Safety: every daemon here runs with `--dry-run` and is `--scope`d to a
//! sandbox with no children, with its own temporary config, socket and state
//! file; it is stopped (SIGTERM through its `Child` handle, then SIGKILL
//! after 5 s) when its test ends, panics included.

mod common;
#[path = "configs/daemon.rs"]
mod daemon;
#[path = "configs/socket_dir.rs"]
mod socket_dir;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

use common::{TempDir, reaperctl, s, text};
use mcp_reaper::config::{Config, MAX_FILE_BYTES};
use mcp_reaper::exit;

// ------------------------------------------------------------------ the corpus

#[derive(Clone, Debug)]
struct Expect {
    /// The file, relative to the case's root.
    file: PathBuf,
    /// `None` for a problem of the whole file (its size).
    position: Option<(usize, usize)>,
    text: String,
}

#[derive(Clone, Debug)]
struct Case {
    name: String,
    /// Relative path and content of every file.
    files: Vec<(PathBuf, Vec<u8>)>,
    /// The file `--config` names, relative to the root.
    main: PathBuf,
    expects: Vec<Expect>,
}

impl Case {
    /// A one-file case, its expectation given here rather than in the file.
    fn generated(name: &str, bytes: Vec<u8>, position: Option<(usize, usize)>, text: &str) -> Case {
        let file = PathBuf::from(format!("{name}.toml"));
        Case {
            name: name.into(),
            files: vec![(file.clone(), bytes)],
            main: file.clone(),
            expects: vec![Expect { file, position, text: text.into() }],
        }
    }

    /// Writes the case's files below `root`, the main file as `main_as`
    /// (relative), every other one at its own relative path. Each is written
    /// whole and renamed into place, so a daemon watching never reads half a file.
    fn install(&self, root: &Path, main_as: &Path) {
        for (rel, bytes) in &self.files {
            put(&root.join(self.placed(rel, main_as)), bytes);
        }
    }

    fn placed<'a>(&self, rel: &'a Path, main_as: &'a Path) -> &'a Path {
        if rel == self.main { main_as } else { rel }
    }

    /// Checks `output` (what validate or reload printed) against the
    /// expectations, the files installed below `root` as by [`Case::install`].
    /// Returns every mismatch.
    fn check(&self, output: &str, root: &Path, main_as: &Path) -> Vec<String> {
        let problems: Vec<&str> = output.lines().filter(|l| l.starts_with(&*root.to_string_lossy())).collect();
        let mut wrong = Vec::new();
        let mut positions = Vec::new();
        for e in &self.expects {
            let path = root.join(self.placed(&e.file, main_as));
            let prefix = match e.position {
                Some((line, col)) => format!("{}:{line}:{col}: ", path.display()),
                None => format!("{}: ", path.display()),
            };
            if !problems.iter().any(|p| p.starts_with(&prefix) && p.contains(&e.text)) {
                wrong.push(format!("{}: no problem reported as `{prefix}…{}…`", self.name, e.text));
            }
            if !positions.contains(&prefix) {
                positions.push(prefix);
            }
        }
        if problems.len() != positions.len() {
            wrong.push(format!(
                "{}: {} problem(s) reported, {} expected: {problems:#?}",
                self.name,
                problems.len(),
                positions.len()
            ));
        }
        wrong
    }
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bad-configs")
}

/// Every case of the corpus directory, by name.
fn corpus() -> Vec<Case> {
    let dir = corpus_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            let (files, main) = if path.is_dir() {
                let mut files = Vec::new();
                collect_files(&path, Path::new(""), &mut files);
                (files, PathBuf::from("config.toml"))
            } else {
                let bytes = std::fs::read(&path).unwrap();
                (vec![(PathBuf::from(&name), bytes)], PathBuf::from(&name))
            };
            let expects: Vec<Expect> = files.iter().flat_map(|(rel, bytes)| expects_of(rel, bytes)).collect();
            assert!(!expects.is_empty(), "corpus case {name} has no `# expect:` line");
            Case { name, files, main, expects }
        })
        .collect()
}

fn collect_files(root: &Path, rel: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel)).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        let r = rel.join(p.file_name().unwrap());
        if p.is_dir() {
            collect_files(root, &r, out);
        } else {
            out.push((r, std::fs::read(&p).unwrap()));
        }
    }
}

/// The `# expect: LINE:COL TEXT` lines of the comment block a file starts with.
fn expects_of(rel: &Path, bytes: &[u8]) -> Vec<Expect> {
    let head = String::from_utf8_lossy(bytes);
    head.lines()
        .take_while(|l| l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("# expect: "))
        .map(|rest| {
            let (pos, text) =
                rest.split_once(' ').unwrap_or_else(|| panic!("{}: malformed expect: {rest}", rel.display()));
            let (line, col) =
                pos.split_once(':').unwrap_or_else(|| panic!("{}: want LINE:COL in {rest}", rel.display()));
            let position = Some((line.parse().unwrap(), col.parse().unwrap()));
            Expect { file: rel.to_path_buf(), position, text: text.into() }
        })
        .collect()
}

/// Cases that are better generated than committed: bytes that editors and
/// git tooling like to "fix", and a file over the size cap.
fn generated() -> Vec<Case> {
    let over = usize::try_from(MAX_FILE_BYTES).unwrap() + 1;
    let mut huge = b"[reaper]\ngrace_secs = 30\n".to_vec();
    while huge.len() < over {
        huge.extend_from_slice(b"# padding padding padding padding padding padding padding padding\n");
    }
    huge.truncate(over);
    vec![
        Case::generated(
            "encoding-latin1",
            b"[reaper]\ngrace_secs = 30 # caf\xe9\n".to_vec(),
            Some((2, 22)),
            "not UTF-8: invalid byte 0xe9",
        ),
        Case::generated(
            "encoding-truncated-utf8",
            b"[reaper]\nmode = \"dry-run\" # \xe2\x82".to_vec(),
            Some((2, 20)),
            "not UTF-8: a sequence cut off at the end of the file",
        ),
        // A byte order mark is no column: `reapr` starts at column 2.
        Case::generated(
            "encoding-bom",
            "\u{feff}[reapr]\ngrace_secs = 1\n".into(),
            Some((1, 2)),
            "did you mean `reaper`?",
        ),
        Case::generated(
            "syntax-control-character",
            b"[reaper]\ngrace_secs = 30 # \x01\n".to_vec(),
            Some((2, 19)),
            "invalid comment character",
        ),
        Case::generated("size-over-the-cap", huge, None, &format!("too large ({over} bytes, limit {MAX_FILE_BYTES})")),
    ]
}

/// Writes a file whole, then renames it into place, as editors do.
fn put(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let tmp = path.with_file_name(format!(".{}.tmp", path.file_name().unwrap().to_string_lossy()));
    std::fs::write(&tmp, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", tmp.display()));
    std::fs::rename(&tmp, path).unwrap_or_else(|e| panic!("renaming to {}: {e}", path.display()));
}

fn validate(config: &Path) -> Output {
    reaperctl([s("--config"), s(config.display()), s("validate")])
}

// ------------------------------------------------------------------ validate

#[test]
fn every_broken_config_is_refused_with_file_line_and_column() {
    let cases = corpus();
    assert!(cases.len() >= 25, "the corpus in {} holds only {} cases", corpus_dir().display(), cases.len());
    let tmp = TempDir::new("bad-configs");
    let mut wrong = Vec::new();
    let t = Instant::now();
    for case in cases.iter().chain(&generated()) {
        let root = tmp.path().join(&case.name);
        case.install(&root, &case.main);
        let out = validate(&root.join(&case.main));
        // Problems are said on stderr (issue 36).
        let said = text(&out.stderr);
        if out.status.code() != Some(i32::from(exit::INVALID)) {
            wrong.push(format!(
                "{}: exit {:?}, want {}:\n{}{said}",
                case.name,
                out.status,
                exit::INVALID,
                text(&out.stdout)
            ));
        }
        wrong.extend(case.check(&said, &root, &case.main));
    }
    eprintln!("validated {} broken configs in {} ms", cases.len() + generated().len(), t.elapsed().as_millis());
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn the_default_config_validates() {
    let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/default.toml");
    let out = validate(&default);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).starts_with("ok ("), "{}", text(&out.stdout));
}

#[test]
fn dropins_apply_in_name_order() {
    let tmp = TempDir::new("dropin-order");
    let main = tmp.write("config.toml", "[reaper]\ngrace_secs = 5\n");
    // Written out of order: the loader sorts.
    put(&tmp.path().join("config.d/20-b.toml"), b"[reaper]\ninterval_secs = 13\n");
    put(&tmp.path().join("config.d/10-a.toml"), b"[reaper]\ninterval_secs = 11\n");
    put(&tmp.path().join("config.d/notes.txt"), b"not a drop-in: [[[");
    let out = validate(&main);
    let d = tmp.path().join("config.d");
    let want = format!(
        "ok (<embedded default config>, {}, {}, {})",
        main.display(),
        d.join("10-a.toml").display(),
        d.join("20-b.toml").display()
    );
    assert_eq!(text(&out.stdout).trim(), want);
    // The later one wins (the daemon shows the effective value: see below).
    let c = Config::load(&mcp_reaper::config::Sources::explicit(&main)).unwrap();
    assert_eq!((c.grace_secs, c.interval_secs), (5, 13));
}

/// A config near the size cap with thousands of patterns is accepted.
#[test]
fn a_large_config_with_thousands_of_patterns_is_accepted() {
    let tmp = TempDir::new("large-config");
    let mut t = String::from("[patterns]\nservers = [\n");
    for i in 0..2000 {
        writeln!(t, "  '(^|/)internal-mcp-{i:04}( |$)',").unwrap();
    }
    t.push_str("]\n");
    let pad = "# a long comment to bring the file near the size cap: padding padding padding\n";
    while t.len() + pad.len() <= usize::try_from(MAX_FILE_BYTES).unwrap() {
        t.push_str(pad);
    }
    let path = tmp.write("config.toml", &t);
    let started = Instant::now();
    let out = validate(&path);
    eprintln!("validated {} bytes with 2000 patterns in {} ms", t.len(), started.elapsed().as_millis());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let c = Config::from_str_with_default("large.toml", &t).unwrap();
    assert_eq!(c.patterns.servers.len(), 2000);
    assert_eq!(c.matcher.classify("/opt/x/internal-mcp-1999 --stdio", None).role, mcp_reaper::config::Role::Server);
}

/// Patterns that are exponential for a backtracking engine are fine for the
/// `regex` crate (finite automata, linear in the input): accepted, and
/// matching them against a 1 MiB command line completes.
#[test]
fn catastrophic_looking_regexes_are_accepted_and_match_a_huge_command_line() {
    let patterns = [r"(a+)+$", r"(a|a)*b", r"(.*a){20}", r"^(a|aa)+$", r"(\w+\s?)+$", r"(x+x+)+y"];
    let list: Vec<String> = patterns.iter().map(|p| format!("'{p}'")).collect();
    let toml = format!("[patterns]\nservers = [{}]\nprotect = [{}]\n", list.join(", "), list.join(", "));
    let tmp = TempDir::new("catastrophic");
    let out = validate(&tmp.write("config.toml", &toml));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    let c = Config::from_str_with_default("c.toml", &toml).unwrap();
    let mib = 1 << 20;
    for hay in ["a".repeat(mib), format!("{}!", "a".repeat(mib)), format!("{}b", "a".repeat(mib)), "x".repeat(mib)] {
        let t = Instant::now();
        let m = c.matcher.classify(&hay, None);
        eprintln!("1 MiB argv ending in {:?}: {:?} in {} ms", &hay[hay.len() - 1..], m.role, t.elapsed().as_millis());
    }
}
