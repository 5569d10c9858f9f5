//! Whether a process listens on a socket of its own: a way to reach it
//! other than its terminal or its stdin (`codex app-server --listen
//! ws://…`, a TUI's local server); else whether it holds an established
//! TCP connection (a relay driving it, Remote Control, or its model's API
//! mid-turn).
//! Read only for the hosts a `stale` rule weighs (issue 32): a host that
//! serves another channel is never stale by its terminal or stdin.
//!
//! The process's socket inodes come from its fd table; the listening ones
//! from its own network namespace's tables (`/proc/PID/net/{tcp,tcp6,unix}`,
//! which follow the process, so the shipped unit's private network
//! namespace does not hide them as socket diagnostics would). Each table
//! is read up to [`MAX_TABLE`]: a longer one is not guessed at, the answer
//! is unknown, and unknown keeps.

use std::collections::HashSet;
use std::os::fd::OwnedFd;

use rustix::fs::{Mode, OFlags};

use super::pid_dir::{read_at_most, readlink_at};
use super::process::Listening;
use super::procfs::ProcFs;
use super::tcp_table;
use crate::ids::Identity;

/// Fds of the process looked at, at most.
const MAX_FDS: usize = 4096;

/// Bytes of one socket table read, at most (~25,000 TCP sockets).
const MAX_TABLE: usize = 4 << 20;

/// `__SO_ACCEPTCON` in `/proc/net/unix`'s flags: a listening socket.
const ACCEPTCON: u32 = 0x0001_0000;

impl ProcFs {
    /// Whether `id` listens on a socket (see the module's header).
    pub fn listening(&self, id: Identity) -> Listening {
        let mut buf = Vec::with_capacity(4096);
        let Some(dir) = self.open_verified(id, &mut buf) else {
            return Listening::Unknown("the process could not be read");
        };
        let Some(inodes) = socket_inodes(&dir) else {
            return Listening::Unknown("its fd table could not be read");
        };
        if inodes.is_empty() {
            return Listening::No;
        }
        let mut connected = None;
        for (table, kind) in [("net/tcp", "TCP"), ("net/tcp6", "TCP"), ("net/unix", "unix")] {
            match read_at_most(&dir, table, &mut buf, MAX_TABLE) {
                Ok(()) if buf.len() >= MAX_TABLE => {
                    return Listening::Unknown("its network namespace has more sockets than are read");
                }
                Ok(()) => {}
                // IPv6 may be off; a table that cannot be read says nothing.
                Err(_) if table == "net/tcp6" => continue,
                Err(_) => return Listening::Unknown("its sockets' tables could not be read"),
            }
            let text = String::from_utf8_lossy(&buf);
            let found = if kind == "TCP" { tcp_listener(&text, &inodes) } else { unix_listener(&text, &inodes) };
            if let Some(what) = found {
                return Listening::Yes(what);
            }
            if kind == "TCP" && connected.is_none() {
                connected = tcp_connection(&text, &inodes);
            }
        }
        connected.map_or(Listening::No, Listening::Connected)
    }
}

/// The inodes of the sockets on the process's fds.
fn socket_inodes(dir: &OwnedFd) -> Option<HashSet<u64>> {
    let fds =
        rustix::fs::openat(dir, "fd", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let entries = rustix::fs::Dir::new(fds).ok()?;
    let mut out = HashSet::new();
    for e in entries.flatten().take(MAX_FDS) {
        let Some(fd) = e.file_name().to_str().ok().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let Some(target) = readlink_at(dir, &format!("fd/{fd}")) else { continue };
        if let Some(ino) =
            target.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')).and_then(|n| n.parse().ok())
        {
            out.insert(ino);
        }
    }
    Some(out)
}

/// A listening socket of the process among `/proc/net/tcp{,6}`'s lines.
fn tcp_listener(text: &str, inodes: &HashSet<u64>) -> Option<String> {
    tcp_socket(text, inodes, tcp_table::LISTEN).map(|r| format!("TCP port {}", r.local.port()))
}

/// An established connection of the process among them.
fn tcp_connection(text: &str, inodes: &HashSet<u64>) -> Option<String> {
    tcp_socket(text, inodes, tcp_table::ESTABLISHED).map(|r| format!("a TCP connection to port {}", r.remote.port()))
}

/// The first of the process's sockets in state `st` among the lines.
fn tcp_socket(text: &str, inodes: &HashSet<u64>, st: u8) -> Option<tcp_table::Row> {
    text.lines().skip(1).filter_map(tcp_table::parse).find(|r| r.state == st && inodes.contains(&r.inode))
}

/// `/proc/net/unix`: `Num RefCount Protocol Flags Type St Inode [Path]`.
fn unix_listener(text: &str, inodes: &HashSet<u64>) -> Option<String> {
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let flags = u32::from_str_radix(f.get(3)?, 16).ok()?;
        let ino: u64 = f.get(6)?.parse().ok()?;
        (flags & ACCEPTCON != 0 && inodes.contains(&ino)).then(|| match f.get(7) {
            Some(path) if path.starts_with('@') => "an abstract unix socket".to_string(),
            Some(path) => format!("unix socket {}", crate::names::printable(path)),
            None => "an unnamed unix socket".to_string(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_in_the_tables() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1194 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0\n   1: 0100007F:9C40 0100007F:1194 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0\n";
        let mine: HashSet<u64> = [4242].into();
        assert_eq!(tcp_listener(tcp, &mine).as_deref(), Some("TCP port 4500"));
        let connected: HashSet<u64> = [4343].into();
        assert_eq!(tcp_listener(tcp, &connected), None, "an established connection is not a listener");
        assert_eq!(tcp_connection(tcp, &connected).as_deref(), Some("a TCP connection to port 4500"));
        assert_eq!(tcp_connection(tcp, &mine), None);
        let unix = "Num       RefCount Protocol Flags    Type St Inode Path\n0000000000000000: 00000002 00000000 00010000 0001 01 777 /run/user/1000/app.sock\n0000000000000000: 00000003 00000000 00000000 0001 03 778\n";
        assert_eq!(unix_listener(unix, &[777].into()).as_deref(), Some("unix socket /run/user/1000/app.sock"));
        assert_eq!(unix_listener(unix, &[778].into()), None, "a connected socket is not a listener");
    }

    #[test]
    fn a_real_listener_is_seen_and_a_plain_process_is_not() {
        let procfs = ProcFs::new("/proc");
        let me = crate::ids::Pid::new(std::process::id().cast_signed()).unwrap();
        let id = procfs.process(me).unwrap().id;
        let before = procfs.listening(id);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        // Other tests of this binary may listen meanwhile (one process):
        // the answer may name their socket; it must say the process listens.
        let now = procfs.listening(id);
        assert!(matches!(now, Listening::Yes(_)), "port {port}: {now:?}, before: {before:?}");
        drop(l);
    }
}
