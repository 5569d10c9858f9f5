//! Goose's and Continue's `config.yaml`, read for each stdio server's
//! command, arguments and working directory only: Goose's
//! `extensions.<name>.cmd` and `args`, Continue's `mcpServers:` list of
//! `{name, command, args, cwd}`.
//!
//! No YAML crate, measured (issue 23): the maintained ones are a full YAML
//! 1.2 parser each — `saphyr-parser` 0.3.4 is 5,507 lines plus `arraydeque`
//! and `thiserror`, `yaml-rust2` 0.13.1 5,372 lines plus `hashlink`,
//! `arraydeque` and `encoding_rs`. Measured with a stand-alone program
//! reading a file (release, fat LTO, one codegen unit): 513,376 bytes with
//! `saphyr-parser` against 392,400 without, +121 KB of parser, and 8 s of
//! CPU to build it on this project's 2-core machine — for two keys of two
//! hosts' files, read as root from every user. `serde_yaml` is archived. This reads the block
//! subset both hosts write and document (block mappings, block sequences,
//! plain or quoted scalars, flow sequences of scalars) line by line, in
//! linear time and without aliases to expand. A construct outside it
//! (anchors, multi-line scalars, flow mappings) leaves that entry
//! unrecognised or the file reported as not read — a server then is not
//! known, never a wrong one known: the safe side for a reaper.

use super::formats::Declared;

struct Line<'a> {
    indent: usize,
    text: &'a str,
    no: usize,
}

/// The significant lines of a file: no blanks, comments or `---`.
fn lines(text: &str) -> Result<Vec<Line<'_>>, String> {
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
    Ok(lines)
}

/// The stdio extensions of a Goose config.
pub fn goose(text: &str) -> Result<Vec<Declared>, String> {
    let lines = lines(text)?;
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
        if let Some((argv, _)) = extension(&block[i + 1..end], "cmd")? {
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

/// A stdio server's argv and working directory.
type Entry = (Vec<String>, Option<String>);

/// The argv (and `cwd`) of one entry, if it is a stdio one with a command
/// under `cmd_key`.
fn extension(body: &[&Line<'_>], cmd_key: &str) -> Result<Option<Entry>, String> {
    let Some(key_indent) = body.first().map(|l| l.indent) else { return Ok(None) };
    let (mut cmd, mut args, mut stdio, mut cwd) = (None, Vec::new(), true, None);
    let mut i = 0;
    while i < body.len() {
        let l = body[i];
        i += 1;
        if l.indent != key_indent {
            continue; // the inside of a key we do not read (envs, …)
        }
        let Some((k, v)) = split_key(l.text) else { continue };
        match k {
            _ if k == cmd_key => cmd = Some(scalar(v, l.no)?),
            "cwd" => cwd = Some(scalar(v, l.no)?),
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
        Some(c) if stdio && !c.is_empty() => Some((std::iter::once(c).chain(args).collect(), cwd)),
        _ => None,
    })
}

/// Continue's `mcpServers:` list: `- name: x` items with `command`, `args`
/// and `cwd` (hub blocks, `- uses: org/block`, have no command: skipped).
pub fn continue_servers(text: &str) -> Result<Vec<Declared>, String> {
    let lines = lines(text)?;
    let mut out = Vec::new();
    let Some(start) = lines.iter().position(|l| l.indent == 0 && l.text == "mcpServers:") else { return Ok(out) };
    // A block sequence may sit at the key's own indent (`- ` at column 0).
    let block: Vec<&Line<'_>> =
        lines[start + 1..].iter().take_while(|l| l.indent > 0 || l.text.starts_with("- ")).collect();
    let Some(seq_indent) = block.first().map(|l| l.indent) else { return Ok(out) };
    let mut items: Vec<Vec<Line<'_>>> = Vec::new();
    for l in block {
        if l.indent == seq_indent {
            let Some(rest) = l.text.strip_prefix("- ") else {
                return Err(format!("invalid YAML: line {}: expected a `- ` list item", l.no));
            };
            let first = rest.trim_start();
            let indent = l.indent + 2 + (rest.len() - first.len());
            items.push(vec![Line { indent, text: first, no: l.no }]);
        } else if l.indent < seq_indent {
            return Err(format!("invalid YAML: line {}: unexpected indentation", l.no));
        } else if let Some(item) = items.last_mut() {
            item.push(Line { indent: l.indent, text: l.text, no: l.no });
        }
    }
    for (n, item) in items.iter().enumerate() {
        let body: Vec<&Line<'_>> = item.iter().collect();
        let name = body
            .iter()
            .filter(|l| l.indent == body[0].indent)
            .find_map(|l| split_key(l.text).filter(|(k, _)| *k == "name").map(|(_, v)| scalar(v, l.no)))
            .transpose()?;
        if let Some((argv, cwd)) = extension(&body, "command")? {
            let key = name.map_or_else(|| format!("mcpServers[{n}]"), |nm| format!("mcpServers.{nm}"));
            out.push(Declared { key, argv, cwd });
        }
    }
    Ok(out)
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
