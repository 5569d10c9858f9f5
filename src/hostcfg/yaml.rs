//! Goose's `config.yaml`, read for `extensions.<name>.cmd` and `args` only.
//!
//! No YAML crate: the maintained ones (`serde_yaml` is archived; `saphyr`,
//! `yaml-rust2`) are a full YAML 1.2 parser each, tens of KiB in a release
//! binary kept near 4–5 MB, for two keys of one host's file that Goose itself
//! writes (`serde_yaml`'s output: block mappings, block sequences, plain or
//! quoted scalars). This reads that subset line by line. A construct outside
//! it (anchors, multi-line scalars, flow mappings) leaves that extension
//! unrecognised — a server then is not known, never a wrong one known.

use super::formats::Declared;

struct Line<'a> {
    indent: usize,
    text: &'a str,
    no: usize,
}

/// The stdio extensions of a Goose config.
pub fn goose(text: &str) -> Result<Vec<Declared>, String> {
    let mut lines = Vec::new();
    for (no, raw) in text.lines().enumerate() {
        let body = raw.trim_start_matches(' ');
        if body.starts_with('\t') {
            return Err(format!("invalid YAML: line {}: a tab in indentation", no + 1));
        }
        let body = body.trim_end();
        if body.is_empty() || body.starts_with('#') || body == "---" {
            continue;
        }
        lines.push(Line { indent: raw.len() - raw.trim_start_matches(' ').len(), text: body, no: no + 1 });
    }
    let mut out = Vec::new();
    let Some(start) = lines.iter().position(|l| l.indent == 0 && l.text == "extensions:") else { return Ok(out) };
    let block: Vec<&Line<'_>> = lines[start + 1..].iter().take_while(|l| l.indent > 0).collect();
    let Some(name_indent) = block.first().map(|l| l.indent) else { return Ok(out) };
    let mut i = 0;
    while i < block.len() {
        let l = block[i];
        if l.indent != name_indent {
            return Err(format!("invalid YAML: line {}: unexpected indentation", l.no));
        }
        let name = key_of(l.text).ok_or_else(|| format!("invalid YAML: line {}: expected `name:`", l.no))?;
        let end = block[i + 1..].iter().position(|m| m.indent <= name_indent).map_or(block.len(), |e| i + 1 + e);
        if let Some(argv) = extension(&block[i + 1..end])? {
            out.push(Declared { key: format!("extensions.{}", unquote(name)?), argv, cwd: None });
        }
        i = end;
    }
    Ok(out)
}

/// `key:` or `key: value` → key.
fn key_of(text: &str) -> Option<&str> {
    let (k, _) = split_key(text)?;
    Some(k)
}

fn split_key(text: &str) -> Option<(&str, &str)> {
    if text.starts_with('-') {
        return None;
    }
    let at = text.find(": ").or_else(|| text.ends_with(':').then(|| text.len() - 1))?;
    Some((text[..at].trim(), text[at + 1..].trim()))
}

/// The argv of one extension, if it is a stdio one with a `cmd`.
fn extension(body: &[&Line<'_>]) -> Result<Option<Vec<String>>, String> {
    let Some(key_indent) = body.first().map(|l| l.indent) else { return Ok(None) };
    let (mut cmd, mut args, mut stdio) = (None, Vec::new(), true);
    let mut i = 0;
    while i < body.len() {
        let l = body[i];
        i += 1;
        if l.indent != key_indent {
            continue; // the inside of a key we do not read (envs, …)
        }
        let Some((k, v)) = split_key(l.text) else { continue };
        match k {
            "cmd" => cmd = Some(scalar(v, l.no)?),
            "type" => stdio = scalar(v, l.no)? == "stdio",
            "args" if v.starts_with('[') => args = flow(v, l.no)?,
            "args" if v.is_empty() || v == "[]" => {
                // A block sequence: `- item` lines, at the key's indent or deeper.
                while i < body.len() && body[i].indent >= key_indent && body[i].text.starts_with('-') {
                    let item = body[i].text[1..].trim();
                    args.push(scalar(item, body[i].no)?);
                    i += 1;
                }
            }
            _ => {}
        }
    }
    Ok(match cmd {
        Some(c) if stdio && !c.is_empty() => Some(std::iter::once(c).chain(args).collect()),
        _ => None,
    })
}

/// `[a, "b c", 'd']`: a flow sequence of scalars without commas in them.
fn flow(v: &str, no: usize) -> Result<Vec<String>, String> {
    let inner = v
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| format!("invalid YAML: line {no}: unterminated sequence"))?;
    inner.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| scalar(s, no)).collect()
}

/// A plain, single- or double-quoted scalar (a trailing ` # comment` cut).
fn scalar(v: &str, no: usize) -> Result<String, String> {
    if v.starts_with('"') || v.starts_with('\'') {
        return unquote(v).map_err(|e| format!("invalid YAML: line {no}: {e}"));
    }
    let v = v.find(" #").map_or(v, |c| &v[..c]).trim();
    if v.starts_with(['&', '*', '|', '>', '{', '!']) {
        // Its first character only: no content of a user's file reaches a log.
        return Err(format!("invalid YAML: line {no}: unsupported value (starts with {:?})", &v[..1]));
    }
    Ok(v.to_string())
}

fn unquote(v: &str) -> Result<String, String> {
    if let Some(r) = v.strip_prefix('\'') {
        let end = r.rfind('\'').ok_or("unterminated quote")?;
        return Ok(r[..end].replace("''", "'"));
    }
    if v.starts_with('"') {
        // YAML's double-quoted escapes are JSON's, for what Goose writes.
        let end = v.rfind('"').filter(|&e| e > 0).ok_or("unterminated quote")?;
        return serde_json::from_str::<String>(&v[..=end]).map_err(|e| format!("bad string: {e}"));
    }
    Ok(v.to_string())
}
