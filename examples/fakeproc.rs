//! A stand-in for real MCP hosts, launchers and servers, for integration tests
//! and benchmarks: builds a process tree from a JSON spec whose processes read,
//! in `/proc/PID/cmdline`, exactly like the real thing.
//!
//! The spec comes from the env var `FAKEPROC` (the program's own argv is
//! ignored, so it can be anything):
//!
//! ```json
//! {"argv": ["npm", "exec", "@playwright/mcp@latest"],
//!  "children": [ {"argv": ["node", "/home/u/.npm/_npx/9833c18b/node_modules/.bin/playwright-mcp"]} ],
//!  "setsid": false, "ignore_term": false, "subreaper": false, "exit_after_spawn": false}
//! ```
//!
//! Only `argv` is required. An argv element may be a string or an array of
//! bytes (for argv that is not valid UTF-8). Each child is this program again,
//! executed with `argv[0]` set to the child's first word and the child's spec
//! in `FAKEPROC`.
//!
//! Once its own children are spawned, every process appends one line
//! `"<pid> <ppid> <argv joined by spaces>\n"` to the file named by
//! `FAKEPROC_READY` (one `write` on an `O_APPEND` file, so lines never mix),
//! then exits (`exit_after_spawn`) or sleeps forever. A `subreaper` process
//! reaps its children (and the orphans it adopts) instead of sleeping, so
//! killed test processes don't linger as zombies.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One argv element: text, or raw bytes.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Arg {
    Text(String),
    Bytes(Vec<u8>),
}

impl Arg {
    fn bytes(&self) -> &[u8] {
        match self {
            Arg::Text(s) => s.as_bytes(),
            Arg::Bytes(b) => b,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Spec {
    argv: Vec<Arg>,
    #[serde(default)]
    children: Vec<Spec>,
    #[serde(default)]
    setsid: bool,
    #[serde(default)]
    ignore_term: bool,
    #[serde(default)]
    subreaper: bool,
    #[serde(default)]
    exit_after_spawn: bool,
}

fn fail(msg: &str) -> ! {
    eprintln!("fakeproc: {msg}");
    std::process::exit(2);
}

fn main() {
    let text = std::env::var("FAKEPROC").unwrap_or_else(|_| fail("FAKEPROC is not set"));
    let spec: Spec = serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("bad FAKEPROC spec: {e}")));
    if spec.argv.is_empty() {
        fail("argv must not be empty");
    }

    if spec.subreaper {
        // `None` would *clear* the flag: any non-zero value sets it.
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
            .unwrap_or_else(|e| fail(&format!("set_child_subreaper: {e}")));
        if rustix::process::child_subreaper().ok().flatten().is_none() {
            fail("PR_SET_CHILD_SUBREAPER did not take effect");
        }
    }
    // A parent that ignored SIGTERM passes that on through exec: put the
    // default back unless this process is meant to ignore it.
    let handler = if spec.ignore_term { libc::SIG_IGN } else { libc::SIG_DFL };
    // SAFETY: single-threaded at this point; SIG_IGN and SIG_DFL are not
    // functions, so no handler code runs in signal context.
    if unsafe { libc::signal(libc::SIGTERM, handler) } == libc::SIG_ERR {
        fail("signal(SIGTERM) failed");
    }
    if spec.setsid {
        rustix::process::setsid().unwrap_or_else(|e| fail(&format!("setsid: {e}")));
    }

    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("current_exe: {e}")));
    for child in &spec.children {
        if child.argv.is_empty() {
            fail("a child's argv must not be empty");
        }
        let json = serde_json::to_string(child).expect("a spec serializes");
        let mut cmd = Command::new(&exe);
        cmd.arg0(OsStr::from_bytes(child.argv[0].bytes()))
            .args(child.argv[1..].iter().map(|a| OsStr::from_bytes(a.bytes())))
            .env("FAKEPROC", json)
            .stdin(Stdio::null());
        // The Child handle is dropped on purpose: nothing waits for it here
        // (a subreaper reaps below; others leave zombies, like real programs
        // that never wait).
        if let Err(e) = cmd.spawn() {
            fail(&format!("spawning child: {e}"));
        }
    }

    if let Some(path) = std::env::var_os("FAKEPROC_READY") {
        let mut line = format!("{} {} ", std::process::id(), std::os::unix::process::parent_id()).into_bytes();
        for (i, a) in spec.argv.iter().enumerate() {
            if i > 0 {
                line.push(b' ');
            }
            line.extend_from_slice(a.bytes());
        }
        line.push(b'\n');
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .unwrap_or_else(|e| fail(&format!("opening FAKEPROC_READY: {e}")));
        match f.write(&line) {
            Ok(n) if n == line.len() => {}
            Ok(_) => fail("short write to FAKEPROC_READY"),
            Err(e) => fail(&format!("writing FAKEPROC_READY: {e}")),
        }
    }

    if spec.exit_after_spawn {
        std::process::exit(0);
    }
    if spec.subreaper {
        loop {
            match rustix::process::wait(rustix::process::WaitOptions::empty()) {
                Ok(_) => {}
                // No children right now; orphans may be adopted later.
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
    loop {
        std::thread::park();
    }
}
