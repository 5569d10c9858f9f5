//! The import statements of a Python file, and nothing else of its text: a
//! module named in a string (a notebook cell a program sends to its
//! kernel, a docstring's example, an f-string), or in a comment, is no
//! import. Read by a small lexer, not by lines: string literals of every
//! kind (prefixed, triple-quoted over many lines) and comments are skipped
//! whole; statements end at a newline outside brackets and backslash
//! continuations, at `;`, and at a `:` outside brackets (`try: import x`).
//! One pass over the text, which the caller caps.

/// One imported module: `import a.b` is `a.b` without names; `from a import
/// b, c` is `a` with `b` and `c`; `from . import x` is `.` with `x`.
#[derive(Debug, PartialEq, Eq)]
pub struct Import {
    pub module: String,
    pub names: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Word(&'a str),
    Punct(u8),
    /// A string literal, whatever it holds.
    Str,
    /// The end of a statement.
    End,
}

/// Every import statement of `text`, in order.
pub fn imports(text: &str) -> Vec<Import> {
    let toks = lex(text);
    let mut out = Vec::new();
    for stmt in toks.split(|t| *t == Tok::End) {
        match stmt {
            [Tok::Word("import"), rest @ ..] => {
                for part in rest.split(|t| *t == Tok::Punct(b',')) {
                    let (module, _) = dotted(part);
                    if !module.is_empty() {
                        out.push(Import { module, names: Vec::new() });
                    }
                }
            }
            [Tok::Word("from"), rest @ ..] => {
                let (module, after) = dotted(rest);
                let [Tok::Word("import"), names @ ..] = after else { continue };
                let names = names
                    .split(|t| *t == Tok::Punct(b','))
                    .filter_map(|n| match n.iter().find(|t| !matches!(t, Tok::Punct(b'(' | b')'))) {
                        Some(Tok::Word(w)) => Some((*w).to_string()),
                        Some(Tok::Punct(b'*')) => Some("*".to_string()),
                        _ => None,
                    })
                    .collect();
                if !module.is_empty() {
                    out.push(Import { module, names });
                }
            }
            _ => {}
        }
    }
    out
}

/// A module name at the start of `toks` (`..a.b`), and what follows it.
fn dotted<'t, 'a>(toks: &'t [Tok<'a>]) -> (String, &'t [Tok<'a>]) {
    let mut name = String::new();
    let mut i = 0;
    while let Some(t) = toks.get(i) {
        match t {
            Tok::Punct(b'.') => name.push('.'),
            Tok::Word(w) if (name.is_empty() || name.ends_with('.')) && *w != "import" => name.push_str(w),
            _ => break,
        }
        i += 1;
    }
    (name, &toks[i..])
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// `r`, `b`, `f`, `u`, `t` and their pairs, in any case.
fn is_string_prefix(w: &[u8]) -> bool {
    w.len() <= 2 && w.iter().all(|c| b"rbfutRBFUT".contains(c))
}

/// f-strings in f-strings' fields read as code.
const MAX_NEST: u8 = 8;

fn lex(text: &str) -> Vec<Tok<'_>> {
    let b = text.as_bytes();
    let mut toks = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\\' if b.get(i + 1) == Some(&b'\n') => i += 1,
            b'\\' if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') => i += 2,
            b'\n' | b';' | b':' if depth == 0 => toks.push(Tok::End),
            b'\'' | b'"' => {
                i = string_end(b, i, b"", 0);
                toks.push(Tok::Str);
                continue;
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                toks.push(Tok::Punct(c));
            }
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                toks.push(Tok::Punct(c));
            }
            _ if is_word(c) => {
                let start = i;
                while i < b.len() && is_word(b[i]) {
                    i += 1;
                }
                let w = &text[start..i];
                if matches!(b.get(i), Some(b'\'' | b'"')) && is_string_prefix(w.as_bytes()) {
                    i = string_end(b, i, w.as_bytes(), 0);
                    toks.push(Tok::Str);
                } else {
                    toks.push(Tok::Word(w));
                }
                continue;
            }
            _ if c.is_ascii_whitespace() => {}
            _ => toks.push(Tok::Punct(c)),
        }
        i += 1;
    }
    toks
}

/// Past the closing quote of the string literal whose quote is at `at`,
/// `prefix` its letters. A backslash escapes the next byte in every kind,
/// raw too (as Python's tokenizer reads `r'\''`); a one-quote string not
/// closed on its line ends there (Python would reject it), a triple-quoted
/// one at the text's end. An f-string's replacement fields are code whose
/// strings may use its own quote (Python 3.12): skipped as code, at most
/// [`MAX_NEST`] deep (deeper, a field is read as the string's text).
fn string_end(b: &[u8], at: usize, prefix: &[u8], nest: u8) -> usize {
    let q = b[at];
    let triple = b.get(at + 1) == Some(&q) && b.get(at + 2) == Some(&q);
    let fields = nest < MAX_NEST && prefix.iter().any(|c| b"fFtT".contains(c));
    let mut i = at + if triple { 3 } else { 1 };
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'\n' if !triple => return i,
            b'{' if fields && b.get(i + 1) == Some(&b'{') => i += 1,
            b'{' if fields => {
                i = field_end(b, i + 1, nest + 1);
                continue;
            }
            c if c == q && (!triple || (b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q))) => {
                return i + if triple { 3 } else { 1 };
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Past the `}` closing the f-string replacement field whose code starts at `at`.
fn field_end(b: &[u8], at: usize, nest: u8) -> usize {
    let mut depth = 0usize;
    let mut i = at;
    while i < b.len() {
        match b[i] {
            b'}' if depth == 0 => return i + 1,
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => depth = depth.saturating_sub(1),
            b'\'' | b'"' => {
                let letters = b[..i].iter().rev().take_while(|&&c| is_word(c)).take(3).count();
                let prefix = &b[i - letters..i];
                i = string_end(b, i, if is_string_prefix(prefix) { prefix } else { b"" }, nest);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modules(text: &str) -> Vec<(String, Vec<String>)> {
        imports(text).into_iter().map(|i| (i.module, i.names)).collect()
    }

    fn m(module: &str, names: &[&str]) -> (String, Vec<String>) {
        (module.to_string(), names.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn statements_however_written() {
        let text = "import sys, json as j\nfrom a.b import (c,\n    d as e,  # why\n)\nif x: from . import y\nimport p; from ..q import *\nfrom x \\\n  import z\n";
        assert_eq!(
            modules(text),
            [
                m("sys", &[]),
                m("json", &[]),
                m("a.b", &["c", "d"]),
                m(".", &["y"]),
                m("p", &[]),
                m("..q", &["*"]),
                m("x", &["z"])
            ]
        );
    }

    #[test]
    fn strings_and_comments_hold_no_statement() {
        let text = "s = 'import a'\nt = \"x\\\"; import b\"\nu = '''\nimport c\n'''\nv = rb\"\"\"import d\"\"\"; import e\nw = f'{x}\\nimport f'\n# import g\nx = (\n 'a'  # )\n)\nimport h\ny = 'unclosed\nimport i\n";
        assert_eq!(modules(text), [m("e", &[]), m("h", &[]), m("i", &[])]);
        // Python 3.12's f-strings: a field's strings may use the f-string's quote.
        let fields =
            "a = f\"{\";import x\"} {d[\"k\"]:{w}} {{;import y}}\"\r\nb = f'''{'''\nimport z'''}'''\r\nimport w\r\n";
        assert_eq!(modules(fields), [m("w", &[])]);
        // Nested deeper than MAX_NEST: read, and the work stays bounded.
        let deep = format!("{}\nimport v\n", "f'{".repeat(4000));
        assert!(modules(&deep).len() <= 1);
        // `yield from`, `raise … from`: no statement starts there.
        assert!(imports("def g():\n    yield from range(3)\n    raise E from None\n").is_empty());
    }
}
