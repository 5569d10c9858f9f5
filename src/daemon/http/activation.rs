//! Socket activation (`sd_listen_fds(3)`'s protocol, read by hand: three
//! environment variables, no crate): the metrics listener passed by the
//! service manager (`systemd/mcp-reaper-metrics.socket`). The manager binds
//! the port at boot, before any user can, and privileged; the daemon, in a
//! unit that may open no network socket of its own, serves it.
//!
//! `LISTEN_PID` must be this process (the variables may have been inherited
//! from a parent they were meant for), fds `3 .. 3 + LISTEN_FDS` are the
//! passed ones, `LISTEN_FDNAMES` names them (`FileDescriptorName=metrics`).
//! Every passed fd is made close-on-exec and the variables are unset, so
//! nothing the daemon starts inherits either.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use rustix::net::{AddressFamily, SocketType, sockopt};

/// The name the shipped socket unit gives its fd.
pub const NAME: &str = "metrics";

/// The variables of the protocol.
const VARS: [&str; 3] = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"];

/// Fds taken at most: the protocol has no limit, this daemon needs one.
const MAX_FDS: u32 = 64;

/// The listener passed for metrics.
#[derive(Debug)]
pub struct Passed {
    pub listener: std::net::TcpListener,
    pub addr: SocketAddr,
    /// Its fd number and name, for the log.
    pub fd: i32,
    pub name: String,
}

/// The metrics listener the service manager passed, if it passed any;
/// an error when it passed sockets of which none can serve. Call once, at
/// start-up, while this is the process's only thread (see
/// [`crate::sys::take_passed_fds`]).
pub fn take() -> Result<Option<Passed>, String> {
    let vars: Vec<Option<String>> = VARS.iter().map(|v| std::env::var(v).ok()).collect();
    if vars.iter().all(Option::is_none) {
        return Ok(None);
    }
    if !crate::sys::unset_env_alone(&VARS) {
        tracing::warn!("socket activation: LISTEN_* are left set (another thread runs already)");
    }
    let me = std::process::id();
    let pid: Option<u32> = vars[0].as_deref().and_then(|p| p.parse().ok());
    if pid != Some(me) {
        tracing::debug!("socket activation: LISTEN_PID {:?} is not this process ({me}): ignored", vars[0]);
        return Ok(None);
    }
    let n: u32 = match vars[1].as_deref().map(str::parse) {
        Some(Ok(n)) if n <= MAX_FDS => n,
        _ => {
            let got =
                vars[1].as_deref().map_or_else(|| "unset".into(), |v| format!("{:?}", crate::names::printable(v)));
            return Err(format!("socket activation: LISTEN_FDS is {got}, not a count up to {MAX_FDS}"));
        }
    };
    let names: Vec<String> = match vars[2].as_deref().map(|s| s.split(':').map(str::to_string).collect::<Vec<_>>()) {
        Some(v) if v.len() == n as usize => v,
        _ => vec!["unknown".into(); n as usize],
    };
    let fds = crate::sys::take_passed_fds(n);
    choose(fds.into_iter().zip(names).collect())
}

/// The fd named [`NAME`], or the only one passed; the others are closed.
fn choose(passed: Vec<(Option<OwnedFd>, String)>) -> Result<Option<Passed>, String> {
    let listing = || passed.iter().map(|(_, n)| crate::names::printable(n).into_owned()).collect::<Vec<_>>().join(", ");
    let pick = passed.iter().position(|(_, n)| n == NAME).or((passed.len() == 1).then_some(0));
    let Some(i) = pick else {
        return if passed.is_empty() {
            Ok(None)
        } else {
            Err(format!(
                "socket activation: {} sockets passed ({}), none named \"{NAME}\" (FileDescriptorName={NAME})",
                passed.len(),
                listing()
            ))
        };
    };
    let (others, several) = (listing(), passed.len() > 1);
    let (fd, name) = passed.into_iter().nth(i).expect("chosen among them");
    if several {
        tracing::warn!(
            "socket activation: serving metrics on \"{name}\"; the other sockets passed are closed ({others})"
        );
    }
    let name = crate::names::printable(&name).into_owned();
    let fd = fd.ok_or_else(|| format!("socket activation: fd {} (\"{name}\") is not open", 3 + i))?;
    let raw = fd.as_raw_fd();
    let addr = listening_tcp(&fd)
        .map_err(|why| format!("socket activation: fd {raw} (\"{name}\") is not a listening TCP socket: {why}"))?;
    let listener = std::net::TcpListener::from(fd);
    listener.set_nonblocking(true).map_err(|e| format!("socket activation: fd {raw}: {e}"))?;
    Ok(Some(Passed { listener, addr, fd: raw, name }))
}

/// The address of `fd` when it is a listening TCP socket; else why not.
fn listening_tcp(fd: &OwnedFd) -> Result<SocketAddr, String> {
    let st = rustix::fs::fstat(fd).map_err(|e| e.to_string())?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Socket {
        return Err("not a socket".into());
    }
    let family = sockopt::socket_domain(fd).map_err(|e| e.to_string())?;
    if family != AddressFamily::INET && family != AddressFamily::INET6 {
        return Err("not an IP socket (ListenStream= an address and port)".into());
    }
    if sockopt::socket_type(fd).map_err(|e| e.to_string())? != SocketType::STREAM {
        return Err("not a stream socket (ListenStream=, not ListenDatagram=)".into());
    }
    if !sockopt::socket_acceptconn(fd).map_err(|e| e.to_string())? {
        return Err("not listening (Accept=no is needed)".into());
    }
    let addr = rustix::net::getsockname(fd).map_err(|e| e.to_string())?;
    SocketAddr::try_from(addr).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener() -> OwnedFd {
        OwnedFd::from(std::net::TcpListener::bind("127.0.0.1:0").unwrap())
    }

    #[test]
    fn the_fd_named_metrics_or_the_only_one_is_served_and_checked() {
        let p = choose(vec![(Some(listener()), "other".into())]).unwrap().unwrap();
        assert!(p.addr.ip().is_loopback() && p.addr.port() != 0);
        let p = choose(vec![(Some(listener()), "x".into()), (Some(listener()), NAME.into())]).unwrap().unwrap();
        assert_eq!(p.name, NAME);
        let e = choose(vec![(Some(listener()), "a".into()), (Some(listener()), "b".into())]).unwrap_err();
        assert!(e.contains("none named \"metrics\"") && e.contains("a, b"), "{e}");
        assert!(choose(vec![]).unwrap().is_none());
        let e = choose(vec![(None, NAME.into())]).unwrap_err();
        assert!(e.contains("fd 3 (\"metrics\") is not open"), "{e}");
    }

    #[test]
    fn anything_but_a_listening_tcp_socket_is_refused_with_the_reason() {
        let unbound = OwnedFd::from(std::net::TcpStream::connect(listener_addr()).unwrap());
        let e = choose(vec![(Some(unbound), NAME.into())]).unwrap_err();
        assert!(e.contains("not listening"), "{e}");
        let udp = OwnedFd::from(std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
        assert!(choose(vec![(Some(udp), NAME.into())]).unwrap_err().contains("not a stream socket"));
        let file = OwnedFd::from(std::fs::File::open("/proc/self/stat").unwrap());
        assert!(choose(vec![(Some(file), NAME.into())]).unwrap_err().contains("not a socket"));
        let (unix, _other) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(choose(vec![(Some(unix.into()), NAME.into())]).unwrap_err().contains("not an IP socket"));
    }

    fn listener_addr() -> SocketAddr {
        // Leaked for the test's life: the connection above needs it to exist.
        let l = Box::leak(Box::new(std::net::TcpListener::bind("127.0.0.1:0").unwrap()));
        l.local_addr().unwrap()
    }
}
