//! `reaperctl generations --end HOST_PID [--dry-run]`: ends one host's old
//! idle copies on the user's request (issue 35 item 4). What may end is
//! [`crate::policy::surplus::plan`]'s to say, as for the daemon's
//! `[generations]` policy, at `Stage::Open` (the user asked, so no probe
//! ending first); the ending is the usual race-free termination.
//!
//! It acts as the user who runs it: a host or copy member of another uid
//! is refused (unless that user is root) before anything is looked at
//! twice or signalled, and the signals go out with the caller's own
//! rights. A host that restarts what it loses is the failure mode of ending
//! a held server, so after ending the host is watched for a few seconds and
//! the report says what it started.

use std::collections::HashSet;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use super::generations::{GenerationsArgs, daemon_status, session};
use super::generations_evidence::{self as evidence, Evidence};
use super::{Cli, assess_now};
use crate::config::Config;
use crate::exit;
use crate::ids::{Identity, Pid};
use crate::policy::generations::{Group, generations};
use crate::policy::surplus::{self, Decision, Stage, Watch};
use crate::policy::{GraceBook, Verdict};
use crate::reap::{self, Order, Outcome};
use crate::report::generations_end::{EndCopy, EndReport, Restarted};
use crate::scan::{ProcFs, Snapshot};
use crate::stdout::{out, outln};

/// How long the host is watched after the endings for new copies.
const WATCH: Duration = Duration::from_secs(5);

pub(super) fn run(cli: &Cli, cmd: &GenerationsArgs, host_pid: Pid) -> ExitCode {
    let (cfg, procfs, a) = match assess_now(cli, &cmd.args) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let snap = &a.snapshot;
    let all = generations(snap, &a.judgements, |root| session(&procfs, snap.procs[root].id));
    let groups: Vec<&Group> = all.iter().filter(|g| snap.procs[g.host].pid() == host_pid).collect();
    let Some(host) = groups.first().map(|g| g.host) else {
        crate::say_err!(
            "reaperctl: pid {} is no live host holding MCP server copies (`reaperctl generations` lists them)",
            host_pid.get()
        );
        return ExitCode::from(exit::USAGE);
    };
    if let Err(why) = may_end(snap, host, &groups) {
        crate::say_err!("reaperctl: {why}; nothing was signalled");
        return ExitCode::from(exit::NOPERM);
    }
    let host_id = snap.procs[host].id;
    let daemon = daemon_status(cli, &cfg, &cmd.args)
        .and_then(|st| evidence::from_daemon(&st.generations, host_id, cfg.generations.sample_secs));
    let ev = daemon
        .unwrap_or_else(|| evidence::sample_locally(&procfs, snap, &groups, Duration::from_secs(cmd.sample_secs)));
    let settings = surplus::Settings { idle: ev.idle, ..surplus::Settings::of(&cfg.generations) };
    let mine: Vec<Group> = groups.iter().map(|&g| g.clone()).collect();
    let decisions = surplus::plan(snap, &mine, settings, |root| watch(&procfs, snap, &ev, root), |_, _| Stage::Open);
    let orders: Vec<Order> = decisions.iter().filter(|d| d.end).filter_map(|d| order(snap, &mine, d)).collect();
    let rs =
        reap::Settings { term_timeout: cfg.term_timeout(), kill_wait: Duration::from_secs(1), dry_run: cmd.dry_run };
    let outcomes = if orders.is_empty() { Vec::new() } else { reap::terminate(&procfs, orders, &rs) };
    let ended: HashSet<&str> = decisions.iter().filter(|d| d.end).map(|d| d.command.as_str()).collect();
    let before: HashSet<Identity> = mine.iter().flat_map(Group::copies).map(|c| snap.procs[c.root].id).collect();
    let watched = !cmd.dry_run && outcomes.iter().any(|o| o.gone > 0);
    let restarted = if watched { restarts(&procfs, &cfg, &cmd.args, host_id, &ended, &before) } else { Vec::new() };
    let r = report(snap, host, &ev, settings, &decisions, &outcomes, cmd.dry_run, watched, restarted);
    if cmd.args.json {
        outln!("{}", crate::names::printable_json(&serde_json::to_string_pretty(&r).expect("report serializes")));
    } else {
        out!("{}", crate::names::printable_lines(&crate::report::generations_end::render(&r)));
    }
    // A copy that would not go (a member in D state, a signal refused) is
    // worth another try later; the rest is done.
    if outcomes.iter().all(Outcome::success) { ExitCode::from(exit::OK) } else { ExitCode::from(exit::TEMPFAIL) }
}

/// Refuses a host, or a member of one of its copies, that runs as another
/// user than the caller (root may end anyone's). The kernel would refuse
/// the signals too, but only after some copies went: this refuses all.
fn may_end(snap: &Snapshot, host: usize, groups: &[&Group]) -> Result<(), String> {
    let me = rustix::process::getuid();
    if me.is_root() {
        return Ok(());
    }
    let mine = |i: usize| snap.procs[i].uid().is_some_and(|u| u.0 == me.as_raw());
    let who = |i: usize| {
        let p = &snap.procs[i];
        let uid = p.uid().map_or_else(|| "an unknown user".into(), |u| format!("uid {}", u.0));
        format!("{} runs as {uid}, not as you (uid {})", crate::names::name(p), me.as_raw())
    };
    if !mine(host) {
        return Err(format!("host {}: only its user or root may end its copies", who(host)));
    }
    let other = groups.iter().flat_map(|g| g.copies()).flat_map(|c| &c.members).find(|&&m| !mine(m));
    match other {
        Some(&m) => Err(format!("a member of one of its copies, {}: only root may end that copy", who(m))),
        None => Ok(()),
    }
}

/// The plan's view of one copy: how long it was seen idle and, once idle
/// for the whole window, whether a request waits in its stdin (asked only
/// then: asking opens the pipe).
fn watch(procfs: &ProcFs, snap: &Snapshot, ev: &Evidence, root: usize) -> Option<Watch> {
    let id = snap.procs[root].id;
    let idle_for = ev.idle_for(id)?;
    let waiting = if idle_for >= ev.idle { procfs.stdin_waiting(id) } else { Some(0) };
    Some(Watch { idle_for, waiting })
}

fn order(snap: &Snapshot, groups: &[Group], d: &Decision) -> Option<Order> {
    let g = groups.iter().find(|g| g.host == d.host && g.command == d.command)?;
    let c = g.copies().find(|c| c.root == d.root)?;
    let members: Vec<_> = c.members.iter().map(|&m| &snap.procs[m]).filter(|p| !p.state.is_zombie()).collect();
    Some(Order::new(Verdict::Surplus, d.why.clone(), &snap.procs[d.root], &members))
}

/// New copies of the `ended` commands the host starts within [`WATCH`]:
/// looked for every half second, done at the first.
fn restarts(
    procfs: &ProcFs,
    cfg: &Config,
    args: &super::ScanArgs,
    host: Identity,
    ended: &HashSet<&str>,
    before: &HashSet<Identity>,
) -> Vec<Restarted> {
    let until = Instant::now() + WATCH;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let grace = GraceBook::default();
        if let Ok(a) = crate::cycle::assess(procfs, cfg, args.scope, &grace, SystemTime::now(), None) {
            let snap = &a.snapshot;
            let new: Vec<Restarted> = generations(snap, &a.judgements, |_| None)
                .iter()
                .filter(|g| snap.procs[g.host].id == host && ended.contains(g.command.as_str()))
                .flat_map(|g| g.copies().map(move |c| (g, c)))
                .filter(|(_, c)| !before.contains(&snap.procs[c.root].id))
                .map(|(g, c)| Restarted { pid: snap.procs[c.root].pid().get(), command: g.command.clone() })
                .collect();
            if !new.is_empty() {
                return new;
            }
        }
        if Instant::now() >= until {
            return Vec::new();
        }
    }
}

#[allow(clippy::too_many_arguments)] // one request's inputs and results, each its own thing
fn report(
    snap: &Snapshot,
    host: usize,
    ev: &Evidence,
    s: surplus::Settings,
    decisions: &[Decision],
    outcomes: &[Outcome],
    dry_run: bool,
    watched: bool,
    restarted: Vec<Restarted>,
) -> EndReport {
    let copies: Vec<EndCopy> = decisions
        .iter()
        .map(|d| {
            let p = &snap.procs[d.root];
            let o = outcomes.iter().find(|o| o.root == p.id);
            let mut errors: Vec<String> = o.map(|o| o.errors.clone()).unwrap_or_default();
            if let Some(o) = o.filter(|o| !o.unkillable.is_empty()) {
                errors.push(format!("{} member(s) would not go", o.unkillable.len()));
            }
            EndCopy {
                pid: p.pid().get(),
                start_time: p.id.start_time.0,
                command: d.command.clone(),
                end: d.end,
                ended: o.is_some_and(|o| !o.dry_run && o.reaped()),
                why: d.why.clone(),
                reclaimed_bytes: o.map(|o| o.reclaimed.total()),
                errors,
            }
        })
        .collect();
    let h = &snap.procs[host];
    let mut r = EndReport {
        host_pid: h.pid().get(),
        host_start_time: h.id.start_time.0,
        host_cmd: h.display_cmd().into_owned(),
        dry_run,
        evidence: ev.source.clone(),
        idle_secs: ev.idle.as_secs(),
        keep_newest: s.keep_newest,
        ended: copies.iter().filter(|c| if dry_run { c.end } else { c.ended }).count(),
        reclaimed_bytes: copies.iter().filter_map(|c| c.reclaimed_bytes).sum(),
        copies,
        watched_secs: if watched { WATCH.as_secs() } else { 0 },
        restarted,
        sentence: String::new(),
    };
    r.sentence = crate::report::generations_end::sentence(&r);
    r
}
