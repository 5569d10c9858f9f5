//! Which container belongs to a `run` client, on evidence its user cannot
//! forge against someone else's container. The engine is one the client's
//! user may use ([`super::sockets`]: a user who may could stop any of its
//! containers themselves); within it, a container is the client's only when
//! all of this holds:
//!
//! - it was created within [`WINDOW`] *after* the client started (both
//!   bounds: [`EARLIER`] before covers the start time's 10 ms ticks): the
//!   client creates it, so a container made before, or long after, is
//!   someone else's that happens to fit;
//! - its image is the client's, and its command too when the client names
//!   one;
//! - its stdin is open (`-i`), the engine says it was started attached
//!   (Docker's attach flags; Podman by the `run` argv it keeps), and the
//!   client's argv has no `-d`;
//! - it is running; and of all the engines' containers, exactly this one.
//!
//! `--name` and `--cidfile` only narrow the choice to that container, which
//! must pass the same checks: a name is anyone's to write in an argv, and a
//! cidfile is read with the client's user's rights ([`crate::userfile`]). A
//! refusal names the container and the evidence that failed ("container
//! prod-db not touched: created 3h0m before its client started").
//!
//! Stronger evidence was looked for. The client's attach connection (its
//! socket to the engine, seen through `/proc/PID/fd` and the socket
//! diagnostics) proves the client talks to that engine, but neither Docker
//! nor Podman tells which container a connection is attached to, and a
//! process connected to the engine could stop its containers anyway: it
//! adds nothing to the permission check. Attach events (`/events`) carry a
//! container and a time, not a client. The engines keep no creator's uid
//! (a rootless engine runs as its user, so all its containers are that
//! user's, which the permission check already covers). So the proof is the
//! conjunction above; a real client whose container was created later than
//! [`WINDOW`] (an image pulled first) is reaped without its container, and
//! its reason says so.

use std::time::{Duration, SystemTime};

use super::cidfile::read_cidfile;
use super::{Client, Container, Engine, Inspect, RunArgs, same_image};

/// How long after its client's start a container may have been created: a
/// local image, a busy machine. Larger lets more of a user's own clients
/// fit one container (then none is stopped); smaller loses slow starts.
const WINDOW: Duration = Duration::from_secs(5);
/// A container is created after its client started; this much earlier
/// covers the start time's 10 ms ticks and the uptime's rounding.
const EARLIER: Duration = Duration::from_millis(500);

/// A span of time in words: `0.8 s`, `42 s`, `3m5s`, `3h0m`.
fn span(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..10 => format!("{:.1} s", d.as_secs_f64()),
        10..60 => format!("{s} s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        _ => format!("{}h{}m", s / 3600, s % 3600 / 60),
    }
}

/// Why `c` is not `client`'s container, in words; `None` when all the
/// evidence holds.
fn refuted(c: &Inspect, client: &Client) -> Option<String> {
    let run = &client.run;
    let why = if c.state.running {
        match c.created_at().map(|t| t.duration_since(client.started)) {
            None => Some("its creation time is unknown".to_string()),
            Some(Ok(after)) if after > WINDOW => {
                Some(format!("created {} after its client started (more than {} s)", span(after), WINDOW.as_secs()))
            }
            Some(Err(before)) if before.duration() > EARLIER => {
                Some(format!("created {} before its client started", span(before.duration())))
            }
            Some(_) if !same_image(&run.image, &c.config.image) => {
                Some(format!("its image {} is not the client's {}", c.config.image, run.image))
            }
            Some(_) if !run.command.is_empty() && c.config.cmd.as_deref() != Some(run.command.as_slice()) => {
                Some("its command is not the client's".to_string())
            }
            Some(_) if !c.config.open_stdin => Some("its stdin is not open (not run with -i)".to_string()),
            Some(_) => None,
        }
    } else {
        Some("it is not running".to_string())
    };
    why.map(|w| format!("container {} not touched: {w}", c.name()))
}

/// What one engine offers for a client: containers that pass, refusals.
#[derive(Default)]
struct Found {
    fit: Vec<Container>,
    refused: Vec<String>,
}

/// The one running container of `client` among `engines`, or why there is none to stop.
pub async fn find(client: &Client, engines: &[Engine]) -> Result<Container, String> {
    let run = &client.run;
    if run.detach {
        return Err("the client ran it detached (-d): its container is not stopped".into());
    }
    // What the client named narrows the choice (and proves nothing).
    let reference = match (&run.name, &run.cidfile) {
        (Some(n), _) => Some((n.clone(), "name")),
        (None, Some(f)) => Some((read_cidfile(client, f)?, "cidfile")),
        (None, None) => None,
    };
    let mut found: Vec<Container> = Vec::new();
    let mut detached: Vec<String> = Vec::new();
    let mut why = Vec::new();
    for e in engines {
        let got = match &reference {
            Some((r, how)) => by_reference(client, e, r, how).await,
            None => by_match(client, e).await,
        };
        match got {
            Ok(f) => {
                why.extend(f.refused);
                for c in f.fit {
                    // The engine's own view: whatever the client's argv says,
                    // a container started detached is nobody's stdio server.
                    match started_detached(e, &c).await {
                        Ok(false) => found.push(c),
                        Ok(true) => detached.push(c.name),
                        Err(err) => why.push(err.to_string()),
                    }
                }
            }
            Err(err) => why.push(err.to_string()),
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 if !detached.is_empty() => {
            Err(format!("the engine says {} was started detached (-d): not stopped", detached.join(", ")))
        }
        0 if !why.is_empty() => Err(why.join("; ")),
        0 => {
            let how = reference.map_or_else(
                || {
                    format!(
                        "created within {} s after the client started, same image and command, stdin open",
                        WINDOW.as_secs()
                    )
                },
                |(_, h)| if h == "name" { "by its --name".to_string() } else { "by its --cidfile".to_string() },
            );
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

/// The container the client named (`reference`, a name or an id), if all
/// the evidence holds for it.
async fn by_reference(
    client: &Client,
    e: &Engine,
    reference: &str,
    how: &'static str,
) -> Result<Found, super::EngineError> {
    let Some(c) = e.inspect(reference).await? else { return Ok(Found::default()) };
    Ok(match refuted(&c, client) {
        None => Found { fit: vec![Container::of(&c, e, client, how)], refused: Vec::new() },
        Some(why) => Found { fit: Vec::new(), refused: vec![why] },
    })
}

async fn by_match(client: &Client, e: &Engine) -> Result<Found, super::EngineError> {
    let started_secs = client.started.duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let mut out = Found::default();
    for s in e.list().await? {
        // The list counts whole seconds: a coarse first cut.
        #[allow(clippy::cast_precision_loss)] // seconds since 1970 fit
        let from_start = s.created as f64 - started_secs;
        if from_start < -1.0 - EARLIER.as_secs_f64() || from_start > WINDOW.as_secs_f64() + 1.0 {
            continue;
        }
        let Some(c) = e.inspect(&s.id).await? else { continue };
        if refuted(&c, client).is_none() {
            out.fit.push(Container::of(&c, e, client, "match"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::access::Cred;
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
        let user = Cred::of_user(rustix::process::geteuid().as_raw());
        Client { pid: 7, started: SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_399_813), run, cwd: None, user }
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
                container("d", "2026-11-23T02:10:19.000Z", r#"["serve"]"#, true), // 6 s later
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
                container("srv", "2026-11-23T02:10:14.900Z", r#"["anything"]"#, true),
                container("old", "2026-11-23T02:00:00Z", r#"["serve"]"#, true),
                container("late", "2026-11-23T03:10:13Z", r#"["serve"]"#, true),
                container("closed", "2026-11-23T02:10:13.300Z", r#"["serve"]"#, false),
            ],
        );
        let engines = std::slice::from_ref(&e);
        let found = block_on(find(&client(&["docker", "run", "-i", "--name", "srv", "mcp/x"]), engines)).unwrap();
        assert_eq!((found.id.as_str(), found.found_by), ("srv", "name"));
        // The name narrows the choice; the evidence must hold all the same.
        let refused = |argv: &[&str]| block_on(find(&client(argv), engines)).unwrap_err();
        assert_eq!(
            refused(&["docker", "run", "-i", "--name=old", "mcp/x"]),
            "container n-old not touched: created 10m13s before its client started"
        );
        assert_eq!(
            refused(&["docker", "run", "-i", "--name", "late", "mcp/x", "serve"]),
            "container n-late not touched: created 1h0m after its client started (more than 5 s)"
        );
        assert_eq!(
            refused(&["docker", "run", "-i", "--name", "srv", "mcp/x", "serve"]),
            "container n-srv not touched: its command is not the client's"
        );
        assert_eq!(
            refused(&["docker", "run", "-i", "--name", "srv", "postgres:16"]),
            "container n-srv not touched: its image mcp/x is not the client's postgres:16"
        );
        assert_eq!(
            refused(&["docker", "run", "-i", "--name", "closed", "mcp/x"]),
            "container n-closed not touched: its stdin is not open (not run with -i)"
        );
        assert!(refused(&["docker", "run", "-i", "--name", "none", "mcp/x"]).contains("by its --name"));
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
        assert_eq!(why, format!("its --cidfile {}/run/c.id does not exist", dir.path().display()));
        std::fs::create_dir(dir.path().join("run")).unwrap();
        std::fs::write(dir.path().join("run/c.id"), format!("{ID}\n")).unwrap();
        let found = block_on(find(&c, engines)).unwrap();
        assert_eq!((found.id.as_str(), found.found_by), (ID, "cidfile"));
        // What is no container id is not read on, not asked about, not told.
        for secret in ["root:$y$j9T$secret:19000:0:99999:7:::\n", "srv", &format!("{ID}x")] {
            std::fs::write(dir.path().join("run/c.id"), secret).unwrap();
            let why = block_on(find(&c, engines)).unwrap_err();
            assert!(why.ends_with("run/c.id holds no container id") && !why.contains("secret"), "{why}");
        }
        // Another user's file (as root: chown it) is not read for this one.
        if rustix::process::geteuid().is_root() {
            std::fs::write(dir.path().join("run/c.id"), format!("{ID}\n")).unwrap();
            std::os::unix::fs::chown(dir.path().join("run/c.id"), Some(4242), None).unwrap();
            let why = block_on(find(&c, engines)).unwrap_err();
            assert!(why.ends_with("run/c.id not read: owned by uid 4242, not by the home's owner 0"), "{why}");
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
        assert!(block_on(find(&c, engines)).unwrap_err().ends_with("run/c.id not read: not a regular file"));
        c.run.cidfile = Some("/dev/zero".into());
        assert_eq!(block_on(find(&c, engines)).unwrap_err(), "its --cidfile /dev/zero not read: not a regular file");
    }
}
