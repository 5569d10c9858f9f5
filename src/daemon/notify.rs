//! `sd_notify(3)` without libsystemd: one datagram to `$NOTIFY_SOCKET`.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

pub struct Notifier {
    sock: Option<(UnixDatagram, SocketAddr)>,
    /// Half the watchdog interval, when systemd asked for pings.
    pub watchdog: Option<Duration>,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` and `WATCHDOG_USEC` (honouring `WATCHDOG_PID`).
    pub fn from_env() -> Notifier {
        let sock = std::env::var("NOTIFY_SOCKET").ok().and_then(|path| {
            let addr = match path.strip_prefix('@') {
                Some(abs) => SocketAddr::from_abstract_name(abs.as_bytes()).ok()?,
                None => SocketAddr::from_pathname(&path).ok()?,
            };
            Some((UnixDatagram::unbound().ok()?, addr))
        });
        let for_us = std::env::var("WATCHDOG_PID")
            .ok()
            .and_then(|p| p.parse::<u32>().ok())
            .is_none_or(|p| p == std::process::id());
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.parse::<u64>().ok())
            .filter(|&u| u > 0 && for_us)
            .map(|u| Duration::from_micros(u / 2));
        Notifier { sock, watchdog }
    }

    pub fn enabled(&self) -> bool {
        self.sock.is_some()
    }

    pub fn send(&self, state: &str) {
        if let Some((sock, addr)) = &self.sock
            && let Err(e) = sock.send_to_addr(state.as_bytes(), addr)
        {
            tracing::debug!("sd_notify failed: {e}");
        }
    }

    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={status}"));
    }

    pub fn status(&self, status: &str) {
        self.send(&format!("STATUS={status}"));
    }

    /// For `Type=notify-reload`: RELOADING=1 with the monotonic time.
    pub fn reloading(&self) {
        let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        // CLOCK_MONOTONIC is never negative.
        let usec = now.tv_sec.cast_unsigned() * 1_000_000 + now.tv_nsec.cast_unsigned() / 1000;
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={usec}"));
    }

    pub fn watchdog_ping(&self) {
        self.send("WATCHDOG=1");
    }

    pub fn stopping(&self) {
        self.send("STOPPING=1");
    }
}
