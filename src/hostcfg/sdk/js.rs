//! The modules a JavaScript or TypeScript file imports, and nothing else of
//! its text: `import … from 'm'`, `import 'm'`, `export … from 'm'`,
//! `require('m')` and `import('m')`. A module named in a string, a template
//! literal or a comment (`//`, `/* … */` over many lines) is no import.
//! Read by a small lexer: string, template and regular expression literals
//! and comments are skipped whole (a regular expression is told from a
//! division by what precedes it, as parsers do). One pass over the text,
//! which the caller caps.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Word(&'a str),
    Punct(u8),
    /// A string literal's text between its quotes, escapes as written.
    Str(&'a str),
    /// A template or regular expression literal, whatever it holds.
    Other,
}

/// The module specifiers `text` imports, in order.
pub fn imports(text: &str) -> Vec<&str> {
    let toks = lex(text);
    let mut out = Vec::new();
    // Inside an `import`/`export` declaration, whose `from 'm'` names its module.
    let mut declaration = false;
    // `require('m')`, `import('m', options)`: the literal is the whole
    // specifier (not `'./' + name`).
    let whole = |t: Option<Tok>| matches!(t, Some(Tok::Punct(b')' | b',')));
    for (k, t) in toks.iter().enumerate() {
        let member = k > 0 && toks[k - 1] == Tok::Punct(b'.');
        let next = |n: usize| toks.get(k + n).copied();
        match *t {
            Tok::Word("import") if !member => match (next(1), next(2)) {
                (Some(Tok::Str(m)), _) => out.push(m),
                (Some(Tok::Punct(b'(')), Some(Tok::Str(m))) if whole(next(3)) => out.push(m),
                _ => declaration = true,
            },
            Tok::Word("export") if !member => declaration = true,
            Tok::Word("from") if declaration => {
                if let Some(Tok::Str(m)) = next(1) {
                    out.push(m);
                    declaration = false;
                }
            }
            Tok::Word("require") if !member => {
                if let (Some(Tok::Punct(b'(')), Some(Tok::Str(m))) = (next(1), next(2))
                    && whole(next(3))
                {
                    out.push(m);
                }
            }
            Tok::Punct(b';') => declaration = false,
            _ => {}
        }
    }
    out
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Keywords followed by an expression, which may be a regular expression.
const TAKE_EXPRESSIONS: &str = "return typeof instanceof in of new delete void throw case do else yield await";

/// Whether a `/` after `prev` starts a regular expression literal rather
/// than a division: after an operator, an opening bracket, a keyword that
/// takes an expression, or nothing.
fn regex_after(prev: Option<&Tok>) -> bool {
    match prev {
        None => true,
        Some(Tok::Punct(c)) => !matches!(c, b')' | b']' | b'}'),
        Some(Tok::Word(w)) => TAKE_EXPRESSIONS.split(' ').any(|k| k == *w),
        Some(Tok::Str(_) | Tok::Other) => false,
    }
}

fn lex(text: &str) -> Vec<Tok<'_>> {
    let b = text.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    if b.starts_with(b"#!") {
        i = b.iter().position(|&c| c == b'\n').unwrap_or(b.len());
    }
    while i < b.len() {
        let c = b[i];
        match c {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |n| i + n);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = b[i + 2..].windows(2).position(|w| w == b"*/").map_or(b.len(), |n| i + 2 + n + 2);
            }
            b'/' if regex_after(toks.last()) => {
                i = regex_end(b, i);
                toks.push(Tok::Other);
            }
            b'\'' | b'"' => {
                let end = string_end(b, i);
                let close = if end - 1 > i && b[end - 1] == c { end - 1 } else { end };
                toks.push(Tok::Str(&text[i + 1..close]));
                i = end;
            }
            b'`' => {
                i = template_end(b, i, 0);
                toks.push(Tok::Other);
            }
            _ if is_word(c) => {
                let start = i;
                while i < b.len() && is_word(b[i]) {
                    i += 1;
                }
                toks.push(Tok::Word(&text[start..i]));
            }
            _ if c.is_ascii_whitespace() => i += 1,
            _ => {
                toks.push(Tok::Punct(c));
                i += 1;
            }
        }
    }
    toks
}

/// Past the closing quote of the string literal opened at `at`;
/// backslashes escape. One not closed on its line ends there (a syntax
/// error).
fn string_end(b: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'\n' => return i,
            c if c == b[at] => return i + 1,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Past the closing backquote of the template literal opened at `at`. Its
/// `${…}` fields are code whose strings and templates may hold a backquote:
/// skipped as code, at most [`MAX_NEST`] deep (deeper, a field is read as
/// the template's text).
fn template_end(b: &[u8], at: usize, nest: u8) -> usize {
    let mut i = at + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'`' => return i + 1,
            b'$' if nest < MAX_NEST && b.get(i + 1) == Some(&b'{') => {
                i = field_end(b, i + 2, nest + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Past the `}` closing the template field whose code starts at `at`.
fn field_end(b: &[u8], at: usize, nest: u8) -> usize {
    let mut depth = 0usize;
    let mut i = at;
    while i < b.len() {
        match b[i] {
            b'}' if depth == 0 => return i + 1,
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b'\'' | b'"' => {
                i = string_end(b, i);
                continue;
            }
            b'`' => {
                i = template_end(b, i, nest);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Templates in templates' fields read as code.
const MAX_NEST: u8 = 8;

/// Past the closing `/` of the regular expression opened at `at` (a `/` in
/// a `[…]` class does not close it), or at the line's end.
fn regex_end(b: &[u8], at: usize) -> usize {
    let mut class = false;
    let mut i = at + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'\n' => return i,
            b'[' => class = true,
            b']' => class = false,
            b'/' if !class => return i + 1,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_requires_and_reexports() {
        let text = "#!/usr/bin/env node\nimport a from 'a';\nimport { b,\n  c } from \"b\"\nimport 'side';\nexport * from './re.js';\nconst d = require('d'), e = await import(\"e\", { with: {} });\nrequire('./' + name);\nconst t = import.meta.url;\nx.require('no'); y.import('no');\n";
        assert_eq!(imports(text), ["a", "b", "side", "./re.js", "d", "e"]);
    }

    #[test]
    fn strings_templates_regexes_and_comments_hold_no_import() {
        let text = "const s = \"import 'a'\";\nconst t = `\nrequire('b')\n${`import 'c'`}\n`;\n/* import 'd'\n*/ // require('e')\nconst r = /['\"`]/g, half = n / 2 / k; import 'f';\nconst u = 'unclosed\nimport 'g';\n";
        assert_eq!(imports(text), ["f", "g"]);
        // Nested deeper than MAX_NEST: read, and the work stays bounded.
        let deep = format!("{}\nimport 'h';\n", "`${".repeat(4000));
        assert!(imports(&deep).len() <= 1);
    }
}
