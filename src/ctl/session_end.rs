//! `reaperctl session-end`: run by a host's session-end hook (Claude Code's
//! and Gemini CLI's `SessionEnd`), with the hook's JSON on stdin. It finds
//! the host, the nearest ancestor the config calls a host, and tells the
//! daemon, which then reaps the host's trees the moment it exits, without
//! grace. Without a daemon there is nobody to tell: exit 69.

use std::io::Read;
use std::process::ExitCode;

use serde::Deserialize;

use super::{Cli, proto};
use crate::config::{Config, Role};
use crate::exit;
use crate::ids::Pid;
use crate::scan::ProcFs;

#[derive(clap::Args, Debug)]
pub struct SessionEndArgs {
    /// The host is this process instead of the nearest host ancestor.
    #[arg(long, value_name = "PID", value_parser = super::parse_pid)]
    pub host: Option<Pid>,
}

/// What the hook passes on stdin; every field optional, others ignored.
#[derive(Debug, Default, Deserialize)]
struct HookInput {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    hook_event_name: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    /// Gemini CLI's name for the reason.
    #[serde(default)]
    trigger: Option<String>,
}

/// Stdin is at most this long: a hook's input is a few hundred bytes.
const MAX_INPUT: u64 = 64 * 1024;
/// How far up to look for the host (hooks run through a shell or two).
const MAX_DEPTH: usize = 64;

pub fn run(cli: &Cli, args: &SessionEndArgs) -> ExitCode {
    let input = match read_input() {
        Ok(i) => i,
        Err(e) => {
            crate::say_err!("reaperctl session-end: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    if let Some(ev) = input.hook_event_name.as_deref().filter(|e| *e != "SessionEnd") {
        crate::say_err!("reaperctl session-end: note: called for hook event {ev:?}, not SessionEnd");
    }
    let reason = input.reason.or(input.trigger);
    if reason.as_deref() == Some("clear") {
        crate::say_err!("reaperctl session-end: the host goes on after a clear; nothing to do");
        return ExitCode::from(exit::OK);
    }
    let cfg = Config::load(&super::sources(&cli.config)).unwrap_or_else(|_| Config::embedded());
    let procfs = ProcFs::new("/proc");
    let host = match args.host {
        Some(pid) => procfs.process(pid).ok_or_else(|| format!("process {pid} does not exist")),
        None => find_host(&procfs, &cfg),
    };
    let host = match host {
        Ok(h) => h,
        Err(e) => {
            crate::say_err!("reaperctl session-end: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let cmd = proto::Command::SessionEnd {
        host_pid: host.pid().get(),
        host_start_time: host.id.start_time.0,
        session_id: input.session_id,
        reason,
    };
    match super::ask(cli, cmd, std::time::Duration::from_secs(30)) {
        Ok(r) => {
            let n = r.session_end.map_or(0, |s| s.children);
            // stderr: a hook's stdout is the host's to parse (Gemini CLI
            // takes it for JSON).
            crate::say_err!(
                "mcp-reaper: the trees of {} are reaped as soon as it exits ({n} child process(es) now)",
                crate::names::name(&host)
            );
            ExitCode::from(exit::OK)
        }
        Err(code) => code,
    }
}

/// The hook's JSON, when stdin carries any (never waits on a terminal).
fn read_input() -> Result<HookInput, String> {
    let stdin = std::io::stdin();
    if rustix::termios::isatty(&stdin) {
        return Ok(HookInput::default());
    }
    let mut text = String::new();
    stdin
        .lock()
        .take(MAX_INPUT)
        .read_to_string(&mut text)
        .map_err(|e| format!("reading the hook's input on stdin: {e}"))?;
    if text.trim().is_empty() {
        return Ok(HookInput::default());
    }
    serde_json::from_str(&text).map_err(|e| format!("the hook's input on stdin is not the JSON expected: {e}"))
}

/// The nearest ancestor of this process that the config calls a host.
fn find_host(procfs: &ProcFs, cfg: &Config) -> Result<crate::scan::Process, String> {
    let mut chain = Vec::new();
    let mut pid = Pid::new(rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get()));
    for _ in 0..MAX_DEPTH {
        let Some(p) = pid.filter(|p| *p != Pid::INIT).and_then(|p| procfs.process(p)) else { break };
        if cfg.matcher.classify_subject(crate::tree::subject(&p)).role == Role::Host {
            return Ok(p);
        }
        chain.push(crate::names::name(&p));
        pid = p.ppid;
    }
    Err(format!(
        "no host among the ancestors of this process ({}): run it from a host's session-end hook, \
         or name the host with --host PID",
        if chain.is_empty() { "none readable".to_string() } else { chain.join(" <- ") }
    ))
}
