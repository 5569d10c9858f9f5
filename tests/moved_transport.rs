//! Issue 32, shape 5: a moved transport is a transport only if its other
//! ends left with a host.
//!
//! `nohup python notebook_pipeline.py &`: adopted, fd 0 on `/dev/null`,
//! fds 1 and 2 its log, pipes above fd 2 to its own children (a real
//! `ProcessPoolExecutor`, a kernel-like subprocess it sends a cell to, two
//! `http.server` apps), 8 processes. That is the MCP Python SDK 2.x's
//! layout, and its script really imports `fastmcp` (a stub package beside
//! it), so only the rule about the pipes' other ends keeps it. Under the
//! default start method before Python 3.14 (`fork`) its workers also inherit
//! its ends of the pipes to the kernel and the apps.
//!
//! The control: the SDK 2.x layout (a real Python server, its host a
//! stand-in as in tests/sdk.rs) with a forked child holding the same ends as
//! the server and a tool subprocess on pipes of its own: a transport while
//! its host lives, and reaped once the host died and nobody holds the other
//! ends.
//!
//! Safety: every tree lives below its sandbox's scope process and every
//! reaper run is `--scope`d to it.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Sandbox, Spec, TempDir, alive, descendants_of, in_any_tree, json_in, reaped_roots, s, wait_until};
use serde_json::Value;

const PIPELINE: &str = r#"from fastmcp import FastMCP
import concurrent.futures
import multiprocessing
import os
import subprocess
import sys
import time

# A cell it sends to the kernel.
CELL = "from fastmcp import FastMCP\nnb = FastMCP('notebook')\n"
KERNEL = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()\n"


def work(n):
    time.sleep(3600)
    return n


if __name__ == "__main__":
    piped = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    kernel = subprocess.Popen([sys.executable, "-c", KERNEL, "kernel"], **piped)
    apps = [
        subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"], **piped)
        for _ in range(2)
    ]
    method = os.environ.get("START_METHOD") or None
    workers = int(os.environ["WORKERS"])
    pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method))
    jobs = [pool.submit(work, i) for i in range(workers)]
    kernel.stdin.write(CELL.encode())
    kernel.stdin.flush()
    kernel.stdout.readline()
    with open(os.environ["READY_AT"], "w") as f:
        f.write("ready\n")
    while True:
        time.sleep(1)
"#;

/// The pipeline started the way `nohup python3 notebook_pipeline.py &`
/// does from a shell that then exits, with the pool's `start` method (the
/// interpreter's default when empty) and `workers` workers; asserts that
/// `expected` processes run and that none is a server or signalled.
fn a_pipeline_is_kept(tag: &str, start: &str, workers: usize, expected: usize) {
    let Some(python) = common::python3(tag) else { return };
    let python = python.display().to_string();
    let dir = TempDir::new(tag);
    dir.write("notebook_pipeline.py", PIPELINE);
    std::fs::create_dir(dir.path().join("fastmcp")).unwrap();
    dir.write("fastmcp/__init__.py", "class FastMCP:\n    def __init__(self, name):\n        self.name = name\n");
    let ready = dir.path().join("pipeline.ready");
    let log = dir.path().join("pipeline.log");
    let cmd = format!("exec {python} notebook_pipeline.py </dev/null >{} 2>&1", log.display());
    let sb = Sandbox::new(vec![
        Spec::new(&["sh", "run-notebook.sh"]).exit_after_spawn().child(
            Spec::new(&["sh", "-c", &cmd])
                .real()
                .cwd(dir.path())
                .env("READY_AT", &ready.display().to_string())
                .env("START_METHOD", start)
                .env("WORKERS", &s(workers)),
        ),
    ]);
    let main = sb.pid_of(&format!("sh -c exec {python}"));
    let started = wait_until(Duration::from_secs(120), || ready.exists() && descendants_of(main).len() + 1 >= expected);
    assert!(started, "the pipeline never started: {:?} {:?}", descendants_of(main), std::fs::read_to_string(&log));
    assert!(wait_until(Duration::from_secs(30), || common::ppid_of(main) == Some(sb.scope_pid())), "not adopted");
    let fd = |n: u32| std::fs::read_link(format!("/proc/{main}/fd/{n}")).unwrap_or_default();
    assert_eq!(fd(0), Path::new("/dev/null"));
    assert_eq!((fd(1), fd(2)), (log.clone(), log.clone()));
    let all: Vec<i32> = std::iter::once(main).chain(descendants_of(main)).collect();
    assert!(all.len() >= expected, "the pipeline and its children: {all:?}");

    let v = json_in(&dir, env!("CARGO_BIN_EXE_mcp-reaperd"), &sb, &["--once", "--log-target", "stderr"]);
    assert!(reaped_roots(&v).is_empty(), "signalled: {v:#}");
    for &p in &all {
        assert!(alive(p), "{p} of the pipeline was ended: {v:#}");
    }
    let v = json_in(&dir, env!("CARGO_BIN_EXE_reaperctl"), &sb, &["scan"]);
    for t in v["trees"].as_array().unwrap() {
        let ours = t["members"].as_array().unwrap().iter().any(|m| all.iter().any(|&p| m["pid"] == p));
        assert!(!ours || t["verdict"] == "detached", "the pipeline in a tree: {t:#}");
    }
}

#[test]
fn a_pipeline_whose_pipes_lead_to_its_own_children_is_no_server() {
    a_pipeline_is_kept("a_pipeline_whose_pipes_lead_to_its_own_children_is_no_server", "forkserver", 2, 8);
}

#[test]
fn a_forked_pool_holding_its_parents_ends_of_pipes_to_its_siblings_is_no_server() {
    a_pipeline_is_kept("a_forked_pool_holding_its_parents_ends_of_pipes_to_its_siblings_is_no_server", "fork", 4, 8);
}

/// The MCP Python SDK 2.x while serving (the host's pipes kept on fds 3 and
/// 4, fd 0 on `/dev/null`, fd 1 onto stderr), with a tool it runs on pipes of
/// its own and a worker it forked, which holds the same ends of the
/// transport as it does.
const SERVER_PY: &str = r#"import os
import subprocess
import sys
import time
try:
    from mcp.server.fastmcp import FastMCP
except ImportError:
    FastMCP = None

rd, wr = os.dup(0), os.dup(1)
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
os.dup2(2, 1)
tool = subprocess.Popen(
    [sys.executable, "-c", "import sys\nfor line in sys.stdin:\n    pass\n", "tool"],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
)
if os.fork() == 0:
    while True:
        time.sleep(3600)
with open(os.environ["READY_AT"], "w") as f:
    f.write("ready\n")
while True:
    time.sleep(3600)
"#;

#[test]
fn an_sdk_2_server_with_children_of_its_own_is_still_reaped_once_its_host_died() {
    let tag = "an_sdk_2_server_with_children_of_its_own_is_still_reaped_once_its_host_died";
    let Some(python) = common::python3(tag) else { return };
    let python = python.display().to_string();
    let dir = TempDir::new(tag);
    std::fs::create_dir(dir.path().join("server")).unwrap();
    dir.write("server/server.py", SERVER_PY);
    let ready = dir.path().join("server.ready");
    let sb = Sandbox::new(vec![
        Spec::new(&["claude", "--resume"]).stdio_null().child(
            Spec::new(&[&python, "server.py"])
                .real()
                .cwd(&dir.path().join("server"))
                .env("READY_AT", &ready.display().to_string()),
        ),
    ]);
    let host = sb.pid_of("claude");
    let server = sb.pid_of(&format!("{python} server.py"));
    assert!(
        wait_until(Duration::from_secs(60), || ready.exists() && descendants_of(server).len() == 2),
        "the server never started its tool and worker: {:?}",
        descendants_of(server)
    );
    let all: Vec<i32> = std::iter::once(server).chain(descendants_of(server)).collect();
    let scan = || json_in(&dir, env!("CARGO_BIN_EXE_reaperctl"), &sb, &["scan"]);
    let tree_of = |v: &Value| -> Value {
        let found = v["trees"].as_array().unwrap().iter().find(|t| t["root"] == server);
        found.cloned().unwrap_or_else(|| panic!("the server roots no tree: {v:#}"))
    };
    // Its host alive, holding the other ends outside its tree: a transport.
    let live = scan();
    assert_eq!(tree_of(&live)["verdict"], "live", "{live:#}");
    let m = in_any_tree(&live, server).unwrap();
    assert_eq!(m["evidence"]["transport"], serde_json::json!({"input": 3, "output": 4}), "{m:#}");

    // The host died: nobody holds the other ends, and its own children hold
    // only the same ends (the worker) or other pipes (the tool).
    sb.kill_host(host);
    let v = scan();
    let t = tree_of(&v);
    assert_eq!(t["verdict"], "orphan", "{t:#}");
    assert!(t["reason"].as_str().unwrap().contains("pipe on fds 3 and 4"), "{t:#}");
    let v = json_in(&dir, env!("CARGO_BIN_EXE_mcp-reaperd"), &sb, &["--once", "--log-target", "stderr"]);
    assert_eq!(reaped_roots(&v), [i64::from(server)], "{v:#}");
    for p in all {
        assert!(wait_until(Duration::from_secs(30), || !alive(p)), "{p} of the orphan survived: {v:#}");
    }
}
