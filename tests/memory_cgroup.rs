//! Bounded memory under a hostile process table (issue 22, item 4): 1,500
//! forks sharing one 200 KB argv made `mcp-reaperd --once` peak at 302 MiB,
//! above the shipped unit's `MemoryMax=256M`: OOM-killed at every scan. Here
//! the daemon runs in a memory cgroup limited to 64 MiB (a quarter of the
//! unit's) while that table exists, and must keep scanning and still reap an
//! orphan of its scope. The figures are `cargo bench --bench memory`'s.
//!
//! Root only (a cgroup of its own), skipped with a reason otherwise. Safety:
//! the daemon is `--scope`d to the sandbox; the table's processes are blocked
//! opening a FIFO of the test's and leave when it is opened and closed.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Daemon, Launch, Sandbox, Spec, TempDir, alive, skip, wait_until};

const LIMIT: u64 = 64 << 20;

/// A memory cgroup of the test's own: its directory and the file its limit
/// went to (`memory.max` on cgroup v2, `memory.limit_in_bytes` on a v1
/// memory hierarchy, as on a hybrid system), found from mountinfo.
struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    fn new(tag: &str) -> Result<Cgroup, String> {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
        let name = format!("mcp-reaper-test-{tag}-{}", std::process::id());
        for line in mounts.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let Some(sep) = f.iter().position(|&x| x == "-") else { continue };
            let (point, fstype, opts) = (f[4], f.get(sep + 1).copied(), f.get(sep + 3).copied().unwrap_or(""));
            let root = Path::new(point);
            if fstype == Some("cgroup2")
                && std::fs::read_to_string(root.join("cgroup.controllers")).is_ok_and(|c| c.contains("memory"))
            {
                let _ = std::fs::write(root.join("cgroup.subtree_control"), "+memory");
                let dir = root.join(&name);
                std::fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
                std::fs::write(dir.join("memory.max"), LIMIT.to_string()).map_err(|e| e.to_string())?;
                std::fs::write(dir.join("memory.swap.max"), "0").ok();
                return Ok(Cgroup { dir });
            }
            if fstype == Some("cgroup") && opts.split(',').any(|o| o == "memory") {
                let dir = root.join(&name);
                std::fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
                std::fs::write(dir.join("memory.limit_in_bytes"), LIMIT.to_string()).map_err(|e| e.to_string())?;
                return Ok(Cgroup { dir });
            }
        }
        Err("no memory cgroup controller is mounted".into())
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Its processes were ended by their owners; the kernel updates the
        // cgroup just after the last exit.
        wait_until(Duration::from_secs(10), || std::fs::remove_dir(&self.dir).is_ok());
    }
}

/// 1,500 forks of one `sh` whose argv is 200 KB, each blocked opening `fifo`.
struct Table {
    sh: Child,
    fifo: PathBuf,
}

impl Table {
    fn start(dir: &Path, count: usize) -> Table {
        let fifo = dir.join("fifo");
        assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let pad: Vec<String> = (0..2).map(|i| format!("{i}{}", "A".repeat(99_999))).collect();
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("i=0; while [ $i -lt {count} ]; do (read x < \"$F\") & i=$((i+1)); done; wait"))
            .arg("sh")
            .args(&pad)
            .env("F", &fifo)
            .stdin(Stdio::null());
        mcp_reaper::sys::kill_with_parent(&mut cmd);
        let sh = cmd.spawn().unwrap();
        let pid = sh.id();
        let children = || {
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .map_or(0, |c| c.split_whitespace().count())
        };
        assert!(wait_until(Duration::from_secs(120), || children() >= count), "the table did not start");
        Table { sh, fifo }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // The readers are blocked in open(2): a writer's open and close lets
        // each of them read end-of-file and exit.
        drop(std::fs::OpenOptions::new().write(true).open(&self.fifo));
        let _ = self.sh.wait();
    }
}

#[test]
fn the_daemon_keeps_reaping_in_a_small_memory_cgroup_under_a_hostile_table() {
    const TEST: &str = "the_daemon_keeps_reaping_in_a_small_memory_cgroup_under_a_hostile_table";
    if !common::is_root() {
        skip(TEST, "needs root (a memory cgroup of its own)");
        return;
    }
    let cg = match Cgroup::new("memory") {
        Ok(c) => c,
        Err(why) => {
            skip(TEST, &why);
            return;
        }
    };
    let dir = TempDir::new("memory-cgroup");
    let table = Table::start(dir.path(), 1500);
    let sb = Sandbox::new(vec![Spec::new(&["claude", "--resume"]).child(Spec::new(&[
        "node",
        "/x/.bin/playwright-mcp",
        "--headless",
    ]))]);
    let (host, server) = (sb.pid_of("claude"), sb.pid_of("node "));
    let cfg = dir.config_with(0, "interval_secs = 1", "");
    let procs = cg.dir.join("cgroup.procs");
    let how = Launch { in_namespace: Some(format!("echo $$ > '{}'", procs.display())), ..Launch::default() };
    let mut daemon = Daemon::start_in(sb.scope_pid(), &cfg, dir.path(), &how);
    // It is in the cgroup, and has scanned the table.
    let cgroup = std::fs::read_to_string(format!("/proc/{}/cgroup", daemon.pid())).unwrap();
    let leaf = cg.dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(cgroup.contains(&leaf), "the daemon is not in {}: {cgroup}", cg.dir.display());
    daemon.status_until(Duration::from_secs(120), "two scans", |st| st["scans"]["count"].as_u64() >= Some(2));
    sb.kill_host(host);
    assert!(
        wait_until(Duration::from_secs(120), || !alive(server)),
        "the orphan {server} was not reaped under the table:\n{}",
        daemon.log_text()
    );
    assert!(daemon.running(), "the daemon died in its cgroup:\n{}", daemon.log_text());
    let st = daemon.status();
    assert!(st["totals"]["trees_reaped"].as_u64() >= Some(1), "{st:#}");
    assert!(st["scans"]["last_processes"].as_u64() >= Some(1500), "the table was scanned: {st:#}");
    drop(daemon);
    drop(sb);
    drop(table);
    drop(cg);
}
