//! Words of a command line and the parts of paths and package specs that name
//! a program, all as byte spans into the joined command line: a program's
//! name is always a piece of the text the process shows, so it costs no
//! allocation to keep and reads the same in every report.

/// A byte range `[start, end)` in the joined command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        // Command lines are capped far below 4 GiB by the kernel (ARG_MAX).
        let c = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Span { start: c(start), end: c(end) }
    }

    pub fn of<'a>(&self, text: &'a str) -> &'a str {
        text.get(self.start as usize..self.end as usize).unwrap_or("")
    }

    fn sub(self, from: usize, to: usize) -> Span {
        let s = self.start as usize;
        Span::new(s + from, s + to)
    }
}

/// The words of a joined command line: one per argv element when the argv
/// boundaries are known, split on whitespace otherwise.
pub fn split_whitespace(text: &str, within: Span, out: &mut Vec<Span>) {
    let s = within.of(text);
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(st)) => {
                out.push(within.sub(st, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(st) = start {
        out.push(within.sub(st, s.len()));
    }
}

/// A shell word without the quotes around it (`'mcp-x'` → `mcp-x`).
pub fn unquote(text: &str, w: Span) -> Span {
    let s = w.of(text);
    let b = s.as_bytes();
    let (mut from, mut to) = (0, b.len());
    while from < to && matches!(b[from], b'\'' | b'"') {
        from += 1;
    }
    while to > from && matches!(b[to - 1], b'\'' | b'"' | b';') {
        to -= 1;
    }
    w.sub(from, to)
}

/// The last path component (`/usr/bin/node` → `node`), a login shell's `-`
/// dropped (`-bash` → `bash`).
pub fn basename(text: &str, w: Span) -> Span {
    let s = w.of(text);
    let s_trim = s.trim_end_matches('/');
    let from = s_trim.rfind('/').map_or(0, |i| i + 1);
    let from = if s_trim[from..].starts_with('-') && from == 0 { 1 } else { from };
    w.sub(from.min(s_trim.len()), s_trim.len())
}

/// Path components with their spans, `.` dropped and `..` applied lexically
/// (`node_modules/.bin/../gitnexus/dist/index.js` → `node_modules`, `gitnexus`, …).
fn components(text: &str, w: Span) -> Vec<Span> {
    let s = w.of(text);
    let mut out: Vec<Span> = Vec::new();
    let mut at = 0;
    for part in s.split('/') {
        let sp = w.sub(at, at + part.len());
        at += part.len() + 1;
        match part {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            _ => out.push(sp),
        }
    }
    out
}

/// Entry files whose name says nothing about the program: look at the
/// directories above them instead.
fn generic_file(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or(name);
    matches!(stem, "index" | "main" | "cli" | "server" | "app" | "__main__" | "run" | "start" | "entry" | "bin")
        && name.contains('.')
}

/// Directories that hold a package's entry file without naming it.
fn generic_dir(name: &str) -> bool {
    matches!(
        name,
        "dist" | "build" | "lib" | "out" | "src" | "bin" | "cli" | "esm" | "cjs" | "server" | "app" | "bundle" | "js"
    )
}

/// Directories in which a package ships copies of other programs.
fn vendor_dir(name: &str) -> bool {
    matches!(name, "bundled" | "vendor" | "vendored" | "third_party")
}

/// The name of the entry file that ends `comps`: the file, or for a generic
/// one the first directory above it that is not generic.
fn entry_name(text: &str, comps: &[Span]) -> Option<Span> {
    let (&last, above) = comps.split_last()?;
    if !generic_file(last.of(text)) {
        return Some(last);
    }
    above.iter().rev().find(|c| !generic_dir(c.of(text))).copied()
}

/// The program a script path names:
/// - inside `node_modules/`, the package (`@scope/name` or `name`), or the
///   shim's name in `node_modules/.bin/NAME`; but a copy of another program
///   that the package ships in a `bundled/`, `vendor/` or `third_party/`
///   directory is that program (Gemini CLI's
///   `@google/gemini-cli/bundle/bundled/chrome-devtools-mcp.mjs`);
/// - a generic entry file (`dist/index.js`, `server.py`) → the first directory
///   above it that is not generic (`/home/u/weather/build/index.js` → `weather`);
/// - otherwise the file's name, extension kept (`weather-mcp.ts`).
pub fn script_name(text: &str, w: Span) -> Span {
    let comps = components(text, w);
    if comps.is_empty() {
        return w;
    }
    if let Some(nm) = comps.iter().rposition(|c| c.of(text) == "node_modules")
        && let Some(&first) = comps.get(nm + 1)
    {
        let f = first.of(text);
        if f == ".bin" {
            if let Some(&bin) = comps.get(nm + 2) {
                return bin;
            }
        } else {
            let (package, inner) = if f.starts_with('@') {
                match comps.get(nm + 2) {
                    Some(&name) => (Span { start: first.start, end: name.end }, &comps[nm + 3..]),
                    None => (first, &comps[nm + 2..]),
                }
            } else {
                (first, &comps[nm + 2..])
            };
            let vendored = inner.iter().rposition(|c| vendor_dir(c.of(text)));
            return vendored.and_then(|v| entry_name(text, &inner[v + 1..])).unwrap_or(package);
        }
    }
    let last = *comps.last().unwrap_or(&w);
    entry_name(text, &comps).unwrap_or(last)
}

/// A versioned install (`~/.local/share/claude/versions/2.1.197`) names the
/// program two directories up: the file name is only its version.
pub fn exec_name(text: &str, w: Span) -> Span {
    let base = basename(text, w);
    let b = base.of(text);
    if b.starts_with(|c: char| c.is_ascii_digit()) && b.contains('.') {
        let comps = components(text, w);
        if comps.len() >= 3 && comps[comps.len() - 2].of(text) == "versions" {
            return comps[comps.len() - 3];
        }
    }
    base
}

/// A package spec without its version, registry prefix or extras:
/// `@playwright/mcp@latest` → `@playwright/mcp`, `npm:pkg@1` → `pkg`,
/// `mcp-server-fetch==1.0` → `mcp-server-fetch`, `pkg[cli]>=2` → `pkg`.
pub fn package_name(text: &str, w: Span) -> Span {
    let mut w = w;
    let s = w.of(text);
    for prefix in ["npm:", "jsr:", "pypi:"] {
        if s.starts_with(prefix) {
            w = w.sub(prefix.len(), s.len());
            break;
        }
    }
    let s = w.of(text);
    // A version after '@' (not the scope's leading '@').
    let cut = s.char_indices().skip(1).find(|&(_, c)| matches!(c, '@' | '=' | '<' | '>' | '[' | '~' | '!' | ' '));
    match cut {
        Some((i, _)) => w.sub(0, i),
        None => w,
    }
}

/// A container image without its tag or digest: `mcp/github:latest` →
/// `mcp/github`, `ghcr.io:443/x/y@sha256:…` → `ghcr.io:443/x/y`.
pub fn image_name(text: &str, w: Span) -> Span {
    let s = w.of(text);
    let s_end = s.find('@').unwrap_or(s.len());
    let last_slash = s[..s_end].rfind('/').map_or(0, |i| i + 1);
    let end = s[last_slash..s_end].find(':').map_or(s_end, |i| last_slash + i);
    w.sub(0, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(s: &str) -> Span {
        Span::new(0, s.len())
    }

    #[test]
    fn names_from_paths() {
        let t = |s: &str| script_name(s, whole(s)).of(s).to_string();
        assert_eq!(t("/home/u/.npm/_npx/a3/node_modules/.bin/mcp-server-filesystem"), "mcp-server-filesystem");
        assert_eq!(t("./node_modules/.bin/../gitnexus/dist/cli/index.js"), "gitnexus");
        assert_eq!(
            t("/usr/lib/node_modules/@modelcontextprotocol/server-github/dist/index.js"),
            "@modelcontextprotocol/server-github"
        );
        assert_eq!(t("/home/u/weather/build/index.js"), "weather");
        assert_eq!(
            t("/x/node_modules/@google/gemini-cli/bundle/bundled/chrome-devtools-mcp.mjs"),
            "chrome-devtools-mcp.mjs"
        );
        assert_eq!(t("/x/node_modules/pkg/vendor/other-tool/dist/index.js"), "other-tool");
        assert_eq!(t("/x/node_modules/pkg/vendor/index.js"), "pkg");
        assert_eq!(t("/x/node_modules/@scope/pkg/dist/cli.js"), "@scope/pkg");
        assert_eq!(t("/home/u/src/weather-mcp.ts"), "weather-mcp.ts");
        assert_eq!(t("weather.py"), "weather.py");
        assert_eq!(t("index.js"), "index.js");
        let e = |s: &str| exec_name(s, whole(s)).of(s).to_string();
        assert_eq!(e("/home/u/.local/share/claude/versions/2.1.197"), "claude");
        assert_eq!(e("/usr/bin/tmux"), "tmux");
        assert_eq!(e("-bash"), "bash");
        assert_eq!(e("2.1.197"), "2.1.197");
    }

    #[test]
    fn names_from_specs() {
        let p = |s: &str| package_name(s, whole(s)).of(s).to_string();
        assert_eq!(p("@playwright/mcp@latest"), "@playwright/mcp");
        assert_eq!(p("npm:@x/y@1.2"), "@x/y");
        assert_eq!(p("mcp-server-fetch==1.0"), "mcp-server-fetch");
        assert_eq!(p("mcp-atlassian"), "mcp-atlassian");
        let i = |s: &str| image_name(s, whole(s)).of(s).to_string();
        assert_eq!(i("mcp/github:latest"), "mcp/github");
        assert_eq!(i("localhost:5000/x/mcp-searxng:1"), "localhost:5000/x/mcp-searxng");
        assert_eq!(i("ghcr.io/github/github-mcp-server@sha256:ab"), "ghcr.io/github/github-mcp-server");
    }
}
