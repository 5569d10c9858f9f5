//! A Python server whose entry shows no MCP import itself: a console-script
//! entry point (`.venv/bin/weather`: `from weather.server import main`) or
//! a script that imports its own module (`.venv/bin/python weather.py` with
//! `from weather_app import serve`), run by a virtual environment.
//!
//! A venv with `mcp/server/` in its site-packages says only that `mcp` is
//! installed: the `mcp` package always ships both halves, so a client's venv
//! has it too. Not enough alone, and kept. What makes it conclusive is the
//! same word as a script's own: the modules its entry imports — found in
//! the script's directory, the venv's site-packages and the directories its
//! `.pth` files add (an editable install's source) — import the server half,
//! and none imports the client half. Followed two imports deep, at most
//! [`MAX_FILES`] files of [`super::MAX_SCRIPT`] each; the SDK's own packages
//! are never followed (they hold both halves).

use std::path::{Path, PathBuf};

use rustix::fs::FileType;

use super::{Evidence, Lang, Says, SdkCache, is_file_as, kind_as};
use crate::access::Cred;

/// Module files read for one entry.
pub const MAX_FILES: usize = 8;
const MAX_PTH: usize = 16;

impl SdkCache {
    /// The server evidence of `script` (run by `interp`) through its venv.
    pub(super) fn through_venv(&mut self, interp: &Path, script: &Path, cred: &Cred) -> Option<Evidence> {
        let root = venv_root(interp, script, cred)?;
        let site = site_packages(&root, cred);
        let sdk = site.iter().find_map(|s| server_sdk(s, cred))?;
        let mut roots = vec![script.parent()?.to_path_buf()];
        roots.extend(site.iter().flat_map(|s| pth_dirs(s, cred)));
        roots.extend(site);
        let mut queue: Vec<(String, u8)> = Vec::new();
        let from = |file: &Path, module: Option<&str>, depth: u8, queue: &mut Vec<(String, u8)>| {
            let text = crate::userfile::read_as(file, cred, super::MAX_SCRIPT).ok()?;
            let package = module.map(|m| package_of(m, file));
            for name in imports(&String::from_utf8_lossy(&text)) {
                if let Some(abs) = absolute(&name, package.as_deref()) {
                    queue.push((abs, depth));
                }
            }
            Some(())
        };
        from(script, None, 1, &mut queue);
        let mut seen = Vec::new();
        while let Some((module, depth)) = (!queue.is_empty()).then(|| queue.remove(0)) {
            let top = module.split('.').next().unwrap_or_default();
            if seen.len() >= MAX_FILES || seen.contains(&module) || top == "mcp" || top == "fastmcp" {
                continue;
            }
            let Some(file) = roots.iter().find_map(|r| module_file(r, &module, cred)) else { continue };
            seen.push(module.clone());
            match self.says(&file, Lang::Python, cred) {
                Says::Client => return None,
                Says::Server(found) => {
                    let file = file.display().to_string();
                    return Some(Evidence { kind: "venv", found, file, via: Some(format!("{sdk} {module}")) });
                }
                Says::Nothing if depth < 2 => {
                    from(&file, Some(&module), depth + 1, &mut queue);
                }
                Says::Nothing => {}
            }
        }
        None
    }
}

fn exists_as(path: &Path, cred: &Cred, dir: bool) -> bool {
    kind_as(path, cred).is_some_and(|t| (t == FileType::Directory) == dir)
}

/// The venv whose interpreter runs it (`V/bin/python`), or whose `bin`
/// holds the console script: the directory with a `pyvenv.cfg`.
fn venv_root(interp: &Path, script: &Path, cred: &Cred) -> Option<PathBuf> {
    [interp, script]
        .into_iter()
        .filter_map(|p| p.parent().filter(|b| b.file_name().is_some_and(|n| n == "bin"))?.parent())
        .find(|v| exists_as(&v.join("pyvenv.cfg"), cred, false))
        .map(Path::to_path_buf)
}

/// `V/lib/python3.*/site-packages`.
fn site_packages(root: &Path, cred: &Cred) -> Vec<PathBuf> {
    let lib = root.join("lib");
    let names = crate::userfile::list_dir(&lib, cred, 64).unwrap_or_default();
    names
        .iter()
        .filter(|n| n.to_string_lossy().starts_with("python"))
        .take(4)
        .map(|n| lib.join(n).join("site-packages"))
        .filter(|s| exists_as(s, cred, true))
        .collect()
}

/// The server SDK installed there.
fn server_sdk(site: &Path, cred: &Cred) -> Option<&'static str> {
    [("mcp/server", "mcp.server"), ("fastmcp", "fastmcp")]
        .into_iter()
        .find(|(d, _)| exists_as(&site.join(d), cred, true))
        .map(|(_, name)| name)
}

/// Directories the `.pth` files of `site` add (editable installs).
fn pth_dirs(site: &Path, cred: &Cred) -> Vec<PathBuf> {
    let names = crate::userfile::list_dir(site, cred, 4096).unwrap_or_default();
    let pth = names.iter().filter(|n| n.to_string_lossy().ends_with(".pth")).take(MAX_PTH);
    pth.filter_map(|n| crate::userfile::read_as(&site.join(n), cred, 4096).ok())
        .flat_map(|b| {
            let text = String::from_utf8_lossy(&b).into_owned();
            text.lines().map(str::trim).filter(|l| l.starts_with('/')).map(PathBuf::from).collect::<Vec<_>>()
        })
        .take(MAX_PTH)
        .collect()
}

/// `a.b` in `root`: `a/b.py` or `a/b/__init__.py`, as `cred`'s user finds it.
fn module_file(root: &Path, module: &str, cred: &Cred) -> Option<PathBuf> {
    if module.is_empty() || module.split('.').any(|c| c.is_empty() || c.contains('/')) {
        return None;
    }
    let rel: PathBuf = module.split('.').collect();
    [root.join(&rel).with_extension("py"), root.join(rel).join("__init__.py")].into_iter().find(|f| is_file_as(f, cred))
}

/// The package a module's relative imports are relative to.
fn package_of(module: &str, file: &Path) -> String {
    if file.file_name().is_some_and(|n| n == "__init__.py") {
        return module.to_string();
    }
    module.rsplit_once('.').map_or_else(String::new, |(p, _)| p.to_string())
}

/// A relative import (`.server`, `..util`) made absolute in `package`.
fn absolute(name: &str, package: Option<&str>) -> Option<String> {
    let dots = name.len() - name.trim_start_matches('.').len();
    if dots == 0 {
        return Some(name.to_string());
    }
    let mut base: Vec<&str> = package?.split('.').filter(|c| !c.is_empty()).collect();
    for _ in 1..dots {
        base.pop()?;
    }
    base.push(&name[dots..]);
    Some(base.join("."))
}

/// The modules a Python file imports (`from . import x` as `.x`), by its
/// import statements only ([`super::python`]).
fn imports(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for i in super::python::imports(text) {
        if i.module.bytes().all(|c| c == b'.') {
            out.extend(i.names.iter().filter(|n| *n != "*").map(|n| format!("{}{n}", i.module)));
        } else {
            out.push(i.module);
        }
    }
    out.truncate(32);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_and_their_modules() {
        let text = "import sys, json as j\nfrom weather.server import main\nfrom . import (tools,\n    x)\nfrom .app import serve\n# import nope\n";
        assert_eq!(imports(text), ["sys", "json", "weather.server", ".tools", ".x", ".app"]);
        assert_eq!(absolute(".app", Some("weather")).as_deref(), Some("weather.app"));
        assert_eq!(absolute("..util", Some("weather.server")).as_deref(), Some("weather.util"));
        assert_eq!(absolute(".app", None), None);
        assert_eq!(package_of("weather", Path::new("/s/weather/__init__.py")), "weather");
        assert_eq!(package_of("weather.server", Path::new("/s/weather/server.py")), "weather");
        assert_eq!(module_file(Path::new("/"), "../etc", &Cred::of_user(0)), None);
    }

    #[test]
    fn an_import_in_a_string_or_a_comment_is_none() {
        let text = "DOC = \"\"\"\nfrom weather.server import main\n\"\"\"\nhint = 'import forecast'\nfrom . import (  # the tools\n    tools,\n)\nimport os; import app.core as core\n";
        assert_eq!(imports(text), [".tools", "os", "app.core"]);
    }
}
