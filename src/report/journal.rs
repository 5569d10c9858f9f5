//! journald output through a socket of our own, in journald's native protocol.
//!
//! `tracing-journald` sends on a blocking socket and drops send errors: a
//! journald that stopped reading would hang the daemon at its next log line,
//! and one that went away would swallow every line after it. Here nothing
//! blocks for long; an entry journald does not take goes to stderr instead
//! (see [`super::log::init`]), and the switch is said once each way.

use std::io::{self, Write as _};
use std::os::fd::AsFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;

/// journald's native socket.
pub const SOCKET: &str = "/run/systemd/journal/socket";

/// Set while journald refuses entries; they go to stderr meanwhile. One flag
/// per process, like the one global subscriber it serves.
static DOWN: AtomicBool = AtomicBool::new(false);

/// Whether entries currently go to stderr because journald refused one.
pub fn is_down() -> bool {
    DOWN.load(Ordering::Relaxed)
}

/// A `tracing` layer writing each event as one journal entry.
pub struct Journal {
    socket: UnixDatagram,
    path: PathBuf,
    ident: String,
    /// Entries that went to stderr during the current outage.
    missed: AtomicU64,
}

impl Journal {
    /// A layer for journald's socket, checked to take an (empty) entry now,
    /// as `tracing-journald` checks it.
    pub fn new(ident: &str) -> io::Result<Journal> {
        Journal::at(Path::new(SOCKET), ident)
    }

    /// [`Journal::new`] for a socket elsewhere (tests).
    pub fn at(path: &Path, ident: &str) -> io::Result<Journal> {
        let socket = UnixDatagram::unbound()?;
        // A full queue must fail the send, not stall the daemon.
        socket.set_nonblocking(true)?;
        socket.send_to(&[], path)?;
        Ok(Journal { socket, path: path.to_path_buf(), ident: ident.to_string(), missed: AtomicU64::new(0) })
    }

    fn send(&self, entry: &[u8]) -> io::Result<()> {
        let mut r = self.send_once(entry);
        // A full queue may be a burst journald is about to read: wait a
        // little before calling it down, but not again while it is down.
        for ms in [5, 20] {
            match &r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && !is_down() => {}
                _ => break,
            }
            std::thread::sleep(Duration::from_millis(ms));
            r = self.send_once(entry);
        }
        r
    }

    fn send_once(&self, entry: &[u8]) -> io::Result<()> {
        match self.socket.send_to(entry, &self.path) {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => self.send_memfd(entry),
            Err(e) => Err(e),
        }
    }

    /// An entry too big for one datagram goes in a sealed memfd, which is
    /// journald's protocol for those.
    fn send_memfd(&self, entry: &[u8]) -> io::Result<()> {
        use rustix::fs::{MemfdFlags, SealFlags};
        use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketAddrUnix};
        let fd = rustix::fs::memfd_create("mcp-reaper-journal", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        let mut file = std::fs::File::from(fd);
        file.write_all(entry)?;
        rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE | SealFlags::SEAL)?;
        let addr = SocketAddrUnix::new(&self.path)?;
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let fds = [file.as_fd()];
        control.push(SendAncillaryMessage::ScmRights(&fds));
        rustix::net::sendmsg_addr(&self.socket, &addr, &[], &mut control, SendFlags::empty())?;
        Ok(())
    }

    fn entry(&self, level: Level, file: Option<&str>, line: Option<u32>, target: &str) -> Vec<u8> {
        let mut buf = Vec::with_capacity(512);
        // The priorities `tracing-journald` maps levels to.
        let priority = match level {
            Level::ERROR => "3",
            Level::WARN => "4",
            Level::INFO => "5",
            Level::DEBUG => "6",
            Level::TRACE => "7",
        };
        put(&mut buf, "PRIORITY", priority.as_bytes());
        put(&mut buf, "SYSLOG_IDENTIFIER", self.ident.as_bytes());
        put(&mut buf, "TARGET", target.as_bytes());
        if let Some(f) = file {
            put(&mut buf, "CODE_FILE", f.as_bytes());
        }
        if let Some(l) = line {
            put(&mut buf, "CODE_LINE", l.to_string().as_bytes());
        }
        buf
    }

    /// Notes that an entry went to stderr; says so on the first of an outage.
    fn refused(&self, e: &io::Error) {
        self.missed.fetch_add(1, Ordering::Relaxed);
        if !DOWN.swap(true, Ordering::Relaxed) {
            let _ = writeln!(
                io::stderr(),
                "{}: journald stopped accepting log entries ({e}); logging to stderr until it does again",
                self.ident
            );
        }
    }
}

impl<S: Subscriber> tracing_subscriber::Layer<S> for Journal {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if is_down() {
            // Try a notice first, so the journal reads in order.
            let n = self.missed.load(Ordering::Relaxed);
            let text = format!("journald accepts log entries again; {n} went to stderr meanwhile");
            let mut notice = self.entry(Level::INFO, None, None, meta.target());
            put(&mut notice, "MESSAGE", text.as_bytes());
            if let Err(e) = self.send(&notice) {
                return self.refused(&e);
            }
            if DOWN.swap(false, Ordering::Relaxed) {
                self.missed.store(0, Ordering::Relaxed);
                let _ = writeln!(io::stderr(), "{}: {text}", self.ident);
            }
        }
        let mut buf = self.entry(*meta.level(), meta.file(), meta.line(), meta.target());
        event.record(&mut Fields(&mut buf));
        if let Err(e) = self.send(&buf) {
            self.refused(&e);
        }
    }
}

/// Event fields as journal fields: `message` is MESSAGE, `reaper_action` is
/// `REAPER_ACTION` (names sanitized as `tracing-journald` does, no prefix).
struct Fields<'a>(&'a mut Vec<u8>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        put(self.0, &sanitize(field.name()), value.as_bytes());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        put(self.0, &sanitize(field.name()), format!("{value:?}").as_bytes());
    }
}

/// Upper case, `.` as `_`, no leading `_`, nothing but `[A-Z0-9_]`.
fn sanitize(name: &str) -> String {
    name.bytes()
        .map(|c| if c == b'.' { b'_' } else { c })
        .skip_while(|&c| c == b'_')
        .filter(|&c| c == b'_' || c.is_ascii_alphanumeric())
        .map(|c| char::from(c.to_ascii_uppercase()))
        .collect()
}

/// One field in the length-prefixed form, which allows any bytes (newlines too).
fn put(buf: &mut Vec<u8>, name: &str, value: &[u8]) {
    buf.extend_from_slice(name.as_bytes());
    buf.push(b'\n');
    buf.extend_from_slice(&(value.len() as u64).to_le_bytes());
    buf.extend_from_slice(value);
    buf.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::prelude::*;

    /// The fields of one native-protocol entry (length-prefixed form only).
    fn fields(mut b: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while let Some(nl) = b.iter().position(|&c| c == b'\n') {
            let name = String::from_utf8_lossy(&b[..nl]).into_owned();
            let len = usize::try_from(u64::from_le_bytes(b[nl + 1..nl + 9].try_into().unwrap())).unwrap();
            let value = String::from_utf8_lossy(&b[nl + 9..nl + 9 + len]).into_owned();
            out.push((name, value));
            b = &b[nl + 9 + len + 1..];
        }
        out
    }

    #[test]
    fn entries_fall_back_to_stderr_while_the_socket_refuses_and_recover() {
        let dir = std::env::temp_dir().join(format!("mcp-reaper-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("socket");
        let _ = std::fs::remove_file(&path);
        let reader = UnixDatagram::bind(&path).unwrap();
        reader.set_nonblocking(true).unwrap();
        let journal = Journal::at(&path, "test-ident").unwrap();
        let subscriber = tracing_subscriber::registry().with(journal);
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(reaper_action = "error", "line\nwith a newline");
            let mut buf = vec![0u8; 65536];
            let mut got = Vec::new();
            while let Ok(n) = reader.recv(&mut buf) {
                got.push(buf[..n].to_vec());
            }
            let f = fields(got.last().unwrap());
            let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
            assert_eq!(get("MESSAGE"), Some("line\nwith a newline"), "{f:?}");
            assert_eq!(get("REAPER_ACTION"), Some("error"), "{f:?}");
            assert_eq!(get("PRIORITY"), Some("4"), "{f:?}");
            assert_eq!(get("SYSLOG_IDENTIFIER"), Some("test-ident"), "{f:?}");

            // Too big for a datagram: sent as a memfd (no bytes, one fd).
            tracing::info!("{}", "x".repeat(400_000));
            assert!(!is_down());
            assert_eq!(reader.recv(&mut buf).unwrap(), 0);

            // Nobody reads: the queue fills, and the journal is called down
            // instead of blocking the caller.
            for i in 0..200 {
                tracing::info!("filler {i}");
            }
            assert!(is_down());
            // Read again: the next entry comes after a notice saying so.
            while reader.recv(&mut buf).is_ok() {}
            tracing::info!("after");
            assert!(!is_down());
            let n = reader.recv(&mut buf).unwrap();
            let notice = fields(&buf[..n]);
            assert!(notice.iter().any(|(k, v)| k == "MESSAGE" && v.starts_with("journald accepts log entries again")));
            let n = reader.recv(&mut buf).unwrap();
            assert!(fields(&buf[..n]).iter().any(|(k, v)| k == "MESSAGE" && v == "after"));

            // Gone altogether: refused at once.
            drop(reader);
            tracing::info!("into the void");
            assert!(is_down());
        });
        DOWN.store(false, Ordering::Relaxed);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn names_are_sanitized_like_tracing_journald() {
        assert_eq!(sanitize("reaper_root_pid"), "REAPER_ROOT_PID");
        assert_eq!(sanitize("_a.b-c"), "A_BC");
    }
}
