//! One HTTP/1.1 request to an engine over its unix socket, with hyper, capped
//! in time and in answer size, and a small runtime for callers that are not
//! async (a cycle runs on a blocking thread).

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

use crate::access::Cred;

/// No answer the reaper reads is anywhere near this (a list of a thousand
/// containers is ~2 MiB); a larger one is garbage.
const MAX_BODY: usize = 8 << 20;

/// The default cap of one call.
pub const CALL_LIMIT: Duration = Duration::from_secs(2);

/// What an engine answered.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Bytes,
}

/// Why a call gave no answer.
#[derive(Debug)]
pub enum CallError {
    Connect(std::io::Error),
    /// The client's user could not connect to it ([`crate::access`]).
    Refused(String),
    Timeout(Duration),
    Protocol(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Connect(e) => write!(f, "cannot connect: {e}"),
            CallError::Refused(why) => write!(f, "not used: {why}"),
            CallError::Timeout(d) => write!(f, "no answer within {:.1} s", d.as_secs_f64()),
            CallError::Protocol(e) => write!(f, "bad answer: {e}"),
        }
    }
}

/// `method path` on the engine at `socket`, answered within `limit`; for
/// `user`, only if that user could connect to it (checked at every call).
pub async fn call(
    socket: &Path,
    user: Option<&Cred>,
    method: Method,
    path: &str,
    limit: Duration,
) -> Result<Reply, CallError> {
    tokio::time::timeout(limit, call_unlimited(socket, user, method, path))
        .await
        .map_err(|_| CallError::Timeout(limit))?
}

async fn call_unlimited(socket: &Path, user: Option<&Cred>, method: Method, path: &str) -> Result<Reply, CallError> {
    let proto = |e: &dyn std::fmt::Display| CallError::Protocol(e.to_string());
    let stream = match user {
        Some(cred) => {
            let fd = crate::access::connect(socket, cred).map_err(|d| CallError::Refused(d.to_string()))?;
            UnixStream::from_std(std::os::unix::net::UnixStream::from(fd)).map_err(CallError::Connect)?
        }
        None => UnixStream::connect(socket).await.map_err(CallError::Connect)?,
    };
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| proto(&e))?;
    let driver = tokio::spawn(conn);
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "engine")
        .body(Empty::<Bytes>::new())
        .map_err(|e| proto(&e))?;
    let answer = async {
        let res = sender.send_request(req).await.map_err(|e| proto(&e))?;
        let status = res.status().as_u16();
        let body = Limited::new(res.into_body(), MAX_BODY).collect().await.map_err(|e| proto(&e))?.to_bytes();
        Ok(Reply { status, body })
    }
    .await;
    driver.abort();
    answer
}

/// Runs `f` to completion on a runtime of its own, on a thread of its own:
/// callable from any thread, inside a tokio runtime or not.
pub fn block_on<F>(f: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime builds (io and time drivers only)");
            rt.block_on(f)
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
