//! A program's source is server evidence only by an import statement of an
//! SDK's server half (issue 32): real Python programs on stdio pipes, mid
//! job, orphaned when their parent dies, read by the real `reaperctl scan`
//! and an enforcing `mcp-reaperd --once` (grace 0).
//!
//! - Shape 6: `python3 embed_worker.py` imports `fastmcp`'s client (`from
//!   fastmcp import Client`, as pydantic-ai 2.x does): a client, kept. The
//!   same program importing `FastMCP` is the control: reaped as an orphan.
//! - Shape 5, its text: a pipeline whose source holds a `fastmcp` notebook
//!   cell only inside string literals and a comment: no server, kept.
//!
//! The `fastmcp` each imports is a stub package beside it, so the import
//! really resolves; each program writes a file once past its imports and
//! then sleeps, as a job would work.
//!
//! Safety: as in tests/sdk.rs, every tree lives below its own sandbox scope
//! process and every reaper run is `--scope`d to it; the reaper's `$HOME` is
//! the fixture's.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Sandbox, Spec, TempDir, alive, in_any_tree, reaped_roots, wait_until};
use serde_json::Value;

const STUB_FASTMCP: &str = "class FastMCP:\n    def __init__(self, *args, **kwargs):\n        pass\n\n\nclass Client:\n    def __init__(self, *args, **kwargs):\n        pass\n";

/// A pipeline's helper: `IMPORT`, one object of it, then the job.
const WORKER: &str = "\"\"\"Embeds a batch with the tools of an MCP server.\"\"\"\nimport time\nIMPORT\n\nhandle = OBJECT\nwith open(\"started\", \"w\") as f:\n    f.write(type(handle).__name__)\nwhile True:\n    time.sleep(3600)\n";

/// The text of shape 5: the cell it sends to its kernel, in a string (with
/// a literal `\n`), in a triple-quoted template and in a comment.
const PIPELINE: &str = r#""""Runs the notebook's cells through a kernel."""
import time

CELL = "from fastmcp import FastMCP\nnb = FastMCP('notebook')"
TEMPLATE = """
from fastmcp import FastMCP
import mcp.server.stdio

nb = FastMCP("{name}")
"""
# from mcp.server.fastmcp import FastMCP (the kernel has it, not us)

with open("started", "w") as f:
    f.write(str(len(CELL) + len(TEMPLATE)))
while True:
    time.sleep(3600)
"#;

fn write(root: &Path, rel: &str, text: &str) -> PathBuf {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

use common::python3;

fn json(dir: &TempDir, bin: &str, sb: &Sandbox, extra: &[&str]) -> Value {
    common::json_in(dir, bin, sb, extra)
}

/// The one sandbox process running `argv` in `cwd`.
fn pid_in(sb: &Sandbox, argv: &str, cwd: &Path) -> i32 {
    sb.ready()
        .iter()
        .find(|r| r.cmd == argv && std::fs::read_link(format!("/proc/{}/cwd", r.pid)).is_ok_and(|c| c == cwd))
        .map_or_else(|| panic!("no {argv:?} in {}: {:#?}", cwd.display(), sb.ready()), |r| r.pid)
}

/// Starts each `(script, directory)` in `d` as a real Python program on
/// stdio pipes below a host stand-in, and waits until each has written its
/// `started` file (past its imports, at work).
fn start(python: &Path, d: &Path, programs: &[(&str, &str)]) -> Sandbox {
    let py = python.display().to_string();
    let mut host = Spec::new(&["python3", "pipeline.py"]);
    for (script, sub) in programs {
        host = host.child(Spec::new(&[&py, script]).cwd(&d.join(sub)).real());
    }
    let sb = Sandbox::new(vec![host]);
    for (_, sub) in programs {
        let started = d.join(sub).join("started");
        let at_work = || std::fs::read_to_string(&started).is_ok_and(|t| !t.is_empty());
        assert!(wait_until(Duration::from_secs(60), at_work), "{sub}: never started");
    }
    sb
}

#[test]
fn an_orphaned_fastmcp_client_is_kept_and_its_server_twin_reaped() {
    let Some(python) = python3("an_orphaned_fastmcp_client_is_kept_and_its_server_twin_reaped") else { return };
    let dir = TempDir::new("source-client");
    let d = dir.path();
    let worker = |import: &str, object: &str| WORKER.replace("IMPORT", import).replace("OBJECT", object);
    for (sub, text) in [
        ("client", worker("from fastmcp import Client", "Client(\"embed_server.py\")")),
        ("server", worker("from fastmcp import FastMCP", "FastMCP(\"embed\")")),
    ] {
        write(d, &format!("{sub}/embed_worker.py"), &text);
        write(d, &format!("{sub}/fastmcp/__init__.py"), STUB_FASTMCP);
    }
    let sb = start(&python, d, &[("embed_worker.py", "client"), ("embed_worker.py", "server")]);
    // The stub really was imported: each made one of its objects.
    for (sub, class) in [("client", "Client"), ("server", "FastMCP")] {
        assert_eq!(std::fs::read_to_string(d.join(sub).join("started")).unwrap(), class);
    }
    let worker_argv = format!("{} embed_worker.py", python.display());
    let client = pid_in(&sb, &worker_argv, &d.join("client"));
    let server = pid_in(&sb, &worker_argv, &d.join("server"));
    sb.kill_host(sb.pid_of("python3 pipeline.py"));

    let v = json(&dir, env!("CARGO_BIN_EXE_reaperctl"), &sb, &["scan"]);
    let m = in_any_tree(&v, server).unwrap_or_else(|| panic!("the FastMCP server is in no tree: {v:#}"));
    assert_eq!((m["role"].as_str(), m["sdk"]["found"].as_str()), (Some("server"), Some("fastmcp")), "{m:#}");
    assert!(in_any_tree(&v, client).is_none(), "FastMCP's client is no server: {v:#}");

    let v = json(&dir, env!("CARGO_BIN_EXE_mcp-reaperd"), &sb, &["--once", "--log-target", "stderr"]);
    assert_eq!(reaped_roots(&v), [i64::from(server)], "{v:#}");
    assert!(v["outcomes"].as_array().unwrap().iter().all(|o| o["verdict"] == "orphan"), "{v:#}");
    assert!(wait_until(Duration::from_secs(30), || !alive(server)), "the orphaned FastMCP server survived");
    sb.assert_alive(&[client]);
}

#[test]
fn a_fastmcp_cell_in_a_string_is_no_server() {
    let Some(python) = python3("a_fastmcp_cell_in_a_string_is_no_server") else { return };
    let dir = TempDir::new("source-cell");
    let d = dir.path();
    write(d, "notebook/notebook_pipeline.py", PIPELINE);
    let sb = start(&python, d, &[("notebook_pipeline.py", "notebook")]);
    let notebook = sb.pid_of(&format!("{} notebook_pipeline.py", python.display()));
    sb.kill_host(sb.pid_of("python3 pipeline.py"));

    let v = json(&dir, env!("CARGO_BIN_EXE_reaperctl"), &sb, &["scan"]);
    assert!(in_any_tree(&v, notebook).is_none(), "a cell in a string is no import: {v:#}");
    let v = json(&dir, env!("CARGO_BIN_EXE_mcp-reaperd"), &sb, &["--once", "--log-target", "stderr"]);
    assert!(reaped_roots(&v).is_empty(), "{v:#}");
    sb.assert_alive(&[notebook]);
}
