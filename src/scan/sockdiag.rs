//! The peer and shutdown state of one unix socket, by inode, from the
//! kernel's socket diagnostics (`NETLINK_SOCK_DIAG`, `unix_diag`): the same
//! source as `ss -x`. No other interface tells whether a socket's peer is
//! still there, and who it is, without holding the socket itself.
//!
//! Limits: the kernel looks the inode up in the network namespace of the
//! diagnostics socket, so a daemon in a private network namespace (the
//! shipped system unit has `PrivateNetwork=yes` and allows `AF_UNIX` only)
//! cannot ask; `link.rs` then polls a duplicate of the socket instead
//! ([`super::sockpoll`]).

use std::io;
use std::os::fd::OwnedFd;

use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketType, netlink::SocketAddrNetlink};

use super::netlink::{self, HDRLEN, u16_at, u32_at};

/// `SOCK_DIAG_BY_FAMILY` (`linux/sock_diag.h`; not in libc).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `linux/unix_diag.h`: show the peer's inode.
const UDIAG_SHOW_PEER: u32 = 0x4;
const UNIX_DIAG_PEER: u16 = 2;
const UNIX_DIAG_SHUTDOWN: u16 = 6;
/// `sk_shutdown` bit: no more data will arrive (the peer shut down writing, or closed).
pub const RCV_SHUTDOWN: u8 = 1;

/// `TCP_ESTABLISHED`: the state of a connected unix socket.
pub const ESTABLISHED: u8 = 1;
/// `SOCK_STREAM` and `SOCK_SEQPACKET`: the kinds whose peer's close is a shutdown.
pub const STREAM: u8 = 1;
pub const SEQPACKET: u8 = 5;

/// What the kernel says about one unix socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnixSocket {
    /// `SOCK_STREAM` (1), `SOCK_DGRAM` (2), `SOCK_SEQPACKET` (5).
    pub kind: u8,
    /// `TCP_ESTABLISHED` (1) for a connected socket, whatever its peer did since.
    pub state: u8,
    /// Inode of the peer; 0 when the peer was closed (released).
    pub peer: Option<u32>,
    /// `sk_shutdown` of this socket ([`RCV_SHUTDOWN`]: nothing more will be read).
    pub shutdown: u8,
}

/// Asks about the unix socket with inode `ino` (in this process's network
/// namespace). `Err(NotFound)` when the namespace has no such socket.
pub fn unix_socket(ino: u32) -> io::Result<UnixSocket> {
    query(&open()?, ino)
}

/// A socket-diagnostics socket, for [`query`].
pub fn open() -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        rustix::net::SocketFlags::CLOEXEC,
        Some(rustix::net::netlink::SOCK_DIAG),
    )?)
}

/// [`unix_socket`] through a socket from [`open`].
pub fn query(fd: &OwnedFd, ino: u32) -> io::Result<UnixSocket> {
    let mut msg = Vec::with_capacity(40);
    // nlmsg_len: header 16 + unix_diag_req 24; seq 1; pid 0: the kernel fills it in.
    netlink::push_header(&mut msg, 40, SOCK_DIAG_BY_FAMILY, netlink::F_REQUEST, 1, 0);
    msg.push(1); // sdiag_family: AF_UNIX
    msg.push(0); // sdiag_protocol
    msg.extend_from_slice(&0u16.to_ne_bytes()); // pad
    msg.extend_from_slice(&u32::MAX.to_ne_bytes()); // udiag_states: all
    msg.extend_from_slice(&ino.to_ne_bytes());
    msg.extend_from_slice(&UDIAG_SHOW_PEER.to_ne_bytes());
    msg.extend_from_slice(&u32::MAX.to_ne_bytes()); // cookie: INET_DIAG_NOCOOKIE
    msg.extend_from_slice(&u32::MAX.to_ne_bytes());
    rustix::net::sendto(fd, &msg, SendFlags::empty(), &SocketAddrNetlink::new(0, 0))?;
    let mut buf = vec![0u8; 1024];
    let n = rustix::net::recv(fd, &mut buf[..], RecvFlags::empty())?.0;
    parse(&buf[..n.min(buf.len())])
}

/// Parses the kernel's one reply: a `unix_diag_msg` with attributes, or an error.
fn parse(b: &[u8]) -> io::Result<UnixSocket> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed sock_diag reply");
    let (len, kind) = netlink::header(b).ok_or_else(bad)?;
    let b = b.get(..len).ok_or_else(bad)?;
    if kind == netlink::ERROR {
        let errno = u32_at(b, HDRLEN).ok_or_else(bad)?.cast_signed();
        return Err(io::Error::from_raw_os_error(-errno));
    }
    if kind != SOCK_DIAG_BY_FAMILY {
        return Err(bad());
    }
    // nlmsghdr (16) + unix_diag_msg (16: family, type, state, pad, ino,
    // cookie), then 4-aligned attributes.
    if b.len() < 32 {
        return Err(bad());
    }
    let mut at = 32;
    let mut out = UnixSocket { kind: b[17], state: b[18], peer: None, shutdown: 0 };
    while let (Some(alen), Some(atype)) = (u16_at(b, at), u16_at(b, at + 2)) {
        let alen = alen as usize;
        if alen < 4 {
            break;
        }
        match atype {
            UNIX_DIAG_PEER => out.peer = u32_at(b, at + 4),
            UNIX_DIAG_SHUTDOWN => out.shutdown = b.get(at + 4).copied().unwrap_or(0),
            _ => {}
        }
        at += netlink::align(alen);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::net::UnixStream;

    fn ino(s: &UnixStream) -> u32 {
        u32::try_from(std::fs::metadata(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(s))).unwrap().ino())
            .unwrap()
    }

    #[test]
    fn sees_the_peer_then_its_shutdown_and_close() {
        let (a, b) = UnixStream::pair().unwrap();
        let live = match unix_socket(ino(&a)) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("SKIPPED: sock_diag unavailable here: {e}");
                return;
            }
        };
        assert_eq!(live, UnixSocket { kind: 1, state: ESTABLISHED, peer: Some(ino(&b)), shutdown: 0 });
        b.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(unix_socket(ino(&a)).unwrap().shutdown & RCV_SHUTDOWN, RCV_SHUTDOWN);
        drop(b);
        // Another test thread forking at this moment holds a copy of `b`
        // until its child execs (close-on-exec): wait for the release.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut closed = unix_socket(ino(&a)).unwrap();
        while closed.peer != Some(0) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            closed = unix_socket(ino(&a)).unwrap();
        }
        assert_eq!(closed.peer, Some(0), "a released peer shows as inode 0");
        assert!(unix_socket(0x7fff_fff0).is_err());
    }
}
