//! A corpus of process trees a person would recognise from their own machine
//! (shapes from `shared/docs/hosts.md`), judged with the embedded default
//! config in both adoption modes: by PID 1, and by `systemd --user`. Every
//! orphaned server tree must be reaped from its root; every bystander kept.

use super::tests::{World, stdio, tty};
use super::*;
use crate::scan::Unit;

/// How the tree's top process is adopted.
#[derive(Clone, Copy, Debug)]
pub(super) enum Mode {
    Pid1,
    UserManager,
}

/// The adopter's pid in `w` for `mode` (900 is a `systemd --user`).
pub(super) fn adopter(w: &mut World, mode: Mode) -> i32 {
    match mode {
        Mode::Pid1 => 1,
        Mode::UserManager => {
            w.add(900, 1, "/usr/lib/systemd/systemd --user");
            900
        }
    }
}

/// (name, processes as (pid, parent or 0 for the adopter, argv)) of orphaned
/// server trees; the first process is the root that must be reaped.
/// (pid, parent pid or 0 for the adopter, argv joined)
type Proc = (i32, i32, &'static str);

const ORPHANS: &[(&str, &[Proc])] = &[
    (
        "npx chain (L1), an argument ending in `code`",
        &[
            (100, 0, "npm exec @modelcontextprotocol/server-filesystem /home/u/code"),
            (101, 100, "sh -c 'mcp-server-filesystem' /home/u/code"),
            (102, 101, "node /home/u/.npm/_npx/a3/node_modules/.bin/mcp-server-filesystem /home/u/code"),
        ],
    ),
    (
        "uvx mcp-atlassian (L3)",
        &[
            (100, 0, "/home/u/.local/bin/uv tool uvx mcp-atlassian"),
            (101, 100, "/home/u/.cache/uv/archive-v0/Xy/bin/python /home/u/.cache/uv/archive-v0/Xy/bin/mcp-atlassian"),
        ],
    ),
    (
        "pnpm dlx gitnexus mcp (L6)",
        &[
            (100, 0, "node /home/u/.local/share/pnpm/pnpm dlx gitnexus mcp"),
            (101, 100, "node /home/u/.cache/pnpm/dlx/h1/h2/node_modules/.bin/../gitnexus/dist/cli/index.js mcp"),
        ],
    ),
    ("docker run -i (L10)", &[(100, 0, "docker run -i --rm -e SEARXNG_URL isokoliuk/mcp-searxng:latest")]),
    ("podman run -i (L10b)", &[(100, 0, "podman run -i --rm docker.io/mcp/fetch")]),
    (
        "Claude Code's built-in chrome server",
        &[(100, 0, "/home/u/.local/share/claude/versions/2.1.197 --claude-in-chrome-mcp")],
    ),
    ("codex as an MCP server", &[(100, 0, "/usr/local/bin/codex mcp-server")]),
    (
        "JetBrains' stdio runner",
        &[(
            100,
            0,
            "/opt/idea/jbr/bin/java -classpath /opt/idea/plugins/mcpserver/lib/mcpserver-frontend.jar:/opt/idea/lib/util-8.jar com.intellij.mcpserver.stdio.McpStdioRunnerKt",
        )],
    ),
    (
        "npm --prefix X run start → sh -c mcp-atlassian (L17)",
        &[
            (100, 0, "npm --prefix /home/u/src/atl run start"),
            (101, 100, "sh -c mcp-atlassian"),
            (102, 101, "/usr/bin/python3 /home/u/.local/bin/mcp-atlassian"),
        ],
    ),
    (
        "uv --directory D run (L4b), a server script",
        &[
            (100, 0, "uv --directory /home/u/src/notes run mcp_server.py"),
            (101, 100, "/home/u/src/notes/.venv/bin/python mcp_server.py"),
        ],
    ),
    (
        "go run (L14)",
        &[(100, 0, "go run github.com/acme/mcp-foo@latest"), (101, 100, "/tmp/go-build1234/b001/exe/mcp-foo")],
    ),
    (
        "a pass-through wrapper script (L16)",
        &[(100, 0, "/bin/bash /home/u/bin/start.sh"), (101, 100, "node /opt/srv/node_modules/.bin/mcp-server-x")],
    ),
    (
        "npx tsx weather-mcp.ts (L2)",
        &[
            (100, 0, "npm exec tsx weather-mcp.ts"),
            (101, 100, "sh -c tsx weather-mcp.ts"),
            (102, 101, "node /home/u/.npm/_npx/b1/node_modules/.bin/tsx weather-mcp.ts"),
            (
                103,
                102,
                "/usr/bin/node --require /home/u/.npm/_npx/b1/node_modules/tsx/dist/preflight.cjs --import file:///home/u/.npm/_npx/b1/node_modules/tsx/dist/loader.mjs weather-mcp.ts",
            ),
            (104, 103, "/home/u/.npm/_npx/b1/node_modules/@esbuild/linux-x64/bin/esbuild --service=0.21.5 --ping"),
        ],
    ),
    (
        "Gemini CLI's built-in browser server",
        &[(100, 0, "node /usr/lib/node_modules/@google/gemini-cli/bundle/bundled/chrome-devtools-mcp.mjs")],
    ),
    (
        "mcp-remote bridge with a headless browser below a server",
        &[
            (100, 0, "npm exec mcp-remote https://example.invalid/sse"),
            (101, 100, "node /home/u/.npm/_npx/c2/node_modules/.bin/mcp-remote https://example.invalid/sse"),
        ],
    ),
    ("python -m (L13)", &[(100, 0, "python3 -m mcp_server_git --repository /home/u/src/zed")]),
    (
        "bunx (L7)",
        &[
            (100, 0, "bunx context7-mcp"),
            (101, 100, "node /tmp/bunx-1000-context7-mcp@latest/node_modules/.bin/context7-mcp"),
        ],
    ),
    (
        "Zed context server",
        &[(100, 0, "node /home/u/.local/share/zed/extensions/work/postgres-context-server/index.mjs")],
    ),
];

/// Bystanders: adopted on purpose or by design; none may be reaped. The
/// first process is adopted; each with the stdio such a program has.
/// [`Proc`] with what fds 0 and 1 point to.
type ProcFd = (i32, i32, &'static str, &'static str);

const BYSTANDERS: &[(&str, &[ProcFd])] = &[
    (
        "tmux server named like a server, a server running in a pane",
        &[
            (100, 0, "tmux new -s foo-mcp -c /home/u/src/mcp", "/dev/null"),
            (101, 100, "-bash", "/dev/pts/4"),
            (102, 101, "node /home/u/src/mcp-server-dev/node_modules/.bin/mcp-server-dev", "/dev/pts/4"),
        ],
    ),
    ("tmux session mcp-server-dev", &[(100, 0, "tmux new-session -d -s mcp-server-dev", "/dev/null")]),
    ("screen", &[(100, 0, "SCREEN -dmS weather-mcp", "/dev/null")]),
    ("ssh tunnel", &[(100, 0, "ssh -fN -L 8931:localhost:8931 gpu-mcp", "/dev/null")]),
    ("browser on an /mcp URL", &[(100, 0, "/usr/lib/firefox/firefox http://localhost:8000/mcp", "/dev/null")]),
    (
        "nohup'd tsc --watch in an mcp-server directory",
        &[(100, 0, "node /home/u/src/mcp-server-weather/node_modules/.bin/tsc --watch", "/dev/null")],
    ),
    ("nohup'd stdio server", &[(100, 0, "/usr/local/bin/github-mcp-server stdio", "/dev/null")]),
    (
        "HTTP server left in a closed terminal",
        &[(100, 0, "/usr/local/bin/github-mcp-server http --port 8082", "/dev/pts/9 (deleted)")],
    ),
    ("setsid'd server with null stdio", &[(100, 0, "node /opt/x/node_modules/.bin/mcp-server-memory", "/dev/null")]),
    (
        "mcphub.nvim's hub and its servers",
        &[
            (
                100,
                0,
                "node /home/u/.local/share/nvim/lazy/mcphub.nvim/node_modules/.bin/mcp-hub --port 37373",
                "/dev/null",
            ),
            (101, 100, "npm exec @modelcontextprotocol/server-github", "pipe:[1]"),
        ],
    ),
    (
        "supergateway bridging a stdio server over HTTP",
        &[
            (
                100,
                0,
                "supergateway --stdio npx -y @modelcontextprotocol/server-filesystem /data --port 8000",
                "/dev/null",
            ),
            (101, 100, "npm exec @modelcontextprotocol/server-filesystem /data", "pipe:[1]"),
        ],
    ),
    ("emacs daemon", &[(100, 0, "emacs --daemon=mcp", "/dev/null")]),
    ("http.server on an mcp directory", &[(100, 0, "python3 -m http.server --directory /srv/mcp", "/dev/null")]),
    ("editor on a server file", &[(100, 0, "nvim mcp-server.py", "/dev/pts/2 (deleted)")]),
    (
        "claude's background pty host",
        &[(
            100,
            0,
            "/home/u/.local/share/claude/versions/2.1.197 --bg-pty-host /tmp/cc/s 80 24 -- claude --bg-spare",
            "/dev/null",
        )],
    ),
    ("mcp-reaper itself", &[(100, 0, "/usr/bin/mcp-reaperd --user", "/dev/null")]),
];

fn build(w: &mut World, mode: Mode, procs: &[ProcFd]) {
    let top = adopter(w, mode);
    for &(p, parent, cmd, fd) in procs {
        let proc_ = w.add(p, if parent == 0 { top } else { parent }, cmd);
        if fd.starts_with("/dev/pts") {
            tty(proc_, fd);
        } else {
            stdio(proc_, fd, fd);
        }
    }
}

#[test]
fn every_orphaned_server_tree_is_reaped_from_its_root_in_both_adoption_modes() {
    let mut wrong = Vec::new();
    for mode in [Mode::Pid1, Mode::UserManager] {
        for (what, procs) in ORPHANS {
            let mut w = World::new();
            let with_pipes: Vec<_> = procs.iter().map(|&(p, pp, c)| (p, pp, c, "pipe:[7]")).collect();
            build(&mut w, mode, &with_pipes);
            let (snap, js) = w.judge();
            let got: Vec<_> = js
                .iter()
                .map(|j| (j.verdict, snap.procs[j.root].pid().get(), j.members.len(), j.reason.clone()))
                .collect();
            let want = (Verdict::Orphan, procs[0].0, procs.len());
            if got.len() != 1 || (got[0].0, got[0].1, got[0].2) != want {
                wrong.push(format!("{mode:?} {what}: want {want:?}, got {got:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{} of {} orphans misjudged:\n{}", wrong.len(), 2 * ORPHANS.len(), wrong.join("\n"));
}

#[test]
fn no_bystander_is_reaped_in_either_adoption_mode() {
    let mut wrong = Vec::new();
    for mode in [Mode::Pid1, Mode::UserManager] {
        for (what, procs) in BYSTANDERS {
            let mut w = World::new();
            build(&mut w, mode, procs);
            let (snap, js) = w.judge();
            for j in js.iter().filter(|j| j.reap || j.candidate) {
                wrong.push(format!("{mode:?} {what}: tree {} {}: {}", snap.procs[j.root].pid(), j.verdict, j.reason));
            }
        }
    }
    assert!(wrong.is_empty(), "bystanders that would be reaped:\n{}", wrong.join("\n"));
}

#[test]
fn a_user_service_running_a_server_is_protected_by_its_unit() {
    // `mcp-proxy` as a systemd user unit: stdin /dev/null, stdout the
    // journal's socket (a link!), adopted by the user manager. Only the unit
    // tells it from an orphan.
    for mode in [Mode::Pid1, Mode::UserManager] {
        let mut w = World::new().cfg("[reaper]\ngrace_secs = 0\n[patterns]\nprotect = []\n");
        build(
            &mut w,
            mode,
            &[
                (100, 0, "/home/u/.local/bin/mcp-proxy --sse-port 8096 -- uvx mcp-server-fetch", "socket:[5]"),
                (101, 100, "/home/u/.local/bin/uv tool uvx mcp-server-fetch", "pipe:[6]"),
                (
                    102,
                    101,
                    "/home/u/.cache/uv/archive-v0/A/bin/python /home/u/.cache/uv/archive-v0/A/bin/mcp-server-fetch",
                    "pipe:[6]",
                ),
            ],
        );
        w.procs.iter_mut().find(|p| p.pid().get() == 100).unwrap().details.as_mut().unwrap().unit =
            Some(Unit { name: "mcp-proxy.service".into(), main: Some(true) });
        let (_, js) = w.judge();
        assert_eq!(js.len(), 1);
        assert_eq!(js[0].verdict, Verdict::Protected, "{mode:?}: {}", js[0].reason);
        assert!(js[0].reason.contains("systemd unit mcp-proxy.service"), "{}", js[0].reason);
    }
}

/// Programs that look like MCP servers by name but are not, with stdin a
/// pipe nobody writes to any more (a pipeline that ended, a dead launcher).
const NOT_SERVERS: &[(&str, &str)] = &[
    ("ssh tunnel", "ssh -fN -L 8931:localhost:8931 gpu-mcp"),
    ("screen", "SCREEN -dmS weather-mcp"),
    ("browser on an /mcp URL", "/usr/lib/firefox/firefox http://localhost:8000/mcp"),
    ("nohup'd tsc --watch", "node /home/u/src/mcp-server-weather/node_modules/.bin/tsc --watch"),
    ("tmux session mcp-server-dev", "tmux new-session -d -s mcp-server-dev"),
    ("emacs daemon", "emacs --daemon=mcp"),
    ("http.server on an mcp directory", "python3 -m http.server --directory /srv/mcp"),
];

#[test]
fn look_alikes_with_a_dead_stdin_are_never_abandoned_or_stale() {
    use crate::scan::{Holder, StdinEnd};
    let gone = || Some(StdinEnd::Gone("no process holds the write end of its stdin pipe"));
    let mut wrong = Vec::new();
    for (what, cmd) in NOT_SERVERS {
        // Under a live host in a terminal, under an adopted host without a
        // terminal fed by a live pipeline, and adopted themselves.
        for place in ["host in a terminal", "adopted host fed by a pipeline", "adopted", "adopted by the user manager"]
        {
            let mut w = World::new();
            let parent = match place {
                "adopted" => 1,
                "adopted by the user manager" => adopter(&mut w, Mode::UserManager),
                _ => {
                    let host = w.add(100, 1, "claude --resume");
                    if place == "host in a terminal" {
                        tty(host, "/dev/pts/1");
                    } else {
                        host.details.as_mut().unwrap().stdin = Some(StdinEnd::Open(Holder::NotAsked));
                    }
                    super::tests::playwright_under(&mut w, 100);
                    w.procs.iter_mut().find(|p| p.pid().get() == 200).unwrap().details.as_mut().unwrap().stdin =
                        Some(StdinEnd::Open(Holder::Expected));
                    100
                }
            };
            w.add(400, parent, cmd).details.as_mut().unwrap().stdin = gone();
            let (snap, js) = w.judge();
            for j in js.iter().filter(|j| j.candidate || matches!(j.verdict, Verdict::Abandoned | Verdict::Stale)) {
                wrong.push(format!("{what} ({place}): tree {} {}: {}", snap.procs[j.root].pid(), j.verdict, j.reason));
            }
        }
    }
    assert!(wrong.is_empty(), "look-alikes that would be reaped:\n{}", wrong.join("\n"));
}
