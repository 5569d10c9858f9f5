//! `reaperctl doctor`: whether this machine gives the reaper what it needs,
//! and for each part that is missing, what that costs. It reads and probes;
//! it signals nothing (the pidfd it opens is its own process's).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use super::platform::{self, Kind, Platform};
use super::{Cli, proto, sources};
use crate::config::{Config, Role};
use crate::exit;

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Print the checks as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    Ok,
    /// Works, with less: `cost` says what is lost.
    Warn,
    /// The reaper cannot do its work: `cost` says what fails.
    Missing,
}

#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub health: Health,
    /// What was found.
    pub found: String,
    /// What the missing part costs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<String>,
    /// The `platform` check only: what was found, field by field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
}

fn ok(name: &'static str, found: impl Into<String>) -> Check {
    Check { name, health: Health::Ok, found: found.into(), cost: None, platform: None }
}

fn warn(name: &'static str, found: impl Into<String>, cost: impl Into<String>) -> Check {
    Check { name, health: Health::Warn, found: found.into(), cost: Some(cost.into()), platform: None }
}

fn missing(name: &'static str, found: impl Into<String>, cost: impl Into<String>) -> Check {
    Check { name, health: Health::Missing, found: found.into(), cost: Some(cost.into()), platform: None }
}

pub fn run(cli: &Cli, args: &DoctorArgs) -> ExitCode {
    let (config, cfg) = config(cli);
    let cfg = cfg.unwrap_or_else(Config::embedded);
    let here = platform::detect(Path::new("/"), &|name| std::env::var(name).ok());
    let checks = vec![
        config,
        Check { platform: Some(here.clone()), ..ok("platform", here.summary()) },
        adoption(&here, &cfg),
        privileges(),
        procfs(),
        pidfds(),
        events(&cfg),
        cgroups(),
        journald(),
        pressure(&cfg),
        engines(&cfg),
        daemon(cli, &cfg, &here),
    ];
    if args.json {
        crate::stdout::outln!(
            "{}",
            crate::names::printable_json(&serde_json::to_string_pretty(&checks).expect("checks serialize"))
        );
    } else {
        crate::stdout::out!("{}", crate::names::printable_lines(&render(&checks)));
    }
    if checks.iter().any(|c| c.health == Health::Missing) {
        ExitCode::from(exit::UNAVAILABLE)
    } else {
        ExitCode::from(exit::OK)
    }
}

pub fn render(checks: &[Check]) -> String {
    let mut o = String::new();
    for c in checks {
        let tag = match c.health {
            Health::Ok => "ok",
            Health::Warn => "WARN",
            Health::Missing => "MISSING",
        };
        let _ = writeln!(o, "{tag:<8} {:<16} {}", c.name, c.found);
        if let Some(cost) = &c.cost {
            let _ = writeln!(o, "{:<25} without it: {cost}", "");
        }
    }
    o
}

fn config(cli: &Cli) -> (Check, Option<Config>) {
    match Config::load(&sources(&cli.config)) {
        Ok(c) => (ok("config", c.sources.join(", ")), Some(c)),
        Err(errs) => {
            let first = errs.0.first().map(ToString::to_string).unwrap_or_default();
            (
                missing(
                    "config",
                    format!("{} problem(s), the first: {first}", errs.0.len()),
                    "mcp-reaperd refuses to start with it (`reaperctl validate` lists every problem); \
                     these checks use the embedded default",
                ),
                None,
            )
        }
    }
}

/// Effective capabilities of this process (`CapEff` in /proc/self/status).
fn capabilities() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or(0)
}

const CAP_KILL: u32 = 5;
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_PTRACE: u32 = 19;

fn privileges() -> Check {
    let uid = rustix::process::geteuid().as_raw();
    let caps = capabilities();
    let has = |c: u32| caps & (1 << c) != 0;
    if uid == 0 && has(CAP_KILL) && has(CAP_SYS_PTRACE) {
        return ok("privileges", "root (CAP_KILL, CAP_SYS_PTRACE)");
    }
    if has(CAP_KILL) && has(CAP_SYS_PTRACE) {
        return ok("privileges", format!("uid {uid} with CAP_KILL and CAP_SYS_PTRACE"));
    }
    warn(
        "privileges",
        format!("uid {uid} without CAP_KILL/CAP_SYS_PTRACE"),
        format!(
            "only uid {uid}'s own trees are reaped; other users' processes are judged from what /proc shows \
             everyone, their stdio and environment unread (run the system daemon as root for the whole machine)"
        ),
    )
}

fn procfs() -> Check {
    let procfs = crate::scan::ProcFs::new(Path::new("/proc"));
    if std::fs::read_to_string("/proc/self/stat").is_err() {
        return missing("/proc", "cannot read /proc/self/stat", "nothing can be scanned: no tree is seen or reaped");
    }
    match procfs.hidden_notice() {
        Some(note) => warn("/proc", "mounted with hidepid", note),
        None => ok("/proc", "every process visible"),
    }
}

fn pidfds() -> Check {
    let me = crate::ids::Pid::new(rustix::process::getpid().as_raw_nonzero().get()).expect("our own pid");
    match crate::sys::pidfd_open(me) {
        Ok(_) => ok("pidfds", "pidfd_open works"),
        Err(e) => missing(
            "pidfds",
            format!("pidfd_open failed: {e}"),
            "no signal can be tied to the process it was meant for, so none is sent: nothing is reaped \
             (Linux 5.3 or later is needed)",
        ),
    }
}

fn events(cfg: &Config) -> Check {
    use crate::scan::events::Connector;
    let opened = Connector::open().and_then(|fd| {
        Connector::prove(std::os::fd::AsFd::as_fd(&fd), std::time::Duration::from_millis(100)).map(|()| fd)
    });
    match opened {
        Ok(_) => ok("process events", "the kernel's proc connector delivers"),
        Err(e) => {
            let why = if capabilities() & (1 << CAP_NET_ADMIN) == 0 { " (needs CAP_NET_ADMIN)" } else { "" };
            warn(
                "process events",
                format!("proc connector unavailable: {e}{why}"),
                format!(
                    "the daemon watches hosts with pidfds and scans every {}s: an orphan whose host it did not \
                     watch waits for the next scan",
                    cfg.interval_secs
                ),
            )
        }
    }
}

fn cgroups() -> Check {
    match crate::session::cgroup::Hierarchy::find() {
        Some(h) if h.mount == Path::new("/sys/fs/cgroup") => ok("cgroups", "cgroup v2 (unified) at /sys/fs/cgroup"),
        Some(h) => ok("cgroups", format!("cgroup v2 at {} (hybrid or nested)", h.mount.display())),
        None => warn(
            "cgroups",
            "no cgroup v2 mount",
            "`reaperctl run` sessions cannot be kept in a cgroup of their own (what they leave is found by \
             ancestry alone), and memory is read from each process instead of its cgroup",
        ),
    }
}

fn journald() -> Check {
    let socket = crate::report::journal::SOCKET;
    if Path::new(socket).exists() {
        ok("journald", format!("{socket} exists"))
    } else {
        warn(
            "journald",
            format!("{socket} not found"),
            "the daemon logs to stderr: `journalctl REAPER_ACTION=reap` and the other field queries find nothing",
        )
    }
}

fn pressure(cfg: &Config) -> Check {
    let Some(file) = cfg.pressure.file() else {
        return ok("memory pressure", "off by configuration ([pressure] enabled = false)");
    };
    match crate::scan::pressure::read(&file) {
        Ok(p) => ok("memory pressure", format!("{}: some avg10={:.1}%", file.display(), p.some_avg10)),
        Err(e) => warn(
            "memory pressure",
            format!("cannot read {}: {e}", file.display()),
            "orphans always wait out their grace, even while memory runs out (PSI needs CONFIG_PSI, and psi=1 \
             where the kernel turns it off by default)",
        ),
    }
}

fn engines(cfg: &Config) -> Check {
    if !cfg.containers.stop {
        return ok("engine sockets", "containers are not stopped by configuration");
    }
    let mut candidates: Vec<PathBuf> = cfg.containers.engine_sockets.clone();
    candidates.extend([PathBuf::from("/var/run/docker.sock"), PathBuf::from("/run/podman/podman.sock")]);
    if let Some(rt) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        candidates.extend([rt.join("docker.sock"), rt.join("podman/podman.sock")]);
    }
    let found: Vec<String> = candidates
        .iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())))
        .map(|p| p.display().to_string())
        .collect();
    if found.is_empty() {
        warn(
            "engine sockets",
            "no docker or podman API socket found",
            "the container of an orphaned `docker run`/`podman run` server cannot be stopped through its \
             engine: the client is reaped, the container may keep running (fine where no such servers run)",
        )
    } else {
        ok("engine sockets", found.join(", "))
    }
}

fn daemon(cli: &Cli, cfg: &Config, here: &Platform) -> Check {
    let socket = super::socket_path(cli, Some(cfg));
    if !socket.exists() {
        return warn(
            "daemon",
            format!("no socket at {}", socket.display()),
            format!("nothing is reaped until mcp-reaperd runs ({})", start_hint(here)),
        );
    }
    let asked = std::os::unix::net::UnixStream::connect(&socket).map_err(|e| e.to_string()).and_then(|mut s| {
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(3)));
        proto::call(&mut s, &proto::Request { v: proto::VERSION, cmd: proto::Command::Status })
            .map_err(|e| e.to_string())
    });
    match asked {
        Ok(r) => match r.status {
            Some(s) => ok(
                "daemon",
                format!(
                    "mcp-reaperd {} (pid {}), mode {}, events {}, at {}",
                    s.version,
                    s.pid,
                    s.mode,
                    s.event_mode,
                    socket.display()
                ),
            ),
            None => {
                warn("daemon", format!("{} answered without a status", socket.display()), "nothing can be said of it")
            }
        },
        Err(e) => warn(
            "daemon",
            format!("{} does not answer: {e}", socket.display()),
            if here.systemd {
                "nothing is reaped until mcp-reaperd runs (`systemctl status mcp-reaper`)"
            } else {
                "nothing is reaped until mcp-reaperd runs (its log says why it stopped)"
            },
        ),
    }
}

/// How the daemon is started where it is not running: systemd's unit where
/// systemd is PID 1, else the route docs/install.md gives for the platform.
fn start_hint(here: &Platform) -> &'static str {
    match here.kind {
        _ if here.systemd => "`systemctl enable --now mcp-reaper`, in dry run first",
        Kind::Wsl2 | Kind::Wsl1 => {
            "no systemd here: a `[boot] command=` in /etc/wsl.conf starts it with the distribution, or \
             `systemd=true` there and the unit (docs/install.md, \"WSL2\")"
        }
        Kind::Container | Kind::Toolbox | Kind::Distrobox => {
            "no systemd here: start it in the background from the container's entrypoint, or with the \
             devcontainer Feature (docs/install.md, \"Without systemd\")"
        }
        Kind::Host => {
            "no systemd here: start it in the background from the init's boot scripts \
                       (docs/install.md, \"Without systemd\")"
        }
    }
}

/// Who adopts orphans here, and whether mcp-reaper sees that adopter for
/// what it is: PID 1 of a namespace always is; a child subreaper is when
/// the `adopters` patterns name it (else only the daemon tells, from a
/// parent it saw change or from sessions).
fn adoption(here: &Platform, cfg: &Config) -> Check {
    const PID1: &str = "mcp-reaper takes every PID namespace's PID 1 as its adopter";
    const SEEN: &str = "; the daemon also takes as adopted any process whose parent it saw change";
    let pid1 = here.pid1.comm.as_deref().unwrap_or("unreadable");
    let known = |cmdline: &str, exe: Option<&str>| {
        let m = cfg.matcher.classify(cmdline, exe);
        (m.role == Role::Adopter).then(|| {
            let pattern = cfg.matcher.pattern_text(Role::Adopter, m.pattern.unwrap_or(0));
            format!("mcp-reaper knows it by the adopters pattern '{pattern}'")
        })
    };
    // (who adopts, how mcp-reaper knows it or None: the patterns miss it, a note)
    let (who, knows, note) = match here.kind {
        Kind::Wsl2 => (
            format!(
                "orphans of a terminal session go to its /init relay (a child subreaper whose executable is /init), \
                 not to PID 1 ({pid1})"
            ),
            known("/init", Some("/init")),
            "",
        ),
        Kind::Toolbox | Kind::Distrobox => (
            "orphans go to conmon, podman's container monitor (a child subreaper)".to_string(),
            known("conmon", None),
            "; toolbox, and distrobox unless made with --unshare-process, share the machine's PID namespace: \
             a daemon on the machine sees them too",
        ),
        Kind::Container => (
            format!("orphans go to PID 1 ({pid1}) or a child subreaper below it"),
            Some(PID1.to_string()),
            "; mcp-reaperd here sees only this container's PID namespace, nothing of the machine outside it",
        ),
        Kind::Host if here.systemd => (
            "orphans go to systemd (PID 1) or to a user's `systemd --user` (a child subreaper)".to_string(),
            known("systemd --user", None),
            "",
        ),
        Kind::Host | Kind::Wsl1 => (
            format!("orphans go to PID 1 ({pid1}) or to the nearest child subreaper"),
            Some(format!("{PID1}, a subreaper by the adopters patterns")),
            "",
        ),
    };
    match knows {
        Some(how) => ok("adoption", format!("{who}: {how}{note}{SEEN}")),
        None => warn(
            "adoption",
            format!("{who}: no adopters pattern of the config matches that adopter{note}"),
            "`reaperctl scan` and `mcp-reaperd --once` call its trees foreign instead of orphaned (the daemon still \
             sees the adoption when it saw the parent change, or by sessions): put the default's adopters pattern \
             back in `[patterns] adopters`",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn platform(kind: Kind, systemd: bool, pid1: &str) -> Platform {
        Platform {
            kind,
            systemd,
            distro: None,
            engine: None,
            name: None,
            pid1: platform::Pid1 { comm: Some(pid1.into()), exe: None, cmdline: None },
            evidence: Vec::new(),
        }
    }

    #[test]
    fn wsl2s_relay_is_known_by_the_default_patterns_with_or_without_systemd() {
        let cfg = Config::embedded();
        for (systemd, pid1) in [(false, "init"), (true, "systemd")] {
            let c = adoption(&platform(Kind::Wsl2, systemd, pid1), &cfg);
            assert_eq!(c.health, Health::Ok, "{c:?}");
            assert!(
                c.found.contains(&format!(
                    "/init relay (a child subreaper whose executable is /init), not to PID 1 ({pid1})"
                )),
                "{}",
                c.found
            );
            assert!(c.found.contains("adopters pattern 'exe:^/init$'"), "{}", c.found);
            assert!(c.found.ends_with("any process whose parent it saw change"), "{}", c.found);
        }
    }

    #[test]
    fn an_adopter_the_patterns_miss_is_a_warning_with_its_cost() {
        let cfg = Config::from_str_with_default("test.toml", "[patterns]\nadopters = ['^tini$']\n").unwrap();
        let c = adoption(&platform(Kind::Toolbox, false, "catatonit"), &cfg);
        assert_eq!(c.health, Health::Warn, "{c:?}");
        assert!(c.found.starts_with("orphans go to conmon"), "{}", c.found);
        assert!(c.cost.unwrap().contains("call its trees foreign"));
        let c = adoption(&platform(Kind::Host, true, "systemd"), &cfg);
        assert_eq!(c.health, Health::Warn, "{c:?}");
    }

    #[test]
    fn pid_1_adopts_in_a_container_and_on_a_host_without_systemd() {
        let cfg = Config::embedded();
        let c = adoption(&platform(Kind::Container, false, "tini"), &cfg);
        assert_eq!(c.health, Health::Ok);
        assert!(c.found.starts_with("orphans go to PID 1 (tini) or a child subreaper below it"), "{}", c.found);
        assert!(c.found.contains("sees only this container's PID namespace"), "{}", c.found);
        let c = adoption(&platform(Kind::Host, false, "openrc-init"), &cfg);
        assert!(
            c.found.starts_with("orphans go to PID 1 (openrc-init) or to the nearest child subreaper"),
            "{}",
            c.found
        );
        let c = adoption(&platform(Kind::Toolbox, true, "systemd"), &cfg);
        assert!(c.found.contains("adopters pattern '^conmon$'"), "{}", c.found);
        let c = adoption(&platform(Kind::Host, true, "systemd"), &cfg);
        assert!(c.found.contains("adopters pattern 'args:^systemd --user( |$)'"), "{}", c.found);
    }

    #[test]
    fn where_there_is_no_systemd_the_daemon_check_names_the_route_that_starts_it() {
        assert!(start_hint(&platform(Kind::Wsl2, false, "init")).contains("[boot] command="));
        assert!(start_hint(&platform(Kind::Wsl2, true, "systemd")).contains("systemctl enable --now mcp-reaper"));
        assert!(start_hint(&platform(Kind::Container, false, "tini")).contains("devcontainer Feature"));
    }
}
