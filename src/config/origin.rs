//! Where each effective value comes from (`reaperctl config`): the layers
//! [`Config::load`] used, read again in its order, each key's value taken
//! from the last layer that sets it, as the merge does (key by key, a later
//! layer's value replacing an earlier one's whole).

use std::path::Path;

use super::Config;
use super::diagnose::line_col;
use super::keys::SECTIONS;
use super::sources::{DEFAULT_NAME, DEFAULT_TOML, read_text};

/// One key as the merged config has it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Setting {
    pub section: &'static str,
    pub key: &'static str,
    /// `None`: no layer sets it (an optional key: its built-in default holds).
    pub value: Option<toml::Value>,
    /// The layer that set it: a file, or the embedded default.
    pub from: Option<String>,
    /// Its line there.
    pub line: Option<usize>,
}

/// Every key, in the order of the sections and keys of mcp-reaper.toml(5).
pub fn settings(cfg: &Config) -> Vec<Setting> {
    let mut out: Vec<Setting> = SECTIONS
        .iter()
        .flat_map(|&(section, keys)| {
            keys.iter().map(move |&key| Setting { section, key, value: None, from: None, line: None })
        })
        .collect();
    for name in &cfg.sources {
        let text = if name == DEFAULT_NAME {
            DEFAULT_TOML.to_string()
        } else {
            // Read and checked a moment ago by Config::load.
            match read_text(Path::new(name), name) {
                Ok(Ok(t)) => t,
                _ => continue,
            }
        };
        let Ok(table) = text.parse::<toml::Table>() else { continue };
        for s in &mut out {
            let Some(v) = table.get(s.section).and_then(|t| t.get(s.key)) else { continue };
            s.value = Some(v.clone());
            s.from = Some(name.clone());
            s.line = key_line(&text, s.section, s.key);
        }
    }
    out
}

/// The line of `key` in `[section]` (the first one; spans from the parser).
fn key_line(text: &str, section: &str, key: &str) -> Option<usize> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let (_, sect) = doc.get_ref().iter().find(|(k, _)| k.get_ref() == section)?;
    let toml::de::DeValue::Table(t) = sect.get_ref() else { return None };
    let (k, _) = t.iter().find(|(k, _)| k.get_ref() == key)?;
    Some(line_col(text, k.span().start).0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_layer_names_itself_and_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("config.toml");
        std::fs::write(&main, "[reaper]\n\n# why\ngrace_secs = 5\n").unwrap();
        std::fs::create_dir(dir.path().join("config.d")).unwrap();
        std::fs::write(dir.path().join("config.d/10-mode.toml"), "[reaper]\nmode = \"enforce\"\n").unwrap();
        let cfg = Config::load(&super::super::Sources::explicit(&main)).unwrap();
        let all = settings(&cfg);
        let get = |k: &str| all.iter().find(|s| format!("{}.{}", s.section, s.key) == k).unwrap().clone();
        let grace = get("reaper.grace_secs");
        assert_eq!(grace.value, Some(toml::Value::Integer(5)));
        assert_eq!((grace.from.as_deref(), grace.line), (Some(main.to_str().unwrap()), Some(4)));
        let mode = get("reaper.mode");
        assert_eq!(mode.value, Some(toml::Value::String("enforce".into())));
        assert!(mode.from.unwrap().ends_with("config.d/10-mode.toml"));
        let interval = get("reaper.interval_secs");
        assert_eq!(interval.from.as_deref(), Some(DEFAULT_NAME));
        assert_eq!(interval.value, Some(toml::Value::Integer(i64::try_from(cfg.interval_secs).unwrap())));
        assert_eq!(all.len(), SECTIONS.iter().map(|(_, k)| k.len()).sum::<usize>());
    }
}
