//! A project's manifest (`package.json`, `pyproject.toml`): whether it
//! depends on an MCP SDK, and which entries it declares.

use std::path::{Path, PathBuf};

use super::Lang;

/// A manifest's facts: the SDK dependency, and the entries it declares.
#[derive(Clone, Debug, Default)]
pub struct Manifest {
    pub sdk: Option<String>,
    /// Entry files (package.json `main`, `bin`), relative to its directory.
    pub entries: Vec<PathBuf>,
    /// `[project.scripts]` names and their modules' first component.
    pub scripts: Vec<(String, String)>,
}

/// Whether `script` is an entry its project declares.
pub fn is_entry(m: &Manifest, root: &Path, script: &Path) -> bool {
    use crate::hostcfg::matching::normalize;
    if m.entries.iter().any(|e| normalize(&root.join(e)) == script) {
        return true;
    }
    // A console script: `…/bin/NAME` in the project (its venv), or the
    // module file a script names (`forecast = "forecast:main"` → forecast.py).
    let name = script.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let stem = script.file_stem().and_then(|n| n.to_str()).unwrap_or_default();
    let in_bin = script.parent().and_then(Path::file_name).is_some_and(|b| b == "bin");
    m.scripts.iter().any(|(n, module)| in_bin && n == name || script.parent() == Some(root) && module == stem)
}

/// A manifest's SDK dependency and declared entries; `None` if unparsable.
pub fn manifest(text: &str, lang: Lang) -> Option<Manifest> {
    let mut m = Manifest::default();
    match lang {
        Lang::Js => {
            let v: serde_json::Value = serde_json::from_str(text).ok()?;
            for key in ["dependencies", "devDependencies", "peerDependencies", "optionalDependencies"] {
                let Some(deps) = v.get(key).and_then(serde_json::Value::as_object) else { continue };
                if let Some(d) = ["@modelcontextprotocol/sdk", "fastmcp"].into_iter().find(|d| deps.contains_key(*d)) {
                    m.sdk.get_or_insert_with(|| d.to_string());
                }
            }
            if let Some(main) = v.get("main").and_then(serde_json::Value::as_str) {
                m.entries.push(PathBuf::from(main));
            }
            match v.get("bin") {
                Some(serde_json::Value::String(b)) => m.entries.push(PathBuf::from(b)),
                Some(serde_json::Value::Object(o)) => {
                    m.entries.extend(o.values().filter_map(serde_json::Value::as_str).map(PathBuf::from));
                }
                _ => {}
            }
        }
        Lang::Python => {
            let v: toml::Value = toml::from_str(text).ok()?;
            let project = v.get("project");
            let deps = project.and_then(|p| p.get("dependencies")).and_then(toml::Value::as_array);
            for d in deps.into_iter().flatten().filter_map(toml::Value::as_str) {
                let name: String = d
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                    .collect::<String>()
                    .to_ascii_lowercase();
                if name == "mcp" || name == "fastmcp" {
                    m.sdk.get_or_insert(name);
                }
            }
            let poetry = v.get("tool").and_then(|t| t.get("poetry")).and_then(|p| p.get("dependencies"));
            if let Some(t) = poetry.and_then(toml::Value::as_table)
                && let Some(d) = ["mcp", "fastmcp"].into_iter().find(|d| t.contains_key(*d))
            {
                m.sdk.get_or_insert_with(|| d.to_string());
            }
            let scripts = project.and_then(|p| p.get("scripts")).and_then(toml::Value::as_table);
            for (name, target) in scripts.into_iter().flatten() {
                let module = target.as_str().unwrap_or_default().split([':', '.']).next().unwrap_or_default();
                m.scripts.push((name.clone(), module.to_string()));
            }
        }
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_declare_the_sdk_and_their_entries() {
        let p = manifest(
            "[project]\nname = \"forecast\"\ndependencies = [\"httpx>=0.27\", \"mcp[cli]>=1.2.0\"]\n[project.scripts]\nforecast = \"forecast.main:run\"\n",
            Lang::Python,
        )
        .unwrap();
        assert_eq!(p.sdk.as_deref(), Some("mcp"));
        assert_eq!(p.scripts, vec![("forecast".to_string(), "forecast".to_string())]);
        let n = manifest(
            r#"{"name": "weather", "main": "build/index.js", "bin": {"weather": "./build/index.js"}, "dependencies": {"@modelcontextprotocol/sdk": "^1.20.0", "zod": "^3"}}"#,
            Lang::Js,
        )
        .unwrap();
        assert_eq!(n.sdk.as_deref(), Some("@modelcontextprotocol/sdk"));
        assert!(is_entry(&n, Path::new("/p"), Path::new("/p/build/index.js")));
        assert!(!is_entry(&n, Path::new("/p"), Path::new("/p/scripts/seed.js")));
        assert!(manifest("[project]\ndependencies = [\"mcpx\", \"mcp-proxy\"]\n", Lang::Python).unwrap().sdk.is_none());
        assert!(manifest("{", Lang::Js).is_none());
    }
}
