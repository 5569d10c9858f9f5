//! Configuration: the embedded default, a user file, and drop-ins, each a layer
//! that sets only the keys it names. Every value is checked in the file that
//! wrote it, so an error always names file, line, column and key path.

mod patterns;

/// The lazy DFA's state cache per compiled regex or list (regex's default is
/// 2 MiB each). Command lines are short and the lists few: a small cache keeps
/// the daemon's footprint down, and a full one only costs a cache reset.
pub const DFA_CACHE: usize = 256 * 1024;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

pub use patterns::{CachedRole, Matcher, Role, RoleMatch, Subject, Target};

/// The default configuration, compiled into the binaries.
pub const DEFAULT_TOML: &str = include_str!("../../config/default.toml");
const DEFAULT_NAME: &str = "<embedded default config>";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Enforce,
    DryRun,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Enforce => "enforce",
            Mode::DryRun => "dry-run",
        })
    }
}

/// The effective configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub mode: Mode,
    pub interval_secs: u64,
    pub grace_secs: u64,
    pub term_timeout_secs: f64,
    pub reap_stale_hosts: bool,
    pub min_uid: u32,
    pub patterns: PatternLists,
    pub socket: Option<PathBuf>,
    pub state_file: Option<PathBuf>,
    pub metrics_textfile: Option<PathBuf>,
    /// Compiled from `patterns`.
    pub matcher: Arc<Matcher>,
    /// `[redact]` as configured.
    pub redact: RedactLists,
    /// Compiled from `redact`: masks secrets in every command line shown.
    pub redactor: Arc<crate::redact::Redactor>,
    /// Files that contributed, in the order applied (the embedded default first).
    pub sources: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PatternLists {
    pub hosts: Vec<String>,
    pub servers: Vec<String>,
    pub launchers: Vec<String>,
    pub adopters: Vec<String>,
    pub protect: Vec<String>,
    pub bystanders: Vec<String>,
}

/// `[redact]`: what is masked in command lines that are shown.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RedactLists {
    pub enabled: bool,
    pub patterns: Vec<String>,
    pub extra_patterns: Vec<String>,
}

/// One problem in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// Dotted key path (`reaper.grace_secs`, `patterns.hosts[3]`), when known.
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        write!(f, ": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

/// Every problem found, so a user fixes them all in one go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

// ---- the file format: every key optional, every value with its span ----

/// One file's values; filled key by key in [`parse_layer`].
#[derive(Default)]
struct FileLayer {
    reaper: Option<FileReaper>,
    patterns: Option<FilePatterns>,
    daemon: Option<FileDaemon>,
    redact: Option<FileRedact>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileReaper {
    mode: Option<Spanned<Mode>>,
    // i128, so that a value beyond i64 gets the range message, not a type error.
    interval_secs: Option<Spanned<i128>>,
    grace_secs: Option<Spanned<i128>>,
    term_timeout_secs: Option<Spanned<f64>>,
    reap_stale_hosts: Option<Spanned<bool>>,
    min_uid: Option<Spanned<i128>>,
}

type SpannedList = Option<Spanned<Vec<Spanned<String>>>>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FilePatterns {
    hosts: SpannedList,
    servers: SpannedList,
    launchers: SpannedList,
    adopters: SpannedList,
    protect: SpannedList,
    bystanders: SpannedList,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileRedact {
    enabled: Option<Spanned<bool>>,
    patterns: SpannedList,
    extra_patterns: SpannedList,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileDaemon {
    socket: Option<Spanned<PathBuf>>,
    state_file: Option<Spanned<PathBuf>>,
    metrics_textfile: Option<Spanned<PathBuf>>,
}

/// Values as they are merged, before they are known to be complete.
#[derive(Default)]
struct Draft {
    mode: Option<Mode>,
    interval_secs: Option<u64>,
    grace_secs: Option<u64>,
    term_timeout_secs: Option<f64>,
    reap_stale_hosts: Option<bool>,
    min_uid: Option<u32>,
    patterns: [Option<Vec<String>>; 6],
    socket: Option<PathBuf>,
    state_file: Option<PathBuf>,
    metrics_textfile: Option<PathBuf>,
    redact_enabled: Option<bool>,
    redact_patterns: Option<Vec<String>>,
    redact_extra: Option<Vec<String>>,
}

const LIST_NAMES: [&str; 6] = ["hosts", "servers", "launchers", "adopters", "protect", "bystanders"];

/// Where configuration comes from.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// The main file. `None`: only the embedded default (plus `dropin_dir`).
    pub main: Option<PathBuf>,
    /// Whether a missing `main` is an error (it is when the user named it).
    pub main_required: bool,
}

impl Sources {
    pub fn explicit(path: impl Into<PathBuf>) -> Sources {
        Sources { main: Some(path.into()), main_required: true }
    }

    /// The main file when none is named: the system file for root, the XDG one
    /// for a user. It need not exist.
    pub fn default_location() -> Sources {
        Sources { main: Some(default_config_path()), main_required: false }
    }

    pub fn embedded_only() -> Sources {
        Sources::default()
    }

    /// `config.d/` beside the main file.
    pub fn dropin_dir(&self) -> Option<PathBuf> {
        let main = self.main.as_ref()?;
        Some(main.parent().unwrap_or(Path::new(".")).join("config.d"))
    }
}

pub fn default_config_path() -> PathBuf {
    if crate::paths::is_root() {
        PathBuf::from("/etc/mcp-reaper/config.toml")
    } else {
        xdg_dir("XDG_CONFIG_HOME", ".config").join("mcp-reaper/config.toml")
    }
}

/// `$VAR` if set and absolute, else `$HOME/fallback`.
pub fn xdg_dir(var: &str, fallback: &str) -> PathBuf {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(p) if p.is_absolute() => p,
        _ => std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from).join(fallback),
    }
}

impl Config {
    /// The embedded default alone.
    pub fn embedded() -> Config {
        Config::load(&Sources::embedded_only()).expect("the embedded default config is valid (tested)")
    }

    /// Loads the embedded default, then the main file, then its drop-ins.
    pub fn load(sources: &Sources) -> Result<Config, ConfigErrors> {
        let mut errors = Vec::new();
        let mut draft = Draft::default();
        let mut used = vec![DEFAULT_NAME.to_string()];
        apply_text(&mut draft, DEFAULT_NAME, DEFAULT_TOML, &mut errors);
        if let Some(main) = &sources.main {
            let name = main.display().to_string();
            match read_text(main, &name) {
                Ok(Ok(text)) => {
                    apply_text(&mut draft, &name, &text, &mut errors);
                    used.push(name);
                }
                Ok(Err(refused)) => errors.push(refused),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !sources.main_required => {}
                Err(e) => errors.push(file_error(&name, format!("cannot read: {e}"))),
            }
        }
        if let Some(dir) = sources.dropin_dir() {
            match dropins(&dir) {
                Ok(files) => {
                    for f in files {
                        let name = f.display().to_string();
                        match read_text(&f, &name) {
                            Ok(Ok(text)) => {
                                apply_text(&mut draft, &name, &text, &mut errors);
                                used.push(name);
                            }
                            Ok(Err(refused)) => errors.push(refused),
                            Err(e) => errors.push(file_error(&name, format!("cannot read: {e}"))),
                        }
                    }
                }
                Err(e) => errors.push(file_error(&dir.display().to_string(), format!("cannot list drop-ins: {e}"))),
            }
        }
        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        draft.finish(used)
    }

    /// Parses one TOML text on top of the embedded default (for tests and `validate`).
    pub fn from_str_with_default(name: &str, text: &str) -> Result<Config, ConfigErrors> {
        let mut errors = Vec::new();
        let mut draft = Draft::default();
        apply_text(&mut draft, DEFAULT_NAME, DEFAULT_TOML, &mut errors);
        apply_text(&mut draft, name, text, &mut errors);
        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        draft.finish(vec![DEFAULT_NAME.to_string(), name.to_string()])
    }

    pub fn is_dry_run(&self) -> bool {
        self.mode == Mode::DryRun
    }

    /// The grace period and term timeout as durations.
    pub fn grace(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.grace_secs)
    }

    pub fn term_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.term_timeout_secs)
    }

    /// Human-readable list of settings that differ, for reload logs.
    pub fn diff(&self, new: &Config) -> Vec<String> {
        let mut out = Vec::new();
        macro_rules! cmp {
            ($($f:ident),*) => {$(
                if format!("{:?}", self.$f) != format!("{:?}", new.$f) {
                    out.push(format!("{}: {:?} -> {:?}", stringify!($f), self.$f, new.$f));
                }
            )*};
        }
        cmp!(
            mode,
            interval_secs,
            grace_secs,
            term_timeout_secs,
            reap_stale_hosts,
            min_uid,
            socket,
            state_file,
            metrics_textfile
        );
        let (a, b) = (&self.patterns, &new.patterns);
        for (name, x, y) in [
            ("patterns.hosts", &a.hosts, &b.hosts),
            ("patterns.servers", &a.servers, &b.servers),
            ("patterns.launchers", &a.launchers, &b.launchers),
            ("patterns.adopters", &a.adopters, &b.adopters),
            ("patterns.protect", &a.protect, &b.protect),
            ("patterns.bystanders", &a.bystanders, &b.bystanders),
            ("redact.patterns", &self.redact.patterns, &new.redact.patterns),
            ("redact.extra_patterns", &self.redact.extra_patterns, &new.redact.extra_patterns),
        ] {
            if x != y {
                out.push(format!("{name}: {} -> {} entries", x.len(), y.len()));
            }
        }
        if self.redact.enabled != new.redact.enabled {
            out.push(format!("redact.enabled: {} -> {}", self.redact.enabled, new.redact.enabled));
        }
        out
    }
}

fn dropins(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
            .collect::<Vec<_>>(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    files.sort();
    Ok(files)
}

fn file_error(file: &str, message: String) -> ConfigError {
    ConfigError { file: file.to_string(), position: None, key: None, message }
}

/// Refused unread: far above any real config (the default is about 10 KiB),
/// so a wrong path (a log, a core dump) costs neither memory nor parse time.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// One file's text, at most [`MAX_FILE_BYTES`] and UTF-8. The outer error is
/// the I/O failure (the caller judges a missing file), the inner one a file
/// refused for its size or encoding.
fn read_text(path: &Path, name: &str) -> std::io::Result<Result<String, ConfigError>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let on_disk = file.metadata()?.len();
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        // A pipe or a device has no size on disk.
        let size = if on_disk > MAX_FILE_BYTES { format!("{on_disk} bytes") } else { "unknown size".into() };
        return Ok(Err(file_error(name, format!("too large ({size}, limit {MAX_FILE_BYTES})"))));
    }
    Ok(String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let what = match e.utf8_error().error_len() {
            Some(_) => format!("invalid byte 0x{:02x}", e.as_bytes()[at]),
            None => "a sequence cut off at the end of the file".into(),
        };
        let valid = std::str::from_utf8(&e.as_bytes()[..at]).unwrap_or_default();
        ConfigError {
            file: name.to_string(),
            position: Some(line_col(valid, at)),
            key: None,
            message: format!("not UTF-8: {what}"),
        }
    }))
}

/// Byte offset → 1-based (line, column in characters).
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    // Editors do not show a byte order mark: it takes no column.
    let bom = usize::from(line == 1 && before.starts_with('\u{feff}'));
    (line, col - bom)
}

struct Layer<'a> {
    name: &'a str,
    text: &'a str,
    errors: &'a mut Vec<ConfigError>,
}

impl Layer<'_> {
    fn err(&mut self, span: std::ops::Range<usize>, key: String, message: String) {
        self.errors.push(ConfigError {
            file: self.name.to_string(),
            position: Some(line_col(self.text, span.start)),
            key: Some(key),
            message,
        });
    }

    fn int_in(&mut self, v: Option<Spanned<i128>>, key: &str, lo: i128, hi: i128) -> Option<i128> {
        let v = v?;
        let n = *v.get_ref();
        if (lo..=hi).contains(&n) {
            Some(n)
        } else {
            self.err(v.span(), key.to_string(), format!("must be between {lo} and {hi} (got {n})"));
            None
        }
    }
}

const SECTIONS: [(&str, &[&str]); 4] = [
    ("reaper", &["mode", "interval_secs", "grace_secs", "term_timeout_secs", "reap_stale_hosts", "min_uid"]),
    ("patterns", &LIST_NAMES),
    ("daemon", &["socket", "state_file", "metrics_textfile"]),
    ("redact", &["enabled", "patterns", "extra_patterns"]),
];

/// Parses one file, collecting every problem: all syntax errors, then every
/// unknown key and every wrongly typed value (each key is deserialized on its
/// own so one bad value does not hide the next).
fn parse_layer(name: &str, text: &str, errors: &mut Vec<ConfigError>) -> Option<FileLayer> {
    use serde::Deserialize as _;
    use toml::de::{DeTable, DeValue, Deserializer};
    let mut push = |span: Option<std::ops::Range<usize>>, key: Option<String>, message: String| {
        errors.push(ConfigError {
            file: name.to_string(),
            position: span.map(|s| line_col(text, s.start)),
            key,
            message: message.trim().to_string(),
        });
    };
    let (doc, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        let mut spanless = None;
        for e in syntax {
            let span = e.span().or_else(|| Some(spanless.get_or_insert_with(|| first_spanless_error(text)).clone()));
            push(span, None, e.message().to_string());
        }
        return None;
    }
    let mut layer = FileLayer::default();
    for (key, value) in doc.into_inner() {
        let section = key.get_ref().to_string();
        let Some(&(_, known)) = SECTIONS.iter().find(|(s, _)| *s == section) else {
            let names: Vec<&str> = SECTIONS.iter().map(|(s, _)| *s).collect();
            let what = if matches!(value.get_ref(), DeValue::Table(_)) { "section" } else { "top-level key" };
            push(
                Some(key.span()),
                None,
                format!(
                    "unknown {what} `{section}`, expected one of {}{}",
                    names.join(", "),
                    unknown_key_hint(&section, &names, None)
                ),
            );
            continue;
        };
        let span = value.span();
        let DeValue::Table(table) = value.into_inner() else {
            push(Some(span), Some(section), "must be a table".into());
            continue;
        };
        for (k, v) in table {
            let kname = k.get_ref().to_string();
            let path = format!("{section}.{kname}");
            if !known.contains(&kname.as_str()) {
                push(
                    Some(k.span()),
                    None,
                    format!(
                        "unknown field `{kname}` in [{section}], expected one of {}{}",
                        known.join(", "),
                        unknown_key_hint(&kname, known, Some(&section))
                    ),
                );
                continue;
            }
            let vspan = v.span();
            let datetime = match v.get_ref() {
                DeValue::Datetime(d) => Some(d.to_string()),
                _ => None,
            };
            let mut one = DeTable::new();
            one.insert(k, v);
            let de = Deserializer::from(toml::Spanned::new(vspan.clone(), one));
            let res = match section.as_str() {
                "reaper" => FileReaper::deserialize(de).map(|r| merge_reaper(layer.reaper.get_or_insert_default(), r)),
                "patterns" => {
                    FilePatterns::deserialize(de).map(|p| merge_patterns(layer.patterns.get_or_insert_default(), p))
                }
                "redact" => FileRedact::deserialize(de).map(|r| merge_redact(layer.redact.get_or_insert_default(), r)),
                _ => FileDaemon::deserialize(de).map(|d| merge_daemon(layer.daemon.get_or_insert_default(), d)),
            };
            if let Err(e) = res {
                push(e.span().or(Some(vspan)), Some(path), toml_type_names(e.message(), datetime.as_deref()));
            }
        }
    }
    Some(layer)
}

/// "; did you mean …?" for a misspelled key, or where a key of another
/// section belongs (`section`: where it was found; `None` at the top level).
fn unknown_key_hint(name: &str, candidates: &[&str], section: Option<&str>) -> String {
    if let Some(close) = candidates.iter().find(|c| edit_distance(name, c) <= 2) {
        return format!("; did you mean `{close}`?");
    }
    match SECTIONS.iter().find(|(s, keys)| Some(*s) != section && keys.contains(&name)) {
        Some((s, _)) => format!("; `{name}` belongs in [{s}]"),
        None => String::new(),
    }
}

/// Levenshtein distance, for short key names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// Serde's type names in a type error, in TOML's words (a datetime shows as a
/// "map" to serde).
fn toml_type_names(message: &str, datetime: Option<&str>) -> String {
    let found = match datetime {
        Some(d) => format!("invalid type: datetime `{d}`"),
        None => "invalid type: table".into(),
    };
    message
        .replace("invalid type: map", &found)
        .replace("invalid type: sequence", "invalid type: array")
        .replace("invalid type: floating point", "invalid type: float")
        .replace("expected a sequence", "expected an array")
        .replace("expected i128", "expected an integer")
        .replace("expected f64", "expected a number")
        .replace("expected path string", "expected a string")
}

/// Where the first syntax error without a span is. toml 0.9 reports a dotted
/// key of 80 or more parts ("recursion limit") without one: the first line
/// whose prefix of the text already gives such an error, at its first
/// non-blank character. Only hostile input gets here, and it costs a parse per
/// halving of the line count. Later spanless errors are shown at the same place.
fn first_spanless_error(text: &str) -> std::ops::Range<usize> {
    let spanless = |end: usize| toml::de::DeTable::parse_recoverable(&text[..end]).1.iter().any(|e| e.span().is_none());
    let ends: Vec<usize> = text.match_indices('\n').map(|(i, _)| i).chain([text.len()]).collect();
    let end = ends.get(ends.partition_point(|&end| !spanless(end))).copied().unwrap_or(text.len());
    let start = text[..end].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[start..end];
    let at = start + line.len() - line.trim_start().len();
    at..at
}

fn merge_reaper(a: &mut FileReaper, b: FileReaper) {
    a.mode = a.mode.take().or(b.mode);
    a.interval_secs = a.interval_secs.take().or(b.interval_secs);
    a.grace_secs = a.grace_secs.take().or(b.grace_secs);
    a.term_timeout_secs = a.term_timeout_secs.take().or(b.term_timeout_secs);
    a.reap_stale_hosts = a.reap_stale_hosts.take().or(b.reap_stale_hosts);
    a.min_uid = a.min_uid.take().or(b.min_uid);
}

fn merge_patterns(a: &mut FilePatterns, b: FilePatterns) {
    a.hosts = a.hosts.take().or(b.hosts);
    a.servers = a.servers.take().or(b.servers);
    a.launchers = a.launchers.take().or(b.launchers);
    a.adopters = a.adopters.take().or(b.adopters);
    a.protect = a.protect.take().or(b.protect);
    a.bystanders = a.bystanders.take().or(b.bystanders);
}

fn merge_redact(a: &mut FileRedact, b: FileRedact) {
    a.enabled = a.enabled.take().or(b.enabled);
    a.patterns = a.patterns.take().or(b.patterns);
    a.extra_patterns = a.extra_patterns.take().or(b.extra_patterns);
}

fn merge_daemon(a: &mut FileDaemon, b: FileDaemon) {
    a.socket = a.socket.take().or(b.socket);
    a.state_file = a.state_file.take().or(b.state_file);
    a.metrics_textfile = a.metrics_textfile.take().or(b.metrics_textfile);
}

/// A list of regexes, each checked; `None` (and an error per bad entry) if any is invalid.
fn checked_list(l: &mut Layer<'_>, list: SpannedList, key: &str) -> Option<Vec<String>> {
    let mut ok = Vec::new();
    let mut good = true;
    for (j, pat) in list?.into_inner().into_iter().enumerate() {
        match patterns::check(pat.get_ref()) {
            Ok(()) => ok.push(pat.get_ref().clone()),
            Err(msg) => {
                good = false;
                l.err(pat.span(), format!("{key}[{j}]"), msg);
            }
        }
    }
    good.then_some(ok)
}

fn apply_text(draft: &mut Draft, name: &str, text: &str, errors: &mut Vec<ConfigError>) {
    let Some(file) = parse_layer(name, text, errors) else { return };
    let mut l = Layer { name, text, errors };
    if let Some(r) = file.reaper {
        if let Some(m) = r.mode {
            draft.mode = Some(m.into_inner());
        }
        if let Some(n) = l.int_in(r.interval_secs, "reaper.interval_secs", 1, 86_400) {
            draft.interval_secs = u64::try_from(n).ok();
        }
        if let Some(n) = l.int_in(r.grace_secs, "reaper.grace_secs", 0, 604_800) {
            draft.grace_secs = u64::try_from(n).ok();
        }
        if let Some(t) = r.term_timeout_secs {
            let secs = *t.get_ref();
            if secs.is_finite() && (0.05..=300.0).contains(&secs) {
                draft.term_timeout_secs = Some(secs);
            } else {
                l.err(
                    t.span(),
                    "reaper.term_timeout_secs".into(),
                    format!("must be between 0.05 and 300 (got {secs})"),
                );
            }
        }
        if let Some(b) = r.reap_stale_hosts {
            draft.reap_stale_hosts = Some(b.into_inner());
        }
        // u32::MAX is (uid_t)-1, "no uid": a floor no user can reach.
        if let Some(n) = l.int_in(r.min_uid, "reaper.min_uid", 0, i128::from(u32::MAX - 1)) {
            draft.min_uid = u32::try_from(n).ok();
        }
    }
    if let Some(p) = file.patterns {
        let lists = [p.hosts, p.servers, p.launchers, p.adopters, p.protect, p.bystanders];
        for (i, list) in lists.into_iter().enumerate() {
            let Some(span) = list.as_ref().map(toml::Spanned::span) else { continue };
            let key = format!("patterns.{}", LIST_NAMES[i]);
            let Some(ok) = checked_list(&mut l, list, &key) else { continue };
            // Checked here, where the list has a position, not when the matcher is built.
            match patterns::check_list(&ok) {
                Ok(()) => draft.patterns[i] = Some(ok),
                Err(msg) => l.err(span, key, msg),
            }
        }
    }
    if let Some(r) = file.redact {
        if let Some(b) = r.enabled {
            draft.redact_enabled = Some(b.into_inner());
        }
        if let Some(ok) = checked_list(&mut l, r.patterns, "redact.patterns") {
            draft.redact_patterns = Some(ok);
        }
        if let Some(ok) = checked_list(&mut l, r.extra_patterns, "redact.extra_patterns") {
            draft.redact_extra = Some(ok);
        }
    }
    if let Some(d) = file.daemon {
        for (slot, v, key) in [
            (&mut draft.socket, d.socket, "daemon.socket"),
            (&mut draft.state_file, d.state_file, "daemon.state_file"),
            (&mut draft.metrics_textfile, d.metrics_textfile, "daemon.metrics_textfile"),
        ] {
            let Some(v) = v else { continue };
            match path_problem(v.get_ref(), key == "daemon.socket") {
                None => *slot = Some(v.into_inner()),
                Some(msg) => l.err(v.span(), key.into(), msg),
            }
        }
    }
}

/// Why a configured path cannot work, caught here rather than when the daemon
/// first uses it.
// Debug on purpose: quoted, with a NUL or control character shown as an escape.
#[allow(clippy::unnecessary_debug_formatting)]
fn path_problem(p: &Path, socket: bool) -> Option<String> {
    use std::os::unix::ffi::OsStrExt as _;
    // sun_path is 108 bytes, its last one the terminating NUL.
    const SUN_PATH_MAX: usize = 107;
    let len = p.as_os_str().len();
    if !p.is_absolute() {
        Some(format!("must be an absolute path (got {p:?})"))
    } else if p.as_os_str().as_bytes().contains(&0) {
        Some(format!("must not contain a NUL byte (got {p:?})"))
    } else if socket && len > SUN_PATH_MAX {
        Some(format!("too long for a unix socket ({len} bytes, limit {SUN_PATH_MAX})"))
    } else {
        None
    }
}

impl Draft {
    fn finish(self, sources: Vec<String>) -> Result<Config, ConfigErrors> {
        let missing = |key: &str| ConfigErrors(vec![file_error(DEFAULT_NAME, format!("{key} has no value"))]);
        let [hosts, servers, launchers, adopters, protect, bystanders] = self.patterns;
        let patterns = PatternLists {
            hosts: hosts.ok_or_else(|| missing("patterns.hosts"))?,
            servers: servers.ok_or_else(|| missing("patterns.servers"))?,
            launchers: launchers.ok_or_else(|| missing("patterns.launchers"))?,
            adopters: adopters.ok_or_else(|| missing("patterns.adopters"))?,
            protect: protect.ok_or_else(|| missing("patterns.protect"))?,
            bystanders: bystanders.ok_or_else(|| missing("patterns.bystanders"))?,
        };
        let matcher = Matcher::new(&patterns).map_err(|m| missing(&m))?;
        let redact = RedactLists {
            enabled: self.redact_enabled.ok_or_else(|| missing("redact.enabled"))?,
            patterns: self.redact_patterns.ok_or_else(|| missing("redact.patterns"))?,
            extra_patterns: self.redact_extra.ok_or_else(|| missing("redact.extra_patterns"))?,
        };
        let redactor = if redact.enabled {
            let all: Vec<String> = redact.patterns.iter().chain(&redact.extra_patterns).cloned().collect();
            crate::redact::Redactor::new(&all).map_err(|message| {
                let file = sources.last().cloned().unwrap_or_default();
                ConfigErrors(vec![ConfigError { file, position: None, key: Some("redact.patterns".into()), message }])
            })?
        } else {
            crate::redact::Redactor::disabled()
        };
        Ok(Config {
            mode: self.mode.ok_or_else(|| missing("reaper.mode"))?,
            interval_secs: self.interval_secs.ok_or_else(|| missing("reaper.interval_secs"))?,
            grace_secs: self.grace_secs.ok_or_else(|| missing("reaper.grace_secs"))?,
            term_timeout_secs: self.term_timeout_secs.ok_or_else(|| missing("reaper.term_timeout_secs"))?,
            reap_stale_hosts: self.reap_stale_hosts.ok_or_else(|| missing("reaper.reap_stale_hosts"))?,
            min_uid: self.min_uid.ok_or_else(|| missing("reaper.min_uid"))?,
            patterns,
            socket: self.socket,
            state_file: self.state_file,
            metrics_textfile: self.metrics_textfile,
            matcher: Arc::new(matcher),
            redact,
            redactor: Arc::new(redactor),
            sources,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_is_complete_and_valid() {
        let c = Config::embedded();
        assert_eq!(c.mode, Mode::Enforce);
        assert_eq!(c.grace_secs, 60);
        assert!(c.patterns.hosts.len() >= 10);
        assert!(!c.patterns.protect.is_empty() && !c.patterns.bystanders.is_empty());
    }

    #[test]
    fn user_file_overrides_only_its_keys() {
        let c =
            Config::from_str_with_default("u.toml", "[reaper]\ngrace_secs = 5\n[patterns]\nprotect = ['x']\n").unwrap();
        assert_eq!(c.grace_secs, 5);
        assert_eq!(c.interval_secs, 10);
        assert_eq!(c.patterns.protect, vec!["x".to_string()]);
        assert!(!c.patterns.servers.is_empty());
    }

    #[test]
    fn every_semantic_error_is_reported_with_position_and_key() {
        let text = "[reaper]\ninterval_secs = 0\ngrace_secs = -1\nterm_timeout_secs = 1000.0\n[patterns]\nhosts = ['ok', '(unclosed']\n";
        let errs = Config::from_str_with_default("u.toml", text).unwrap_err().0;
        let shown: Vec<String> = errs.iter().map(std::string::ToString::to_string).collect();
        assert_eq!(errs.len(), 4, "{shown:#?}");
        assert!(shown[0].starts_with("u.toml:2:17: reaper.interval_secs: must be between 1 and 86400"), "{}", shown[0]);
        assert!(shown[1].starts_with("u.toml:3:14: reaper.grace_secs"), "{}", shown[1]);
        assert!(shown[2].starts_with("u.toml:4:21: reaper.term_timeout_secs"), "{}", shown[2]);
        assert!(shown[3].starts_with("u.toml:6:16: patterns.hosts[1]: invalid regex"), "{}", shown[3]);
    }

    #[test]
    fn syntax_type_and_unknown_key_errors_carry_line_and_column() {
        let e = Config::from_str_with_default("u.toml", "[reaper]\ngrace_secs = \"ten\"\n").unwrap_err().0;
        assert_eq!(e[0].position, Some((2, 14)), "{}", e[0]);
        let e = Config::from_str_with_default("u.toml", "[reaper]\ngrace = 3\n").unwrap_err().0;
        assert_eq!(e[0].position, Some((2, 1)), "{}", e[0]);
        assert!(e[0].message.contains("unknown field `grace`"), "{}", e[0]);
        let e = Config::from_str_with_default("u.toml", "[reaper\n").unwrap_err().0;
        assert_eq!(e[0].position.map(|p| p.0), Some(1), "{}", e[0]);
        let e = Config::from_str_with_default("u.toml", "[reaper]\nmode = \"kill-all\"\n").unwrap_err().0;
        assert_eq!(e[0].position, Some((2, 8)), "{}", e[0]);
    }

    #[test]
    fn every_syntax_type_and_key_problem_is_reported_at_once() {
        let text = "[reaper]\ngrace = 3\ninterval_secs = \"ten\"\nmin_uid = -1\nmode = \"x\"\n[patterns]\nhosts = ['(']\n[extra]\n";
        let errs = Config::from_str_with_default("u.toml", text).unwrap_err().0;
        let shown: Vec<String> = errs.iter().map(std::string::ToString::to_string).collect();
        assert_eq!(errs.len(), 6, "{shown:#?}");
        for want in [
            "u.toml:2:1",
            "u.toml:3:17: reaper.interval_secs",
            "u.toml:4:11: reaper.min_uid",
            "u.toml:5:8: reaper.mode",
            "u.toml:7:10: patterns.hosts[0]",
            "u.toml:8:2",
        ] {
            assert!(shown.iter().any(|s| s.starts_with(want)), "missing {want} in {shown:#?}");
        }
        let errs = Config::from_str_with_default("u.toml", "a = [\nb = \"unterminated\n").unwrap_err().0;
        assert!(!errs.is_empty() && errs[0].position.is_some(), "{errs:?}");
    }

    #[test]
    fn relative_paths_are_refused() {
        let e = Config::from_str_with_default("u.toml", "[daemon]\nsocket = \"x.sock\"\n").unwrap_err().0;
        assert_eq!(e[0].key.as_deref(), Some("daemon.socket"));
    }

    #[test]
    fn dropins_apply_in_name_order_after_the_main_file() {
        let dir = std::env::temp_dir().join(format!("mcp-reaper-cfg-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("config.d")).unwrap();
        std::fs::write(dir.join("config.toml"), "[reaper]\ngrace_secs = 1\ninterval_secs = 7\n").unwrap();
        std::fs::write(dir.join("config.d/20-b.toml"), "[reaper]\ngrace_secs = 3\n").unwrap();
        std::fs::write(dir.join("config.d/10-a.toml"), "[reaper]\ngrace_secs = 2\n").unwrap();
        std::fs::write(dir.join("config.d/ignored.txt"), "garbage").unwrap();
        let c = Config::load(&Sources::explicit(dir.join("config.toml"))).unwrap();
        assert_eq!((c.grace_secs, c.interval_secs), (3, 7));
        assert_eq!(c.sources.len(), 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_explicit_file_is_an_error() {
        let e = Config::load(&Sources::explicit("/nonexistent/mcp-reaper.toml")).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }

    #[test]
    fn redact_extra_patterns_extend_and_patterns_replace_the_defaults() {
        let d = Config::embedded();
        assert!(d.redact.enabled && d.redact.patterns.len() >= 10 && d.redact.extra_patterns.is_empty());
        let cmd = "srv --token=abc --acme=internal1";
        assert_eq!(d.redactor.redact(cmd), "srv --token=*** --acme=internal1");

        let c = Config::from_str_with_default("u.toml", "[redact]\nextra_patterns = ['--acme=(\\S+)']\n").unwrap();
        assert_eq!(c.redact.patterns, d.redact.patterns);
        assert_eq!(c.redactor.redact(cmd), "srv --token=*** --acme=***");

        let c = Config::from_str_with_default("u.toml", "[redact]\npatterns = ['--acme=(\\S+)']\n").unwrap();
        assert_eq!(c.redact.patterns, vec!["--acme=(\\S+)".to_string()]);
        assert_eq!(c.redactor.redact(cmd), "srv --token=abc --acme=***");

        let c = Config::from_str_with_default("u.toml", "[redact]\nenabled = false\n").unwrap();
        assert!(!c.redactor.is_enabled());
        assert_eq!(c.redactor.redact(cmd), cmd);
        assert!(d.diff(&c).iter().any(|l| l == "redact.enabled: true -> false"), "{:?}", d.diff(&c));
    }

    #[test]
    fn bad_redact_patterns_are_refused_with_position_and_key() {
        let text = "[redact]\nextra_patterns = ['ok', '(unclosed']\npatterns = [\n  '[z-a]',\n]\nenable = true\n";
        let errs = Config::from_str_with_default("u.toml", text).unwrap_err().0;
        let shown: Vec<String> = errs.iter().map(std::string::ToString::to_string).collect();
        assert_eq!(errs.len(), 3, "{shown:#?}");
        for want in [
            "u.toml:2:25: redact.extra_patterns[1]: invalid regex",
            "u.toml:4:3: redact.patterns[0]: invalid regex",
            "u.toml:6:1: unknown field `enable` in [redact]",
        ] {
            assert!(shown.iter().any(|s| s.starts_with(want)), "missing {want} in {shown:#?}");
        }
        let e = Config::from_str_with_default("u.toml", "[redact]\nenabled = \"yes\"\n").unwrap_err().0;
        assert_eq!((e[0].position, e[0].key.as_deref()), (Some((2, 11)), Some("redact.enabled")), "{}", e[0]);
    }
}
