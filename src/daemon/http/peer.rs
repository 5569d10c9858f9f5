//! Who a metrics connection is from, the key its fair share is counted by:
//! the uid owning the other end when that end is a socket of this machine
//! (a local user, a kubelet in the host's network namespace), else the
//! peer's address. TCP has no `SO_PEERCRED`; the owner is in the kernel's
//! socket table, the row whose local and remote ends are the connection's
//! remote and local ends (a 4-tuple is unique among a namespace's
//! established sockets, so no other socket can stand in for it).
//!
//! Which tables: the listener's own network namespace's (found by its inode
//! in `/proc/self/net`, or in PID 1's when the service manager passed a
//! socket of the host's to a service in a private namespace), and the
//! host's (PID 1's) besides, when the listener's is another: a pod's
//! kubelet probes come from the node's namespace, through the same node
//! address a local user's connection would have.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::scan::tcp_table::{self as table, ESTABLISHED, LISTEN};

/// A connection's owner, as the fair share counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    Uid(u32),
    Addr(IpAddr),
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Uid(u) => write!(f, "uid {u}"),
            Peer::Addr(a) => write!(f, "{a}"),
        }
    }
}

/// Tables are read again no sooner than this after the last read ended,
/// nor sooner than half the time it took: a flood of connections is looked
/// up in batches (one read finds every connection waiting to be accepted),
/// and reads take at most two thirds of a core (of a blocking thread's, not
/// the runtime's) however large a user makes the table, while a new
/// client waits for at most two and a half reads.
const REREAD_EVERY: Duration = Duration::from_millis(10);

/// Owners remembered from the last read, at most (~1 MiB): more than the
/// connections that can wait in a listen backlog.
const MAX_KNOWN: usize = 16_384;

/// The tables, and the owners of the connections not yet accepted.
pub struct Peers {
    nets: Vec<PathBuf>,
    port: u16,
    known: HashMap<(SocketAddr, SocketAddr), u32>,
    /// When the next read may start.
    next_read: Option<Instant>,
}

impl Peers {
    /// For `listener`, a bound TCP listener on `port` (its tables are found
    /// here, in the listening sockets at the head of each table).
    pub fn new(listener: &impl AsFd, port: u16) -> Peers {
        let nets = nets(listener);
        if nets.is_empty() {
            tracing::info!(
                "metrics: the listener is in no socket table this daemon can read; clients are told apart by address only"
            );
        }
        Peers { nets, port, known: HashMap::new(), next_read: None }
    }

    /// The owner of the connection `client` → `server` (as accepted).
    pub async fn of(&mut self, client: SocketAddr, server: SocketAddr) -> Peer {
        let key = (table::unmapped(client), table::unmapped(server));
        if self.nets.is_empty() {
            return Peer::Addr(key.0.ip());
        }
        // Each remembered owner is used once: a later connection that
        // happens to get the same ports again is looked up afresh.
        if let Some(uid) = self.known.remove(&key) {
            return Peer::Uid(uid);
        }
        if let Some(next) = self.next_read {
            tokio::time::sleep_until(next.into()).await;
        }
        let (nets, port) = (self.nets.clone(), self.port);
        let started = Instant::now();
        // Off the runtime's thread: the control socket and the loop go on
        // while a large table is read.
        self.known = tokio::task::spawn_blocking(move || owners(&nets, port)).await.unwrap_or_default();
        let took = started.elapsed();
        self.next_read = Some(Instant::now() + (took / 2).max(REREAD_EVERY));
        self.known.remove(&key).map_or(Peer::Addr(key.0.ip()), Peer::Uid)
    }
}

/// The owner of every established connection to `port` in `nets`' tables,
/// by (its local end, its remote end).
fn owners(nets: &[PathBuf], port: u16) -> HashMap<(SocketAddr, SocketAddr), u32> {
    let mut known = HashMap::new();
    for net in nets {
        table::find(net, |r| {
            if r.state == ESTABLISHED && r.remote.port() == port && known.len() < MAX_KNOWN {
                // The first table's row wins: the listener's own namespace.
                known.entry((r.local, r.remote)).or_insert(r.uid);
            }
            false
        });
    }
    known
}

/// The `/proc/PID/net` directories to look in: the one whose table holds
/// the listener's inode, then the host's when that is another namespace.
fn nets(listener: &impl AsFd) -> Vec<PathBuf> {
    let Ok(st) = rustix::fs::fstat(listener) else { return Vec::new() };
    let (own, host) = (Path::new("/proc/self/net"), Path::new("/proc/1/net"));
    let holds = |net: &Path| table::find(net, |r| r.state == LISTEN && r.inode == st.st_ino);
    if holds(own) {
        let ns = |p: &str| rustix::fs::stat(p).ok().map(|s| (s.st_dev, s.st_ino));
        // When PID 1's namespace cannot be told, it is read too: a second
        // table costs a read, never a wrong owner (4-tuples are unique).
        let same = ns("/proc/self/ns/net").is_some_and(|me| ns("/proc/1/ns/net") == Some(me));
        if same { vec![own.into()] } else { vec![own.into(), host.into()] }
    } else if holds(host) {
        vec![host.into()]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_client_is_its_uid_and_each_owner_serves_once() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut peers = Peers::new(&l, port);
        assert!(!peers.nets.is_empty(), "the listener is in no table");
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, client) = l.accept().unwrap();
        let server = s.local_addr().unwrap();
        let me = rustix::process::geteuid().as_raw();
        assert_eq!(rt.block_on(peers.of(client, server)), Peer::Uid(me));
        // Once used, gone from memory; the next look-up reads again.
        assert!(!peers.known.contains_key(&(client, server)));
        assert_eq!(rt.block_on(peers.of(client, server)), Peer::Uid(me));
        drop(c);
        // A connection in no table is its address.
        let far: SocketAddr = "192.0.2.7:5555".parse().unwrap();
        assert_eq!(rt.block_on(peers.of(far, server)), Peer::Addr(far.ip()));
    }
}
