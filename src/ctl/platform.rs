//! Which platform `reaperctl doctor` runs on: WSL2 (with or without systemd),
//! a container and its PID 1, toolbox or distrobox, or a plain host and its
//! init. Each platform puts orphans somewhere else, and starts the daemon
//! another way (docs/install.md).
//!
//! Everything is read below a root directory (`/` for real, a fixture tree
//! in tests) plus an environment lookup; nothing is probed or signalled, and
//! whatever cannot be read is left out rather than guessed.

use std::path::{Path, PathBuf};

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Wsl2,
    /// WSL 1: a translation layer, not a Linux kernel.
    Wsl1,
    Toolbox,
    Distrobox,
    Container,
    Host,
}

/// PID 1 as `/proc/1` shows it; `None` where it could not be read (another
/// user's `exe` needs privileges, hidepid hides it all).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Pid1 {
    pub comm: Option<String>,
    pub exe: Option<String>,
    pub cmdline: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Platform {
    pub kind: Kind,
    /// Whether systemd runs as PID 1 (its comm, or `/run/systemd/system`).
    pub systemd: bool,
    /// WSL: the distribution (`WSL_DISTRO_NAME`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distro: Option<String>,
    /// A container's engine or runtime, as its markers name it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// A container's name, where its markers give one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub pid1: Pid1,
    /// The files and variables the verdict rests on, e.g. `/.dockerenv`.
    pub evidence: Vec<String>,
}

/// Environment variables looked at, by name.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The platform seen from `root` (`/` on the machine) with `env` as this
/// process's environment.
pub fn detect(root: &Path, env: Env<'_>) -> Platform {
    let r = Root(root);
    let pid1 = Pid1 {
        comm: r.line("proc/1/comm"),
        exe: std::fs::read_link(r.path("proc/1/exe")).ok().map(|p| p.display().to_string()),
        cmdline: r
            .read("proc/1/cmdline")
            .map(|c| c.trim_end_matches('\0').replace('\0', " "))
            .filter(|c| !c.is_empty()),
    };
    let systemd = pid1.comm.as_deref() == Some("systemd") || r.path("run/systemd/system").is_dir();
    let mut p =
        Platform { kind: Kind::Host, systemd, distro: None, engine: None, name: None, pid1, evidence: Vec::new() };
    // A container's markers come first: a container on a WSL2 machine (Docker
    // Desktop's backend) runs on WSL2's kernel, yet its processes are the
    // container's, and WSL's /init is not there.
    if !container(&r, env, &mut p) {
        wsl(&r, env, &mut p);
    }
    p
}

/// WSL by its kernel's name: WSL2's says `microsoft-standard-WSL2` (older
/// ones `microsoft-standard`), WSL 1's `Microsoft`; `/run/WSL` and
/// `WSL_DISTRO_NAME` confirm it.
fn wsl(r: &Root<'_>, env: Env<'_>, p: &mut Platform) {
    let release = r.line("proc/sys/kernel/osrelease").or_else(|| r.line("proc/version")).unwrap_or_default();
    let kernel = release.to_ascii_lowercase().contains("microsoft");
    let distro = env("WSL_DISTRO_NAME").filter(|d| !d.is_empty());
    let run_wsl = r.path("run/WSL").is_dir();
    if !kernel && distro.is_none() && !run_wsl {
        return;
    }
    if kernel {
        p.evidence.push(format!("kernel {release}"));
    }
    if run_wsl {
        p.evidence.push("/run/WSL".into());
    }
    if let Some(d) = &distro {
        p.evidence.push(format!("WSL_DISTRO_NAME={d}"));
    }
    // WSL 1 has no Linux kernel of its own: its release names Microsoft
    // without "standard" (`4.4.0-19041-Microsoft`).
    let lower = release.to_ascii_lowercase();
    p.kind = if kernel && !lower.contains("wsl2") && !lower.contains("microsoft-standard") {
        Kind::Wsl1
    } else {
        Kind::Wsl2
    };
    p.distro = distro;
}

/// A container by the markers engines leave (what systemd-detect-virt
/// reads): `/run/.toolboxenv`, distrobox's tools, `/run/.containerenv`
/// (podman; `engine=` and `name=` inside), `/.dockerenv`, PID 1's
/// `container=`, `/run/systemd/container`, a Kubernetes service host, and
/// PID 1's cgroup path. Whether it found one.
fn container(r: &Root<'_>, env: Env<'_>, p: &mut Platform) -> bool {
    let mut engine: Option<String> = None;
    let mut kind = None;
    if r.path("run/.toolboxenv").exists() {
        p.evidence.push("/run/.toolboxenv".into());
        kind = Some(Kind::Toolbox);
    }
    for tool in ["usr/bin/distrobox-export", "usr/bin/distrobox-host-exec"] {
        if kind.is_none() && r.path(tool).exists() {
            p.evidence.push(format!("/{tool}"));
            kind = Some(Kind::Distrobox);
        }
    }
    if kind.is_none() && env("DISTROBOX_ENTER_PATH").is_some() {
        p.evidence.push("DISTROBOX_ENTER_PATH".into());
        kind = Some(Kind::Distrobox);
    }
    if let Some(text) = r.read("run/.containerenv") {
        p.evidence.push("/run/.containerenv".into());
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .map(|v| v.trim().trim_matches('"').to_string())
                .filter(|v| !v.is_empty())
        };
        // `engine="podman-4.9.3"`: the engine's name without its version.
        engine =
            Some(field("engine").map_or_else(|| "podman".into(), |e| e.split('-').next().unwrap_or(&e).to_string()));
        p.name = field("name");
    }
    if r.path(".dockerenv").exists() {
        p.evidence.push("/.dockerenv".into());
        engine.get_or_insert_with(|| "docker".into());
    }
    let pid1_container = r
        .read("proc/1/environ")
        .and_then(|e| e.split('\0').find_map(|v| v.strip_prefix("container=").map(str::to_string)))
        .filter(|c| !c.is_empty());
    if let Some(c) = pid1_container {
        p.evidence.push(format!("PID 1's container={c}"));
        engine.get_or_insert(c);
    }
    if let Some(c) = r.line("run/systemd/container") {
        p.evidence.push(format!("/run/systemd/container ({c})"));
        engine.get_or_insert(c);
    }
    if env("KUBERNETES_SERVICE_HOST").is_some() {
        p.evidence.push("KUBERNETES_SERVICE_HOST".into());
        engine.get_or_insert_with(|| "kubernetes".into());
    }
    if let Some(hint) = r.read("proc/1/cgroup").as_deref().and_then(cgroup_hint) {
        p.evidence.push(format!("PID 1's cgroup ({hint})"));
        engine.get_or_insert_with(|| hint.into());
    }
    if kind.is_some() {
        engine.get_or_insert_with(|| "podman".into());
    }
    if engine.is_none() && kind.is_none() {
        return false;
    }
    p.kind = kind.unwrap_or(Kind::Container);
    p.engine = engine;
    true
}

/// The engine a cgroup path names, where it names one (a cgroup namespace
/// shows only `/`).
fn cgroup_hint(text: &str) -> Option<&'static str> {
    let has = |w: &str| text.lines().any(|l| l.rsplit(':').next().is_some_and(|path| path.contains(w)));
    [("kubepods", "kubernetes"), ("libpod", "podman"), ("docker", "docker"), ("/lxc", "lxc")]
        .into_iter()
        .find_map(|(w, engine)| has(w).then_some(engine))
}

struct Root<'a>(&'a Path);

impl Root<'_> {
    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read(self.path(rel)).ok().map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// The first line, trimmed; `None` when missing or empty.
    fn line(&self, rel: &str) -> Option<String> {
        self.read(rel).and_then(|t| t.lines().next().map(|l| l.trim().to_string())).filter(|l| !l.is_empty())
    }
}

impl Platform {
    /// PID 1 in a few words: `tini (/sbin/tini -- sleep infinity)`.
    pub fn pid1_words(&self) -> String {
        let name = self.pid1.comm.clone().unwrap_or_else(|| "unreadable".into());
        match self.pid1.cmdline.as_deref().or(self.pid1.exe.as_deref()) {
            Some(cmd) if cmd != name => format!("{name} ({})", crate::names::printable(&shorten(cmd))),
            _ => name,
        }
    }

    /// What was found, in one line.
    pub fn summary(&self) -> String {
        let on = |what: String| format!("{what}, PID 1 {}; from {}", self.pid1_words(), self.evidence.join(", "));
        match self.kind {
            Kind::Wsl2 | Kind::Wsl1 => {
                let v = if self.kind == Kind::Wsl2 { "WSL2" } else { "WSL 1" };
                let distro = self.distro.as_ref().map(|d| format!(" ({d})")).unwrap_or_default();
                let systemd = if self.systemd { "with systemd (systemd=true)" } else { "without systemd" };
                on(format!("{v}{distro} {systemd}"))
            }
            Kind::Toolbox | Kind::Distrobox => {
                let what = if self.kind == Kind::Toolbox { "toolbox" } else { "distrobox" };
                on(format!("{what} container{}", self.named()))
            }
            Kind::Container => {
                on(format!("container ({}){}", self.engine.as_deref().unwrap_or("unknown engine"), self.named()))
            }
            Kind::Host if self.systemd => format!("host with systemd as PID 1 ({})", self.pid1_words()),
            Kind::Host => format!("host without systemd, PID 1 {}", self.pid1_words()),
        }
    }

    fn named(&self) -> String {
        self.name.as_ref().map(|n| format!(" {n}")).unwrap_or_default()
    }
}

/// A command line cut to a readable length.
fn shorten(cmd: &str) -> String {
    const MAX: usize = 60;
    if cmd.chars().count() <= MAX {
        cmd.to_string()
    } else {
        format!("{}…", cmd.chars().take(MAX).collect::<String>())
    }
}

#[cfg(test)]
#[path = "platform_tests.rs"]
mod tests;
