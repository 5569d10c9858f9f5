//! The kernel's TCP socket tables (`/proc/PID/net/tcp{,6}`): what the
//! metrics listener needs of them (who owns the other end of a connection,
//! who holds a port), and the row parser the listener check of a host
//! (`listen.rs`) reads its own bounded copy of the tables with. Read a line at a time (memory stays flat however many sockets
//! there are), up to [`MAX_TABLE`] bytes of each: the kernel formats each
//! row anew at every read, some 3-9 µs a socket (measured: 24,000
//! established sockets, 205 ms), and a local user can add sockets (even
//! closed ones: `TIME_WAIT` rows cost them nothing), so reading is bounded,
//! and past the cut a socket is simply not found.

use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// `TCP_ESTABLISHED` in the `st` column.
pub const ESTABLISHED: u8 = 0x01;
/// `TCP_LISTEN` there.
pub const LISTEN: u8 = 0x0A;

/// Bytes of one table read, at most: ~220,000 sockets, more than the
/// kernel keeps in `TIME_WAIT` (`tcp_max_tw_buckets`, half the established
/// hash: 131,072 on a 4 GiB machine), about a second to read.
pub const MAX_TABLE: u64 = 32 << 20;

/// One socket: `sl local rem st tx:rx tr:when retrnsmt uid timeout inode …`.
#[derive(Debug, PartialEq, Eq)]
pub struct Row {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: u8,
    /// The socket's owner, as seen from this process's user namespace.
    pub uid: u32,
    pub inode: u64,
}

/// Calls `each` with every row of `net`'s `tcp` and `tcp6` tables (`net` is
/// a `/proc/PID/net` directory) until it returns true; whether it did.
/// A missing `tcp6` (IPv6 off) is an empty table.
pub fn find(net: &Path, mut each: impl FnMut(&Row) -> bool) -> bool {
    let mut line = String::new();
    for table in ["tcp", "tcp6"] {
        let Ok(f) = std::fs::File::open(net.join(table)) else { continue };
        let mut r = BufReader::with_capacity(64 << 10, f.take(MAX_TABLE));
        // A read error ends the table: what came before it was whole lines.
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if parse(&line).is_some_and(|row| each(&row)) {
                return true;
            }
        }
    }
    false
}

/// One line of the table; `None` for the header or anything malformed.
pub fn parse(line: &str) -> Option<Row> {
    let mut f = line.split_whitespace();
    let _sl = f.next()?;
    let local = addr(f.next()?)?;
    let remote = addr(f.next()?)?;
    let state = u8::from_str_radix(f.next()?, 16).ok()?;
    let (_queues, _timer, _retransmits) = (f.next()?, f.next()?, f.next()?);
    let uid = f.next()?.parse().ok()?;
    let _timeout = f.next()?;
    let inode = f.next()?.parse().ok()?;
    Some(Row { local, remote, state, uid, inode })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the address
/// as the kernel stores it (network order), printed 32 bits at a time in
/// this machine's order; the port as a number.
fn addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| ip.get(i * 8..i * 8 + 8).and_then(|w| u32::from_str_radix(w, 16).ok()).map(u32::to_ne_bytes);
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(unmapped(SocketAddr::new(ip, port)))
}

/// An IPv4 address in IPv6 clothes (`::ffff:127.0.0.1`, what a dual-stack
/// listener sees of an IPv4 client) as the IPv4 address the client's own
/// socket shows.
pub fn unmapped(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, |v4| SocketAddr::new(IpAddr::V4(v4), a.port())),
        IpAddr::V4(_) => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn rows_of_both_tables_are_read_in_this_machines_order() {
        // From a real /proc/net/tcp and tcp6 (little-endian x86_64).
        let v4 = "   1: 0100007F:9C40 0100007F:2468 01 00000000:00000000 00:00000000 00000000 65534        0 4343 1 0000000000000000 20 4 30 10 -1";
        let r = parse(v4).unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(r.local, sa("127.0.0.1:40000"));
            assert_eq!(r.remote, sa("127.0.0.1:9320"));
        }
        assert_eq!((r.state, r.uid, r.inode), (ESTABLISHED, 65534, 4343));
        let v6 = "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0";
        let r = parse(v6).unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(r.local, sa("[::1]:8080"));
        }
        assert_eq!((r.state, r.uid, r.inode), (LISTEN, 0, 777));
        // A v4-mapped address is its IPv4 address.
        let mapped = "   2: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:A000 01 00000000:00000000 00:00000000 00000000  1000        0 9 1";
        if cfg!(target_endian = "little") {
            assert_eq!(parse(mapped).unwrap().local, sa("127.0.0.1:8080"));
        }
        assert_eq!(
            parse("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"),
            None
        );
        assert_eq!(parse("   1: 0100007F:9C40"), None);
    }

    #[test]
    fn a_real_connection_is_found_with_its_owner() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (local, remote) = (c.local_addr().unwrap(), c.peer_addr().unwrap());
        let mut uid = None;
        let found = find(Path::new("/proc/self/net"), |r| {
            uid = Some(r.uid);
            r.state == ESTABLISHED && r.local == local && r.remote == remote
        });
        assert!(found, "{local} → {remote} not in /proc/self/net/tcp");
        assert_eq!(uid, Some(rustix::process::geteuid().as_raw()));
    }
}
