//! Issue 32, shape 5: `nohup python notebook_pipeline.py &` — adopted, fd 0
//! on `/dev/null`, fds 1 and 2 its log, pipes above fd 2 to its own
//! children (a real `ProcessPoolExecutor` with its forkserver and resource
//! tracker, a kernel-like subprocess, two app subprocesses): 8 processes.
//! It has the MCP Python SDK 2.x's layout, and its script really imports
//! `fastmcp` (a stub package beside it), so only the rule that a moved
//! transport's other ends must have left with a host keeps it. The SDK 2.x
//! orphan whose host died is still reaped (tests/sdk.rs).

mod common;

use std::time::Duration;

use common::{Sandbox, Spec, TempDir, alive, descendants_of, in_any_tree, nothing_reaped, s, scan_json, wait_until};

const PIPELINE: &str = r#"from fastmcp import FastMCP
import concurrent.futures
import multiprocessing
import os
import subprocess
import sys
import time

# A cell it sends to the kernel.
CELL = "from fastmcp import FastMCP\nnb = FastMCP('notebook')"


def work(n):
    time.sleep(3600)
    return n


if __name__ == "__main__":
    ctx = multiprocessing.get_context("forkserver")
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=ctx)
    jobs = [pool.submit(work, i) for i in range(2)]
    loop = "import sys, time\nwhile True:\n    time.sleep(1)\n"
    kernel = subprocess.Popen([sys.executable, "-c", loop, "kernel"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    apps = [
        subprocess.Popen([sys.executable, "-c", loop, f"app{i}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for i in range(2)
    ]
    kernel.stdin.write(CELL.encode())
    kernel.stdin.flush()
    with open(os.environ["READY_AT"], "w") as f:
        f.write("ready\n")
    while True:
        time.sleep(1)
"#;

#[test]
fn a_pipeline_whose_pipes_lead_to_its_own_children_is_no_server() {
    let Some(python) = ["/usr/bin/python3"].into_iter().find(|p| std::path::Path::new(p).is_file()) else {
        return common::skip("a_pipeline_whose_pipes_lead_to_its_own_children_is_no_server", "no /usr/bin/python3");
    };
    let dir = TempDir::new("pipeline");
    dir.write("notebook_pipeline.py", PIPELINE);
    std::fs::create_dir(dir.path().join("fastmcp")).unwrap();
    dir.write("fastmcp/__init__.py", "class FastMCP:\n    def __init__(self, name):\n        self.name = name\n");
    let ready = dir.path().join("pipeline.ready");
    let log = dir.path().join("pipeline.log");
    let cmd = format!("exec {python} notebook_pipeline.py </dev/null >{} 2>&1", log.display());
    // `nohup python notebook_pipeline.py &` from a shell that then exits.
    let sb =
        Sandbox::new(vec![Spec::new(&["sh", "run-notebook.sh"]).exit_after_spawn().child(
            Spec::new(&["sh", "-c", &cmd]).real().cwd(dir.path()).env("READY_AT", &ready.display().to_string()),
        )]);
    assert!(
        wait_until(Duration::from_secs(60), || ready.exists()),
        "the pipeline never started: {:?}",
        std::fs::read_to_string(&log)
    );
    let main = sb.pid_of(&format!("sh -c exec {python}"));
    assert!(wait_until(Duration::from_secs(30), || common::ppid_of(main) == Some(sb.scope_pid())), "not adopted");
    let all: Vec<i32> = std::iter::once(main).chain(descendants_of(main)).collect();
    assert!(all.len() >= 8, "the pipeline and its 7 children: {all:?}");
    let cfg = sb.dir().config(0, "");
    let v = scan_json(&cfg, &["--scope", &s(sb.scope_pid())]);
    assert!(in_any_tree(&v, main).is_none(), "taken for a server: {v:#}");
    nothing_reaped(&sb, &cfg, &all);
    assert!(all.iter().all(|&p| alive(p)));
}
