//! A live host holding a pile of copies of one server (issue 35), for the
//! tests of `reaperctl generations --end` and the `[generations]` policy.
//!
//! The host stand-in is bash, run through a link named `claude`, on a
//! terminal: each copy's stdin is a process substitution (bash keeps the
//! write end), each copy is fakeproc with `serve` (it answers each line of
//! its stdin, so its I/O counters move only when it is sent something).
//! Copies start in sets more than the generation window apart; then, every
//! 0.3 s, the host sends a request to each copy of the newest set and to
//! the copies `busy` names. With `respawn` it starts again every copy it
//! loses, as a host that restarts what it loses does, and notes each
//! restart in `respawned`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Sandbox, Spec, TempDir};

/// What pile to build.
pub struct Shape {
    pub generations: usize,
    pub per_generation: usize,
    /// Old copies (by index, oldest first) the host sends requests to too.
    pub busy: Vec<usize>,
    pub respawn: bool,
}

impl Shape {
    pub fn copies(&self) -> usize {
        self.generations * self.per_generation
    }
}

/// The host and its copies, running below a sandbox's scope.
pub struct Pile {
    pub sb: Sandbox,
    pub dir: TempDir,
    pub host: i32,
    /// Copy pids by index, oldest set first (by the host's own count:
    /// copies of one set may start in one clock tick).
    pub copies: Vec<i32>,
    /// Where the host notes each copy it started again.
    pub respawned: PathBuf,
}

/// The host's script.
fn script(shape: &Shape, fakeproc: &str, window: u64, dir: &Path) -> String {
    let (pids, respawned, writing) = (dir.join("pids"), dir.join("respawned"), dir.join("writing"));
    let spec = serde_json::json!({ "argv": ["npx", "-y", "@playwright/mcp@latest"], "serve": true }).to_string();
    let mut sh = String::from("trap '' PIPE\ndeclare -a FD PID\n");
    let _ = writeln!(
        sh,
        "start() {{ exec {{w}}> >(export FAKEPROC='{spec}'; exec -a npx '{fakeproc}' -y @playwright/mcp@latest >/dev/null); FD[$1]=$w; PID[$1]=$!; echo \"$1 $!\" >> '{}'; }}",
        pids.display()
    );
    for g in 0..shape.generations {
        for k in 0..shape.per_generation {
            let _ = writeln!(sh, "start {}", g * shape.per_generation + k);
        }
        if g + 1 < shape.generations {
            let _ = writeln!(sh, "sleep {}", window + 1);
        }
    }
    let n = shape.copies();
    let busy: Vec<String> =
        (n - shape.per_generation..n).chain(shape.busy.iter().copied()).map(|i| i.to_string()).collect();
    let _ = writeln!(sh, "while :; do");
    let _ = writeln!(
        sh,
        "  for i in {}; do echo '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}}' >&${{FD[$i]}}; done",
        busy.join(" ")
    );
    if shape.respawn {
        let _ = writeln!(
            sh,
            "  for i in ${{!PID[@]}}; do st=; read -r _ _ st _ < /proc/${{PID[$i]}}/stat 2>/dev/null; \
             if [[ -z $st || $st == Z ]]; then eval \"exec ${{FD[$i]}}>&-\"; start $i; echo $i >> '{}'; fi; done",
            respawned.display()
        );
    }
    // The first requests are out: the busy copies are busy from now on.
    let _ = writeln!(sh, "  [[ -e '{w}' ]] || : > '{w}'", w = writing.display());
    let _ = writeln!(sh, "  sleep 0.3\ndone");
    sh
}

/// Starts the pile and waits until every copy runs and the host sends
/// requests; `None` (the skip printed) without bash.
pub fn start(test: &str, tag: &str, shape: &Shape) -> Option<Pile> {
    let Some(bash) = super::find_tool("bash") else {
        super::skip(test, "no bash");
        return None;
    };
    let dir = TempDir::new(tag);
    let link = dir.path().join("claude");
    std::os::unix::fs::symlink(&bash, &link).unwrap();
    let window = mcp_reaper::policy::generations::WINDOW_SECS;
    let fakeproc = super::fakeproc_path().to_str().unwrap().to_string();
    let script = dir.write("host.sh", script(shape, &fakeproc, window, dir.path()));
    let host = Spec::new(&[link.to_str().unwrap(), script.to_str().unwrap()]).real().stdio_pty();
    let mut sb = Sandbox::new(vec![host]);
    let n = shape.copies();
    // The scope, the host, and every copy once it reported ready.
    sb.wait_ready(2 + n);
    let host = sb.pid_of(link.to_str().unwrap());
    let pids = dir.path().join("pids");
    let lines = || std::fs::read_to_string(&pids).unwrap_or_default();
    assert!(super::wait_until(Duration::from_secs(60), || lines().lines().count() >= n), "{}", lines());
    let mut copies = vec![0; n];
    for line in lines().lines().take(n) {
        let (i, pid) = line.split_once(' ').unwrap();
        copies[i.parse::<usize>().unwrap()] = pid.parse().unwrap();
    }
    assert!(copies.iter().all(|&p| p > 0), "{copies:?}");
    let writing = dir.path().join("writing");
    assert!(super::wait_until(Duration::from_secs(60), || writing.exists()), "the host never wrote");
    let respawned = dir.path().join("respawned");
    Some(Pile { sb, dir, host, copies, respawned })
}
