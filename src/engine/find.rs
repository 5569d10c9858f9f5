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
/// A container is created after its client started; this much earlier
/// covers the start time's 10 ms ticks and the uptime's rounding.
const EARLIER: Duration = Duration::from_millis(500);

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
    /// Docker's attach flags: set unless it was run detached.
    #[serde(skip)]
    pub attached: bool,
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
            attached: c.config.attached(),
        }
    }
}

/// Created at most [`EARLIER`] before the client's start and at most
/// [`WINDOW`] after it.
fn created_by(created: SystemTime, started: SystemTime) -> bool {
    match created.duration_since(started) {
        Ok(after) => after <= WINDOW,
        Err(before) => before.duration() <= EARLIER,
    }
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
    let mut detached: Vec<String> = Vec::new();
    let mut errors = Vec::new();
    for e in engines {
        let got = match certain {
            Some(how) => by_reference(client, e, how).await,
            None => by_match(client, e).await,
        };
        match got {
            Ok(v) => {
                for c in v {
                    // The engine's own view: whatever the client's argv says,
                    // a container started detached is nobody's stdio server.
                    match started_detached(e, &c).await {
                        Ok(false) => found.push(c),
                        Ok(true) => detached.push(c.name),
                        Err(err) => errors.push(err.to_string()),
                    }
                }
            }
            Err(err) => errors.push(err.to_string()),
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 if !errors.is_empty() => Err(errors.join("; ")),
        0 if !detached.is_empty() => {
            Err(format!("the engine says {} was started detached (-d): not stopped", detached.join(", ")))
        }
        0 => {
            let how = certain.map_or("started within 2 s of the client, same image and command, stdin open", |h| {
                if h == "name" { "by its --name" } else { "by its --cidfile" }
            });
            let socks: Vec<String> = engines.iter().map(|e| e.socket.display().to_string()).collect();
            Err(format!("no running container of the client found ({how}) at {}", socks.join(", ")))
        }
        n => {
            let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
            Err(format!("{n} running containers could be the client's ({})", names.join(", ")))
        }
    }
}

/// Whether the engine says `c` was started detached: Docker by its attach
/// flags (all false for `run -d`); Podman, whose compatible API answers
/// those false for every container, by the `run` argv it keeps. A Podman
/// container created through the API (no argv kept) is not known to be
/// detached: the client's own argv, checked first, decides.
async fn started_detached(e: &Engine, c: &Container) -> Result<bool, super::EngineError> {
    if c.attached {
        return Ok(false);
    }
    Ok(match e.create_command(&c.id).await? {
        None => true,
        Some(argv) => RunArgs::parse(&argv).is_some_and(|r| r.detach),
    })
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
        match read_cidfile(&path) {
            Some(id) => id,
            None => return Ok(Vec::new()),
        }
    };
    let Some(c) = e.inspect(&reference).await? else { return Ok(Vec::new()) };
    // A container created before its client started is another one that
    // happens to hold the name now.
    let fresh = c.created_at().is_some_and(|t| t + WINDOW >= client.started);
    Ok(if c.state.running && fresh { vec![Container::of(&c, e, client, how)] } else { Vec::new() })
}

/// The container id a `--cidfile` holds: 64 hex digits (what Docker and
/// Podman write). The path is the client's to choose and the reaper may be
/// root: only a regular file is read (a FIFO would block, `/dev/zero` never
/// end), at most 128 bytes, and nothing but an id comes out of it (no other
/// content reaches a request, a log line or a reason).
fn read_cidfile(path: &std::path::Path) -> Option<String> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read as _;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let f = std::fs::File::from(rustix::fs::open(path, flags, Mode::empty()).ok()?);
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    f.take(128).read_to_string(&mut text).ok()?;
    let id = text.trim();
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
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
        let time_ok = c.created_at().is_some_and(|t| created_by(t, client.started));
        if c.state.running && time_ok && c.config.open_stdin && cmd_ok && same_image(&run.image, &c.config.image) {
            out.push(Container::of(&c, e, client, "match"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::engine::block_on;

    /// An engine answering `GET path` from `answers` (404 otherwise), one
    /// request per connection, until the listener is dropped with the test.
    fn fake_engine(dir: &std::path::Path, answers: Vec<(String, String)>) -> Engine {
        Engine::new(crate::engine::fake::serve(dir, move |_, path| {
            answers
                .iter()
                .find(|(p, _)| p == path)
                .map_or(("404 Not Found", "{}".to_string()), |(_, b)| ("200 OK", b.clone()))
        }))
    }

    fn container(id: &str, created: &str, cmd: &str, open_stdin: bool) -> (String, String) {
        (
            format!("/containers/{id}/json"),
            format!(
                r#"{{"Id":"{id}","Name":"/n-{id}","Created":"{created}","Config":{{"Image":"mcp/x","Cmd":{cmd},"OpenStdin":{open_stdin},"AttachStdout":true}},
                   "State":{{"Running":true,"Pid":0}},"HostConfig":{{"AutoRemove":true}}}}"#
            ),
        )
    }

    /// [`container`] as Podman's compatible API shows it (no attach flags),
    /// with the `run` argv its own API keeps.
    fn podman_container(id: &str, created: &str, run: &str) -> Vec<(String, String)> {
        let (path, body) = container(id, created, r#"["serve"]"#, true);
        let create = format!(r#"{{"Config":{{"CreateCommand":{run}}}}}"#);
        vec![
            (path, body.replace(r#","AttachStdout":true"#, "")),
            (format!("/v4.0.0/libpod/containers/{id}/json"), create),
        ]
    }

    fn client(argv: &[&str]) -> Client {
        let run = RunArgs::parse(&argv.iter().map(|s| (*s).to_string()).collect::<Vec<_>>()).unwrap();
        // 2026-11-23T02:10:13Z
        Client { pid: 7, started: SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_399_813), run, cwd: None }
    }

    fn listing(ids: &[&str]) -> (String, String) {
        let items: Vec<String> = ids.iter().map(|id| format!(r#"{{"Id":"{id}","Created":1795399813}}"#)).collect();
        ("/containers/json".into(), format!("[{}]", items.join(",")))
    }

    #[test]
    fn exactly_one_container_matches_time_image_command_and_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let e = fake_engine(
            dir.path(),
            vec![
                listing(&["a", "b", "c", "d", "e"]),
                container("a", "2026-11-23T02:10:13.300Z", r#"["serve"]"#, true), // the one
                container("b", "2026-11-23T02:10:13.300Z", r#"["other"]"#, true), // another command
                container("c", "2026-11-23T02:10:13.300Z", r#"["serve"]"#, false), // stdin closed (-d)
                container("d", "2026-11-23T02:10:16.000Z", r#"["serve"]"#, true), // 3 s later
                container("e", "2026-11-23T02:10:11.000Z", r#"["serve"]"#, true), // before the client
            ],
        );
        let c = client(&["docker", "run", "-i", "--rm", "mcp/x", "serve"]);
        let found = block_on(find(&c, std::slice::from_ref(&e))).unwrap();
        assert_eq!((found.id.as_str(), found.name.as_str(), found.found_by, found.rm), ("a", "n-a", "match", true));
    }

    #[test]
    fn two_candidates_or_none_or_detached_stop_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let e = fake_engine(
            dir.path(),
            vec![
                listing(&["a", "b"]),
                container("a", "2026-11-23T02:10:13.300Z", r#"["serve"]"#, true),
                container("b", "2026-11-23T02:10:14.100Z", r#"["serve"]"#, true),
            ],
        );
        let engines = std::slice::from_ref(&e);
        let why = block_on(find(&client(&["docker", "run", "-i", "mcp/x", "serve"]), engines)).unwrap_err();
        assert!(why.contains("2 running containers could be the client's (n-a, n-b)"), "{why}");
        let why = block_on(find(&client(&["docker", "run", "-i", "mcp/y"]), engines)).unwrap_err();
        assert!(why.contains("no running container of the client found"), "{why}");
        let why = block_on(find(&client(&["docker", "run", "-di", "mcp/x", "serve"]), engines)).unwrap_err();
        assert!(why.contains("detached"), "{why}");
    }

    #[test]
    fn a_name_is_certain_but_not_an_older_holder_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let e = fake_engine(
            dir.path(),
            vec![
                container("srv", "2026-11-23T02:10:14.900Z", r#"["anything"]"#, false),
                container("old", "2026-11-23T02:00:00Z", r#"["serve"]"#, true),
            ],
        );
        let engines = std::slice::from_ref(&e);
        let found = block_on(find(&client(&["docker", "run", "-i", "--name", "srv", "mcp/x"]), engines)).unwrap();
        assert_eq!((found.id.as_str(), found.found_by), ("srv", "name"));
        let why = block_on(find(&client(&["docker", "run", "-i", "--name=old", "mcp/x"]), engines)).unwrap_err();
        assert!(why.contains("by its --name"), "{why}");
    }

    #[test]
    fn a_container_the_engine_says_was_started_detached_is_not_stopped() {
        let dir = tempfile::tempdir().unwrap();
        // Docker: no attach flags, and no Podman API (404).
        let (path, body) = container("dd", "2026-11-23T02:10:13.300Z", r#"["serve"]"#, true);
        let mut answers = vec![listing(&["dd"]), (path, body.replace(r#","AttachStdout":true"#, ""))];
        let e = fake_engine(dir.path(), answers.clone());
        let engines = std::slice::from_ref(&e);
        let c = client(&["docker", "run", "-i", "mcp/x", "serve"]);
        let why = block_on(find(&c, engines)).unwrap_err();
        assert_eq!(why, "the engine says n-dd was started detached (-d): not stopped");
        let why = block_on(find(&client(&["docker", "run", "-i", "--name", "dd", "mcp/x"]), engines)).unwrap_err();
        assert!(why.contains("n-dd was started detached"), "{why}");

        // Podman: its own API keeps the run argv; the attached one is found.
        let dir = tempfile::tempdir().unwrap();
        answers = vec![listing(&["pd", "pi"])];
        answers.extend(podman_container("pd", "2026-11-23T02:10:13.300Z", r#"["podman","run","-di","mcp/x","serve"]"#));
        answers.extend(podman_container("pi", "2026-11-23T02:10:13.400Z", r#"["podman","run","-i","mcp/x","serve"]"#));
        let e = fake_engine(dir.path(), answers);
        let found =
            block_on(find(&client(&["podman", "run", "-i", "mcp/x", "serve"]), std::slice::from_ref(&e))).unwrap();
        assert_eq!(found.id, "pi");
    }

    #[test]
    fn a_cidfile_is_read_from_the_clients_directory() {
        const ID: &str = "5e0c1d6f0b4c4a8f9e2d7c6b5a4938271605f4e3d2c1b0a99887766554433221";
        let dir = tempfile::tempdir().unwrap();
        let e = fake_engine(dir.path(), vec![container(ID, "2026-11-23T02:10:14.900Z", r#"["x"]"#, true)]);
        let engines = std::slice::from_ref(&e);
        let mut c = client(&["docker", "run", "-i", "--cidfile", "run/c.id", "mcp/x"]);
        c.cwd = Some(dir.path().to_path_buf());
        // Not written yet (or gone): nothing is found, nothing guessed.
        let why = block_on(find(&c, engines)).unwrap_err();
        assert!(why.contains("by its --cidfile"), "{why}");
        std::fs::create_dir(dir.path().join("run")).unwrap();
        std::fs::write(dir.path().join("run/c.id"), format!("{ID}\n")).unwrap();
        let found = block_on(find(&c, engines)).unwrap();
        assert_eq!((found.id.as_str(), found.found_by), (ID, "cidfile"));
        // What is no container id is not read on, not asked about, not told.
        for secret in ["root:$y$j9T$secret:19000:0:99999:7:::\n", "srv", &format!("{ID}x")] {
            std::fs::write(dir.path().join("run/c.id"), secret).unwrap();
            let why = block_on(find(&c, engines)).unwrap_err();
            assert!(why.contains("by its --cidfile") && !why.contains("secret"), "{why}");
        }
        // A FIFO would block, /dev/zero never end: neither is read.
        std::fs::remove_file(dir.path().join("run/c.id")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("run/c.id"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();
        assert!(block_on(find(&c, engines)).unwrap_err().contains("by its --cidfile"));
        c.run.cidfile = Some("/dev/zero".into());
        assert!(block_on(find(&c, engines)).unwrap_err().contains("by its --cidfile"));
    }
}
