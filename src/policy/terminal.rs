//! A host's terminal as evidence: live, dead, or none, and the dead one a
//! terminal UI read its keys from.

use crate::scan::Process;

pub(super) enum Term {
    Live(String),
    Dead(String),
    None,
}

pub(super) fn terminal(p: &Process) -> Term {
    let fds = p.details.as_ref().map(|d| &d.fds);
    let mut live = None;
    for fd in fds.into_iter().flatten().flatten() {
        if fd.is_dead_terminal() {
            return Term::Dead(fd.0.clone());
        }
        if live.is_none() && fd.is_terminal() {
            live = Some(fd.0.clone());
        }
    }
    live.map_or(Term::None, Term::Live)
}

/// The dead pseudo-terminal a terminal UI read its keys from: its stdin,
/// and its controlling terminal unless `stat` field 7 names another one.
/// When a terminal's master closes the kernel hangs it up and clears the
/// controlling terminal of every process of its session, so field 7 reads
/// 0 afterwards: what remains of the terminal is fd 0 on the deleted
/// `/dev/pts/N`. A process that only kept an output fd there (`> log 2>&1`
/// the other way round, a GUI's stderr) is not reading from it.
pub(super) fn keys_terminal_dead(p: &Process) -> Option<&str> {
    let fd0 = p.details.as_ref()?.fds[0].as_ref()?;
    let n: u32 = fd0.0.strip_suffix(" (deleted)")?.strip_prefix("/dev/pts/")?.parse().ok()?;
    (p.tty_nr == 0 || pts_number(p.tty_nr) == Some(n)).then_some(fd0.0.as_str())
}

/// The `N` of `/dev/pts/N` a `tty_nr` encodes (majors 136–143), if it is one.
pub(crate) fn pts_number(tty_nr: u32) -> Option<u32> {
    let major = (tty_nr >> 8) & 0xfff;
    let minor = (tty_nr & 0xff) | ((tty_nr >> 12) & 0xf_ff00);
    (136..=143).contains(&major).then(|| (major - 136) * 256 + minor)
}
