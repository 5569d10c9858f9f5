//! One file as a layer: parsed with every problem collected (all syntax
//! errors, then each unknown key and each wrongly typed value, one key at a
//! time so one bad value does not hide the next), then checked key by key
//! onto the draft the layers before it made.

use toml::Spanned;

use super::ConfigError;
use super::diagnose::{first_spanless_error, line_col, toml_type_names, unknown_key_hint};
use super::keys::{self, Draft, FileLayer, SECTIONS};

/// The file being checked, and where its problems go.
pub(super) struct Layer<'a> {
    name: &'a str,
    text: &'a str,
    errors: &'a mut Vec<ConfigError>,
    /// The embedded default itself: its patterns are known to compile
    /// (tested), so checking it compiles none (see [`crate::compiled`]).
    embedded: bool,
}

impl Layer<'_> {
    pub(super) fn is_embedded(&self) -> bool {
        self.embedded
    }

    pub(super) fn err(&mut self, span: std::ops::Range<usize>, key: String, message: String) {
        self.errors.push(ConfigError {
            file: self.name.to_string(),
            position: Some(line_col(self.text, span.start)),
            key: Some(key),
            message,
        });
    }
}

/// Parses `text` (the file `name`) and applies the keys it sets to `draft`.
pub(super) fn apply_text(draft: &mut Draft, name: &str, text: &str, errors: &mut Vec<ConfigError>) {
    let Some(file) = parse_layer(name, text, errors) else { return };
    let embedded = name == super::sources::DEFAULT_NAME && text == super::sources::DEFAULT_TOML;
    keys::apply(draft, file, &mut Layer { name, text, errors, embedded });
}

/// Parses one file, collecting every problem (see the module comment).
fn parse_layer(name: &str, text: &str, errors: &mut Vec<ConfigError>) -> Option<FileLayer> {
    use toml::de::{DeTable, DeValue, Deserializer};
    let mut push = |span: Option<std::ops::Range<usize>>, key: Option<String>, message: String| {
        errors.push(ConfigError {
            file: name.to_string(),
            position: span.map(|s| line_col(text, s.start)),
            key,
            message: message.trim().to_string(),
        });
    };
    let (doc, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        let mut spanless = None;
        for e in syntax {
            let span = e.span().or_else(|| Some(spanless.get_or_insert_with(|| first_spanless_error(text)).clone()));
            push(span, None, e.message().to_string());
        }
        return None;
    }
    let mut layer = FileLayer::default();
    for (key, value) in doc.into_inner() {
        let section = key.get_ref().to_string();
        let Some(&(_, known)) = SECTIONS.iter().find(|(s, _)| *s == section) else {
            let names: Vec<&str> = SECTIONS.iter().map(|(s, _)| *s).collect();
            let what = if matches!(value.get_ref(), DeValue::Table(_)) { "section" } else { "top-level key" };
            push(
                Some(key.span()),
                None,
                format!(
                    "unknown {what} `{section}`, expected one of {}{}",
                    names.join(", "),
                    unknown_key_hint(&section, &names, None)
                ),
            );
            continue;
        };
        let span = value.span();
        let DeValue::Table(table) = value.into_inner() else {
            push(Some(span), Some(section), "must be a table".into());
            continue;
        };
        for (k, v) in table {
            let kname = k.get_ref().to_string();
            let path = format!("{section}.{kname}");
            if !known.contains(&kname.as_str()) {
                push(
                    Some(k.span()),
                    None,
                    format!(
                        "unknown field `{kname}` in [{section}], expected one of {}{}",
                        known.join(", "),
                        unknown_key_hint(&kname, known, Some(&section))
                    ),
                );
                continue;
            }
            let vspan = v.span();
            let datetime = match v.get_ref() {
                DeValue::Datetime(d) => Some(d.to_string()),
                _ => None,
            };
            let mut one = DeTable::new();
            one.insert(k, v);
            let de = Deserializer::from(Spanned::new(vspan.clone(), one));
            let res = keys::read_key(&mut layer, &section, de);
            if let Err(e) = res {
                push(e.span().or(Some(vspan)), Some(path), toml_type_names(e.message(), datetime.as_deref()));
            }
        }
    }
    Some(layer)
}
