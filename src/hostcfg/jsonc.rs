//! JSON with comments and trailing commas (VS Code's, Zed's and opencode's
//! config dialect, also accepted by Gemini CLI) made plain JSON for
//! `serde_json`. Hand-written rather than a crate: `json5` brings a parser
//! generator (pest) for a superset we do not need, and the dialect is two
//! rules — comments are blanked, a comma before `}`/`]` is dropped — applied
//! outside strings. Plain JSON passes through unchanged.

/// `text` with `//` and `/* */` comments turned into spaces (newlines kept, so
/// error positions stay right) and trailing commas removed.
pub fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    // Where the last comma outside a string went in `out`, while only
    // whitespace and comments followed it.
    let mut comma: Option<usize> = None;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                comma = None;
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
                out.extend_from_slice(&b[start..i]);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out.push(b' ');
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                out.extend(b[i..end].iter().map(|&c| if c == b'\n' { b'\n' } else { b' ' }));
                i = end;
                continue;
            }
            b',' => comma = Some(out.len()),
            b'}' | b']' => {
                if let Some(c) = comma.take() {
                    out[c] = b' ';
                }
            }
            c if c.is_ascii_whitespace() => {}
            _ => comma = None,
        }
        out.push(b[i]);
        i += 1;
    }
    // Only ASCII was replaced by ASCII, and strings were copied whole.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::strip;

    #[test]
    fn comments_and_trailing_commas_go_strings_stay() {
        let text = "{\n // a comment, with \"quotes\"\n \"a\": \"http://x/*y*/\", /* block\n */ \"b\": [1, 2,],\n \"c\": {\"d\": \"e\\\",\",},\n}";
        let v: serde_json::Value = serde_json::from_str(&strip(text)).unwrap();
        assert_eq!(v["a"], "http://x/*y*/");
        assert_eq!(v["b"], serde_json::json!([1, 2]));
        assert_eq!(v["c"]["d"], "e\",");
        let plain = r#"{"x": [1, {"y": "//z"}]}"#;
        assert_eq!(strip(plain), plain);
        // Unterminated constructs end the text, they do not panic.
        for t in ["{\"a", "/* x", "// x", "\"\\"] {
            let _ = strip(t);
        }
    }
}
