//! A host's options read the way its CLI library reads them (commander,
//! yargs, clap, cobra all agree on what matters here): `--name VALUE`,
//! `--name=VALUE`, and clusters of short flags (`-cp` is `-c -p`; a short
//! flag that takes a value takes the rest of the cluster, or the next word).
//!
//! The parse is strict: an option the host's table does not know, or a
//! cluster with a letter it does not know, fails it. A mode read from a
//! command line can end a tree only when the whole line was understood
//! (issue 32: `claude -cp …` read as the terminal UI was killed); whatever
//! the table does not know is `unknown`.

/// The options of one host (or one subcommand of it).
pub(super) struct Options {
    /// Take a value: `--model X`, `--model=X`, `-m X`, `-mX`.
    pub valued: &'static [&'static str],
    /// Take every word up to the next option (commander's `<values...>`,
    /// yargs' arrays, clap's `num_args(1..)`).
    pub variadic: &'static [&'static str],
    /// Take a value only when the next word is no option (commander's
    /// `[value]`): `claude --resume` and `claude --resume ID`.
    pub optional: &'static [&'static str],
    /// Take none.
    pub switches: &'static [&'static str],
}

/// A command line as its host reads it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Parsed<'a> {
    /// Each option given, as the table spells it, with its value.
    pub flags: Vec<(&'static str, Option<&'a str>)>,
    pub positionals: Vec<&'a str>,
}

impl Parsed<'_> {
    pub fn has(&self, names: &[&str]) -> bool {
        self.flags.iter().any(|(f, _)| names.contains(f))
    }

    pub fn value(&self, names: &[&str]) -> Option<&str> {
        self.flags.iter().find(|(f, _)| names.contains(f)).and_then(|&(_, v)| v)
    }
}

/// Why a command line could not be read: the word the table does not know.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Unread<'a>(pub &'a str);

/// Reads `args` with `opts`. A positional stops nothing: options after a
/// positional are read too (commander and yargs allow them anywhere).
pub(super) fn parse<'a>(args: &[&'a str], opts: &Options) -> Result<Parsed<'a>, Unread<'a>> {
    let mut out = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let w = args[i];
        i += 1;
        if w == "--" {
            out.positionals.extend(&args[i..]);
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (&w[..n.len() + 2], Some(v)),
                None => (w, None),
            };
            let Some((spelt, kind)) = opts.find(name) else { return Err(Unread(w)) };
            let value = match (kind, inline) {
                (_, Some(v)) => Some(v),
                (Kind::Switch, None) => None,
                (Kind::Valued, None) => take(args, &mut i, opts, true),
                (Kind::Optional, None) => take(args, &mut i, opts, false),
                (Kind::Variadic, None) => take_all(args, &mut i, opts),
            };
            out.flags.push((spelt, value));
            continue;
        }
        if w.len() > 1 && w.starts_with('-') && !is_number(w) {
            cluster(w, args, &mut i, opts, &mut out)?;
            continue;
        }
        out.positionals.push(w);
    }
    Ok(out)
}

/// `-abc`: each letter a short flag; the first that takes a value takes
/// the rest of the word, or else the next word.
fn cluster<'a>(
    w: &'a str,
    args: &[&'a str],
    i: &mut usize,
    opts: &Options,
    out: &mut Parsed<'a>,
) -> Result<(), Unread<'a>> {
    for (at, ch) in w.char_indices().skip(1) {
        let mut name = [0u8; 8];
        name[0] = b'-';
        let len = 1 + ch.encode_utf8(&mut name[1..]).len();
        let short = std::str::from_utf8(&name[..len]).unwrap_or("-");
        let Some((spelt, kind)) = opts.find(short) else { return Err(Unread(w)) };
        let rest = &w[at + ch.len_utf8()..];
        match kind {
            Kind::Switch => out.flags.push((spelt, None)),
            Kind::Valued | Kind::Optional | Kind::Variadic if !rest.is_empty() => {
                out.flags.push((spelt, Some(rest.strip_prefix('=').unwrap_or(rest))));
                return Ok(());
            }
            Kind::Valued => {
                let v = take(args, i, opts, true);
                out.flags.push((spelt, v));
                return Ok(());
            }
            Kind::Optional => {
                let v = take(args, i, opts, false);
                out.flags.push((spelt, v));
                return Ok(());
            }
            Kind::Variadic => {
                let v = take_all(args, i, opts);
                out.flags.push((spelt, v));
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The value of an option from the next word. A required value is any word
/// but one the table knows as an option: the joined command line drops
/// empty arguments (`--setting-sources ""`), so an option there means the
/// value was empty.
fn take<'a>(args: &[&'a str], i: &mut usize, opts: &Options, required: bool) -> Option<&'a str> {
    let next = *args.get(*i)?;
    let option = next.starts_with('-') && next.len() > 1 && !is_number(next);
    if option && (!required || opts.find(next.split('=').next().unwrap_or(next)).is_some()) {
        return None;
    }
    *i += 1;
    Some(next)
}

/// Every next word up to an option, for a variadic option; the first one.
fn take_all<'a>(args: &[&'a str], i: &mut usize, opts: &Options) -> Option<&'a str> {
    let first = take(args, i, opts, true)?;
    while args.get(*i).is_some_and(|w| !(w.starts_with('-') && w.len() > 1 && !is_number(w))) {
        *i += 1;
    }
    Some(first)
}

fn is_number(w: &str) -> bool {
    w[1..].parse::<f64>().is_ok()
}

#[derive(Clone, Copy)]
enum Kind {
    Switch,
    Valued,
    Optional,
    Variadic,
}

impl Options {
    fn find(&self, name: &str) -> Option<(&'static str, Kind)> {
        let hit = |list: &'static [&'static str]| list.iter().copied().find(|f| *f == name);
        hit(self.valued)
            .map(|f| (f, Kind::Valued))
            .or_else(|| hit(self.optional).map(|f| (f, Kind::Optional)))
            .or_else(|| hit(self.variadic).map(|f| (f, Kind::Variadic)))
            .or_else(|| hit(self.switches).map(|f| (f, Kind::Switch)))
    }
}

/// Whether any word names one of `flags`, as itself, as `FLAG=…`, or as a
/// letter of a short cluster (`-cp` holds `-p`): read loosely, for the
/// modes that keep a tree (a one-shot run), where reading too much only
/// keeps.
pub(super) fn mentions(args: &[&str], flags: &[&str]) -> Option<String> {
    for w in args.iter().copied().take_while(|w| *w != "--") {
        for f in flags {
            if w == *f || w.strip_prefix(f).is_some_and(|r| r.starts_with('=')) {
                return Some(w.to_string());
            }
            if let Some(letter) = f.strip_prefix('-').filter(|l| l.len() == 1 && !l.starts_with('-'))
                && w.starts_with('-')
                && !w.starts_with("--")
                && w.len() > 2
                && !is_number(w)
                && w[1..].contains(letter)
            {
                return Some(format!("{w} ({f})"));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const O: Options = Options {
        valued: &["--model", "-m", "--add-dir"],
        variadic: &["--mcp-config"],
        optional: &["--resume", "-r", "--debug", "-d"],
        switches: &["--print", "-p", "-c", "--continue", "--verbose"],
    };

    fn p(line: &'static str) -> Result<Parsed<'static>, Unread<'static>> {
        let args: Vec<&'static str> = line.split(' ').filter(|w| !w.is_empty()).collect();
        parse(Box::leak(args.into_boxed_slice()), &O)
    }

    #[test]
    fn clusters_are_read_letter_by_letter() {
        let r = p("-cp fix").unwrap();
        assert_eq!(r.flags, vec![("-c", None), ("-p", None)]);
        assert_eq!(r.positionals, vec!["fix"]);
        let r = p("-cmopus").unwrap();
        assert_eq!(r.flags, vec![("-c", None), ("-m", Some("opus"))]);
        let r = p("-cm opus").unwrap();
        assert_eq!(r.flags, vec![("-c", None), ("-m", Some("opus"))]);
        assert_eq!(p("-cx").unwrap_err(), Unread("-cx"), "a letter it does not know");
    }

    #[test]
    fn long_options_with_and_without_values() {
        let r = p("--model=opus --resume --verbose").unwrap();
        assert_eq!(r.flags, vec![("--model", Some("opus")), ("--resume", None), ("--verbose", None)]);
        let r = p("--resume abc --add-dir /x").unwrap();
        assert_eq!(r.flags, vec![("--resume", Some("abc")), ("--add-dir", Some("/x"))]);
        assert_eq!(p("--remote-control").unwrap_err(), Unread("--remote-control"));
        assert_eq!(p("--new=1").unwrap_err(), Unread("--new=1"));
        // An empty value the joined line dropped.
        let r = p("--add-dir --verbose").unwrap();
        assert_eq!(r.flags, vec![("--add-dir", None), ("--verbose", None)]);
        let r = p("--mcp-config a.json b.json --verbose fix").unwrap();
        assert_eq!(r.flags, vec![("--mcp-config", Some("a.json")), ("--verbose", None)]);
        assert_eq!(r.positionals, vec!["fix"]);
        let r = p("-- -p").unwrap();
        assert_eq!(r.positionals, vec!["-p"]);
    }

    #[test]
    fn mentions_reads_clusters_loosely() {
        let args = ["-cp", "fix"];
        assert!(mentions(&args, &["-p", "--print"]).is_some());
        assert!(mentions(&["--print=yes"], &["-p", "--print"]).is_some());
        assert!(mentions(&["--prompt"], &["-p", "--print"]).is_none());
        assert!(mentions(&["-c"], &["-p", "--print"]).is_none());
        assert!(mentions(&["--", "-p"], &["-p"]).is_none());
    }
}
