//! Process events from the kernel's netlink proc connector (fork, exec, exit).
//! Needs `CAP_NET_ADMIN`; without it the daemon watches hosts with pidfds.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use libc::{
    CN_IDX_PROC, CN_VAL_PROC, PROC_CN_MCAST_LISTEN, PROC_EVENT_COMM, PROC_EVENT_EXEC, PROC_EVENT_EXIT, PROC_EVENT_FORK,
};
use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{AddressFamily, SendFlags, SocketFlags, SocketType};

use super::netlink::{self, HDRLEN, u16_at, u32_at};
use crate::ids::Pid;

/// `struct cn_msg` (id idx/val, seq, ack, len, flags) before its data.
const CN_MSG_LEN: usize = 20;
/// Room for one datagram in a drain: the connector sends one event a
/// datagram, under a hundred bytes with its headers; a longer one is cut
/// and then skipped by [`parse`] (its length says more than is there).
const DATAGRAM: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcEvent {
    /// A new process (not thread) was forked.
    Fork { parent: Pid, child: Pid },
    /// A process replaced its image, or its main thread renamed itself
    /// (`process.title`, `setproctitle` and npm's `npm exec <pkg>` set the
    /// comm with the title): cached argv is stale.
    Exec { pid: Pid },
    /// A process (thread group leader) exited.
    Exit { pid: Pid },
}

/// The proc connector: a subscribed, non-blocking netlink socket.
pub struct Connector;

/// Result of draining the socket.
#[derive(Debug, Default)]
pub struct Batch {
    pub events: Vec<ProcEvent>,
    /// The kernel dropped events (ENOBUFS): a full rescan is needed.
    pub lost: bool,
}

impl Connector {
    /// Opens and subscribes; the fd is what to wait on and pass to [`Connector::drain`].
    pub fn open() -> io::Result<OwnedFd> {
        let fd = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            Some(rustix::net::netlink::CONNECTOR),
        )?;
        // Threads and ignored kinds dropped by the kernel (issue 37). Best
        // effort: without it the same events are dropped by `parse`. Before
        // the bind, which joins the group: events queue from then on (when
        // any other listener is subscribed), and they would pass unfiltered.
        let _ = crate::sys::attach_socket_filter(std::os::fd::AsFd::as_fd(&fd), &super::events_filter::program());
        rustix::net::bind(&fd, &SocketAddrNetlink::new(0, CN_IDX_PROC))?;
        // A larger buffer rides out fork storms (best effort).
        // Forced as root: `rmem_max` (208 KiB by default) caps the plain
        // request at ~400 datagrams.
        if rustix::net::sockopt::set_socket_recv_buffer_size_force(&fd, 4 << 20).is_err() {
            let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&fd, 4 << 20);
        }
        let msg = listen_message(rustix::process::getpid().as_raw_nonzero().get().cast_unsigned());
        rustix::net::sendto(&fd, &msg, SendFlags::empty(), &SocketAddrNetlink::new(0, 0))?;
        Ok(fd)
    }

    /// Checks that events really flow: a subscription is accepted in any PID
    /// namespace, but the kernel delivers nothing outside the initial one
    /// (and there is no connector in a network namespace of one's own). A
    /// short-lived child of ours (this binary with `--version`) must be
    /// reported within `within`; the error says why it was not, once.
    pub fn prove(fd: BorrowedFd<'_>, within: std::time::Duration) -> io::Result<()> {
        let exe = std::env::current_exe()?;
        let child = std::process::Command::new(exe)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let pid = Pid::new(i32::try_from(child.id()).unwrap_or(0));
        let mut child = child;
        let _ = child.wait();
        let deadline = std::time::Instant::now() + within;
        let mut buf = vec![0u8; 8192];
        loop {
            let batch = Self::drain(fd, &mut buf)?;
            let seen = batch.events.iter().any(|e| match *e {
                ProcEvent::Fork { child, .. } => Some(child) == pid,
                ProcEvent::Exec { pid: p } | ProcEvent::Exit { pid: p } => Some(p) == pid,
            });
            if seen {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::Error::other(silence_reason(within)));
            }
            let ts = rustix::time::Timespec {
                tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(left.subsec_nanos()),
            };
            let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
            let _ = rustix::event::poll(&mut fds, Some(&ts));
        }
    }

    /// Reads everything queued now. `WouldBlock` is not an error: it ends the batch.
    /// Datagrams are taken many at a time ([`crate::sys::recv_datagrams`]),
    /// each in a [`DATAGRAM`]-byte piece of `buf`; a call that fills fewer
    /// pieces than it had emptied the queue, and ends the batch without
    /// the extra call that would say so.
    pub fn drain(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Batch> {
        let mut batch = Batch::default();
        let mut lens = Vec::with_capacity(crate::sys::DATAGRAMS_AT_ONCE);
        let room = (buf.len() / DATAGRAM).min(crate::sys::DATAGRAMS_AT_ONCE);
        loop {
            match crate::sys::recv_datagrams(fd, buf, DATAGRAM, &mut lens) {
                Ok(()) => {
                    for (i, &n) in lens.iter().enumerate() {
                        parse(&buf[i * DATAGRAM..][..n], &mut batch.events);
                    }
                    if lens.len() < room.max(1) {
                        return Ok(batch);
                    }
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) => return Ok(batch),
                    Some(libc::EINTR) => {}
                    Some(libc::ENOBUFS) => batch.lost = true,
                    _ => return Err(e),
                },
            }
        }
    }
}

/// Inode of the initial PID namespace (`PROC_PID_INIT_INO`).
const INITIAL_PID_NS: &str = "pid:[4026531836]";

/// Why no event came for our own child.
fn silence_reason(within: std::time::Duration) -> String {
    let ns = std::fs::read_link("/proc/self/ns/pid").map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let why = if !ns.is_empty() && ns != INITIAL_PID_NS {
        format!(
            "this daemon runs in a PID namespace other than the initial one ({ns}), and the kernel sends process events only there"
        )
    } else {
        "the connector delivers nothing here (a network namespace of its own has no proc connector)".to_string()
    };
    format!("subscribed, but no event for a child of ours arrived within {} ms: {why}", within.as_millis())
}

fn listen_message(port: u32) -> Vec<u8> {
    let total = HDRLEN + CN_MSG_LEN + 4;
    let mut m = Vec::with_capacity(total);
    let len = u32::try_from(total).expect("a message of a few dozen bytes");
    netlink::push_header(&mut m, len, netlink::DONE, 0, 0, port);
    m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // ack
    m.extend_from_slice(&4u16.to_ne_bytes()); // len
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
    m
}

/// Parses one datagram (one or more netlink messages). Never panics: the
/// kernel is trusted, but the parser is also fuzzed.
pub fn parse(buf: &[u8], out: &mut Vec<ProcEvent>) {
    let mut off = 0;
    while off + HDRLEN <= buf.len() {
        let Some((len, ty)) = netlink::header(&buf[off..]) else { return };
        if len < HDRLEN || off + len > buf.len() {
            return;
        }
        if ty != netlink::ERROR {
            parse_cn(&buf[off + HDRLEN..off + len], out);
        }
        off += netlink::align(len);
    }
}

fn parse_cn(b: &[u8], out: &mut Vec<ProcEvent>) {
    if u32_at(b, 0) != Some(CN_IDX_PROC) || u32_at(b, 4) != Some(CN_VAL_PROC) {
        return;
    }
    let Some(data_len) = u16_at(b, 16).map(usize::from) else { return };
    let Some(ev) = b.get(CN_MSG_LEN..CN_MSG_LEN + data_len) else { return };
    let Some(what) = u32_at(ev, 0) else { return };
    let d = 16; // what, cpu, timestamp_ns
    let pid = |off: usize| u32_at(ev, d + off).and_then(|v| i32::try_from(v).ok()).and_then(Pid::new);
    match what {
        PROC_EVENT_FORK => {
            // Threads share the tgid: only new processes matter.
            if let (Some(parent), Some(child), Some(child_pid)) = (pid(4), pid(12), pid(8))
                && child == child_pid
            {
                out.push(ProcEvent::Fork { parent, child });
            }
        }
        PROC_EVENT_EXEC => {
            if let Some(p) = pid(4) {
                out.push(ProcEvent::Exec { pid: p });
            }
        }
        PROC_EVENT_COMM => {
            // A thread's own name is no title: only the main thread's.
            if let (Some(p), Some(tgid)) = (pid(0), pid(4))
                && p == tgid
            {
                out.push(ProcEvent::Exec { pid: p });
            }
        }
        PROC_EVENT_EXIT => {
            if let (Some(p), Some(tgid)) = (pid(0), pid(4))
                && p == tgid
            {
                out.push(ProcEvent::Exit { pid: p });
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(what: u32, fields: &[u32]) -> Vec<u8> {
        let mut ev = Vec::new();
        ev.extend_from_slice(&what.to_ne_bytes());
        ev.extend_from_slice(&0u32.to_ne_bytes());
        ev.extend_from_slice(&0u64.to_ne_bytes());
        for f in fields {
            ev.extend_from_slice(&f.to_ne_bytes());
        }
        let mut m = listen_message(0);
        m.truncate(HDRLEN + CN_MSG_LEN);
        m[16 + 16..16 + 18].copy_from_slice(&(ev.len() as u16).to_ne_bytes());
        m.extend_from_slice(&ev);
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    #[test]
    fn parses_fork_exec_exit_and_skips_threads() {
        let mut out = Vec::new();
        let mut buf = msg(PROC_EVENT_FORK, &[10, 10, 11, 11]);
        buf.extend(msg(PROC_EVENT_FORK, &[10, 10, 12, 11])); // a thread of 11
        buf.extend(msg(PROC_EVENT_EXEC, &[11, 11]));
        buf.extend(msg(PROC_EVENT_COMM, &[12, 11, 0, 0, 0, 0])); // a thread named itself
        buf.extend(msg(PROC_EVENT_COMM, &[11, 11, 0x006d_706e, 0, 0, 0])); // retitled "npm"
        buf.extend(msg(PROC_EVENT_EXIT, &[12, 11, 0, 17, 10, 10])); // thread exit
        buf.extend(msg(PROC_EVENT_EXIT, &[11, 11, 0, 17, 10, 10]));
        parse(&buf, &mut out);
        let p = |n| Pid::new(n).unwrap();
        assert_eq!(
            out,
            vec![
                ProcEvent::Fork { parent: p(10), child: p(11) },
                ProcEvent::Exec { pid: p(11) },
                ProcEvent::Exec { pid: p(11) },
                ProcEvent::Exit { pid: p(11) }
            ]
        );
    }

    #[test]
    fn truncated_or_garbage_input_is_ignored() {
        let full = msg(PROC_EVENT_EXIT, &[11, 11, 0, 17, 10, 10]);
        for cut in 0..full.len() {
            let mut out = Vec::new();
            parse(&full[..cut], &mut out);
            assert!(out.is_empty(), "cut at {cut}");
        }
        let mut out = Vec::new();
        parse(&[0xff; 64], &mut out);
        assert!(out.is_empty());
    }
}
