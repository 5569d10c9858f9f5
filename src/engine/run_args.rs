//! What a `docker|podman run` client's argv says about its container: how it
//! is named, whether the engine removes it, whether it is detached, which
//! image runs which command. Read from the real argv (NUL-separated), not
//! the joined command line, so a quoted `sh -c '…'` stays one word.

use std::path::PathBuf;

use crate::program::{ENGINE_GLOBAL_OPTS, RUN_OPTS, RUN_SHORT_VALUE};

/// Which engine's client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    Docker,
    Podman,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
        }
    }
}

/// One `run` client's argv, the parts that find and end its container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // the flags of `run`
pub struct RunArgs {
    pub engine: Option<EngineKind>,
    /// `-H`/`--host`/`--url` as given (`unix:///run/x.sock`, `tcp://…`).
    pub host: Option<String>,
    /// `-c`/`--context` (docker): the context whose endpoint to use.
    pub context: Option<String>,
    /// `--config DIR` (docker): the CLI's config directory.
    pub config_dir: Option<PathBuf>,
    pub name: Option<String>,
    pub cidfile: Option<PathBuf>,
    pub rm: bool,
    pub detach: bool,
    pub interactive: bool,
    pub tty: bool,
    pub image: String,
    /// The command after the image (empty: the image's default).
    pub command: Vec<String>,
}

/// `--flag`, `--flag=true` → true; `--flag=false` → false.
fn bool_opt(w: &str, long: &str) -> Option<bool> {
    if w == long {
        return Some(true);
    }
    let v = w.strip_prefix(long)?.strip_prefix('=')?;
    Some(v != "false" && v != "0")
}

impl RunArgs {
    /// `None` unless argv is `docker|podman [global opts] [container] run … IMAGE …`.
    pub fn parse(argv: &[String]) -> Option<RunArgs> {
        let base = argv.first()?.rsplit('/').next()?;
        let engine = match base {
            "docker" => EngineKind::Docker,
            "podman" => EngineKind::Podman,
            _ => return None,
        };
        let mut r = RunArgs { engine: Some(engine), ..RunArgs::default() };
        let mut k = 1;
        // Global options, keeping the engine's address.
        while let Some(w) = argv.get(k) {
            if !w.starts_with('-') {
                break;
            }
            let (key, inline) = w.split_once('=').map_or((w.as_str(), None), |(a, b)| (a, Some(b)));
            let takes = ENGINE_GLOBAL_OPTS.contains(&key) && inline.is_none();
            let value = if takes { argv.get(k + 1).map(String::as_str) } else { inline };
            match key {
                "-H" | "--host" | "--url" => r.host = value.map(str::to_string),
                "-c" | "--context" if engine == EngineKind::Docker => r.context = value.map(str::to_string),
                "--config" if engine == EngineKind::Docker => r.config_dir = value.map(PathBuf::from),
                _ => {}
            }
            k += if takes { 2 } else { 1 };
        }
        if argv.get(k).is_some_and(|w| w == "container") {
            k += 1;
        }
        if argv.get(k).is_none_or(|w| w != "run") {
            return None;
        }
        k += 1;
        while let Some(w) = argv.get(k) {
            if w == "--" {
                k += 1;
                break;
            }
            if !w.starts_with('-') || w == "-" {
                break;
            }
            if w.starts_with("--") {
                let (key, inline) = w.split_once('=').map_or((w.as_str(), None), |(a, b)| (a, Some(b)));
                let takes = RUN_OPTS.contains(&key) && inline.is_none();
                let value = if takes { argv.get(k + 1).cloned() } else { inline.map(str::to_string) };
                match key {
                    "--name" => r.name = value,
                    "--cidfile" => r.cidfile = value.map(PathBuf::from),
                    _ => {}
                }
                r.rm = bool_opt(w, "--rm").unwrap_or(r.rm);
                r.detach = bool_opt(w, "--detach").unwrap_or(r.detach);
                r.interactive = bool_opt(w, "--interactive").unwrap_or(r.interactive);
                r.tty = bool_opt(w, "--tty").unwrap_or(r.tty);
                k += if takes { 2 } else { 1 };
                continue;
            }
            // Grouped short flags: `-dit`, `-ie VAR`, `-eVAR=x`.
            let mut skip_next = false;
            for (n, c) in w.char_indices().skip(1) {
                match c {
                    'i' => r.interactive = true,
                    't' => r.tty = true,
                    'd' => r.detach = true,
                    _ => {}
                }
                if RUN_SHORT_VALUE.contains(c) {
                    skip_next = n + 1 == w.len();
                    break;
                }
            }
            k += if skip_next { 2 } else { 1 };
        }
        r.image.clone_from(argv.get(k)?);
        r.command = argv[k + 1..].to_vec();
        Some(r)
    }
}

/// Two image references name the same image: `docker.io/`, `library/` and
/// podman's `localhost/` dropped, `:latest` implied.
pub fn same_image(a: &str, b: &str) -> bool {
    normalize_image(a) == normalize_image(b)
}

fn normalize_image(s: &str) -> String {
    let mut s = s;
    for p in ["docker.io/", "index.docker.io/", "localhost/"] {
        s = s.strip_prefix(p).unwrap_or(s);
    }
    s = s.strip_prefix("library/").unwrap_or(s);
    let last = s.rsplit('/').next().unwrap_or(s);
    if last.contains(':') || s.contains('@') { s.to_string() } else { format!("{s}:latest") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &[&str]) -> Option<RunArgs> {
        RunArgs::parse(&s.iter().map(|w| (*w).to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn run_args_keep_what_finds_the_container() {
        let r = parse(&[
            "/usr/bin/docker",
            "-H",
            "unix:///tmp/d.sock",
            "run",
            "-i",
            "--rm",
            "--network",
            "none",
            "--name=srv",
            "-e",
            "A=B",
            "mcp/github:1.2",
            "sh",
            "-c",
            "trap '' TERM; cat",
        ])
        .unwrap();
        assert_eq!(r.engine, Some(EngineKind::Docker));
        assert_eq!(r.host.as_deref(), Some("unix:///tmp/d.sock"));
        assert_eq!(r.name.as_deref(), Some("srv"));
        assert!(r.rm && r.interactive && !r.detach && !r.tty);
        assert_eq!(r.image, "mcp/github:1.2");
        assert_eq!(r.command, ["sh", "-c", "trap '' TERM; cat"]);
    }

    #[test]
    fn detached_grouped_and_container_run_forms() {
        let r = parse(&["podman", "container", "run", "-dit", "--cidfile", "/tmp/c", "img"]).unwrap();
        assert_eq!(r.engine, Some(EngineKind::Podman));
        assert!(r.detach && r.interactive && r.tty);
        assert_eq!(r.cidfile, Some(PathBuf::from("/tmp/c")));
        assert!(r.command.is_empty());
        let r = parse(&["docker", "run", "-ie", "X=1", "--detach=false", "img", "x"]).unwrap();
        assert!(r.interactive && !r.detach);
        assert_eq!((r.image.as_str(), r.command.as_slice()), ("img", &["x".to_string()][..]));
        assert!(parse(&["docker", "ps"]).is_none());
        assert!(parse(&["nerdctl", "run", "img"]).is_none());
        assert_eq!(
            parse(&["docker", "--host", "tcp://h:2375", "run", "img"]).unwrap().host.as_deref(),
            Some("tcp://h:2375")
        );
    }

    #[test]
    fn image_names_compare_as_the_engine_stores_them() {
        assert!(same_image("busybox", "docker.io/library/busybox:latest"));
        assert!(same_image("mcp/github", "docker.io/mcp/github:latest"));
        assert!(same_image("localhost/t14img", "t14img:latest"));
        assert!(!same_image("mcp/github:1", "mcp/github:2"));
        assert!(same_image("reg:5000/x", "reg:5000/x:latest"));
    }
}
