//! Launchers that run another program: package runners (npx, uvx, pnpm dlx,
//! bunx, pipx, deno npm:), container engines' `run`, runners that stay the
//! parent (npm run, uv run, bun run, poetry run, timeout…) and shells. Each
//! finds the program it runs past its own options.

use super::{Program, Span, Via, at, identify_at, launch, make, skip_opts, words};

/// A package runner's package (or, with `--package`/`--from`/`--spec`, the
/// command it runs from it).
pub(super) fn package(text: &str, words: &[Span], from: usize, opts: &[&str]) -> Option<Program> {
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
pub(super) fn npm_like(text: &str, words: &[Span], i: usize, depth: u8) -> Option<Program> {
    let tool = words::basename(text, words[i]).of(text);
    let tool = match tool {
        "npm" => "npm",
        "pnpm" => "pnpm",
        _ => "yarn",
    };
    npm_like_as(text, words, i, tool, depth)
}

pub(super) fn npm_like_as(text: &str, words: &[Span], i: usize, tool: &str, _depth: u8) -> Option<Program> {
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

pub(super) fn uv(text: &str, words: &[Span], i: usize, depth: u8) -> Option<Program> {
    let k = skip_opts(text, words, i + 1, launch::UV_OPTS)?;
    match at(text, words, k) {
        "run" => run_command(text, words, k + 1, launch::UV_OPTS, depth, words[k]).into(),
        "tool" if matches!(at(text, words, k + 1), "run" | "uvx") => package(text, words, k + 2, launch::UV_OPTS),
        _ => None,
    }
}

pub(super) fn bun(text: &str, words: &[Span], i: usize, depth: u8) -> Option<Program> {
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

pub(super) fn deno(text: &str, words: &[Span], i: usize, _depth: u8) -> Option<Program> {
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
pub(super) fn image(text: &str, words: &[Span], i: usize) -> Option<Program> {
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
pub(super) fn run_command(
    text: &str,
    words: &[Span],
    from: usize,
    opts: &[&str],
    depth: u8,
    runner_name: Span,
) -> Program {
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
pub(super) fn shell(text: &str, words: &[Span], i: usize, depth: u8) -> Program {
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
