//! Which container belongs to a `run` client. Certain first: the name it
//! gave (`--name`) or the id the engine wrote (`--cidfile`). Otherwise the
//! running container created within 2 s of the client's start whose image
//! and command are the client's and whose stdin is open (`-i`). Anything but
//! exactly one is no answer: a container nobody can tie to this client is
//! left alone.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::{Engine, Inspect, RunArgs, same_image};

/// How far a container's creation may be from its client's start.
const WINDOW: Duration = Duration::from_secs(2);

/// A client as the plan read it.
#[derive(Clone, Debug)]
pub struct Client {
    pub pid: i32,
    pub started: SystemTime,
    pub run: RunArgs,
    /// Its working directory, for a relative `--cidfile`.
    pub cwd: Option<PathBuf>,
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
}

impl Container {
    pub fn short_id(&self) -> &str {
        self.id.get(..12).unwrap_or(&self.id)
    }

    fn of(c: &Inspect, engine: &Engine, client: &Client, found_by: &'static str) -> Container {
        Container {
            id: c.id.clone(),
            name: c.name().to_string(),
            image: c.config.image.clone(),
            socket: engine.socket.clone(),
            pid: u32::try_from(c.state.pid).unwrap_or(0),
            rm: client.run.rm,
            auto_remove: c.host_config.auto_remove,
            found_by,
        }
    }
}

fn within(a: SystemTime, b: SystemTime, d: Duration) -> bool {
    a.duration_since(b).or_else(|_| b.duration_since(a)).is_ok_and(|x| x <= d)
}

/// The one running container of `client` among `engines`, or why there is none to stop.
pub async fn find(client: &Client, engines: &[Engine]) -> Result<Container, String> {
    let run = &client.run;
    if run.detach {
        return Err("the client ran it detached (-d): its container is not stopped".into());
    }
    let certain = if run.name.is_some() {
        Some("name")
    } else if run.cidfile.is_some() {
        Some("cidfile")
    } else {
        None
    };
    let mut found: Vec<Container> = Vec::new();
    let mut errors = Vec::new();
    for e in engines {
        let got = match certain {
            Some(how) => by_reference(client, e, how).await,
            None => by_match(client, e).await,
        };
        match got {
            Ok(mut v) => found.append(&mut v),
            Err(err) => errors.push(err.to_string()),
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 if !errors.is_empty() => Err(errors.join("; ")),
        0 => {
            let how = certain.map_or("started within 2 s of the client, same image and command, stdin open", |h| {
                if h == "name" { "by its --name" } else { "by its --cidfile" }
            });
            let socks: Vec<String> = engines.iter().map(|e| e.socket.display().to_string()).collect();
            Err(format!("no running container of the client found ({how}) at {}", socks.join(", ")))
        }
        n => {
            let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
            Err(format!("{n} running containers could be the client's ({}): none is stopped", names.join(", ")))
        }
    }
}

async fn by_reference(client: &Client, e: &Engine, how: &'static str) -> Result<Vec<Container>, super::EngineError> {
    let reference = if let Some(n) = &client.run.name {
        n.clone()
    } else {
        let Some(file) = client.run.cidfile.as_ref() else { return Ok(Vec::new()) };
        let path = match &client.cwd {
            Some(cwd) if file.is_relative() => cwd.join(file),
            _ => file.clone(),
        };
        match std::fs::read_to_string(&path) {
            Ok(id) => id.trim().to_string(),
            Err(_) => return Ok(Vec::new()),
        }
    };
    let Some(c) = e.inspect(&reference).await? else { return Ok(Vec::new()) };
    // A container created before its client started is another one that
    // happens to hold the name now.
    let fresh = c.created_at().is_some_and(|t| t + WINDOW >= client.started);
    Ok(if c.state.running && fresh { vec![Container::of(&c, e, client, how)] } else { Vec::new() })
}

async fn by_match(client: &Client, e: &Engine) -> Result<Vec<Container>, super::EngineError> {
    let started_secs = client.started.duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let mut out = Vec::new();
    for s in e.list().await? {
        // The list counts whole seconds: a coarse first cut.
        #[allow(clippy::cast_precision_loss)] // seconds since 1970 fit
        if (s.created as f64 - started_secs).abs() > WINDOW.as_secs_f64() + 1.0 {
            continue;
        }
        let Some(c) = e.inspect(&s.id).await? else { continue };
        let run = &client.run;
        let cmd_ok = run.command.is_empty() || c.config.cmd.as_deref() == Some(run.command.as_slice());
        let time_ok = c.created_at().is_some_and(|t| within(t, client.started, WINDOW));
        if c.state.running && time_ok && c.config.open_stdin && cmd_ok && same_image(&run.image, &c.config.image) {
            out.push(Container::of(&c, e, client, "match"));
        }
    }
    Ok(out)
}
