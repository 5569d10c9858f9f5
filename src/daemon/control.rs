//! The control socket: length-prefixed JSON, one request per connection.
//! Anyone may ask for status (filtered to their own trees); only root and the
//! daemon's own user may reload or reap. A slow, silent, huge or garbage client
//! gets an error or a closed connection, never the daemon's attention for long.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::board::Shared;
use super::run::LoopRequest;
use crate::proto::{self, Command, ErrorKind, Reply, Request};

/// Bound on concurrent clients; more get a "busy" reply.
pub const MAX_CLIENTS: usize = 32;
/// Whole-conversation time limit per client.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// Held for the daemon's lifetime: one instance per socket path.
pub struct Lock {
    _file: File,
    path: PathBuf,
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Why the daemon cannot take its socket.
#[derive(Debug)]
pub enum LockError {
    /// Another instance holds it: a temporary failure.
    Held(String),
    /// The socket's directory or lock file cannot be created.
    Create(String),
}

impl LockError {
    pub fn exit_code(&self) -> u8 {
        match self {
            LockError::Held(_) => crate::exit::TEMPFAIL,
            LockError::Create(_) => crate::exit::CANTCREAT,
        }
    }
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held(m) | LockError::Create(m) => f.write_str(m),
        }
    }
}

/// Takes the lock beside the socket, creating the socket's directory if it
/// is missing (a runtime dir not made by systemd, a `--socket` anywhere):
/// 0755, since anyone may connect.
pub fn lock(socket: &Path) -> Result<Lock, LockError> {
    let dir = socket.parent().unwrap_or(Path::new("/"));
    crate::paths::check_socket_dir(socket).map_err(|e| LockError::Create(e.to_string()))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|e| LockError::Create(format!("cannot create the socket's directory {}: {e}", dir.display())))?;
    let path = socket.with_extension("lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| LockError::Create(format!("cannot open lock file {}: {e}", path.display())))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(|_| {
        LockError::Held(format!(
            "another mcp-reaperd is already running on {} (lock {} is held)",
            socket.display(),
            path.display()
        ))
    })?;
    Ok(Lock { _file: file, path })
}

/// Binds the socket (we hold the lock, so a leftover file is stale).
pub fn bind(socket: &Path) -> io::Result<UnixListener> {
    match std::fs::remove_file(socket) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let l = UnixListener::bind(socket)?;
    // Everyone may connect; what they may see and do is decided per peer.
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666))?;
    Ok(l)
}

/// Connections one unprivileged uid may hold at once: a user flooding the
/// socket only uses up its own share.
pub const PER_UID: usize = 4;
/// Extra slots only root and the daemon's own user may use, so they always
/// get an answer.
pub const RESERVED: usize = 8;
/// Connections one process may hold at once, whoever runs it: a root script
/// that opens hundreds does not take the slots of the next `reaperctl status`.
pub const PER_PID: usize = 4;

/// Open connections per key (uid or pid), entries removed at zero.
#[derive(Default)]
struct Counts<K>(std::collections::HashMap<K, usize>);

impl<K: std::hash::Hash + Eq> Counts<K> {
    fn get(&self, k: &K) -> usize {
        self.0.get(k).copied().unwrap_or(0)
    }
    fn add(&mut self, k: K) {
        *self.0.entry(k).or_default() += 1;
    }
    fn sub(&mut self, k: &K) {
        if let Some(n) = self.0.get_mut(k) {
            *n -= 1;
            if *n == 0 {
                self.0.remove(k);
            }
        }
    }
}

pub async fn serve(listener: UnixListener, shared: Rc<RefCell<Shared>>, loop_tx: mpsc::Sender<LoopRequest>) {
    let slots = std::sync::Arc::new(Semaphore::new(MAX_CLIENTS));
    let reserve = std::sync::Arc::new(Semaphore::new(RESERVED));
    let per_uid: Rc<RefCell<Counts<u32>>> = Rc::default();
    let per_pid: Rc<RefCell<Counts<i32>>> = Rc::default();
    let unseen = Unseen::default();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await; // EMFILE and friends
            continue;
        };
        let (uid, pid) = match peer_cred(&stream) {
            Ok((uid, pid)) if pid > 0 => (uid, pid),
            seen => {
                let why = match seen {
                    Ok((uid, _)) => format!(
                        "cannot see the pid of a client (uid {uid} as the daemon sees it): it runs in another PID \
                         namespace, outside the daemon's; run reaperctl in the daemon's PID namespace"
                    ),
                    Err(e) => format!("cannot tell who a client is (SO_PEERCRED: {e})"),
                };
                unseen.note(&why);
                // Bounded like any client: without a slot, just close.
                if let Ok(permit) = slots.clone().try_acquire_owned() {
                    tokio::task::spawn_local(async move {
                        let _permit = permit;
                        refuse(stream, UNSEEN).await;
                    });
                }
                continue;
            }
        };
        let privileged = uid == 0 || uid == shared.borrow().self_uid;
        let over = per_pid.borrow().get(&pid) >= PER_PID || (!privileged && per_uid.borrow().get(&uid) >= PER_UID);
        let permit = if over {
            None
        } else {
            slots
                .clone()
                .try_acquire_owned()
                .ok()
                .or_else(|| if privileged { reserve.clone().try_acquire_owned().ok() } else { None })
        };
        let shared = shared.clone();
        let loop_tx = loop_tx.clone();
        match permit {
            Some(permit) => {
                per_uid.borrow_mut().add(uid);
                per_pid.borrow_mut().add(pid);
                let (per_uid, per_pid) = (per_uid.clone(), per_pid.clone());
                tokio::task::spawn_local(async move {
                    let _permit = permit;
                    client(stream, shared, loop_tx).await;
                    per_uid.borrow_mut().sub(&uid);
                    per_pid.borrow_mut().sub(&pid);
                });
            }
            None => {
                tokio::task::spawn_local(refuse(stream, BUSY));
            }
        }
    }
}

const BUSY: (ErrorKind, &str) = (ErrorKind::Busy, "busy: too many clients, try again");
const UNSEEN: (ErrorKind, &str) = (
    ErrorKind::PermissionDenied,
    "refused: the daemon cannot see this client's process (it runs in another PID namespace, outside the \
     daemon's), so it cannot tell what it may show or do; run reaperctl in the daemon's PID namespace \
     (e.g. on the host, or `nsenter --target <daemon pid> --pid`)",
);

/// Answers `why` without serving the request: taken off the wire first, so
/// the client's write succeeds and it reads the answer.
async fn refuse(mut stream: UnixStream, (kind, why): (ErrorKind, &'static str)) {
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut sink)).await;
    let _ =
        tokio::time::timeout(Duration::from_millis(200), stream.write_all(&proto::encode(&Reply::error(kind, why))))
            .await;
}

/// The peer's uid and pid as this daemon's namespaces see them; pid 0 when
/// the peer's process is in a PID namespace the daemon cannot see into.
/// (Not rustix's `socket_peercred`: its `UCred` holds a non-zero `Pid`, and
/// a 0 there reads as an error.)
fn peer_cred(stream: &UnixStream) -> io::Result<(u32, i32)> {
    let cred = stream.peer_cred()?;
    Ok((cred.uid(), cred.pid().unwrap_or(0)))
}

/// Clients the daemon cannot identify, logged once and then at most once an
/// hour with how many came meanwhile: a script retrying from a container
/// does not fill the journal.
#[derive(Default)]
struct Unseen {
    last: std::cell::Cell<Option<std::time::Instant>>,
    since: std::cell::Cell<u64>,
}

impl Unseen {
    const EVERY: Duration = Duration::from_secs(3600);

    fn note(&self, why: &str) {
        let now = std::time::Instant::now();
        if self.last.get().is_some_and(|t| now.duration_since(t) < Self::EVERY) {
            self.since.set(self.since.get() + 1);
            return;
        }
        let more = self.since.replace(0);
        let more = if more > 0 {
            format!(" ({more} more such client(s) refused since the last notice)")
        } else {
            String::new()
        };
        tracing::warn!(
            reaper_action = "error",
            "refused a client: the daemon {why}{more}; logged at most \
             once an hour"
        );
        self.last.set(Some(now));
    }
}

async fn client(mut stream: UnixStream, shared: Rc<RefCell<Shared>>, loop_tx: mpsc::Sender<LoopRequest>) {
    let Ok((uid, pid)) = peer_cred(&stream) else { return };
    // The client gets CLIENT_TIMEOUT to send its request and again to take
    // the reply; the wait in between is ours (a reap-now lasts a whole cycle,
    // up to the term timeout and more on a loaded machine).
    let reply = match tokio::time::timeout(CLIENT_TIMEOUT, read_request(&mut stream)).await {
        Ok(Ok(req)) => handle(req, uid, pid, &shared, &loop_tx).await,
        Ok(Err(msg)) => Reply::error(ErrorKind::BadRequest, msg),
        Err(_) => {
            Reply::error(ErrorKind::BadRequest, format!("no complete request within {}s", CLIENT_TIMEOUT.as_secs()))
        }
    };
    let _ = tokio::time::timeout(CLIENT_TIMEOUT, async {
        let _ = stream.write_all(&proto::encode(&reply)).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

async fn read_request(stream: &mut UnixStream) -> Result<Request, String> {
    let mut hdr = [0u8; 4];
    stream.read_exact(&mut hdr).await.map_err(|e| format!("reading request: {e}"))?;
    let n = proto::frame_len(hdr, proto::MAX_REQUEST).map_err(|e| e.to_string())?;
    let mut body = vec![0u8; n];
    stream.read_exact(&mut body).await.map_err(|e| format!("reading request: {e}"))?;
    let req: Request = proto::decode(&body).map_err(|e| e.to_string())?;
    if req.v != proto::VERSION {
        return Err(format!("unsupported protocol version {} (this daemon speaks {})", req.v, proto::VERSION));
    }
    Ok(req)
}

async fn handle(
    req: Request,
    uid: u32,
    pid: i32,
    shared: &Rc<RefCell<Shared>>,
    loop_tx: &mpsc::Sender<LoopRequest>,
) -> Reply {
    let privileged = uid == 0 || uid == shared.borrow().self_uid;
    match req.cmd {
        Command::Status => Reply { status: Some(shared.borrow().status(uid)), ..Reply::ok() },
        Command::Metrics => {
            Reply { metrics: Some(crate::report::metrics::render(&shared.borrow().status(0))), ..Reply::ok() }
        }
        Command::History { since_unix } => {
            let state = shared.borrow().args.state_file.clone().unwrap_or_default();
            let path = crate::history::beside(&state);
            let uid = (!privileged).then_some(uid);
            // Read off the loop: a ledger is a few MiB at most.
            let read = tokio::task::spawn_blocking({
                let path = path.clone();
                move || crate::history::load(&path)
            })
            .await;
            let view = match read {
                Ok(Ok(ledger)) => crate::history::View::new(&path, ledger.as_ref(), since_unix, uid),
                Ok(Err(e)) => crate::history::View {
                    note: Some(format!("cannot read {}: {e}", path.display())),
                    ..crate::history::View::new(&path, None, since_unix, uid)
                },
                Err(e) => return Reply::error(ErrorKind::Unknown, format!("reading the history failed: {e}")),
            };
            Reply { history: Some(view), ..Reply::ok() }
        }
        Command::Reload | Command::ReapNow { .. } if !privileged => {
            tracing::warn!(
                reaper_action = "error",
                "refused {} from uid {uid} (pid {pid}): only root and the daemon's user may do that",
                match req.cmd {
                    Command::ReapNow { dry_run: true } => "reap-now --dry-run",
                    Command::ReapNow { dry_run: false } => "reap-now",
                    _ => "reload",
                }
            );
            Reply::error(
                ErrorKind::PermissionDenied,
                "permission denied: only root and the daemon's own user may reload or reap",
            )
        }
        Command::SessionEnd { host_pid, host_start_time, session_id, reason } => {
            let procfs = crate::scan::ProcFs::new(&shared.borrow().args.proc_root);
            let host = match super::endings::check(&procfs, uid, pid, privileged, host_pid, host_start_time) {
                Ok(h) => h,
                Err((kind, msg)) => return Reply::error(kind, msg),
            };
            let (tx, rx) = oneshot::channel();
            let req = LoopRequest::SessionEnd { host, session_id, reason, reply: tx };
            if loop_tx.send(req).await.is_err() {
                return Reply::error(ErrorKind::ShuttingDown, "daemon is shutting down");
            }
            match rx.await {
                Ok(r) => Reply { session_end: Some(r), ..Reply::ok() },
                Err(_) => Reply::error(ErrorKind::ShuttingDown, "daemon is shutting down"),
            }
        }
        Command::Reload => {
            let (tx, rx) = oneshot::channel();
            if loop_tx.send(LoopRequest::Reload(tx)).await.is_err() {
                return Reply::error(ErrorKind::ShuttingDown, "daemon is shutting down");
            }
            match rx.await {
                Ok(r) => Reply { ok: r.ok, kind: (!r.ok).then_some(ErrorKind::Config), reload: Some(r), ..Reply::ok() },
                Err(_) => Reply::error(ErrorKind::ShuttingDown, "daemon is shutting down"),
            }
        }
        Command::ReapNow { dry_run } => {
            let (tx, rx) = oneshot::channel();
            if loop_tx.send(LoopRequest::ReapNow { dry_run, reply: tx }).await.is_err() {
                return Reply::error(ErrorKind::ShuttingDown, "daemon is shutting down");
            }
            match rx.await {
                Ok(r) => Reply { reap: Some(r), ..Reply::ok() },
                Err(_) => Reply::error(ErrorKind::ShuttingDown, "daemon is shutting down"),
            }
        }
    }
}
