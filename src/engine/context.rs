//! Which engine a client talks to, as its CLI decides. The docker CLI's
//! order (cli/command/cli.go, `resolveContextName`): `--context`, else
//! `-H` (the default context), else `DOCKER_HOST`, else `DOCKER_CONTEXT`,
//! else the config's `currentContext`, else the default. A context other
//! than `default` names its endpoint in
//! `CONFIG/contexts/meta/<sha256 of the name>/meta.json`; the directories are
//! read instead of hashing the name (a handful of small files). `CONFIG` is
//! `--config DIR`, else `DOCKER_CONFIG`, else `~/.docker` of the client's
//! `HOME` (else its passwd home). Docker Desktop for Linux is such a context
//! (`desktop-linux`, a socket in `~/.docker/desktop/`).
//!
//! Podman takes `--url`/`-H`, else `CONTAINER_HOST`; its named connections
//! (`--connection`, `CONTAINER_CONNECTION`) are remote (ssh) and not read.
//!
//! The files are the client user's: each is read with that user's rights
//! (the path resolved as them, every directory searched as them), only if
//! it is a regular file they own ([`crate::userfile`]); the contexts'
//! directory is listed only if they may list it. Of `config.json`, which
//! also holds credentials, only `currentContext` is parsed out and nothing
//! kept. The endpoint found is then used only if that user could connect to
//! it ([`super::sockets`]).

use std::path::{Path, PathBuf};

use super::EngineKind;
use super::environ;
use super::run_args::RunArgs;
use crate::access::{Cred, Denied};

/// A `config.json` of a few KiB; `meta.json` files are smaller still.
const MAX_CONFIG: u64 = 1 << 20;
const MAX_META: u64 = 64 << 10;
/// Contexts looked at, at most.
const MAX_CONTEXTS: usize = 256;

/// What the client's process offers to find its engine.
pub struct ClientView<'a> {
    pub run: &'a RunArgs,
    pub kind: EngineKind,
    /// `/proc/PID/environ`, raw.
    pub environ: &'a [u8],
    /// Its working directory (a relative `--config`).
    pub cwd: Option<&'a Path>,
    /// Its user: files are read with their rights.
    pub user: &'a Cred,
}

/// The engine address the client uses and where it came from (for reasons:
/// `its argv`, `DOCKER_HOST`, `docker context x`); `None` for the default
/// engine; `Err` when the client names a context that cannot be read.
pub fn address(c: &ClientView<'_>) -> Result<Option<(String, String)>, String> {
    let var = |name: &str| environ::var(c.environ, name);
    if c.kind == EngineKind::Podman {
        let from_env = || environ::host(c.environ, c.kind).map(|h| (h, environ::host_var(c.kind).to_string()));
        return Ok(c.run.host.clone().map(|h| (h, "its argv".into())).or_else(from_env));
    }
    // The steps that read the user's files.
    let files = || -> Result<PathBuf, String> {
        config_dir(c).ok_or_else(|| "the docker CLI's config directory is unknown".into())
    };
    if let Some(name) = &c.run.context {
        return endpoint(&files()?, name, c.user);
    }
    if let Some(h) = &c.run.host {
        return Ok(Some((h.clone(), "its argv".into())));
    }
    if let Some(h) = var("DOCKER_HOST") {
        return Ok(Some((h, "DOCKER_HOST".into())));
    }
    let dir = files()?;
    match var("DOCKER_CONTEXT").map_or_else(|| current_context(&dir, c.user), |name| Ok(Some(name)))? {
        Some(name) => endpoint(&dir, &name, c.user),
        None => Ok(None),
    }
}

/// The endpoint of context `name` in config directory `dir`; `None` for
/// `default`.
fn endpoint(dir: &Path, name: &str, user: &Cred) -> Result<Option<(String, String)>, String> {
    if name == "default" {
        return Ok(None);
    }
    let from = format!("docker context {name}");
    find_endpoint(dir, name, user)?
        .map(|h| Some((h, from.clone())))
        .ok_or_else(|| format!("{from} is not in {}", dir.join("contexts/meta").display()))
}

/// `--config DIR`, else `DOCKER_CONFIG`, else `.docker` in `HOME` (else the
/// passwd home of its user); relative to the client's working directory.
fn config_dir(c: &ClientView<'_>) -> Option<PathBuf> {
    let var = |name: &str| environ::var(c.environ, name).map(PathBuf::from);
    let dir = c.run.config_dir.clone().or_else(|| var("DOCKER_CONFIG")).or_else(|| {
        var("HOME")
            .filter(|h| h.is_absolute())
            .or_else(|| crate::userfile::passwd_home(c.user.uid))
            .map(|h| h.join(".docker"))
    })?;
    if dir.is_absolute() { Some(dir) } else { c.cwd.map(|cwd| cwd.join(dir)) }
}

/// `currentContext` of `dir/config.json`; `None` when the file or the key
/// is missing, or when the user may not read the file (the docker CLI then
/// warns and goes on with the default).
fn current_context(dir: &Path, user: &Cred) -> Result<Option<String>, String> {
    #[derive(serde::Deserialize)]
    struct Config {
        #[serde(rename = "currentContext")]
        current: Option<String>,
    }
    let path = dir.join("config.json");
    let bytes = match crate::userfile::read_as(&path, user, MAX_CONFIG) {
        Ok(b) => b,
        Err(Denied::Missing(_)) => return Ok(None),
        Err(Denied::Refused(e)) => {
            tracing::debug!("{} not read for uid {}: {e}", path.display(), user.uid);
            return Ok(None);
        }
    };
    // Where, not what: serde's messages can quote the file.
    let cfg: Config = serde_json::from_slice(&bytes).map_err(|e| {
        format!("{}: not a docker CLI config (line {}, column {})", path.display(), e.line(), e.column())
    })?;
    Ok(cfg.current.filter(|n| !n.is_empty()))
}

/// The docker endpoint of the context called `name` in `dir/contexts/meta`.
fn find_endpoint(dir: &Path, name: &str, user: &Cred) -> Result<Option<String>, String> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "Name")]
        name: String,
        #[serde(rename = "Endpoints", default)]
        endpoints: Endpoints,
    }
    #[derive(serde::Deserialize, Default)]
    struct Endpoints {
        docker: Option<Endpoint>,
    }
    #[derive(serde::Deserialize)]
    struct Endpoint {
        #[serde(rename = "Host")]
        host: Option<String>,
    }
    let meta = dir.join("contexts/meta");
    let entries = match crate::userfile::list_dir(&meta, user, MAX_CONTEXTS) {
        Ok(e) => e,
        Err(Denied::Missing(_)) => return Ok(None),
        Err(Denied::Refused(e)) => return Err(format!("{}: {e}", meta.display())),
    };
    for e in entries {
        let Ok(bytes) = crate::userfile::read_as(&meta.join(e).join("meta.json"), user, MAX_META) else { continue };
        let Ok(m) = serde_json::from_slice::<Meta>(&bytes) else { continue };
        if m.name == name {
            return Ok(m.endpoints.docker.and_then(|d| d.host));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'a>(run: &'a RunArgs, environ: &'a [u8]) -> ClientView<'a> {
        let me: &'static Cred = Box::leak(Box::new(Cred::of_user(rustix::process::geteuid().as_raw())));
        ClientView { run, kind: EngineKind::Docker, environ, cwd: None, user: me }
    }

    /// `HOME=home` first, then `env`.
    fn with_home(home: &Path, env: &[u8]) -> Vec<u8> {
        let mut e = format!("HOME={}\0", home.display()).into_bytes();
        e.extend_from_slice(env);
        e
    }

    fn context(dir: &Path, hash: &str, name: &str, host: &str) {
        let d = dir.join("contexts/meta").join(hash);
        std::fs::create_dir_all(&d).unwrap();
        let meta = format!(r#"{{"Name":"{name}","Metadata":{{}},"Endpoints":{{"docker":{{"Host":"{host}"}}}}}}"#);
        std::fs::write(d.join("meta.json"), meta).unwrap();
    }

    #[test]
    fn the_docker_clis_order() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".docker");
        context(&dir, "aa", "desktop-linux", "unix:///home/u/.docker/desktop/docker.sock");
        context(&dir, "bb", "other", "unix:///run/other.sock");
        std::fs::write(
            dir.join("config.json"),
            r#"{"auths":{"x":{"auth":"c2VjcmV0"}},"currentContext":"desktop-linux"}"#,
        )
        .unwrap();
        let plain = RunArgs::parse(&["docker".into(), "run".into(), "-i".into(), "img".into()]).unwrap();
        let at = |run: &RunArgs, env: &[u8]| {
            address(&view(run, &with_home(home.path(), env))).map(|a| a.map(|(h, f)| format!("{h} ({f})")))
        };
        // The config's current context.
        assert_eq!(
            at(&plain, b"").unwrap().as_deref(),
            Some("unix:///home/u/.docker/desktop/docker.sock (docker context desktop-linux)")
        );
        // DOCKER_CONTEXT before it; DOCKER_HOST before that; `default` is the default engine.
        assert_eq!(
            at(&plain, b"DOCKER_CONTEXT=other\0").unwrap().as_deref(),
            Some("unix:///run/other.sock (docker context other)")
        );
        assert_eq!(
            at(&plain, b"DOCKER_CONTEXT=other\0DOCKER_HOST=unix:///h.sock\0").unwrap().as_deref(),
            Some("unix:///h.sock (DOCKER_HOST)")
        );
        assert_eq!(at(&plain, b"DOCKER_CONTEXT=default\0").unwrap(), None);
        // Argv: -H before the environment, --context before all.
        let argv = |w: &[&str]| RunArgs::parse(&w.iter().map(ToString::to_string).collect::<Vec<_>>()).unwrap();
        let h = argv(&["docker", "-H", "unix:///a.sock", "run", "-i", "img"]);
        assert_eq!(at(&h, b"DOCKER_HOST=unix:///h.sock\0").unwrap().as_deref(), Some("unix:///a.sock (its argv)"));
        let c = argv(&["docker", "--context", "other", "run", "-i", "img"]);
        assert_eq!(
            at(&c, b"DOCKER_HOST=unix:///h.sock\0").unwrap().as_deref(),
            Some("unix:///run/other.sock (docker context other)")
        );
        // A context that is not there is said so.
        let missing = argv(&["docker", "-c", "gone", "run", "-i", "img"]);
        assert!(at(&missing, b"").unwrap_err().contains("docker context gone is not in"));
        // `--config DIR` and DOCKER_CONFIG move the directory.
        let elsewhere = home.path().join("cfg2");
        context(&elsewhere, "cc", "third", "unix:///third.sock");
        let env = format!("DOCKER_CONFIG={}\0DOCKER_CONTEXT=third\0", elsewhere.display());
        assert_eq!(at(&plain, env.as_bytes()).unwrap().as_deref(), Some("unix:///third.sock (docker context third)"));
        // Podman reads none of it.
        let p = RunArgs::parse(&["podman".into(), "run".into(), "-i".into(), "img".into()]).unwrap();
        let env = with_home(home.path(), b"DOCKER_CONTEXT=other\0");
        let v = ClientView { kind: EngineKind::Podman, ..view(&p, &env) };
        assert_eq!(address(&v).unwrap(), None);
    }

    #[test]
    fn files_of_someone_else_are_not_read() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".docker");
        context(&dir, "aa", "x", "unix:///x.sock");
        let run =
            RunArgs::parse(&["docker".into(), "--context".into(), "x".into(), "run".into(), "img".into()]).unwrap();
        let env = with_home(home.path(), b"");
        let other = rustix::process::geteuid().as_raw() + 1;
        let other = Cred { uid: other, gid: other, groups: Vec::new() };
        let v = ClientView { user: &other, ..view(&run, &env) };
        assert!(address(&v).is_err(), "another uid's context was used");
        // No config at all: the default engine.
        let none = RunArgs::parse(&["docker".into(), "run".into(), "img".into()]).unwrap();
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(address(&view(&none, &with_home(empty.path(), b""))).unwrap(), None);
    }
}
