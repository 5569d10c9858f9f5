//! Where configuration comes from, in order: the embedded default, the main
//! file, then its drop-ins (`config.d/*.toml`, in name order); each file read
//! with a size cap and as UTF-8, and applied as a layer over the ones before.

use std::path::{Path, PathBuf};

use super::layer::apply_text;
use super::{Config, ConfigError, ConfigErrors, keys::Draft};

/// The default configuration, compiled into the binaries.
pub const DEFAULT_TOML: &str = include_str!("../../config/default.toml");
pub(super) const DEFAULT_NAME: &str = "<embedded default config>";

/// Where configuration comes from.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// The main file. `None`: only the embedded default (plus `dropin_dir`).
    pub main: Option<PathBuf>,
    /// Whether a missing `main` is an error (it is when the user named it).
    pub main_required: bool,
}

impl Sources {
    pub fn explicit(path: impl Into<PathBuf>) -> Sources {
        Sources { main: Some(path.into()), main_required: true }
    }

    /// The main file when none is named: the system file for root, the XDG one
    /// for a user. It need not exist.
    pub fn default_location() -> Sources {
        Sources { main: Some(crate::paths::default_config_path()), main_required: false }
    }

    pub fn embedded_only() -> Sources {
        Sources::default()
    }

    /// What a `--config` argument names: `-` the embedded default alone, a
    /// path that file (which must exist), nothing the default location.
    pub fn from_arg(config: Option<&Path>) -> Sources {
        match config {
            Some(p) if p.as_os_str() == "-" => Sources::embedded_only(),
            Some(p) => Sources::explicit(p),
            None => Sources::default_location(),
        }
    }

    /// `config.d/` beside the main file.
    pub fn dropin_dir(&self) -> Option<PathBuf> {
        let main = self.main.as_ref()?;
        Some(main.parent().unwrap_or(Path::new(".")).join("config.d"))
    }
}

impl Config {
    /// Loads the embedded default, then the main file, then its drop-ins.
    pub fn load(sources: &Sources) -> Result<Config, ConfigErrors> {
        // Each regex compiled once: checking a layer and building the
        // matcher and redactor share what was compiled.
        crate::compiled::once(|| Config::load_layers(sources))
    }

    fn load_layers(sources: &Sources) -> Result<Config, ConfigErrors> {
        let mut errors = Vec::new();
        let mut draft = Draft::default();
        let mut used = vec![DEFAULT_NAME.to_string()];
        apply_text(&mut draft, DEFAULT_NAME, DEFAULT_TOML, &mut errors);
        let mut read = |path: &Path, missing_ok: bool| {
            let name = path.display().to_string();
            match read_text(path, &name) {
                Ok(Ok(text)) => {
                    apply_text(&mut draft, &name, &text, &mut errors);
                    used.push(name);
                }
                Ok(Err(refused)) => errors.push(refused),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing_ok => {}
                Err(e) => errors.push(ConfigError::file(&name, format!("cannot read: {e}"))),
            }
        };
        if let Some(main) = &sources.main {
            read(main, !sources.main_required);
        }
        match sources.dropin_dir().map(|dir| (dropins(&dir), dir)) {
            Some((Ok(files), _)) => files.iter().for_each(|f| read(f, false)),
            Some((Err(e), dir)) => {
                errors.push(ConfigError::file(&dir.display().to_string(), format!("cannot list drop-ins: {e}")));
            }
            None => {}
        }
        if !errors.is_empty() {
            return Err(ConfigErrors(errors).in_file_order());
        }
        Config::finish(draft, used)
    }

    /// Parses one TOML text on top of the embedded default (for tests and `validate`).
    pub fn from_str_with_default(name: &str, text: &str) -> Result<Config, ConfigErrors> {
        let mut errors = Vec::new();
        let mut draft = Draft::default();
        apply_text(&mut draft, DEFAULT_NAME, DEFAULT_TOML, &mut errors);
        apply_text(&mut draft, name, text, &mut errors);
        if !errors.is_empty() {
            return Err(ConfigErrors(errors).in_file_order());
        }
        Config::finish(draft, vec![DEFAULT_NAME.to_string(), name.to_string()])
    }
}

fn dropins(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
            .collect::<Vec<_>>(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    files.sort_unstable();
    Ok(files)
}

/// Refused unread: far above any real config (the default is about 10 KiB),
/// so a wrong path (a log, a core dump) costs neither memory nor parse time.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// One file's text, at most [`MAX_FILE_BYTES`] and UTF-8. The outer error is
/// the I/O failure (the caller judges a missing file), the inner one a file
/// refused for its size or encoding.
pub(super) fn read_text(path: &Path, name: &str) -> std::io::Result<Result<String, ConfigError>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let on_disk = file.metadata()?.len();
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        // A pipe or a device has no size on disk.
        let size = if on_disk > MAX_FILE_BYTES { format!("{on_disk} bytes") } else { "unknown size".into() };
        return Ok(Err(ConfigError::file(name, format!("too large ({size}, limit {MAX_FILE_BYTES})"))));
    }
    Ok(String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let what = match e.utf8_error().error_len() {
            Some(_) => format!("invalid byte 0x{:02x}", e.as_bytes()[at]),
            None => "a sequence cut off at the end of the file".into(),
        };
        let valid = std::str::from_utf8(&e.as_bytes()[..at]).unwrap_or_default();
        ConfigError {
            file: name.to_string(),
            position: Some(super::diagnose::line_col(valid, at)),
            key: None,
            message: format!("not UTF-8: {what}"),
        }
    }))
}
