//! TOML diagnostics in a user's words: byte offsets as line:column, a
//! misspelled key's nearest name ("did you mean"), serde's type names as
//! TOML's, and a place for the rare syntax error toml reports without one.

use super::keys::SECTIONS;

/// Byte offset → 1-based (line, column in characters).
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    // Editors do not show a byte order mark: it takes no column.
    let bom = usize::from(line == 1 && before.starts_with('\u{feff}'));
    (line, col - bom)
}

/// "; did you mean …?" for a misspelled key, or where a key of another
/// section belongs (`section`: where it was found; `None` at the top level).
pub(super) fn unknown_key_hint(name: &str, candidates: &[&str], section: Option<&str>) -> String {
    if let Some(close) = candidates.iter().find(|c| edit_distance(name, c) <= 2) {
        return format!("; did you mean `{close}`?");
    }
    match SECTIONS.iter().find(|(s, keys)| Some(*s) != section && keys.contains(&name)) {
        Some((s, _)) => format!("; `{name}` belongs in [{s}]"),
        None => String::new(),
    }
}

/// Levenshtein distance, for short key names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// Serde's type names in a type error, in TOML's words (a datetime shows as a
/// "map" to serde).
pub(super) fn toml_type_names(message: &str, datetime: Option<&str>) -> String {
    let found = match datetime {
        Some(d) => format!("invalid type: datetime `{d}`"),
        None => "invalid type: table".into(),
    };
    message
        .replace("invalid type: map", &found)
        .replace("invalid type: sequence", "invalid type: array")
        .replace("invalid type: floating point", "invalid type: float")
        .replace("expected a sequence", "expected an array")
        .replace("expected i128", "expected an integer")
        .replace("expected f64", "expected a number")
        .replace("expected path string", "expected a string")
}

/// Where the first syntax error without a span is. toml 0.9 reports a dotted
/// key of 80 or more parts ("recursion limit") without one: the first line
/// whose prefix of the text already gives such an error, at its first
/// non-blank character. Only hostile input gets here, and it costs a parse per
/// halving of the line count. Later spanless errors are shown at the same place.
pub(super) fn first_spanless_error(text: &str) -> std::ops::Range<usize> {
    let spanless = |end: usize| toml::de::DeTable::parse_recoverable(&text[..end]).1.iter().any(|e| e.span().is_none());
    let ends: Vec<usize> = text.match_indices('\n').map(|(i, _)| i).chain([text.len()]).collect();
    let end = ends.get(ends.partition_point(|&end| !spanless(end))).copied().unwrap_or(text.len());
    let start = text[..end].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[start..end];
    let at = start + line.len() - line.trim_start().len();
    at..at
}
