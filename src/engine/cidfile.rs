//! The container id a client's `--cidfile` names, read with the client's
//! user's rights: all a cidfile may tell [`super::find`].

use std::path::Path;

use super::Client;
use crate::access::Denied;

/// A cidfile holds one 64-digit id and a newline.
const MAX_CIDFILE: u64 = 128;

/// The container id a `--cidfile` holds: 64 hex digits (what Docker and
/// Podman write), read with the client's user's rights: a regular file
/// they own and may read, at most 128 bytes (a FIFO, a device, another
/// user's file is never opened). Nothing but an id comes out of it (no
/// other content reaches a request, a log line or a reason).
pub(super) fn read_cidfile(client: &Client, file: &Path) -> Result<String, String> {
    let path = match &client.cwd {
        _ if file.is_absolute() => file.to_path_buf(),
        Some(cwd) => cwd.join(file),
        None => return Err(format!("its --cidfile {} is relative to a directory not known", file.display())),
    };
    let shown = path.display();
    let bytes = match crate::userfile::read_as(&path, &client.user, MAX_CIDFILE) {
        Ok(b) => b,
        Err(Denied::Missing(_)) => return Err(format!("its --cidfile {shown} does not exist")),
        Err(Denied::Refused(why)) => return Err(format!("its --cidfile {shown} not read: {why}")),
    };
    let id = std::str::from_utf8(&bytes).unwrap_or_default().trim();
    if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(id.to_string())
    } else {
        Err(format!("its --cidfile {shown} holds no container id"))
    }
}
