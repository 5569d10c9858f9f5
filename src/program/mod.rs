//! Program identity: what a process runs, derived from its argv.
//!
//! Role patterns are matched against the program, not against the whole
//! command line: a tmux session named `foo-mcp`, a directory called `code` or
//! a URL ending in `/mcp` are arguments, not programs. The program is
//! - argv[0]'s file name (`/usr/bin/tmux` → `tmux`; a versioned install
//!   `…/claude/versions/2.1.197` → `claude`);
//! - for interpreters (node, bun, deno, python, pypy, java, ruby, perl, tsx)
//!   the script (its package inside `node_modules/`), the `-m` module, the
//!   `-jar` file or the main class;
//!   an interpreter running a launcher's own script (`node …/pnpm.cjs dlx`,
//!   `python3 /usr/bin/pipx run`, `python3 …/poetry run`) is that launcher;
//! - for package runners (npm exec, npx, pnpm dlx/exec, yarn dlx, bunx, bun x,
//!   uvx, uv tool run, pipx run, deno run npm:) the package, version dropped;
//! - for `docker|podman run` the image, tag dropped;
//! - for runners that stay the parent of what they run (npm run, uv run,
//!   bun run, go run, poetry/pipenv/pdm/hatch/conda run, timeout, tsx) and
//!   for `sh -c STRING` the program of the command they run.
//!
//! The name is kept as a span of the command line (16 bytes a process) and
//! computed once per read, with the argv boundaries the kernel gives.

mod launch;
mod runners;
pub(crate) mod words;

use serde::Serialize;

use launch::Interp;
/// For `engine::RunArgs`, which reads the same `run` options.
pub(crate) use launch::{ENGINE_GLOBAL_OPTS, RUN_OPTS, RUN_SHORT_VALUE};
use runners::{bun, deno, image, npm_like, npm_like_as, package, run_command, shell, uv};
pub use words::Span;

/// How the program was reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// argv[0] is the program.
    #[default]
    Exec,
    /// An interpreter runs it: a script, module, jar or main class.
    Script,
    /// Code given in argv (`node -e`, `python -c`): the interpreter is the name.
    Inline,
    /// A package runner runs a package (npx, uvx, pnpm dlx, …).
    Package,
    /// A container engine's client runs an image.
    Image,
    /// A runner that stays the parent of the command it runs.
    Runner,
    /// A shell runs a command string or a script file.
    Shell,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Exec => "exec",
            Via::Script => "script",
            Via::Inline => "inline",
            Via::Package => "package",
            Via::Image => "image",
            Via::Runner => "runner",
            Via::Shell => "shell",
        }
    }

    /// Processes of these kinds pass a program on: links of a server tree
    /// while they are pass-throughs.
    pub fn is_launcher(self) -> bool {
        matches!(self, Via::Package | Via::Image | Via::Runner | Via::Shell)
    }
}

/// The program of one process, as spans of its joined command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Program {
    name: Span,
    /// Where the program's own arguments start.
    args: u32,
    pub via: Via,
    /// `docker|podman run -i` without `-t`: the container's stdin is the
    /// client's pipe.
    stdin_open: bool,
    /// The command line was longer than a scan keeps (`scan::CMDLINE_KEEP`):
    /// its last arguments are unknown.
    cut: bool,
}

/// Recursion cap for runners inside shells inside runners.
const DEPTH: u8 = 4;

impl Program {
    /// Marks the command line it was read from as cut short.
    pub fn set_cut(&mut self) {
        self.cut = true;
    }

    /// Whether the command line was cut short: what is missing is unknown.
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// The program of a command line given as words (argv elements, or
    /// whitespace-separated words of a rewritten title) with their spans.
    pub fn identify(text: &str, words: &[Span]) -> Program {
        let mut p = identify_at(text, words, 0, DEPTH).unwrap_or_default();
        if p.name == Span::default() && !words.is_empty() {
            p.name = words::basename(text, words[0]);
        }
        p
    }

    /// The program of an argv, given as the spans of its elements in the
    /// joined text. An argv[0] with spaces is a rewritten process title
    /// (`npm exec @x/y …`, padded; `exec -a "npm exec …" cmd args`): its
    /// words are words of the command line, the other elements follow.
    pub fn from_argv(text: &str, args: &[Span]) -> Program {
        if let Some((first, rest)) = args.split_first()
            && first.of(text).contains(char::is_whitespace)
        {
            let mut w = Vec::new();
            words::split_whitespace(text, *first, &mut w);
            w.extend_from_slice(rest);
            return Program::identify(text, &w);
        }
        Program::identify(text, args)
    }

    /// For a command line known only joined (argv boundaries lost): its
    /// whitespace-separated words. A path with a space splits, which can only
    /// hide a role.
    pub fn of_joined(text: &str) -> Program {
        let mut w = Vec::new();
        words::split_whitespace(text, Span::new(0, text.len()), &mut w);
        Program::identify(text, &w)
    }

    pub fn name<'a>(&self, text: &'a str) -> &'a str {
        self.name.of(text)
    }

    /// Where the name lies in the command line (inside the word it came from).
    pub fn name_span(&self) -> Span {
        self.name
    }

    /// The program's own arguments (after its script, package or image).
    pub fn args<'a>(&self, text: &'a str) -> &'a str {
        text.get(self.args as usize..).unwrap_or("").trim()
    }

    /// `NAME ARGS…`, what `args:` patterns see.
    pub fn line(&self, text: &str) -> String {
        let (n, a) = (self.name(text), self.args(text));
        if a.is_empty() { n.to_string() } else { format!("{n} {a}") }
    }

    pub fn stdin_open(&self) -> bool {
        self.stdin_open
    }
}

pub(super) fn at<'a>(text: &'a str, words: &[Span], i: usize) -> &'a str {
    words.get(i).map_or("", |w| w.of(text))
}

/// The first word at or after `i` that is not an option, skipping the values
/// of the options in `with_value` (`--opt=value` needs no skipping).
pub(super) fn skip_opts(text: &str, words: &[Span], mut i: usize, with_value: &[&str]) -> Option<usize> {
    while i < words.len() {
        let w = at(text, words, i);
        if w == "--" {
            return (i + 1 < words.len()).then_some(i + 1);
        }
        if !w.starts_with('-') || w == "-" {
            return Some(i);
        }
        if !w.contains('=') && with_value.contains(&w) {
            i += 1;
        }
        i += 1;
    }
    None
}

fn args_after(words: &[Span], i: usize, text: &str) -> u32 {
    let off = words.get(i + 1).map_or(text.len(), |w| w.start as usize);
    u32::try_from(off).unwrap_or(u32::MAX)
}

pub(super) fn make(text: &str, words: &[Span], i: usize, name: Span, via: Via) -> Program {
    Program { name, args: args_after(words, i, text), via, stdin_open: false, cut: false }
}

/// The program whose first word is `words[i]`.
pub(super) fn identify_at(text: &str, words: &[Span], i: usize, depth: u8) -> Option<Program> {
    let w0 = *words.get(i)?;
    let base = words::basename(text, w0).of(text);
    if depth == 0 {
        return Some(make(text, words, i, words::exec_name(text, w0), Via::Exec));
    }
    if let Some(interp) = launch::interpreter(base) {
        return Some(interpreted(text, words, i, interp, depth));
    }
    if let Some(opts) = launch::runner(base) {
        return Some(run_command(text, words, i + 1, opts, depth, words::exec_name(text, w0)));
    }
    if launch::is_shell(base) {
        return Some(shell(text, words, i, depth));
    }
    let p = match base {
        "npx" | "pnpx" | "bunx" => package(text, words, i + 1, launch::NPM_OPTS),
        "npm" | "pnpm" | "yarn" => npm_like(text, words, i, depth),
        "uvx" => package(text, words, i + 1, launch::UV_OPTS),
        "uv" => uv(text, words, i, depth),
        "pipx" => match skip_opts(text, words, i + 1, &[]) {
            Some(k) if at(text, words, k) == "run" => package(text, words, k + 1, launch::PIPX_OPTS),
            _ => None,
        },
        "bun" => bun(text, words, i, depth),
        "deno" => deno(text, words, i, depth),
        "docker" | "podman" | "nerdctl" => image(text, words, i),
        "go" if at(text, words, i + 1) == "run" => {
            skip_opts(text, words, i + 2, &["-C", "-tags", "-ldflags", "-gcflags", "-mod", "-exec", "-o"]).map(|k| {
                let spec = words::package_name(text, words[k]);
                make(text, words, k, words::basename(text, spec), Via::Runner)
            })
        }
        _ => None,
    };
    Some(p.unwrap_or_else(|| make(text, words, i, words::exec_name(text, w0), Via::Exec)))
}

/// node, python, java, ruby, perl, tsx: the script, module, jar or class.
fn interpreted(text: &str, words: &[Span], i: usize, interp: Interp, depth: u8) -> Program {
    let value_opts = launch::interp_value_opts(interp);
    let inline = launch::inline_opts(interp);
    let mut k = i + 1;
    while k < words.len() {
        let w = at(text, words, k);
        if inline.contains(&w) {
            return make(text, words, i, words::basename(text, words[i]), Via::Inline);
        }
        if interp == Interp::Python && w == "-m" || interp == Interp::Java && (w == "-jar" || w == "-m") {
            let Some(&target) = words.get(k + 1) else { break };
            let name = if w == "-jar" { words::basename(text, target) } else { target };
            return make(text, words, k + 1, name, Via::Script);
        }
        if interp == Interp::Python && w.starts_with("-m") && w.len() > 2 {
            // `-mmodule`
            let sp = Span::new(words[k].start as usize + 2, words[k].end as usize);
            return make(text, words, k, sp, Via::Script);
        }
        if w == "--" {
            k += 1;
            break;
        }
        if !w.starts_with('-') || w == "-" {
            break;
        }
        if !w.contains('=') && value_opts.contains(&w) {
            k += 1;
        }
        k += 1;
    }
    let Some(&script) = words.get(k) else {
        return make(text, words, i, words::basename(text, words[i]), Via::Exec);
    };
    if interp == Interp::Java {
        return make(text, words, k, script, Via::Script); // main class
    }
    let sbase = words::basename(text, script).of(text);
    if interp == Interp::Node
        && let Some(tool) = launch::node_tool(sbase)
    {
        let p = match tool {
            "npx" | "pnpx" => package(text, words, k + 1, launch::NPM_OPTS),
            "tsx" => ts_runner(text, words, k, depth),
            _ => npm_like_as(text, words, k, tool, depth),
        };
        if let Some(p) = p {
            return p;
        }
    }
    // A launcher that is a Python script (`/usr/bin/python3 /usr/bin/pipx
    // run pkg`, as Debian installs pipx; poetry, pdm, …): that launcher.
    if interp == Interp::Python
        && launch::python_tool(sbase)
        && depth > 1
        && let Some(p) = identify_at(text, words, k, depth - 1).filter(|p| p.via != Via::Exec)
    {
        return p;
    }
    if interp == Interp::TsRunner {
        return ts_runner(text, words, i, depth).unwrap_or_else(|| make(text, words, k, script, Via::Script));
    }
    make(text, words, k, words::script_name(text, script), Via::Script)
}

/// tsx stays the parent of a node running the script.
fn ts_runner(text: &str, words: &[Span], i: usize, _depth: u8) -> Option<Program> {
    let k = skip_opts(text, words, i + 1, launch::interp_value_opts(Interp::TsRunner))?;
    let k = if matches!(at(text, words, k), "watch" | "run") { k + 1 } else { k };
    let script = *words.get(k)?;
    Some(make(text, words, k, words::script_name(text, script), Via::Runner))
}

#[cfg(test)]
mod tests;
