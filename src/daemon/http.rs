//! `[metrics] listen`: `GET /metrics` (the textfile's series, from
//! [`crate::report::metrics::render`]) and `GET /healthz` over HTTP/1, for a
//! Prometheus scraper and a kubelet's probes. hyper's server, the crate that
//! already speaks to the container engines (src/engine/http.rs), on the
//! daemon's own runtime: a task beside the control socket's, so an answer
//! never waits for a cycle (whose reaps may take the whole term timeout).
//!
//! Bounded like the control socket: a few connections at once (more are
//! closed unanswered), one request each, a deadline on the whole of it. No
//! request body is read; answers are counts, never a command line.

use std::cell::RefCell;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::board::{Shared, unix_now};

/// Connections served at once; a scraper and two probes need three.
pub const MAX_CONNECTIONS: usize = 8;
/// The whole exchange, request line to last byte of the answer.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
/// `/healthz` fails when the last scan is older than this many intervals
/// (plus [`HEALTH_SLACK_SECS`]): the loop is stuck, not merely busy.
const HEALTH_INTERVALS: u64 = 3;
const HEALTH_SLACK_SECS: u64 = 60;

/// Binds `addr`; the error says which address.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr).await.map_err(|e| format!("cannot serve metrics on {addr}: {e}"))
}

/// Accepts until the daemon ends.
pub async fn serve(listener: TcpListener, shared: Rc<RefCell<Shared>>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await; // EMFILE and friends
            continue;
        };
        // Over the bound: closed at once (the scraper retries next interval).
        let Ok(permit) = slots.clone().try_acquire_owned() else { continue };
        let shared = shared.clone();
        tokio::task::spawn_local(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req| {
                let answer = answer(&req, &shared.borrow());
                async move { Ok::<_, Infallible>(answer) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(CONNECTION_TIMEOUT)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
        });
    }
}

/// The answer to one request.
fn answer<B>(req: &Request<B>, shared: &Shared) -> Response<Full<Bytes>> {
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
    }
    match req.uri().path() {
        "/metrics" => {
            let mut r = text(StatusCode::OK, crate::report::metrics::render(&shared.status(0)));
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
