//! Who holds the port `[metrics] listen` could not be bound on, for the
//! error the daemon exits with: the listening socket's owner from this
//! namespace's socket table, and its process from a scan of the fd tables
//! (`/proc/*/fd`, only the ones this daemon may read; bounded, once, at
//! start-up).

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::scan::tcp_table::{self as table, LISTEN};

/// Fd links read at most while looking for the holder's process.
const MAX_LINKS: usize = 200_000;
/// Nor longer than this.
const MAX_TIME: Duration = Duration::from_secs(2);

/// "uid 1000, pid 4242 (python3)", or the uid alone when no process shows
/// the socket; `None` when no listening socket on `addr`'s port is seen.
pub fn holder(addr: SocketAddr) -> Option<String> {
    let mut found = None;
    table::find(Path::new("/proc/self/net"), |r| {
        let clash = r.local.ip() == addr.ip() || r.local.ip().is_unspecified() || addr.ip().is_unspecified();
        if r.state == LISTEN && r.local.port() == addr.port() && clash {
            found = Some((r.uid, r.inode, r.local));
        }
        found.is_some()
    });
    let (uid, inode, local) = found?;
    Some(match process_of(inode) {
        Some((pid, comm)) => format!("uid {uid}, pid {pid} ({}) listening on {local}", crate::names::printable(&comm)),
        None => format!("uid {uid} (its process is not visible here) listening on {local}"),
    })
}

/// The first process with the socket `inode` on one of its fds, and its name.
fn process_of(inode: u64) -> Option<(i32, String)> {
    let want = format!("socket:[{inode}]");
    let start = Instant::now();
    let mut links = 0usize;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            links += 1;
            if links > MAX_LINKS || start.elapsed() > MAX_TIME {
                return None;
            }
            if std::fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == want.as_str()) {
                let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                return Some((pid, comm.trim_end().to_string()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_is_named_as_the_holder_of_its_port() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let me = format!("uid {}, pid {} (", rustix::process::geteuid().as_raw(), std::process::id());
        // The fd scan gives up after MAX_TIME, which a busy machine can pass.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut h = super::holder(addr).expect("the listener is seen");
        while !h.starts_with(&me) && std::time::Instant::now() < deadline {
            h = super::holder(addr).expect("the listener is seen");
        }
        assert!(h.starts_with(&me) && h.ends_with(&format!("listening on {addr}")), "{h}");
        // Any address on the same port clashes with a wildcard and back.
        assert!(super::holder(format!("0.0.0.0:{}", addr.port()).parse().unwrap()).is_some());
        drop(l);
        // Another test's child, forked before it execs, holds a copy of the
        // socket for a moment; wait for the last copy to go.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while super::holder(addr).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(super::holder(addr), None);
    }
}
