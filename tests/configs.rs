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

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Sandbox, TempDir, reaperctl, s, text};
use mcp_reaper::config::{Config, MAX_FILE_BYTES};
use mcp_reaper::exit;
use serde_json::Value;

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
    let over = MAX_FILE_BYTES as usize + 1;
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
        let stdout = text(&out.stdout);
        if out.status.code() != Some(i32::from(exit::INVALID)) {
            wrong.push(format!(
                "{}: exit {:?}, want {}:\n{stdout}{}",
                case.name,
                out.status,
                exit::INVALID,
                text(&out.stderr)
            ));
        }
        wrong.extend(case.check(&stdout, &root, &case.main));
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
        t.push_str(&format!("  '(^|/)internal-mcp-{i:04}( |$)',\n"));
    }
    t.push_str("]\n");
    let pad = "# a long comment to bring the file near the size cap: padding padding padding\n";
    while t.len() + pad.len() <= MAX_FILE_BYTES as usize {
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

// ------------------------------------------------------------------ the daemon

/// A running `mcp-reaperd --dry-run`, scoped to a sandbox with no children,
/// with its own socket and state file; stopped on drop.
struct Daemon {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Daemon {
    /// Starts the daemon on `config` and waits until its socket answers.
    fn start(sb: &Sandbox, config: &Path) -> Daemon {
        let dir = sb.dir().path();
        let socket = dir.join("control.sock");
        let log = dir.join("daemon.log");
        let child = Command::new(env!("CARGO_BIN_EXE_mcp-reaperd"))
            .arg("--config")
            .arg(config)
            .args(["--dry-run", "--scope", &s(sb.scope_pid()), "--log-target", "stderr", "--log-level", "debug"])
            .arg("--socket")
            .arg(&socket)
            .arg("--state-file")
            .arg(dir.join("state.json"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("creating the daemon log"))
            .spawn()
            .expect("spawning mcp-reaperd");
        let mut d = Daemon { child, socket, log };
        let ok = common::wait_until(Duration::from_secs(10), || {
            if let Ok(Some(st)) = d.child.try_wait() {
                panic!("mcp-reaperd exited at start ({st}):\n{}", d.log_text());
            }
            d.ctl(&["status"]).status.success()
        });
        assert!(ok, "mcp-reaperd did not answer on {} in 10 s:\n{}", d.socket.display(), d.log_text());
        d
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn ctl(&self, args: &[&str]) -> Output {
        let mut a: Vec<String> = args.iter().map(s).collect();
        a.extend([s("--socket"), s(self.socket.display())]);
        reaperctl(&a)
    }

    fn status(&self) -> Value {
        let out = self.ctl(&["status", "--json"]);
        assert!(out.status.success(), "reaperctl status failed: {}\nlog:\n{}", text(&out.stderr), self.log_text());
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("status JSON ({e}): {}", text(&out.stdout)))
    }

    /// Polls the status until `cond` holds (5 s at most); the last one.
    fn status_until(&self, what: &str, mut cond: impl FnMut(&Value) -> bool) -> Value {
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let st = self.status();
            if cond(&st) {
                return st;
            }
            assert!(Instant::now() < end, "{what}: not within 5 s; last status:\n{st:#}\nlog:\n{}", self.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            if let Some(p) = rustix::process::Pid::from_raw(self.child.id() as i32) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
            }
            let stopped = common::wait_until(Duration::from_secs(5), || matches!(self.child.try_wait(), Ok(Some(_))));
            if !stopped {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

/// The first case of each category (its name up to the first `-`) and every
/// drop-in case: the daemon loads through the code `validate` runs on every
/// case, so these cover what is the daemon's own (reload, status, `config.d/`).
fn representative(cases: Vec<Case>) -> Vec<Case> {
    let mut seen = std::collections::HashSet::new();
    let category = |c: &Case| c.name.split('-').next().unwrap_or_default().to_string();
    let picked: Vec<Case> =
        cases.into_iter().filter(|c| c.name.starts_with("dropin-") || seen.insert(category(c))).collect();
    assert!(picked.len() >= 10, "only {} representative cases", picked.len());
    picked
}

/// Empties `config.d/` of the previous case.
fn clear_dropins(etc: &Path) {
    if let Ok(rd) = std::fs::read_dir(etc.join("config.d")) {
        for e in rd {
            let _ = std::fs::remove_file(e.unwrap().path());
        }
    }
}

#[test]
fn daemon_refuses_every_broken_config_and_keeps_the_last_good_one() {
    let sb = Sandbox::new(vec![]);
    let etc = sb.dir().path().join("etc");
    let cfg = etc.join("config.toml");
    put(&cfg, sb.dir().config_text(60, "interval_secs = 37", "").as_bytes());
    let d = Daemon::start(&sb, &cfg);
    let st = d.status();
    assert_eq!((st["grace_secs"].as_u64(), st["interval_secs"].as_u64()), (Some(60), Some(37)), "{st:#}");

    let cases = representative(corpus().into_iter().chain(generated()).collect());
    let t = Instant::now();
    let mut wrong = Vec::new();
    for case in &cases {
        clear_dropins(&etc);
        case.install(&etc, Path::new("config.toml"));
        let out = d.ctl(&["reload"]);
        let stdout = text(&out.stdout);
        if out.status.code() != Some(i32::from(exit::CONFIG)) || !stdout.contains("keeps its previous config") {
            wrong.push(format!("{}: reload exit {:?}:\n{stdout}{}", case.name, out.status, text(&out.stderr)));
        }
        wrong.extend(case.check(&stdout, &etc, Path::new("config.toml")));
        let st = d.status();
        let first = &case.expects[0];
        let want = match first.position {
            Some((l, c)) => {
                format!("{}:{l}:{c}: ", etc.join(case.placed(&first.file, Path::new("config.toml"))).display())
            }
            None => format!("{}: ", cfg.display()),
        };
        let reload = &st["last_reload"];
        if reload["ok"] != false || !reload["messages"].to_string().contains(&want) {
            wrong.push(format!("{}: status shows another last reload than `{want}…`: {reload:#}", case.name));
        }
        if (st["grace_secs"].as_u64(), st["interval_secs"].as_u64()) != (Some(60), Some(37)) {
            wrong.push(format!("{}: the config in force changed: {st:#}", case.name));
        }
    }
    eprintln!("{} broken configs refused by the daemon in {} ms", cases.len(), t.elapsed().as_millis());
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    assert!(d.log_text().contains("keeping the previous config"), "{}", d.log_text());

    // A good config again, with two drop-ins setting one key: the later one in
    // name order wins.
    clear_dropins(&etc);
    put(&etc.join("config.d/20-b.toml"), b"[reaper]\ninterval_secs = 13\n");
    put(&etc.join("config.d/10-a.toml"), b"[reaper]\ninterval_secs = 11\n");
    put(&cfg, sb.dir().config_text(7, "", "").as_bytes());
    let out = d.ctl(&["reload"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    let st = d.status();
    assert_eq!(st["last_reload"]["ok"], true, "{st:#}");
    assert_eq!((st["grace_secs"].as_u64(), st["interval_secs"].as_u64()), (Some(7), Some(13)), "{st:#}");
    let sources: Vec<&str> = st["config_sources"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let d10 = etc.join("config.d/10-a.toml");
    let d20 = etc.join("config.d/20-b.toml");
    assert_eq!(sources[1..], [s(cfg.display()), s(d10.display()), s(d20.display())], "{st:#}");
}

// ------------------------------------------------------------------ symlinks

/// An editor's save of a symlinked config's target (a new file renamed over
/// it, in the target's own directory) reloads without a SIGHUP; so does
/// retargeting the link, after which the new target is the one watched.
#[test]
fn editing_the_target_of_a_symlinked_config_reloads_it() {
    let sb = Sandbox::new(vec![]);
    let dir = sb.dir();
    let etc = dir.path().join("etc");
    let (real1, real2) = (dir.path().join("srv1/reaper.toml"), dir.path().join("srv2/reaper.toml"));
    put(&real1, dir.config_text(60, "", "").as_bytes());
    std::fs::create_dir_all(&etc).unwrap();
    let cfg = etc.join("config.toml");
    std::os::unix::fs::symlink(&real1, &cfg).unwrap();
    let d = Daemon::start(&sb, &cfg);
    assert_eq!(d.status()["grace_secs"], 60);

    put(&real1, dir.config_text(42, "", "").as_bytes());
    let st = d.status_until("an edit of the link's target reloads", |st| st["grace_secs"] == 42);
    assert_eq!(st["last_reload"]["ok"], true, "{st:#}");
    assert!(st["last_reload"]["messages"].to_string().contains("grace_secs: 60 -> 42"), "{st:#}");

    // `ln -sfn`: a new link renamed over the old one.
    put(&real2, dir.config_text(43, "", "").as_bytes());
    let tmp_link = etc.join(".config.toml.new");
    std::os::unix::fs::symlink(&real2, &tmp_link).unwrap();
    std::fs::rename(&tmp_link, &cfg).unwrap();
    d.status_until("retargeting the link reloads", |st| st["grace_secs"] == 43);

    put(&real2, dir.config_text(44, "", "").as_bytes());
    d.status_until("an edit of the new target reloads", |st| st["grace_secs"] == 44);
    assert!(!d.log_text().contains("SIGHUP"), "{}", d.log_text());
}

/// A Kubernetes ConfigMap volume: `config.toml -> ..data/config.toml`, and
/// an update swaps `..data` to a new timestamped directory.
#[test]
fn a_configmap_style_data_swap_reloads_the_config() {
    let sb = Sandbox::new(vec![]);
    let dir = sb.dir();
    let etc = dir.path().join("etc");
    put(&etc.join("..v1/config.toml"), dir.config_text(60, "", "").as_bytes());
    std::os::unix::fs::symlink("..v1", etc.join("..data")).unwrap();
    let cfg = etc.join("config.toml");
    std::os::unix::fs::symlink("..data/config.toml", &cfg).unwrap();
    let d = Daemon::start(&sb, &cfg);
    assert_eq!(d.status()["grace_secs"], 60);

    // What kubelet's atomic writer does: new directory, new link, rename, clean up.
    let swap = |from: &str, to: &str, grace: u64| {
        put(&etc.join(to).join("config.toml"), dir.config_text(grace, "", "").as_bytes());
        std::os::unix::fs::symlink(to, etc.join("..data_tmp")).unwrap();
        std::fs::rename(etc.join("..data_tmp"), etc.join("..data")).unwrap();
        std::fs::remove_dir_all(etc.join(from)).unwrap();
    };
    swap("..v1", "..v2", 42);
    d.status_until("the first swap reloads", |st| st["grace_secs"] == 42);
    swap("..v2", "..v3", 43);
    d.status_until("the second swap reloads", |st| st["grace_secs"] == 43);
}

// ------------------------------------------------------------------ the socket's directory

/// Runs `mcp-reaperd` (as `uid`, through setpriv when that is not ours)
/// with no XDG_RUNTIME_DIR and `TMPDIR=tmp`, so its socket falls back to
/// `tmp/mcp-reaper-UID/mcp-reaper/control.sock`.
fn daemon_without_runtime_dir(sb: &Sandbox, tmp: &Path, uid: u32) -> Child {
    let config = sb.dir().config(60, "");
    let state = tmp.join("state.json");
    let mut cmd = if uid == rustix::process::geteuid().as_raw() {
        Command::new(env!("CARGO_BIN_EXE_mcp-reaperd"))
    } else {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", &s(uid), "--regid", &s(uid), "--clear-groups", env!("CARGO_BIN_EXE_mcp-reaperd")]);
        c
    };
    cmd.arg("--config")
        .arg(&config)
        .args(["--dry-run", "--scope", &s(sb.scope_pid()), "--log-target", "stderr", "--state-file"])
        .arg(&state)
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning mcp-reaperd")
}

/// Waits (10 s at most) for the daemon to exit; its code and stderr.
fn refused(mut child: Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("mcp-reaperd kept running on an unsafe socket directory");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), text(&out.stderr))
}

/// Without XDG_RUNTIME_DIR a user daemon's socket falls back to
/// `$TMPDIR/mcp-reaper-UID`, a name anyone may take first. The daemon refuses
/// that directory when others may write it or another user owns it (exit
/// 73, naming the directory and the problem), and makes it 0700 when missing.
/// As root (whose socket is under /run) the daemon runs as uid 65534.
#[test]
fn daemon_refuses_a_shared_socket_directory_it_does_not_own_alone() {
    const TEST: &str = "daemon_refuses_a_shared_socket_directory_it_does_not_own_alone";
    let root = common::is_root();
    if root
        && (common::find_tool("setpriv").is_none()
            || !common::world_executable(Path::new(env!("CARGO_BIN_EXE_mcp-reaperd"))))
    {
        return common::skip(TEST, "as root this needs setpriv and an mcp-reaperd other users can run");
    }
    let uid = if root { 65534 } else { rustix::process::geteuid().as_raw() };
    let sb = Sandbox::new(vec![]);
    let tmp = TempDir::new("sockdir");
    // Like /tmp: anyone may create a name in it.
    std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let dir = tmp.path().join(format!("mcp-reaper-{uid}"));
    let chown = |owner: u32| rustix::fs::chown(&dir, Some(rustix::fs::Uid::from_raw(owner)), None).unwrap();
    let chmod = |mode: u32| std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();

    // Writable by others: refused.
    std::fs::create_dir(&dir).unwrap();
    chmod(0o777);
    if root {
        chown(uid);
    }
    let (code, err) = refused(daemon_without_runtime_dir(&sb, tmp.path(), uid));
    assert_eq!(code, Some(i32::from(exit::CANTCREAT)), "{err}");
    let want =
        format!("refusing the socket's directory {}: it is writable by group or others (mode 0777)", dir.display());
    assert!(err.contains(&want), "{err}");
    assert!(!dir.join("mcp-reaper").exists(), "nothing is created inside a refused directory");

    // Owned by another user: refused.
    if root {
        chmod(0o755);
        chown(0);
        let (code, err) = refused(daemon_without_runtime_dir(&sb, tmp.path(), uid));
        assert_eq!(code, Some(i32::from(exit::CANTCREAT)), "{err}");
        let want = format!("{}: it is owned by uid 0, not by us (uid {uid})", dir.display());
        assert!(err.contains(&want), "{err}");
    } else {
        common::skip(TEST, "the case of a directory another user owns needs root (to chown it)");
    }

    // Missing: made 0700, and the daemon starts.
    std::fs::remove_dir(&dir).unwrap();
    let mut child = daemon_without_runtime_dir(&sb, tmp.path(), uid);
    let socket = dir.join("mcp-reaper/control.sock");
    let up = common::wait_until(Duration::from_secs(10), || socket.exists());
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(up, "no socket at {}:\n{}", socket.display(), text(&out.stderr));
    let meta = std::fs::symlink_metadata(&dir).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777, 0o700);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), uid);
}
