//! A `run` client as the plan read it, and the container found for it (by
//! [`super::find`]): what stopping it and reporting it need.

use std::path::PathBuf;
use std::time::SystemTime;

use serde::Serialize;

use super::{Engine, Inspect, RunArgs};
use crate::access::Cred;

/// A client as the plan read it.
#[derive(Clone, Debug)]
pub struct Client {
    pub pid: i32,
    pub started: SystemTime,
    pub run: RunArgs,
    /// Its working directory, for a relative `--cidfile`.
    pub cwd: Option<PathBuf>,
    /// Its user: its cidfile is read with their rights.
    pub user: Cred,
}

/// The container of a client: what stopping it and reporting it need.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Container {
    pub id: String,
    pub name: String,
    pub image: String,
    /// The engine's socket.
    pub socket: PathBuf,
    /// Its init process on the host (for its cgroup), 0 if unknown.
    pub pid: u32,
    /// The client asked for `--rm`.
    pub rm: bool,
    /// The engine removes it when it stops (`HostConfig.AutoRemove`).
    pub auto_remove: bool,
    /// How it was tied to the client: `name`, `cidfile` or `match`.
    pub found_by: &'static str,
    /// Docker's attach flags: set unless it was run detached.
    #[serde(skip)]
    pub attached: bool,
    /// Whose rights reach the engine (the client's user): every call that
    /// ends it is checked again.
    #[serde(skip)]
    pub user: Option<Cred>,
}

impl Container {
    pub fn short_id(&self) -> &str {
        self.id.get(..12).unwrap_or(&self.id)
    }

    pub(super) fn of(c: &Inspect, engine: &Engine, client: &Client, found_by: &'static str) -> Container {
        Container {
            id: c.id.clone(),
            name: c.name().to_string(),
            image: c.config.image.clone(),
            socket: engine.socket.clone(),
            pid: u32::try_from(c.state.pid).unwrap_or(0),
            rm: client.run.rm,
            auto_remove: c.host_config.auto_remove,
            found_by,
            attached: c.config.attached(),
            user: engine.user.clone(),
        }
    }

    /// The engine that runs it, reached with the same rights as when found.
    pub fn engine(&self) -> Engine {
        Engine { socket: self.socket.clone(), user: self.user.clone() }
    }
}
