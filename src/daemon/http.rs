//! `[metrics] listen`: `GET /metrics` (the textfile's series, from
//! [`crate::report::metrics::render`]) and `GET /healthz` over HTTP/1, for a
//! Prometheus scraper and a kubelet's probes. hyper's server, the crate that
//! already speaks to the container engines (src/engine/http.rs), on the
//! daemon's own runtime: a task beside the control socket's, so an answer
//! never waits for a cycle (whose reaps may take the whole term timeout).
//!
//! Any local user (and, on `0.0.0.0`, anyone routed to it) may connect, so
//! the listener is fair per client rather than first come, first served
//! (issue 34): connections are counted per peer ([`peer`]: the uid owning
//! the other end, else its address) and a peer holds a few slots of many
//! ([`fair`]); the request head must arrive whole within
//! [`HEADER_TIMEOUT`], however it is dribbled; `/metrics` is rendered at
//! most once a second whoever asks, so `/healthz`, which renders nothing,
//! never waits behind scrapes. No request body is read; answers are counts,
//! never a command line. The address is the daemon's or nobody's: one it
//! cannot bind ends the daemon ([`ListenError`]), and the service manager
//! may bind it instead ([`activation`]).

mod activation;
mod fair;
mod holder;
mod peer;

use std::cell::RefCell;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

pub use activation::Passed;
pub use fair::{MAX_CONNECTIONS, PER_PEER};

use super::board::{Shared, unix_now};
use fair::Slots;
use peer::{Peer, Peers};

/// The request line and headers, from the first byte read to the last: a
/// deadline, not an idle timeout (hyper's `header_read_timeout` starts when
/// the head's read starts and is not reset by bytes arriving, hyper 1.12
/// `proto/h1/conn.rs`), so a client dribbling a byte at a time is cut off
/// like a silent one.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// The whole exchange, request line to last byte of the answer.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
/// A request head's bytes, at most (hyper's smallest buffer): a probe's or
/// a scraper's head is a few hundred.
const MAX_HEAD: usize = 8192;
/// `/metrics` answers with a rendering at most this old.
const RENDER_EVERY: Duration = Duration::from_secs(1);
/// `/healthz` fails when the last scan is older than this many intervals
/// (plus [`HEALTH_SLACK_SECS`]): the loop is stuck, not merely busy.
const HEALTH_INTERVALS: u64 = 3;
const HEALTH_SLACK_SECS: u64 = 60;

/// Why the daemon cannot serve the metrics it was configured to: it then
/// exits ([`crate::exit::metrics_listener`]) rather than run on while
/// whoever holds the port answers the scraper and the probe in its name.
#[derive(Debug)]
pub enum ListenError {
    /// `[metrics] listen` cannot be bound; `holder` says who has the port,
    /// when that can be seen.
    Bind { addr: SocketAddr, error: std::io::Error, holder: Option<String> },
    /// What the service manager passed cannot be served.
    Passed(String),
}

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenError::Bind { addr, error, holder } => {
                write!(f, "cannot serve metrics on {addr} ([metrics] listen): {error}")?;
                if let Some(h) = holder {
                    write!(f, "; the port is held by {h}")?;
                }
                // The shipped unit allows no IP socket: the socket unit is the way.
                if matches!(error.raw_os_error(), Some(libc::EAFNOSUPPORT | libc::EPERM | libc::EACCES)) {
                    write!(
                        f,
                        "; under systemd, enable mcp-reaper-metrics.socket instead (it binds the port for the daemon)"
                    )?;
                }
                f.write_str("; not running with the metrics unserved")
            }
            ListenError::Passed(why) => write!(f, "{why}; not running with the metrics unserved"),
        }
    }
}

/// What the service manager passed for metrics: a listener, none, or why
/// what it passed cannot serve.
pub type Taken = Result<Option<Passed>, ListenError>;

/// The passed listener (see [`activation`]); call once, at start-up, while
/// the process has one thread.
pub fn take_passed() -> Taken {
    activation::take().map_err(ListenError::Passed)
}

/// The listener to serve: the one the service manager passed, else
/// `configured` bound here, else none.
pub async fn listener(
    configured: Option<SocketAddr>,
    passed: Option<Passed>,
) -> Result<Option<(TcpListener, String)>, ListenError> {
    if let Some(p) = passed {
        if configured.is_some_and(|c| c != p.addr) {
            tracing::warn!(
                "[metrics] listen = \"{}\" is not used: the service manager passed a socket on {}",
                configured.map(|c| c.to_string()).unwrap_or_default(),
                p.addr
            );
        }
        let how = format!("fd {} \"{}\" from the service manager", p.fd, p.name);
        let l = TcpListener::from_std(p.listener)
            .map_err(|e| ListenError::Passed(format!("socket activation: fd {}: {e}", p.fd)))?;
        return Ok(Some((l, how)));
    }
    let Some(addr) = configured else { return Ok(None) };
    match TcpListener::bind(addr).await {
        Ok(l) => Ok(Some((l, "[metrics] listen".into()))),
        Err(error) => {
            let holder = (error.kind() == std::io::ErrorKind::AddrInUse).then(|| holder::holder(addr)).flatten();
            Err(ListenError::Bind { addr, error, holder })
        }
    }
}

/// `/metrics`' last rendering and when it was made.
#[derive(Default)]
struct Rendered {
    at: Option<Instant>,
    body: Bytes,
}

/// Accepts until the daemon ends.
pub async fn serve(listener: TcpListener, shared: Rc<RefCell<Shared>>) {
    let port = listener.local_addr().map_or(0, |a| a.port());
    let mut peers = Peers::new(&listener, port);
    let slots = Rc::new(RefCell::new(Slots::new(MAX_CONNECTIONS, PER_PEER)));
    let rendered: Rc<RefCell<Rendered>> = Rc::default();
    loop {
        let Ok((stream, client)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await; // EMFILE and friends
            continue;
        };
        let Ok(server) = stream.local_addr() else { continue };
        let peer = peers.of(client, server).await;
        let id = slots.borrow_mut().ticket();
        let release = Release { slots: slots.clone(), peer, id };
        let task = tokio::task::spawn_local(connection(stream, shared.clone(), rendered.clone(), release));
        // Refused (the peer holds its share, or every slot is held fairly):
        // closed at once, unread; or the newcomer took another's oldest.
        let cut = slots.borrow_mut().admit(peer, id, task.abort_handle());
        if let Some(cut) = cut {
            tracing::debug!(
                "metrics: a connection cut or refused for {peer}'s (per peer {PER_PEER}, in all {MAX_CONNECTIONS})"
            );
            cut.abort();
        }
    }
}

/// Gives a connection's slot back when its task ends, however it ends.
struct Release {
    slots: Rc<RefCell<Slots>>,
    peer: Peer,
    id: fair::Id,
}

impl Drop for Release {
    fn drop(&mut self) {
        self.slots.borrow_mut().release(self.peer, self.id);
    }
}

/// One exchange, under [`HEADER_TIMEOUT`] and [`CONNECTION_TIMEOUT`].
async fn connection(
    stream: tokio::net::TcpStream,
    shared: Rc<RefCell<Shared>>,
    rendered: Rc<RefCell<Rendered>>,
    _release: Release,
) {
    let service = hyper::service::service_fn(move |req| {
        let answer = answer(&req, &shared.borrow(), &rendered);
        async move { Ok::<_, Infallible>(answer) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    let _ = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
}

/// The answer to one request.
fn answer<B>(req: &Request<B>, shared: &Shared, rendered: &RefCell<Rendered>) -> Response<Full<Bytes>> {
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
    }
    match req.uri().path() {
        "/metrics" => {
            let mut r = Response::new(Full::new(metrics(shared, rendered)));
            // The Prometheus text format's own content type.
            r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(PROMETHEUS_TEXT));
            r
        }
        "/healthz" => {
            let (ok, why) = health(shared);
            text(if ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }, why)
        }
        "/" => text(StatusCode::OK, "mcp-reaperd: /metrics /healthz\n".into()),
        _ => text(StatusCode::NOT_FOUND, "not found: /metrics or /healthz\n".into()),
    }
}

/// `/metrics`' body: the status of every tree is copied to render it, so
/// scrapers share one rendering a second however many ask.
fn metrics(shared: &Shared, rendered: &RefCell<Rendered>) -> Bytes {
    let mut r = rendered.borrow_mut();
    if r.at.is_none_or(|t| t.elapsed() >= RENDER_EVERY) {
        r.body = Bytes::from(crate::report::metrics::render(&shared.status(0)));
        r.at = Some(Instant::now());
    }
    r.body.clone()
}

const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// Healthy while scans keep coming: the last one (or the start, before
/// the first) is at most [`HEALTH_INTERVALS`] intervals + [`HEALTH_SLACK_SECS`] old.
fn health(shared: &Shared) -> (bool, String) {
    verdict(shared.scans.last_at_unix, shared.started.elapsed().as_secs(), shared.cfg.interval_secs, unix_now())
}

/// [`health`] from its figures: the last scan's unix time (0: none yet),
/// seconds since the start, the interval, now.
fn verdict(last_scan: u64, up_secs: u64, interval_secs: u64, now: u64) -> (bool, String) {
    let limit = HEALTH_INTERVALS.saturating_mul(interval_secs).saturating_add(HEALTH_SLACK_SECS);
    let (age, what) =
        if last_scan == 0 { (up_secs, "no scan yet, started") } else { (now.saturating_sub(last_scan), "last scan") };
    let ok = age <= limit;
    (ok, format!("{} {what} {age}s ago (limit {limit}s)\n", if ok { "ok" } else { "stalled" }))
}

#[cfg(test)]
mod tests {
    use super::verdict;

    #[test]
    fn healthy_until_the_last_scan_is_three_intervals_and_a_minute_old() {
        let now = 1_790_000_000;
        assert_eq!(verdict(now - 5, 500, 10, now), (true, "ok last scan 5s ago (limit 90s)\n".into()));
        assert!(verdict(now - 90, 500, 10, now).0);
        assert_eq!(verdict(now - 91, 500, 10, now), (false, "stalled last scan 91s ago (limit 90s)\n".into()));
        // Before the first scan, the start counts.
        assert!(verdict(0, 30, 10, now).0);
        assert_eq!(verdict(0, 91, 10, now).1, "stalled no scan yet, started 91s ago (limit 90s)\n");
        // A clock set back never reads as stalled.
        assert!(verdict(now + 100, 500, 10, now).0);
    }
}
