//! A stand-in engine for unit tests: answers one request per connection on
//! a Unix socket, with whatever `answer(method, path)` says, until the test
//! process ends.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

/// Serves `dir/e.sock`; returns its path.
pub(crate) fn serve(
    dir: &Path,
    mut answer: impl FnMut(&str, &str) -> (&'static str, String) + Send + 'static,
) -> PathBuf {
    let p = dir.join("e.sock");
    let l = UnixListener::bind(&p).unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            let mut words = req.split(' ');
            let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
            let (status, body) = answer(method, path);
            let _ = write!(s, "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        }
    });
    p
}
