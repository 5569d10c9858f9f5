//! `reaperctl run -- HOST ARGS…`: runs a host in a session of its own and
//! ends whatever it leaves behind. The wrapper is a child subreaper (nothing
//! below it can re-parent past it, not by setsid nor a double fork) and, where
//! it can, puts the host in a cgroup v2 leaf before exec (a transient systemd
//! scope when systemd runs the machine, else a cgroup it makes under its own
//! or `--cgroup-parent`). The host stays in the wrapper's process group, so
//! it keeps the terminal's foreground: a Ctrl-C reaches it from the terminal
//! directly, and only signals sent to the wrapper itself are forwarded.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::time::Duration;

use rustix::process::Signal;

use crate::config::Config;
use crate::ids::Pid;
use crate::reap::Settings;
use crate::scan::ProcFs;
use crate::session::cgroup::{Hierarchy, Leaf};
use crate::session::leftovers::{Ended, Session};
use crate::session::memcg_v1::MemoryV1;
use crate::session::supervise::{FORWARD, reap_adopted, supervise, wait_grace};
use crate::session::systemd::{self, Manager, Started};
use crate::{exit, session, sys};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Seconds the session's leftovers get after the host exits, before
    /// they are sent SIGTERM (then SIGKILL after the configured
    /// `term_timeout_secs`). The wrapper returns as soon as nothing is left.
    #[arg(long, value_name = "SECS", default_value_t = 3.0, value_parser = parse_secs)]
    pub grace: f64,
    /// Limit the session's memory (cgroup memory.max), e.g. 4G, 512M,
    /// 1073741824. Needs the memory controller: in the cgroup v2 hierarchy,
    /// or (a hybrid system) in the v1 one, where a v1 memory cgroup of the
    /// session's own is limited instead (swap is not limited, as with
    /// memory.max). `run` refuses to start rather than run without the
    /// limit.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_max: Option<u64>,
    /// Make the session's cgroup below this cgroup v2 directory (one
    /// delegated to you) instead of below your own cgroup.
    #[arg(long, value_name = "DIR")]
    pub cgroup_parent: Option<PathBuf>,
    /// Use no cgroup: the session is the wrapper's descendants only (a
    /// child subreaper).
    #[arg(long, conflicts_with_all = ["memory_max", "cgroup_parent"])]
    pub no_cgroup: bool,
    /// The host and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "HOST")]
    pub command: Vec<OsString>,
}

fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("not a number of seconds between 0 and 86400: {s:?}")),
    }
}

/// `4G`, `512M`, `64k`, `1GiB`, plain bytes: binary units, any case.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num.parse().map_err(|_| format!("not a size: {s:?} (e.g. 4G, 512M, 1073741824)"))?;
    let shift = match unit.to_ascii_lowercase().trim_end_matches('b').trim_end_matches('i') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(format!("unknown size unit in {s:?} (K, M, G or T)")),
    };
    n.checked_mul(1 << shift).filter(|&b| b > 0).ok_or_else(|| format!("size out of range: {s:?}"))
}

pub fn run(config: &Option<PathBuf>, args: &RunArgs) -> ExitCode {
    let me = rustix::process::getpid();
    // Before the host exists: anything it orphans, at any depth, comes here.
    if let Err(e) = rustix::process::set_child_subreaper(Some(me)) {
        crate::say_err!("reaperctl run: cannot become a child subreaper ({e})");
        return ExitCode::from(exit::OSERR);
    }
    let mut sigs = FORWARD.to_vec();
    sigs.push(Signal::CHILD);
    let sigfd = match sys::block_into_signalfd(&sigs) {
        Ok(fd) => fd,
        Err(e) => {
            crate::say_err!("reaperctl run: cannot set up signal forwarding ({e})");
            return ExitCode::from(exit::OSERR);
        }
    };
    let wrapper = me.as_raw_nonzero().get().cast_unsigned();
    let host_name = crate::names::printable(&args.command[0].to_string_lossy()).into_owned();
    let mut ask_systemd = true;
    let (mut child, host, pidfd, session, memcg) = loop {
        let (mut cmd, plan, memcg) = match prepare(args, wrapper, ask_systemd) {
            Ok(x) => x,
            Err(code) => return code,
        };
        sys::unblock_before_exec(&mut cmd, &sigs);
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                if let Plan::Leaf(leaf) = &plan {
                    let _ = leaf.remove();
                }
                if let Some(m) = &memcg {
                    let _ = m.remove();
                }
                let code = if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
                crate::say_err!("reaperctl run: cannot run {}: {e}", cmd.get_program().to_string_lossy());
                return ExitCode::from(code);
            }
        };
        drop(cmd); // the parent's copy of the cgroup.procs fd
        let host = Pid::new(child.id().cast_signed()).expect("a child's pid is positive");
        // Held while the host lives (and only then): the daemon and `scan`
        // read from it which child is the host (see `session::host_of_wrapper`).
        let pidfd = sys::pidfd_open(host).ok();
        match start_session(plan, child, host, wrapper, args.memory_max) {
            Ok((child, session)) => break (child, host, pidfd, session, memcg),
            Err(Retry::WithoutSystemd) => ask_systemd = false,
            Err(Retry::No(code)) => return ExitCode::from(code),
        }
    };
    let procfs = ProcFs::new("/proc");
    let status = supervise(&mut child, host, pidfd.as_ref(), &sigfd, &procfs, wrapper);
    drop(pidfd);
    let reap_zombies = || reap_adopted(&procfs, wrapper, None);
    let interrupted = wait_grace(&session, &procfs, &sigfd, Duration::from_secs_f64(args.grace), &reap_zombies);
    let what = format!("{host_name} (pid {host})");
    let ended = if session.members(&procfs).is_empty() {
        Ended::default()
    } else {
        // Only now: compiling the config's patterns would delay every host's start.
        let cfg = Config::load(&super::sources(config)).unwrap_or_else(|errs| {
            let first = errs.0.first().map(ToString::to_string).unwrap_or_default();
            crate::say_err!("reaperctl run: warning: config not loaded ({first}); using the defaults");
            Config::embedded()
        });
        let settings = Settings { term_timeout: cfg.term_timeout(), kill_wait: Duration::from_secs(1), dry_run: false };
        session.end(&procfs, &settings, &what, &reap_zombies)
    };
    if ended.found > 0 {
        // The host first, by name and pid: "ended 1 of 1 process(es) sh left
        // behind" read as if sh was what was left behind.
        let n = ended.found;
        crate::say_err!(
            "reaperctl run: {what} left {n} process{} behind; ended {}{}{}{}",
            if n == 1 { "" } else { "es" },
            match ended.gone {
                g if g == n && n == 1 => "it".to_string(),
                g if g == n => format!("all {n}"),
                g => format!("{g} of them"),
            },
            if interrupted { " (grace cut short by a signal)" } else { "" },
            if ended.escalated { "; some needed SIGKILL" } else { "" },
            if ended.cgroup_killed { "; cgroup.kill was needed" } else { "" },
        );
    }
    if ended.left > 0 {
        crate::say_err!(
            "reaperctl run: {} process(es) are still in the session: they keep forking faster than they \
             can be signalled{}",
            ended.left,
            if matches!(session, Session::Subreaper(_)) { " (a cgroup would end them at once)" } else { "" }
        );
    }
    for e in &ended.errors {
        crate::say_err!("reaperctl run: {e}");
    }
    if let Session::Cgroup(leaf) = &session
        && let Err(e) = retry_removal(&|| leaf.remove(), &reap_zombies)
    {
        crate::say_err!("reaperctl run: cannot remove the session's cgroup {}: {e}", leaf.dir.display());
    }
    if let Some(m) = &memcg
        && let Err(e) = retry_removal(&|| m.remove(), &reap_zombies)
    {
        crate::say_err!("reaperctl run: cannot remove the session's memory cgroup {}: {e}", m.dir.display());
    }
    ExitCode::from(status)
}

/// Whether the session's memory limit reads `bytes` or less. On a hybrid
/// machine systemd moves the host into the scope's v1 memory cgroup a moment
/// after the unified one (longer on a busy machine): a limit not seen yet is
/// read again for a while before the host is stopped for want of it.
fn limit_applied(read: &dyn Fn() -> Option<u64>, bytes: u64) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        if read().is_some_and(|b| b <= bytes) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Where the host is to run.
enum Plan {
    Leaf(Leaf),
    Systemd,
    Subreaper,
}

/// Why a started child is not a session.
enum Retry {
    /// `systemd-run` could not make the scope: start the host again, without it.
    WithoutSystemd,
    /// Give up with this exit status.
    No(u8),
}

/// The session the child started in: for a systemd scope, once the host is
/// seen in it (with the memory limit read back).
fn start_session(
    plan: Plan,
    mut child: Child,
    host: Pid,
    wrapper: u32,
    memory_max: Option<u64>,
) -> Result<(Child, Session), Retry> {
    let own = || Session::Subreaper(Pid::new(wrapper.cast_signed()).expect("own pid"));
    match plan {
        Plan::Leaf(leaf) => Ok((child, Session::Cgroup(leaf))),
        Plan::Subreaper => Ok((child, own())),
        Plan::Systemd => match systemd::started(host, wrapper) {
            Started::Scope(leaf) => {
                if let Some(bytes) = memory_max
                    && !limit_applied(&|| systemd::memory_limit(&leaf, host, wrapper), bytes)
                {
                    let _ = child.kill();
                    let _ = child.wait();
                    crate::say_err!(
                        "reaperctl run: systemd did not apply MemoryMax={bytes} to {}; the host was \
                         stopped rather than run without the limit",
                        leaf.dir.display()
                    );
                    return Err(Retry::No(exit::OSERR));
                }
                Ok((child, Session::Cgroup(leaf)))
            }
            Started::Failed => {
                let st = child.wait().map(|s| s.to_string()).unwrap_or_default();
                crate::say_err!(
                    "reaperctl run: warning: systemd-run could not make a scope ({st}); starting the host \
                     without systemd"
                );
                Err(Retry::WithoutSystemd)
            }
            Started::Exited => Ok((child, own())),
            Started::Unseen => {
                crate::say_err!(
                    "reaperctl run: warning: the host did not appear in a transient systemd scope; \
                     the session is the wrapper's descendants only"
                );
                Ok((child, own()))
            }
        },
    }
}

/// The command to start, the session it will run in, and the v1 memory
/// cgroup that holds `--memory-max` where the v2 hierarchy has no memory
/// controller; warns when it falls back, fails when `--memory-max` cannot
/// be honoured.
fn prepare(args: &RunArgs, wrapper: u32, ask_systemd: bool) -> Result<(Command, Plan, Option<MemoryV1>), ExitCode> {
    let fail = |msg: &str| {
        crate::say_err!("reaperctl run: {msg}");
        ExitCode::from(exit::OSERR)
    };
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    if args.no_cgroup {
        return Ok((cmd, Plan::Subreaper, None));
    }
    let name = session::leaf_name(wrapper);
    if ask_systemd
        && args.cgroup_parent.is_none()
        // A missing program is told by the spawn below, not by systemd-run.
        && crate::paths::find_program(&args.command[0]).is_some()
        // A host itself called systemd-run could not be told from a
        // systemd-run that failed (see `systemd::started`).
        && Path::new(&args.command[0]).file_name().is_none_or(|n| n != "systemd-run")
        && let Some(m) = Manager::find()
        // Where systemd cannot limit memory, a cgroup of our own (v1 on a
        // hybrid machine) may.
        && (args.memory_max.is_none() || m.can_limit_memory())
    {
        return Ok((m.command(&name, args.memory_max, &args.command), Plan::Systemd, None));
    }
    let v2 = Hierarchy::find();
    let v1_only = v2.is_none() && args.cgroup_parent.is_none();
    let made = v2
        .ok_or_else(|| "no cgroup v2 hierarchy is mounted".to_string())
        .and_then(|h| {
            args.cgroup_parent
                .clone()
                .or_else(|| h.own_dir())
                .ok_or_else(|| "cannot tell which cgroup this process is in".to_string())
        })
        .and_then(|parent| {
            Leaf::create(&parent, &name).map_err(|e| format!("cannot create a cgroup in {}: {e}", parent.display()))
        })
        .and_then(|leaf| {
            let fd = leaf.procs_for_child().map_err(|e| {
                let _ = leaf.remove();
                format!("cannot open {}/cgroup.procs: {e}", leaf.dir.display())
            })?;
            Ok((leaf, fd))
        });
    let limit_v1 = |cmd: &mut Command, bytes: u64| -> Result<MemoryV1, String> {
        let m = MemoryV1::create(&name, bytes)?;
        match m.procs_for_child() {
            Ok(fd) => {
                sys::join_cgroup_before_exec(cmd, fd);
                Ok(m)
            }
            Err(e) => {
                let _ = m.remove();
                Err(format!("cannot open {}/cgroup.procs: {e}", m.dir.display()))
            }
        }
    };
    match (made, args.memory_max) {
        (Ok((leaf, fd)), _) => {
            sys::join_cgroup_before_exec(&mut cmd, fd);
            let mut memcg = None;
            if let Some(bytes) = args.memory_max
                && let Err(e) = leaf.set_memory_max(bytes)
            {
                // A hybrid system: the memory controller may be v1's.
                match limit_v1(&mut cmd, bytes) {
                    Ok(m) => memcg = Some(m),
                    Err(v1) => {
                        let _ = leaf.remove();
                        return Err(fail(&format!("--memory-max: {e}; and on cgroup v1: {v1}")));
                    }
                }
            }
            Ok((cmd, Plan::Leaf(leaf), memcg))
        }
        // No cgroup v2 at all (a machine on cgroup v1 alone), yet a v1
        // memory cgroup can still hold the limit.
        (Err(why), Some(bytes)) if v1_only => match limit_v1(&mut cmd, bytes) {
            Ok(m) => {
                crate::say_err!(
                    "reaperctl run: warning: {why}; the memory limit is held by the cgroup v1 memory \
                     cgroup {}, and the session is the wrapper's descendants only (a process that makes \
                     itself a subreaper can escape)",
                    m.dir.display()
                );
                Ok((cmd, Plan::Subreaper, Some(m)))
            }
            Err(v1) => {
                Err(fail(&format!("--memory-max needs a cgroup for the session, and {why}; on cgroup v1: {v1}")))
            }
        },
        (Err(why), Some(_)) => Err(fail(&format!("--memory-max needs a cgroup for the session, and {why}"))),
        (Err(why), None) => {
            crate::say_err!(
                "reaperctl run: warning: {why}. A session no process can leave needs cgroup v2 and either \
                 systemd (systemd-run --scope) or a cgroup you may write to (root, or a delegated \
                 one given as --cgroup-parent). Falling back to a subreaper session: what the host \
                 leaves below it is still ended, but a process that makes itself a subreaper can \
                 escape, and memory cannot be limited."
            );
            Ok((cmd, Plan::Subreaper, None))
        }
    }
}

/// Removes a session's cgroup once its last process is gone (a few tries:
/// the kernel updates `populated` just after the last exit).
fn retry_removal(remove: &dyn Fn() -> std::io::Result<()>, reap_zombies: &dyn Fn()) -> std::io::Result<()> {
    let mut last = Ok(());
    for _ in 0..50 {
        reap_zombies();
        last = remove();
        match &last {
            Ok(()) => return last,
            // Swept already (the daemon's sweep of stale session cgroups).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(_) => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("64KB"), Ok(64 << 10));
        assert_eq!(parse_size("1073741824"), Ok(1 << 30));
        assert!(parse_size("0").is_err());
        assert!(parse_size("4X").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
