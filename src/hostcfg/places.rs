//! Where a host looks for its configs: the directories its own environment
//! names (issue 23). A host reads `$HOME` and its own variables, not the
//! passwd database: in containers, dev containers, `sudo -u` with `HOME`
//! kept, CI runners or home-manager setups the two differ, and a reaper
//! that read only the passwd home missed every server those hosts named.
//!
//! The values come from `/proc/PID/environ` of a live host (at most
//! [`MAX_ENV`] bytes, read once per host identity) and are hostile input:
//! only absolute paths are taken, and the files under them are read with the
//! same owner, type and size rules as any other (see [`crate::userfile`]), so
//! a `HOME` pointing at someone else's directory yields nothing.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Which directory a user-level config file is relative to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Base {
    /// `$HOME`.
    Home,
    /// `$XDG_CONFIG_HOME`, by default `~/.config`.
    XdgConfig,
    /// `$CLAUDE_CONFIG_DIR` (where Claude Code keeps `.claude.json`), by default `~`.
    Claude,
    /// `$CODEX_HOME`, by default `~/.codex`.
    Codex,
    /// `$GEMINI_CLI_HOME`, the home Gemini CLI puts `.gemini/` in, by default `~`.
    Gemini,
    /// `$CONTINUE_GLOBAL_DIR`, by default `~/.continue`.
    Continue,
    /// Cline CLI's data directory: `$CLINE_DATA_DIR`, else `$CLINE_DIR/data`,
    /// by default `~/.cline/data` (as its 3.0 binary resolves it).
    ClineData,
}

impl Base {
    /// How the directory reads when no host's environment moved it.
    pub fn default_shown(self) -> &'static str {
        match self {
            Base::Home | Base::Claude | Base::Gemini => "~",
            Base::XdgConfig => "~/.config",
            Base::Codex => "~/.codex",
            Base::Continue => "~/.continue",
            Base::ClineData => "~/.cline/data",
        }
    }
}

/// The directories of one host's environment (or of a home alone).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Places {
    pub home: PathBuf,
    xdg_config: Option<PathBuf>,
    claude: Option<PathBuf>,
    codex: Option<PathBuf>,
    gemini: Option<PathBuf>,
    continue_dir: Option<PathBuf>,
    cline_dir: Option<PathBuf>,
    cline_data: Option<PathBuf>,
}

/// An environment is at most a few hundred KiB (`ARG_MAX` shares it with argv).
pub const MAX_ENV: u64 = 1 << 20;

/// Longest path value taken from an environment.
const MAX_PATH: usize = 4096;

impl Places {
    /// A home with every variable at its default.
    pub fn of_home(home: PathBuf) -> Places {
        Places { home, ..Places::default() }
    }

    /// The places an environment block names; `fallback` when it has no
    /// usable `HOME`.
    pub fn from_environ(environ: &[u8], fallback: Option<&Path>) -> Option<Places> {
        let mut p = Places::default();
        let mut home = None;
        for var in environ.split(|&b| b == 0) {
            let Some(eq) = var.iter().position(|&b| b == b'=') else { continue };
            let (name, value) = (&var[..eq], &var[eq + 1..]);
            let slot = match name {
                b"HOME" => &mut home,
                b"XDG_CONFIG_HOME" => &mut p.xdg_config,
                b"CLAUDE_CONFIG_DIR" => &mut p.claude,
                b"CODEX_HOME" => &mut p.codex,
                b"GEMINI_CLI_HOME" => &mut p.gemini,
                b"CONTINUE_GLOBAL_DIR" => &mut p.continue_dir,
                b"CLINE_DIR" => &mut p.cline_dir,
                b"CLINE_DATA_DIR" => &mut p.cline_data,
                _ => continue,
            };
            *slot = absolute(value);
        }
        p.home = home.or_else(|| fallback.map(Path::to_path_buf))?;
        Some(p)
    }

    /// The places of a live process, from its `/proc/PID/environ`.
    pub fn of_process(proc_dir: &Path, fallback: Option<&Path>) -> Option<Places> {
        let mut buf = Vec::new();
        std::fs::File::open(proc_dir.join("environ")).ok()?.take(MAX_ENV).read_to_end(&mut buf).ok()?;
        Places::from_environ(&buf, fallback)
    }

    /// The directory `base` stands for here.
    pub fn dir(&self, base: Base) -> PathBuf {
        let or = |v: &Option<PathBuf>, default: &str| {
            v.clone().unwrap_or_else(|| if default.is_empty() { self.home.clone() } else { self.home.join(default) })
        };
        match base {
            Base::Home => self.home.clone(),
            Base::XdgConfig => or(&self.xdg_config, ".config"),
            Base::Claude => or(&self.claude, ""),
            Base::Codex => or(&self.codex, ".codex"),
            Base::Gemini => or(&self.gemini, ""),
            Base::Continue => or(&self.continue_dir, ".continue"),
            Base::ClineData => self.cline_data.clone().unwrap_or_else(|| or(&self.cline_dir, ".cline").join("data")),
        }
    }
}

/// An absolute path value, `..` and `.` resolved by text (a value is
/// compared and shown, never trusted to stay inside anything).
fn absolute(v: &[u8]) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if v.is_empty() || v.len() > MAX_PATH || v[0] != b'/' {
        return None;
    }
    Some(super::matching::normalize(Path::new(std::ffi::OsStr::from_bytes(v))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_environment_names_its_config_directories() {
        let env =
            b"PATH=/usr/bin\0HOME=/work/h\0XDG_CONFIG_HOME=/work/x/../cfg\0CODEX_HOME=relative\0CLAUDE_CONFIG_DIR=/c\0";
        let p = Places::from_environ(env, Some(Path::new("/home/u"))).unwrap();
        assert_eq!(p.home, Path::new("/work/h"));
        assert_eq!(p.dir(Base::XdgConfig), Path::new("/work/cfg"));
        assert_eq!(p.dir(Base::Codex), Path::new("/work/h/.codex"), "a relative value is not taken");
        assert_eq!(p.dir(Base::Claude), Path::new("/c"));
        assert_eq!(p.dir(Base::Gemini), Path::new("/work/h"));
        assert_eq!(p.dir(Base::Continue), Path::new("/work/h/.continue"));
        assert_eq!(p.dir(Base::ClineData), Path::new("/work/h/.cline/data"));
        let p = Places::from_environ(b"HOME=\0", Some(Path::new("/home/u"))).unwrap();
        assert_eq!(p.home, Path::new("/home/u"), "an empty HOME falls back to the passwd home");
        assert!(Places::from_environ(b"", None).is_none());
    }

    #[test]
    fn clines_data_dir_follows_its_two_variables() {
        // Cline CLI 3.0: CLINE_DATA_DIR wins, else CLINE_DIR/data, else ~/.cline/data.
        let p = Places::from_environ(b"HOME=/h\0CLINE_DIR=/c\0", None).unwrap();
        assert_eq!(p.dir(Base::ClineData), Path::new("/c/data"));
        let p = Places::from_environ(b"HOME=/h\0CLINE_DIR=/c\0CLINE_DATA_DIR=/d\0", None).unwrap();
        assert_eq!(p.dir(Base::ClineData), Path::new("/d"));
        assert_eq!(Base::ClineData.default_shown(), "~/.cline/data");
    }
}
