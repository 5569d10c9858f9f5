//! Ending the containers of `docker|podman run` clients, through the engine
//! that runs them, the way a tree is ended: the engine's stop (the stop
//! signal, `term_timeout_secs` rounded up, then SIGKILL), a kill if it still
//! runs, and removal when the client asked for `--rm` and the engine does not
//! remove it itself. Which container is the plan's ([`ContainerPlan`]); this
//! file only acts on it. Runs beside the signal waves, on a thread of its own.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engine::{self, Container, Engine};
use crate::ids::Pid;

/// A `run` client of a tree to reap, and the container the plan tied to it
/// (or why none).
#[derive(Clone, Debug)]
pub struct ContainerPlan {
    pub client: Pid,
    /// The image as the client named it.
    pub image: String,
    pub found: Result<Container, String>,
}

/// How a container ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// Ended by its stop signal.
    Stopped,
    /// Needed SIGKILL.
    Killed,
    /// Had already ended (or was gone) when the reaper came.
    Gone,
    /// Dry run.
    WouldStop,
    /// No container was tied to the client (see `note`).
    #[default]
    NotStopped,
    /// The engine failed to end it (see `note`).
    Failed,
}

impl Ended {
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Stopped => "stopped",
            Ended::Killed => "killed",
            Ended::Gone => "gone",
            Ended::WouldStop => "would stop",
            Ended::NotStopped => "not stopped",
            Ended::Failed => "failed",
        }
    }
}

/// What happened to one client's container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerOutcome {
    pub client_pid: i32,
    /// Full id; `None` when no container was tied to the client.
    pub id: Option<String>,
    pub name: Option<String>,
    pub image: String,
    /// `memory.current` (or v1 usage) of its cgroup before the stop.
    pub memory_bytes: Option<u64>,
    pub ended: Ended,
    /// No longer exists at the end (the engine's `--rm`, or removed here).
    pub removed: bool,
    /// Why it was not stopped, or what went wrong.
    pub note: Option<String>,
}

impl ContainerOutcome {
    /// Its texts (the engine's, named by users) cut to `width` characters.
    pub fn bound(&mut self, width: usize) {
        let texts = [self.id.as_mut(), self.name.as_mut(), Some(&mut self.image), self.note.as_mut()];
        for t in texts.into_iter().flatten() {
            crate::names::cut(t, width);
        }
    }

    /// Whether the engine ended a running container.
    pub fn stopped(&self) -> bool {
        matches!(self.ended, Ended::Stopped | Ended::Killed)
    }

    fn of(p: &ContainerPlan, c: &Container) -> ContainerOutcome {
        ContainerOutcome {
            client_pid: p.client.get(),
            id: Some(c.id.clone()),
            name: Some(c.name.clone()),
            image: c.image.clone(),
            ..ContainerOutcome::default()
        }
    }

    /// The plan's answer when no container was tied to the client.
    pub(super) fn unmatched(p: &ContainerPlan, why: &str) -> ContainerOutcome {
        ContainerOutcome {
            client_pid: p.client.get(),
            image: p.image.clone(),
            ended: Ended::NotStopped,
            note: Some(why.to_string()),
            ..ContainerOutcome::default()
        }
    }

    /// For the outcome line: `container NAME (image) stopped, 12.0 MiB`.
    pub fn words(&self) -> String {
        let Some(name) = &self.name else {
            return format!(
                "container of client {} ({}) not stopped: {}",
                self.client_pid,
                self.image,
                self.note.as_deref().unwrap_or("?")
            );
        };
        let mut s = if self.ended == Ended::WouldStop {
            format!("would stop container {name} ({})", self.image)
        } else {
            format!("container {name} ({}) {}", self.image, self.ended.as_str())
        };
        if self.removed {
            s.push_str(" and removed");
        }
        if let Some(m) = self.memory_bytes {
            let _ = write!(s, ", {}", crate::report::bytes(m));
        }
        if let Some(n) = &self.note {
            let _ = write!(s, " ({n})");
        }
        s
    }
}

/// Ends every planned container at once; in dry run only reads its memory.
pub(super) fn end_all(
    plans: Vec<(usize, ContainerPlan)>,
    term_timeout: Duration,
    dry_run: bool,
) -> Vec<(usize, ContainerOutcome)> {
    if plans.is_empty() {
        return Vec::new();
    }
    // `stop?t=` takes whole seconds: never sooner than the processes' timeout.
    let t = term_timeout.as_secs() + u64::from(term_timeout.subsec_nanos() > 0);
    engine::block_on(async move {
        let mut set = tokio::task::JoinSet::new();
        for (i, p) in plans {
            set.spawn(async move { (i, end_one(&p, t, dry_run).await) });
        }
        let mut out = Vec::new();
        while let Some(r) = set.join_next().await {
            if let Ok(x) = r {
                out.push(x);
            }
        }
        out
    })
}

async fn end_one(p: &ContainerPlan, t: u64, dry_run: bool) -> ContainerOutcome {
    let c = match &p.found {
        Ok(c) => c,
        Err(why) => return ContainerOutcome::unmatched(p, why),
    };
    let mut o = ContainerOutcome::of(p, c);
    // With the rights it was found with: the client's user must still be able to connect.
    let e = c.engine();
    let failed = |mut o: ContainerOutcome, err: engine::EngineError| {
        tracing::warn!(reaper_action = "error", "container {} ({}) of client {}: {err}", c.name, c.image, p.client);
        o.ended = Ended::Failed;
        o.note = Some(err.to_string());
        o
    };
    let now = match e.inspect(&c.id).await {
        Err(err) => return failed(o, err),
        Ok(None) => {
            o.ended = Ended::Gone;
            o.removed = true;
            return o;
        }
        Ok(Some(i)) => i,
    };
    o.memory_bytes = u32::try_from(now.state.pid).ok().filter(|&p| p > 0).and_then(engine::cgroup_memory);
    if dry_run {
        o.ended = Ended::WouldStop;
        return o;
    }
    if now.state.running {
        let asked = Instant::now();
        if let Err(err) = e.stop(&c.id, t).await {
            // Slow or refusing: the kill below still has its chance.
            o.note = Some(err.to_string());
        }
        match inspect(&e, &c.id).await {
            Ok(Some(i)) if i.state.running => {
                if let Err(err) = e.kill(&c.id).await {
                    return failed(o, err);
                }
                o.ended = Ended::Killed;
                if !settled(&e, &c.id, |i| i.is_none_or(|i| !i.state.running)).await {
                    o.ended = Ended::Failed;
                    o.note = Some("still running after kill".into());
                    return o;
                }
            }
            // SIGKILL ends with 137; a process that took the stop signal
            // exits as it likes. An `AutoRemove` container may be gone before
            // it can be asked: a stop that took the whole timeout was a kill.
            Ok(i) => {
                let waited = asked.elapsed() >= Duration::from_secs(t);
                let code = i.map(|i| i.state.exit_code);
                o.ended = if code == Some(137) || code.is_none() && waited { Ended::Killed } else { Ended::Stopped };
            }
            Err(err) => return failed(o, err),
        }
    } else {
        o.ended = Ended::Gone;
    }
    o.removed = remove_if_asked(&e, c).await.unwrap_or_else(|err| {
        o.note = Some(err.to_string());
        false
    });
    o
}

/// Whether the container is gone at the end: the engine removes an
/// `AutoRemove` one itself (waited for); a `--rm` one it does not remove is
/// removed here, only now that it has stopped.
async fn remove_if_asked(e: &Engine, c: &Container) -> Result<bool, engine::EngineError> {
    if c.auto_remove && settled(e, &c.id, |i| i.is_none()).await {
        return Ok(true);
    }
    if !c.rm {
        return Ok(inspect(e, &c.id).await?.is_none());
    }
    match inspect(e, &c.id).await? {
        None => Ok(true),
        Some(i) if i.state.running => Ok(false),
        Some(_) => {
            e.remove(&c.id).await?;
            Ok(inspect(e, &c.id).await?.is_none())
        }
    }
}

/// Inspects a container that is being stopped or removed: an engine may
/// answer an error meanwhile (Podman: HTTP 500 while it removes one), so
/// errors are retried for 2 s.
async fn inspect(e: &Engine, id: &str) -> Result<Option<engine::Inspect>, engine::EngineError> {
    let until = Instant::now() + engine::CALL_LIMIT;
    loop {
        match e.inspect(id).await {
            Err(_) if Instant::now() < until => tokio::time::sleep(Duration::from_millis(50)).await,
            r => return r,
        }
    }
}

/// Polls the container (2 s at most) until `done` holds.
async fn settled(e: &Engine, id: &str, done: impl Fn(Option<&engine::Inspect>) -> bool) -> bool {
    let until = Instant::now() + engine::CALL_LIMIT;
    loop {
        match e.inspect(id).await {
            Ok(i) if done(i.as_ref()) => return true,
            // An error while it is being removed is worth another look.
            _ if Instant::now() >= until => return false,
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// How the fake engine's container takes a stop.
    #[derive(Clone, Copy)]
    enum Takes {
        /// Ends by its stop signal (exit 0).
        Stop,
        /// Ignores it until killed (exit 137).
        Kill,
    }

    #[derive(Default)]
    struct State {
        running: bool,
        exists: bool,
        exit: i64,
        calls: Vec<String>,
    }

    /// An engine with one container `c1`, its state changed by stop, kill
    /// and remove as `takes` says (`AutoRemove` off: nothing removes it but
    /// a DELETE).
    fn engine(dir: &std::path::Path, takes: Takes) -> (std::path::PathBuf, Arc<Mutex<State>>) {
        let state = Arc::new(Mutex::new(State { running: true, exists: true, ..State::default() }));
        let st = Arc::clone(&state);
        let p = crate::engine::fake::serve(dir, move |method, path| {
            let mut g = st.lock().unwrap();
            let path = path.split('?').next().unwrap_or(path);
            g.calls.push(format!("{method} {path}"));
            match (method, path) {
                (_, _) if !g.exists => ("404 Not Found", "{}".to_string()),
                ("GET", "/containers/c1/json") => (
                    "200 OK",
                    format!(
                        r#"{{"Id":"c1","Name":"/srv","Created":"2026-11-23T02:10:13Z","Config":{{"Image":"mcp/x"}},
                           "State":{{"Running":{},"Pid":0,"ExitCode":{}}},"HostConfig":{{"AutoRemove":false}}}}"#,
                        g.running, g.exit
                    ),
                ),
                ("POST", "/containers/c1/stop") => {
                    if matches!(takes, Takes::Stop) {
                        (g.running, g.exit) = (false, 0);
                    }
                    ("204 No Content", String::new())
                }
                ("POST", "/containers/c1/kill") => {
                    (g.running, g.exit) = (false, 137);
                    ("204 No Content", String::new())
                }
                ("DELETE", "/containers/c1") => {
                    g.exists = false;
                    ("204 No Content", String::new())
                }
                _ => ("404 Not Found", "{}".to_string()),
            }
        });
        (p, state)
    }

    fn plan(socket: &std::path::Path, rm: bool) -> ContainerPlan {
        let c = Container {
            id: "c1".into(),
            name: "srv".into(),
            image: "mcp/x".into(),
            socket: socket.to_path_buf(),
            pid: 0,
            rm,
            auto_remove: false,
            found_by: "match",
            attached: true,
            user: None,
        };
        ContainerPlan { client: Pid::new(77).unwrap(), image: "mcp/x".into(), found: Ok(c) }
    }

    fn end(p: ContainerPlan, dry_run: bool) -> ContainerOutcome {
        end_all(vec![(0, p)], Duration::from_secs(1), dry_run).remove(0).1
    }

    #[test]
    fn a_container_that_takes_its_stop_signal_is_stopped_and_removed_for_rm() {
        let dir = tempfile::tempdir().unwrap();
        let (sock, state) = engine(dir.path(), Takes::Stop);
        let o = end(plan(&sock, true), true);
        assert_eq!(o.ended, Ended::WouldStop);
        assert!(state.lock().unwrap().running, "a dry run stopped it");
        let o = end(plan(&sock, true), false);
        assert_eq!((o.ended, o.removed, o.note.as_deref()), (Ended::Stopped, true, None), "{o:?}");
        let calls = state.lock().unwrap().calls.clone();
        assert!(calls.contains(&"POST /containers/c1/stop".into()) && !calls.iter().any(|c| c.contains("kill")));
        assert!(calls.contains(&"DELETE /containers/c1".into()), "{calls:?}");
        // Asked again: already gone.
        assert_eq!(end(plan(&sock, true), false).ended, Ended::Gone);
    }

    #[test]
    fn a_container_that_ignores_it_is_killed_and_kept_without_rm() {
        let dir = tempfile::tempdir().unwrap();
        let (sock, state) = engine(dir.path(), Takes::Kill);
        let o = end(plan(&sock, false), false);
        assert_eq!((o.ended, o.removed), (Ended::Killed, false), "{o:?}");
        assert!(o.stopped());
        let g = state.lock().unwrap();
        assert!(g.exists && !g.running, "no --rm: stopped, not removed");
        assert!(g.calls.contains(&"POST /containers/c1/kill".into()), "{:?}", g.calls);
    }

    #[test]
    fn an_unmatched_client_is_said_and_nothing_is_asked() {
        let p = ContainerPlan { client: Pid::new(78).unwrap(), image: "mcp/y".into(), found: Err("why".into()) };
        let o = end(p, false);
        assert_eq!((o.ended, o.note.as_deref(), o.id), (Ended::NotStopped, Some("why"), None));
    }
}
