//! A configured command as a pattern for the processes it becomes.
//!
//! Both sides go through [`Program`]: the configured argv and the running
//! process each get their program identity, so `uv --directory D run
//! weather.py`, the `uv` process it starts and the `python weather.py` below
//! it all are `weather.py`; `npx -y pkg`, `npm exec pkg` and `node
//! …/node_modules/.bin/pkg` are `pkg`; `uvx pkg` and `python …/bin/pkg` are
//! `pkg`. The configured program's own arguments must lead the process's.
//!
//! A name alone is not enough for a script file: `python server.py` is what
//! half the tutorials run. Where the configured script's directory is known
//! (an absolute path, `--directory D`, the entry's `cwd`, the project a file
//! belongs to) the process's script, resolved against its own working
//! directory, must be that file. Where it is not known the pattern is
//! *weak*: it only counts for a process below a live host.

use std::path::{Component, Path, PathBuf};

use crate::program::{Program, Span, Via};

/// One configured command, compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// The program identity (see [`crate::program`]).
    pub name: String,
    /// The program's own leading arguments, as words.
    pub args: Vec<String>,
    /// The file the program is, when it is one and its place is known.
    pub path: Option<PathBuf>,
    /// A script file whose place is not known: only below a live host.
    pub weak: bool,
}

/// Options that set the directory a runner runs its command in.
const DIR_OPTS: &[&str] = &["--directory", "--cwd"];

const SCRIPT_EXT: &[&str] = &[".py", ".js", ".mjs", ".cjs", ".ts", ".mts", ".rb", ".pl", ".sh", ".jar", ".php"];

/// The pattern of a configured argv started in `cwd` (when known); `None`
/// for what no process could be told by (`node -e CODE`, an empty command).
pub fn compile(argv: &[String], cwd: Option<&Path>) -> Option<Pattern> {
    let (text, spans) = join(argv);
    let program = Program::from_argv(&text, &spans);
    let name = program.name(&text);
    if name.is_empty() || program.via == Via::Inline {
        return None;
    }
    let args = program.args(&text).split_whitespace().map(str::to_string).collect();
    let n = program.name_span();
    let at = spans.iter().position(|s| s.start <= n.start && n.end <= s.end)?;
    let word = argv[at].as_str();
    let (mut path, mut weak) = (None, false);
    // `python -m weather` with a known directory: the module is the file in
    // that directory (`W/weather`, compared as text on both sides), not any
    // `-m weather` anywhere. Without one it stays a name, as an installed
    // package's module (`-m mcp_server_git`) is.
    let module = at > 0 && argv[at - 1] == "-m" && program.via == Via::Script;
    if module {
        let base = dir_opt(&argv[..at]).map(PathBuf::from).map_or_else(
            || cwd.map(Path::to_path_buf),
            |d| {
                if d.is_absolute() { Some(d) } else { cwd.map(|c| c.join(d)) }
            },
        );
        path = base.filter(|b| b.is_absolute()).map(|b| normalize(&b.join(word)));
    } else if is_file_word(program.via, word) {
        let base = match (dir_opt(&argv[..at]), cwd) {
            (Some(d), _) if Path::new(&d).is_absolute() => Some(PathBuf::from(d)),
            (Some(d), Some(c)) => Some(c.join(d)),
            (Some(_), None) => None,
            (None, c) => c.map(Path::to_path_buf),
        };
        if Path::new(word).is_absolute() {
            path = Some(normalize(Path::new(word)));
        } else if let Some(b) = base.filter(|b| b.is_absolute()) {
            path = Some(normalize(&b.join(word)));
        } else {
            weak = true;
        }
    }
    Some(Pattern { name: name.to_string(), args, path, weak })
}

/// What a running process shows to [`Pattern::matches`].
pub struct Running<'a> {
    pub cmdline: &'a str,
    pub program: Program,
}

impl Pattern {
    /// Whether the process runs this configured command. `cwd` reads the
    /// process's working directory, only when a path must be compared.
    pub fn matches(&self, p: &Running<'_>, cwd: impl FnOnce() -> Option<PathBuf>) -> bool {
        if p.program.name(p.cmdline) != self.name {
            return false;
        }
        let mut theirs = p.program.args(p.cmdline).split_whitespace();
        if !self.args.iter().all(|a| theirs.next() == Some(a.as_str())) {
            return false;
        }
        let Some(want) = &self.path else { return true };
        let (word, before) = word_at(p.cmdline, p.program.name_span());
        let file = Path::new(word);
        let got = if file.is_absolute() {
            normalize(file)
        } else {
            let Some(cwd) = cwd() else { return false };
            let words: Vec<String> = before.split_whitespace().map(str::to_string).collect();
            let base = dir_opt(&words).map_or_else(|| cwd.clone(), |d| normalize(&cwd.join(d)));
            normalize(&base.join(file))
        };
        &got == want
    }
}

/// The whitespace-delimited word around `name`, and the text before it.
fn word_at(text: &str, name: Span) -> (&str, &str) {
    let (s, e) = (name.start as usize, name.end as usize);
    let start = text[..s.min(text.len())].rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let end = text[e.min(text.len())..].find(char::is_whitespace).map_or(text.len(), |i| e + i);
    (&text[start..end], &text[..start])
}

fn is_file_word(via: Via, word: &str) -> bool {
    let file = word.contains('/') || SCRIPT_EXT.iter().any(|x| word.ends_with(x));
    file && matches!(via, Via::Script | Via::Runner | Via::Shell | Via::Exec)
}

/// The value of the last `--directory D` / `--cwd=D` among `words`.
fn dir_opt<S: AsRef<str>>(words: &[S]) -> Option<String> {
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        let w = w.as_ref();
        for o in DIR_OPTS {
            if w == *o {
                found = words.get(i + 1).map(|v| v.as_ref().to_string());
            } else if let Some(v) = w.strip_prefix(o).and_then(|r| r.strip_prefix('=')) {
                found = Some(v.to_string());
            }
        }
    }
    found
}

/// `.` and `..` resolved by text: the reaper compares paths a host wrote
/// with paths a process shows, it does not follow links.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// argv joined by spaces, with each element's span.
fn join(argv: &[String]) -> (String, Vec<Span>) {
    let mut text = String::new();
    let mut spans = Vec::with_capacity(argv.len());
    for a in argv {
        if !text.is_empty() {
            text.push(' ');
        }
        let start = text.len();
        text.push_str(a);
        spans.push(Span::new(start, text.len()));
    }
    (text, spans)
}

/// A process's side from its argv (tests, `reaperctl hosts`).
pub fn running(argv: &[String]) -> (String, Program) {
    let (text, spans) = join(argv);
    let p = Program::from_argv(&text, &spans);
    (text, p)
}
