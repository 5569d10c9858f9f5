//! `reaperctl doctor`: whether this machine gives the reaper what it needs,
//! and for each part that is missing, what that costs. It reads and probes;
//! it signals nothing (the pidfd it opens is its own process's).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use super::{Cli, proto, sources};
use crate::config::Config;
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
}

fn ok(name: &'static str, found: impl Into<String>) -> Check {
    Check { name, health: Health::Ok, found: found.into(), cost: None }
}

fn warn(name: &'static str, found: impl Into<String>, cost: impl Into<String>) -> Check {
    Check { name, health: Health::Warn, found: found.into(), cost: Some(cost.into()) }
}

fn missing(name: &'static str, found: impl Into<String>, cost: impl Into<String>) -> Check {
    Check { name, health: Health::Missing, found: found.into(), cost: Some(cost.into()) }
}

pub fn run(cli: &Cli, args: &DoctorArgs) -> ExitCode {
    let (config, cfg) = config(cli);
    let cfg = cfg.unwrap_or_else(Config::embedded);
    let checks = vec![
        config,
        privileges(),
        procfs(),
        pidfds(),
        events(&cfg),
        cgroups(),
        journald(),
        pressure(&cfg),
        engines(&cfg),
        daemon(cli, &cfg),
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

fn daemon(cli: &Cli, cfg: &Config) -> Check {
    let socket = super::socket_path(cli, Some(cfg));
    if !socket.exists() {
        return warn(
            "daemon",
            format!("no socket at {}", socket.display()),
            "nothing is reaped until mcp-reaperd runs (`systemctl enable --now mcp-reaper`, in dry run first)",
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
            "nothing is reaped until mcp-reaperd runs (`systemctl status mcp-reaper`)",
        ),
    }
}
