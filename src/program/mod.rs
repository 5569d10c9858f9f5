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
pub(crate) mod words;

use serde::Serialize;

use launch::Interp;
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
}

/// Recursion cap for runners inside shells inside runners.
const DEPTH: u8 = 4;

impl Program {
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

fn at<'a>(text: &'a str, words: &[Span], i: usize) -> &'a str {
    words.get(i).map_or("", |w| w.of(text))
}

/// The first word at or after `i` that is not an option, skipping the values
/// of the options in `with_value` (`--opt=value` needs no skipping).
fn skip_opts(text: &str, words: &[Span], mut i: usize, with_value: &[&str]) -> Option<usize> {
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

fn make(text: &str, words: &[Span], i: usize, name: Span, via: Via) -> Program {
    Program { name, args: args_after(words, i, text), via, stdin_open: false }
}

/// The program whose first word is `words[i]`.
fn identify_at(text: &str, words: &[Span], i: usize, depth: u8) -> Option<Program> {
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

/// A package runner's package (or, with `--package`/`--from`/`--spec`, the
/// command it runs from it).
fn package(text: &str, words: &[Span], from: usize, opts: &[&str]) -> Option<Program> {
    let named_elsewhere =
        words[from.min(words.len())..].iter().map(|w| w.of(text)).take_while(|w| w.starts_with('-')).any(|w| {
            ["--package", "-p", "--from", "--spec"].contains(&w)
                || w.starts_with("--package=")
                || w.starts_with("--from=")
                || w.starts_with("--spec=")
        });
    let k = skip_opts(text, words, from, opts)?;
    let name = if named_elsewhere { words::exec_name(text, words[k]) } else { words::package_name(text, words[k]) };
    Some(make(text, words, k, name, Via::Package))
}

/// npm, pnpm, yarn as argv[0].
fn npm_like(text: &str, words: &[Span], i: usize, depth: u8) -> Option<Program> {
    let tool = words::basename(text, words[i]).of(text);
    let tool = match tool {
        "npm" => "npm",
        "pnpm" => "pnpm",
        _ => "yarn",
    };
    npm_like_as(text, words, i, tool, depth)
}

fn npm_like_as(text: &str, words: &[Span], i: usize, tool: &str, _depth: u8) -> Option<Program> {
    let k = skip_opts(text, words, i + 1, launch::NPM_OPTS)?;
    let sub = at(text, words, k);
    match (tool, sub) {
        ("npm", "exec" | "x") | ("pnpm" | "yarn", "dlx" | "exec") => package(text, words, k + 1, launch::NPM_OPTS),
        (_, "run" | "run-script" | "rum" | "urn") => {
            let s = skip_opts(text, words, k + 1, launch::NPM_OPTS)?;
            Some(make(text, words, s, words[s], Via::Runner))
        }
        (_, "start" | "test" | "restart" | "t" | "tst") => Some(make(text, words, k, words[k], Via::Runner)),
        _ => None,
    }
}

fn uv(text: &str, words: &[Span], i: usize, depth: u8) -> Option<Program> {
    let k = skip_opts(text, words, i + 1, launch::UV_OPTS)?;
    match at(text, words, k) {
        "run" => run_command(text, words, k + 1, launch::UV_OPTS, depth, words[k]).into(),
        "tool" if matches!(at(text, words, k + 1), "run" | "uvx") => package(text, words, k + 2, launch::UV_OPTS),
        _ => None,
    }
}

fn bun(text: &str, words: &[Span], i: usize, depth: u8) -> Option<Program> {
    let k = skip_opts(text, words, i + 1, launch::BUN_OPTS)?;
    match at(text, words, k) {
        "x" => package(text, words, k + 1, launch::BUN_OPTS),
        "run" => {
            let s = skip_opts(text, words, k + 1, launch::BUN_OPTS)?;
            let w = at(text, words, s);
            let name = if w.contains('/') || w.contains('.') { words::script_name(text, words[s]) } else { words[s] };
            Some(make(text, words, s, name, Via::Runner))
        }
        "install" | "add" | "remove" | "build" | "test" | "upgrade" | "link" | "pm" | "init" | "create" | "repl" => {
            None
        }
        _ => {
            let _ = depth;
            Some(make(text, words, k, words::script_name(text, words[k]), Via::Script))
        }
    }
}

fn deno(text: &str, words: &[Span], i: usize, _depth: u8) -> Option<Program> {
    let k = skip_opts(text, words, i + 1, launch::DENO_OPTS)?;
    match at(text, words, k) {
        "run" | "serve" => {
            let s = skip_opts(text, words, k + 1, launch::DENO_OPTS)?;
            let w = at(text, words, s);
            if w.starts_with("npm:") || w.starts_with("jsr:") {
                Some(make(text, words, s, words::package_name(text, words[s]), Via::Package))
            } else {
                Some(make(text, words, s, words::script_name(text, words[s]), Via::Script))
            }
        }
        "task" => {
            let s = skip_opts(text, words, k + 1, launch::DENO_OPTS)?;
            Some(make(text, words, s, words[s], Via::Runner))
        }
        _ => None,
    }
}

/// `docker|podman [global options] [container] run [options] IMAGE`.
fn image(text: &str, words: &[Span], i: usize) -> Option<Program> {
    let mut k = skip_opts(text, words, i + 1, launch::ENGINE_GLOBAL_OPTS)?;
    if at(text, words, k) == "container" {
        k += 1;
    }
    if at(text, words, k) != "run" {
        return None;
    }
    k += 1;
    // `-i` attaches the client's stdin; `-t` too means a terminal on it, a
    // person's session: docker refuses `-t` when stdin is a pipe ("the input
    // device is not a TTY"), so a host's stdio server never has it.
    let (mut interactive, mut tty) = (false, false);
    while k < words.len() {
        let w = at(text, words, k);
        if w == "--" {
            k += 1;
            break;
        }
        if !w.starts_with('-') {
            break;
        }
        if w.starts_with("--") {
            if w == "--interactive" || w == "--interactive=true" {
                interactive = true;
            }
            if w == "--tty" || w == "--tty=true" {
                tty = true;
            }
            if !w.contains('=') && launch::RUN_OPTS.contains(&w) {
                k += 1;
            }
        } else {
            // Grouped short flags: `-it`, `-ie VAR`.
            for (n, c) in w.chars().skip(1).enumerate() {
                match c {
                    'i' => interactive = true,
                    't' => tty = true,
                    _ => {}
                }
                if launch::RUN_SHORT_VALUE.contains(c) {
                    if n + 2 == w.len() {
                        k += 1; // the value is the next word
                    }
                    break;
                }
            }
        }
        k += 1;
    }
    let img = *words.get(k)?;
    let mut p = make(text, words, k, words::image_name(text, img), Via::Image);
    p.stdin_open = interactive && !tty;
    Some(p)
}

/// A runner that stays the parent of the command after its options.
fn run_command(text: &str, words: &[Span], from: usize, opts: &[&str], depth: u8, runner_name: Span) -> Program {
    // `timeout DURATION CMD`, `hatch run env:cmd`, `mise x tool@1 -- cmd`.
    let runner = runner_name.of(text);
    let Some(mut k) = skip_opts(text, words, from, opts) else {
        return make(text, words, from.saturating_sub(1), runner_name, Via::Runner);
    };
    if runner == "timeout" || matches!(at(text, words, k), "run" | "x" | "exec") && runner != "run" {
        k = skip_opts(text, words, k + 1, opts).unwrap_or(k + 1);
    }
    if matches!(runner, "mise" | "rtx")
        && let Some(dd) = (k..words.len()).find(|&j| at(text, words, j) == "--")
    {
        k = dd + 1;
    }
    match identify_at(text, words, k, depth - 1) {
        Some(mut p) => {
            if matches!(p.via, Via::Exec | Via::Script | Via::Inline) {
                p.via = Via::Runner;
            }
            p
        }
        None => make(text, words, from.saturating_sub(1), runner_name, Via::Runner),
    }
}

/// `sh -c STRING` runs the string's program; `sh SCRIPT` the script.
fn shell(text: &str, words: &[Span], i: usize, depth: u8) -> Program {
    let mut k = i + 1;
    let mut command = false;
    while k < words.len() {
        let w = at(text, words, k);
        if w == "--" {
            k += 1;
            break;
        }
        if !w.starts_with('-') && !w.starts_with('+') {
            break;
        }
        if w.starts_with('-') && !w.starts_with("--") && w.contains('c') {
            command = true;
        }
        if matches!(w, "-o" | "+o" | "--rcfile" | "--init-file") {
            k += 1;
        }
        k += 1;
    }
    let interactive = make(text, words, i, words::basename(text, words[i]), Via::Exec);
    let Some(&first) = words.get(k) else { return interactive };
    if !command {
        return make(text, words, k, words::basename(text, first), Via::Shell);
    }
    // The command string: its own words (quotes dropped), leading `exec`,
    // `env`, `command`, `nohup` and VAR=value assignments skipped.
    let mut sub = Vec::new();
    let last = words.last().map_or(first.end, |w| w.end);
    words::split_whitespace(text, Span { start: first.start, end: last }, &mut sub);
    let sub: Vec<Span> = sub.into_iter().map(|w| words::unquote(text, w)).filter(|w| w.start < w.end).collect();
    let skip = sub
        .iter()
        .take_while(|w| {
            let s = w.of(text);
            matches!(s, "exec" | "env" | "command" | "nohup" | "nice")
                || s.split_once('=')
                    .is_some_and(|(k, _)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        })
        .count();
    match identify_at(text, &sub, skip, depth - 1) {
        Some(mut p) => {
            if matches!(p.via, Via::Exec | Via::Script | Via::Inline) {
                p.via = Via::Shell;
            }
            p
        }
        None => interactive,
    }
}

#[cfg(test)]
mod tests;
