//! Framing: a 4-byte big-endian length, then a JSON body; the length is
//! checked against a limit before any body is read.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use super::{MAX_REPLY, Reply, Request};

#[derive(Debug)]
pub enum FrameError {
    Io(io::Error),
    TooLarge(usize),
    Json(serde_json::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "{e}"),
            FrameError::TooLarge(n) => write!(f, "frame of {n} bytes is over the limit"),
            FrameError::Json(e) => write!(f, "malformed message: {e}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Checks a frame header against the limit before any body is read.
pub fn frame_len(header: [u8; 4], max: usize) -> Result<usize, FrameError> {
    let n = u32::from_be_bytes(header) as usize;
    if n > max { Err(FrameError::TooLarge(n)) } else { Ok(n) }
}

pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("protocol types serialize");
    let mut out = Vec::with_capacity(4 + body.len());
    let len = u32::try_from(body.len()).expect("a message far below 4 GiB (replies are capped by the tree count)");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    out
}

pub fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(body).map_err(FrameError::Json)
}

/// Blocking client call (reaperctl).
pub fn call(stream: &mut std::os::unix::net::UnixStream, req: &Request) -> Result<Reply, FrameError> {
    stream.write_all(&encode(req)).map_err(FrameError::Io)?;
    let mut hdr = [0u8; 4];
    stream.read_exact(&mut hdr).map_err(FrameError::Io)?;
    let n = frame_len(hdr, MAX_REPLY)?;
    let mut body = vec![0u8; n];
    stream.read_exact(&mut body).map_err(FrameError::Io)?;
    decode(&body)
}
