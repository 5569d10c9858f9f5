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
//!  "setsid": false, "ignore_term": false, "subreaper": false, "exit_after_spawn": false,
//!  "handle_term": false, "term_delay_ms": 0, "note_term": false, "uid": null, "on_usr1": [],
//!  "stdio": "pipe"}
//! ```
//!
//! Only `argv` is required. An argv element may be a string or an array of
//! bytes (for argv that is not valid UTF-8). Each child is this program again,
//! executed with `argv[0]` set to the child's first word and the child's spec
//! in `FAKEPROC`.
//!
//! More switches, for termination tests:
//! - `handle_term`: a SIGTERM handler that exits (like node or python
//!   servers), after `term_delay_ms` (a browser takes a moment to shut down).
//!   Unlike the default action, a handler only runs once a stopped process is
//!   continued.
//! - `note_term`: catch SIGTERM and keep running, but first append
//!   `"<pid> TERM <CLOCK_MONOTONIC ns>\n"` to the file named by
//!   `FAKEPROC_NOTES`: exactly when the signal arrived.
//! - `uid`: the parent starts this process as that uid and gid (the parent
//!   must be root).
//! - `on_usr1`: children spawned (once) when the process gets SIGUSR1 after it
//!   reported ready: a tree that grows on cue.
//! - `reap`: reaps its children as they exit (a SIGCHLD handler), as real
//!   hosts do (node's libuv, tokio): no zombie is left, and the pid's
//!   count of tasks drops at once.
//! - `exec_on_usr1`: a spec this process execs into (same pid, no fork) when
//!   it gets SIGUSR1 after it reported ready, as `exec claude` in a shell;
//!   that spec then starts its children and writes its own ready line.
//! - `touch_mib`: allocate this many MiB and write to every page (after the
//!   children are spawned, before the ready line), so the process holds that
//!   much private memory (Pss) for memory-accounting tests.
//! - `exe`: start this process through that path (a symlink to this program)
//!   rather than this program's own: its comm is then the link's name, which
//!   may hold `)`, spaces or a newline.
//! - `pad_kib`: the parent appends that many KiB of filler arguments (up to
//!   127 KiB each, the most one argv string may hold) to the argv it starts
//!   this process with; they are not in `FAKEPROC` (an environment string
//!   has the same limit), nor in the ready line.
//! - `cwd`: the directory the parent starts this process in (a host in its
//!   project, a server started with `uv --directory D`).
//! - `env`: `[name, value]` pairs added to the environment the parent gives
//!   this process (the markers hosts set for their servers).
//! - `hook`: `{"argv": [...], "stdin": "...", "report": "/path"}`, a real
//!   program this process runs (once) when it gets SIGUSR1 after it reported
//!   ready, as a host runs a hook: `stdin` written to the program's stdin,
//!   then `{"code": N, "stdout": "...", "stderr": "..."}` written to `report`
//!   once it exited (`code` null when a signal ended it).
//! - `flip`: a second argv. Every 3 ms the process execs itself (same pid)
//!   with the other argv: readers of `/proc` may see either, or one in their
//!   first read and the other in their second. The ready line is written once.
//! - `title`: an argv this process writes over its own (in place, as
//!   `process.title` and `setproctitle` do: the bytes `/proc/PID/cmdline`
//!   shows, NUL-padded to the original length, and its comm) at start,
//!   before its ready line; `retitle`: another one, written when it gets
//!   SIGUSR1 after it reported ready (`npm` sets `npm exec <pkg>` a moment
//!   after exec). Each must fit in the original argv's bytes.
//!
//! - `real`: the child is not this program but the real program `argv[0]`
//!   (found on `PATH`) with `argv[1..]`, and the environment variables in
//!   `env` added: a host stand-in's real `docker run -i` client. The parent
//!   writes the child's ready line; the child's own switches are ignored.
//! - `serve`: after its ready line, the process reads its stdin a line at a
//!   time and answers each with a line on its stdout, as a stdio server
//!   does, until the stdin ends (then it stays). Its read and write counters
//!   (`/proc/PID/io`) move only when it is sent something.
//! - `close_stdin_ms`: the parent ends this process's stdin that many ms
//!   after starting it, as a host ends a server's stdin before signalling it
//!   (or forgets the server after that): it closes its write end of the pipe,
//!   or its end of the socketpair. The process itself never reads its stdin,
//!   so it keeps running: a server that ignores EOF.
//! - `close_stdin_when`: a path; the parent ends this process's stdin (as
//!   `close_stdin_ms` does) once that file exists (looked for every 5 ms):
//!   a close on the test's cue, for tests that must look before and after it
//!   however slowly the machine runs.
//! - `stdin_leak`: a helper process the parent starts right after this one,
//!   holding (as its stdout; its stdin on `/dev/null`) a copy of the
//!   parent's end of this process's stdin: a write end leaked into a
//!   long-lived helper. Its own `stdio` is ignored.
//!
//! And `stdio`, what the parent connects this process's fd 0 and fd 1 to
//! (fd 2 is always inherited):
//! - `"pipe"` (the default): two pipes, fd 0 the read end of one and fd 1
//!   the write end of the other, as most MCP hosts start a stdio server. The
//!   parent holds its ends open (close-on-exec, so no other child inherits
//!   them) for as long as it lives.
//! - `"socket"`: one end of an `AF_UNIX` `SOCK_STREAM` socketpair as both
//!   fd 0 and fd 1, as Claude Code starts its servers; the parent holds the
//!   other end.
//! - `"null"`: both on `/dev/null` (a daemon, a `nohup`-like bystander).
//! - `"inherit"`: stdin on `/dev/null`, stdout the parent's own (the old
//!   behaviour).
//! - `"share"`: fd 0, 1 and 2 the parent's own (a launcher that relaunches
//!   itself with `stdio: 'inherit'`, as Gemini CLI does).
//! - `"pty"`: a new pseudo-terminal whose slave is fd 0, 1 and 2 and the
//!   controlling terminal of a new session the process leads, as a terminal
//!   emulator starts a shell or a TUI; the parent holds the master (the
//!   terminal's window). With `close_stdin_ms` the parent closes the master
//!   then: the window closed, `/dev/pts/N` deleted. The process ignores the
//!   SIGHUP that follows (it stands in for one that survived it).
//!
//! - `out_file`: a path; fd 1 and fd 2 go to that file instead (appended):
//!   `> log 2>&1`, `nohup`'s `nohup.out`.
//! - `listen`: the process listens on a TCP socket of its own on 127.0.0.1
//!   (an ephemeral port): a host that also serves clients over the network
//!   (`codex app-server --listen ws://…`).
//!
//! A process never reads its stdin nor writes its stdout after it starts,
//! unless `serve` (the ready line goes to `FAKEPROC_READY`), so one whose parent died, and
//! with it the far ends, keeps running.
//!
//! Once its own children are spawned, every process appends one line
//! `"<pid> <ppid> <argv joined by spaces>\n"` to the file named by
//! `FAKEPROC_READY` (one `write` on an `O_APPEND` file, so lines never mix),
//! then exits (`exit_after_spawn`) or sleeps forever. A `subreaper` process
//! reaps its children (and the orphans it adopts) instead of sleeping, so
//! killed test processes don't linger as zombies.

// This program stands in for other programs (hosts, servers, forking
// helpers) and needs raw system calls; every block has a `// SAFETY:` note.
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a child's fd 0 and fd 1 are connected to (see the header).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum StdioKind {
    #[default]
    Pipe,
    Socket,
    Null,
    Inherit,
    Share,
    Pty,
}

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

/// A program run on SIGUSR1, the way a host runs a hook (see the header).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Hook {
    argv: Vec<String>,
    #[serde(default)]
    stdin: String,
    report: std::path::PathBuf,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[allow(clippy::struct_excessive_bools)] // the switches of the JSON spec
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
    #[serde(default)]
    handle_term: bool,
    #[serde(default)]
    term_delay_ms: u64,
    #[serde(default)]
    note_term: bool,
    #[serde(default)]
    uid: Option<u32>,
    #[serde(default)]
    on_usr1: Vec<Spec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exec_on_usr1: Option<Box<Spec>>,
    #[serde(default)]
    reap: bool,
    #[serde(default)]
    touch_mib: u64,
    #[serde(default)]
    exe: Option<std::path::PathBuf>,
    #[serde(default)]
    flip: Vec<Arg>,
    #[serde(default)]
    pad_kib: usize,
    #[serde(default)]
    stdio: StdioKind,
    #[serde(default)]
    cwd: Option<std::path::PathBuf>,
    #[serde(default)]
    env: Vec<(String, String)>,
    hook: Option<Hook>,
    #[serde(default)]
    real: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    close_stdin_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    close_stdin_when: Option<std::path::PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stdin_leak: Option<Box<Spec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    out_file: Option<std::path::PathBuf>,
    #[serde(default)]
    listen: bool,
    #[serde(default)]
    title: Vec<Arg>,
    #[serde(default)]
    retitle: Vec<Arg>,
    #[serde(default)]
    serve: bool,
}

/// Writes `argv` over this process's own argv bytes (NUL-separated, the
/// rest NUL-filled) and sets its comm to the first word's last path part.
fn set_title(argv: &[Arg]) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_else(|e| fail(&format!("/proc/self/stat: {e}")));
    let f: Vec<&str> = stat.rsplit_once(')').map_or("", |x| x.1).split_whitespace().collect();
    // Fields 48 and 49 (arg_start, arg_end); `f` starts at field 3.
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
    let (start, end) = (field(48), field(49));
    let mut bytes: Vec<u8> = Vec::new();
    for a in argv {
        bytes.extend_from_slice(a.bytes());
        bytes.push(0);
    }
    if start == 0 || end <= start || bytes.len() > end - start {
        fail(&format!("title of {} bytes does not fit in the argv area {start:#x}..{end:#x}", bytes.len()));
    }
    bytes.resize(end - start, 0);
    // SAFETY: [arg_start, arg_end) is this process's own argv area on its
    // stack, mapped and writable for its whole life; nothing reads it
    // concurrently (single-threaded here); the length was checked above.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), start as *mut u8, bytes.len()) };
    let first = argv.first().map(Arg::bytes).unwrap_or_default();
    let base = first.rsplit(|&b| b == b'/').next().unwrap_or_default();
    let mut comm = base.iter().copied().filter(|&b| b != 0).take(15).collect::<Vec<u8>>();
    comm.push(0);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, comm.as_ptr()) };
}

fn fail(msg: &str) -> ! {
    eprintln!("fakeproc: {msg}");
    std::process::exit(2);
}

/// `term_delay_ms` for the handler.
static TERM_DELAY_MS: AtomicU64 = AtomicU64::new(0);
/// The `FAKEPROC_NOTES` file, opened before the handler is installed.
static NOTES_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn reap_children(_: libc::c_int) {
    // SAFETY: waitpid is async-signal-safe; no status is asked for.
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
}

extern "C" fn exit_on_term(_: libc::c_int) {
    let ms = TERM_DELAY_MS.load(Ordering::Relaxed);
    // SAFETY: nanosleep and _exit are async-signal-safe; the timespec lives
    // on this stack frame.
    unsafe {
        if ms > 0 {
            let ts =
                libc::timespec { tv_sec: (ms / 1000).cast_signed(), tv_nsec: ((ms % 1000) * 1_000_000).cast_signed() };
            libc::nanosleep(&raw const ts, std::ptr::null_mut());
        }
        libc::_exit(0)
    }
}

/// Appends the decimal digits of `v` to `buf` at `*at`.
fn push_decimal(buf: &mut [u8; 64], at: &mut usize, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    while n > 0 {
        n -= 1;
        buf[*at] = digits[n];
        *at += 1;
    }
}

extern "C" fn note_term(_: libc::c_int) {
    // Only async-signal-safe calls, no allocation: clock_gettime, getpid,
    // write, into a buffer on this stack frame.
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    // CLOCK_MONOTONIC is never negative.
    let ns = ts.tv_sec.cast_unsigned() * 1_000_000_000 + ts.tv_nsec.cast_unsigned();
    let mut buf = [0u8; 64];
    let mut at = 0;
    // SAFETY: getpid cannot fail.
    push_decimal(&mut buf, &mut at, u64::from(unsafe { libc::getpid() }.cast_unsigned()));
    for &b in b" TERM " {
        buf[at] = b;
        at += 1;
    }
    push_decimal(&mut buf, &mut at, ns);
    buf[at] = b'\n';
    at += 1;
    let fd = NOTES_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: `buf[..at]` is initialised; a bad fd only makes write fail.
        let _ = unsafe { libc::write(fd, buf.as_ptr().cast(), at) };
    }
}

/// Starts `child`; `leak`: instead of its `stdio`, stdin on `/dev/null` and
/// stdout this fd (a `stdin_leak` helper).
fn spawn_child(exe: &std::path::Path, child: &Spec, leak: Option<OwnedFd>) {
    if child.argv.is_empty() {
        fail("a child's argv must not be empty");
    }
    let json = serde_json::to_string(child).expect("a spec serializes");
    // Through another path (a symlink to this program) the kernel names the
    // process after that path: a way to get any comm.
    let mut cmd = if child.real {
        let mut c = Command::new(OsStr::from_bytes(child.argv[0].bytes()));
        c.env_remove("FAKEPROC");
        c
    } else {
        let mut c = Command::new(child.exe.as_deref().unwrap_or(exe));
        c.arg0(OsStr::from_bytes(child.argv[0].bytes())).env("FAKEPROC", json);
        c
    };
    cmd.args(child.argv[1..].iter().map(|a| OsStr::from_bytes(a.bytes())))
        .envs(child.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if let Some(dir) = &child.cwd {
        cmd.current_dir(dir);
    }
    // The parent's end of a socketpair, held (like the pipe ends below) for
    // as long as this process lives.
    let mut keep: Option<OwnedFd> = None;
    let stdio = if leak.is_some() { StdioKind::Inherit } else { child.stdio };
    match stdio {
        StdioKind::Pipe => {
            // std makes both pipes close-on-exec on this side.
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        }
        StdioKind::Socket => {
            // Both ends close-on-exec; the child gets its end dup2'ed to
            // fd 0 and fd 1, which clears the flag there.
            let (mine, theirs) = UnixStream::pair().unwrap_or_else(|e| fail(&format!("socketpair: {e}")));
            let theirs2 = theirs.try_clone().unwrap_or_else(|e| fail(&format!("dup of a socket: {e}")));
            cmd.stdin(Stdio::from(OwnedFd::from(theirs))).stdout(Stdio::from(OwnedFd::from(theirs2)));
            keep = Some(OwnedFd::from(mine));
        }
        StdioKind::Null => {
            cmd.stdin(Stdio::null()).stdout(Stdio::null());
        }
        StdioKind::Inherit => {
            cmd.stdin(Stdio::null()).stdout(leak.map_or_else(Stdio::inherit, Stdio::from));
        }
        StdioKind::Share => drop(cmd.stdin(Stdio::inherit()).stdout(Stdio::inherit())),
        StdioKind::Pty => {
            let (master, slave) = open_pty();
            let dup = |f: &OwnedFd| f.try_clone().unwrap_or_else(|e| fail(&format!("dup of a pty: {e}")));
            cmd.stdin(Stdio::from(dup(&slave))).stdout(Stdio::from(dup(&slave))).stderr(Stdio::from(slave));
            // SAFETY: between fork and exec only async-signal-safe calls:
            // setsid and ioctl, on fd 0 which the slave was just dup2'ed to.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            keep = Some(master);
        }
    }
    if let Some(path) = &child.out_file {
        cmd.stdout(append_to(path)).stderr(append_to(path));
    }
    let mut left = child.pad_kib * 1024;
    while left > 0 {
        let n = left.min(127 * 1024);
        cmd.arg("p".repeat(n));
        left -= n;
    }
    if let Some(uid) = child.uid {
        cmd.uid(uid).gid(uid);
    }
    // The Child handle is dropped on purpose: nothing waits for it here
    // (a subreaper reaps below; others leave zombies, like real programs
    // that never wait). Its pipe ends are not: they are leaked, open until
    // this process exits or execs (close-on-exec), like a host's.
    #[allow(clippy::zombie_processes, reason = "reaped by a subreaper, or left a zombie like real programs leave them")]
    let mut spawned = cmd.spawn().unwrap_or_else(|e| fail(&format!("spawning child: {e}")));
    drop(cmd); // the child's ends of a socketpair: closed here
    if child.real {
        write_ready(spawned.id(), std::process::id(), &child.argv);
    }
    // The end this process's stdin is written through: the pipe's write end,
    // or the parent's end of the socketpair.
    let far = spawned.stdin.take().map(OwnedFd::from).or(keep);
    if let Some(stdout) = spawned.stdout.take() {
        let _ = stdout.into_raw_fd();
    }
    if let (Some(helper), Some(f)) = (&child.stdin_leak, &far) {
        let copy = f.try_clone().unwrap_or_else(|e| fail(&format!("dup of a stdin end: {e}")));
        spawn_child(exe, helper, Some(copy));
    }
    match (far, child.close_stdin_ms, child.close_stdin_when.clone()) {
        (Some(f), Some(ms), _) => {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(ms));
                drop(f);
            });
        }
        (Some(f), None, Some(cue)) => {
            std::thread::spawn(move || {
                while !cue.exists() {
                    std::thread::sleep(Duration::from_millis(5));
                }
                drop(f);
            });
        }
        (Some(f), None, None) => {
            let _ = f.into_raw_fd();
        }
        (None, ..) => {}
    }
}

/// `path` opened for appending, as a child's stdout or stderr (`out_file`).
fn append_to(path: &std::path::Path) -> Stdio {
    let f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap_or_else(|e| fail(&format!("opening out_file: {e}")));
    Stdio::from(f)
}

/// With `on`, a TCP listener on 127.0.0.1, open for as long as the
/// process lives.
fn listen(on: bool) {
    if !on {
        return;
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| fail(&format!("listen: {e}")));
    let _ = l.into_raw_fd();
}

/// Runs a hook to its end and writes its report (see the header).
fn run_hook(hook: &Hook) {
    let Some((prog, args)) = hook.argv.split_first() else { fail("a hook's argv must not be empty") };
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| fail(&format!("running the hook {prog}: {e}")));
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(hook.stdin.as_bytes());
    }
    let out = child.wait_with_output().unwrap_or_else(|e| fail(&format!("waiting for the hook: {e}")));
    let report = serde_json::json!({
        "code": out.status.code(),
        "stdout": String::from_utf8_lossy(&out.stdout),
        "stderr": String::from_utf8_lossy(&out.stderr),
    });
    std::fs::write(&hook.report, report.to_string()).unwrap_or_else(|e| fail(&format!("writing the hook report: {e}")));
}

/// Appends `"<pid> <ppid> <argv>\n"` to `FAKEPROC_READY` (if set), in one write.
fn write_ready(pid: u32, ppid: u32, argv: &[Arg]) {
    let Some(path) = std::env::var_os("FAKEPROC_READY") else { return };
    let mut line = format!("{pid} {ppid} ").into_bytes();
    for (i, a) in argv.iter().enumerate() {
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

/// A signal set holding only SIGUSR1.
fn usr1_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise the set they are given.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        libc::sigaddset(&raw mut set, libc::SIGUSR1);
        set
    }
}

#[allow(clippy::too_many_lines)] // the spec's switches, applied in order
/// A new pseudo-terminal: (master, slave), both close-on-exec.
fn open_pty() -> (OwnedFd, OwnedFd) {
    use std::os::fd::FromRawFd;
    // SAFETY: posix_openpt returns a new fd or -1; grantpt/unlockpt act on
    // that fd; ptsname_r writes at most the buffer's length, NUL-terminated.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if m < 0 || libc::grantpt(m) != 0 || libc::unlockpt(m) != 0 {
            fail(&format!("posix_openpt: {}", std::io::Error::last_os_error()));
        }
        let master = OwnedFd::from_raw_fd(m);
        let mut buf = [0 as libc::c_char; 64];
        if libc::ptsname_r(m, buf.as_mut_ptr(), buf.len()) != 0 {
            fail("ptsname_r failed");
        }
        let s = libc::open(buf.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if s < 0 {
            fail(&format!("opening the pty slave: {}", std::io::Error::last_os_error()));
        }
        (master, OwnedFd::from_raw_fd(s))
    }
}

/// Private, touched memory, held until the process ends.
fn touch_memory(mib: u64) {
    if mib > 0 {
        let mut mem = vec![0u8; usize::try_from(mib).expect("touch_mib") << 20];
        for page in mem.chunks_mut(4096) {
            page[0] = 1;
        }
        std::hint::black_box(&mem);
        std::mem::forget(mem);
    }
}

/// A process on a terminal that stands in for one surviving its hangup.
fn ignore_hangup() {
    // SAFETY: single-threaded here; SIG_IGN installs no handler.
    if unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) } == libc::SIG_ERR {
        fail("signal(SIGHUP) failed");
    }
}

fn main() {
    let text = std::env::var("FAKEPROC").unwrap_or_else(|_| fail("FAKEPROC is not set"));
    let spec: Spec = serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("bad FAKEPROC spec: {e}")));
    if spec.argv.is_empty() {
        fail("argv must not be empty");
    }
    if spec.stdio == StdioKind::Pty {
        ignore_hangup();
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
    if spec.note_term {
        let path = std::env::var_os("FAKEPROC_NOTES").unwrap_or_else(|| fail("note_term needs FAKEPROC_NOTES"));
        let f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .unwrap_or_else(|e| fail(&format!("opening FAKEPROC_NOTES: {e}")));
        NOTES_FD.store(f.into_raw_fd(), Ordering::Relaxed);
    }
    TERM_DELAY_MS.store(spec.term_delay_ms, Ordering::Relaxed);
    let handler = if spec.ignore_term {
        libc::SIG_IGN
    } else if spec.note_term {
        note_term as extern "C" fn(libc::c_int) as libc::sighandler_t
    } else if spec.handle_term {
        exit_on_term as extern "C" fn(libc::c_int) as libc::sighandler_t
    } else {
        libc::SIG_DFL
    };
    // SAFETY: single-threaded at this point; the handler only calls _exit,
    // which is async-signal-safe.
    if unsafe { libc::signal(libc::SIGTERM, handler) } == libc::SIG_ERR {
        fail("signal(SIGTERM) failed");
    }
    if spec.reap {
        let handler = reap_children as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: single-threaded at this point; the handler only calls
        // waitpid, which is async-signal-safe.
        if unsafe { libc::signal(libc::SIGCHLD, handler) } == libc::SIG_ERR {
            fail("signal(SIGCHLD) failed");
        }
    }
    let on_usr1 =
        !spec.on_usr1.is_empty() || spec.hook.is_some() || !spec.retitle.is_empty() || spec.exec_on_usr1.is_some();
    if on_usr1 {
        // Blocked before the ready line, so a SIGUSR1 sent after it waits
        // for sigwait below instead of killing the process.
        let set = usr1_set();
        // SAFETY: a valid, initialised set; no old set is asked for.
        if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &raw const set, std::ptr::null_mut()) } != 0 {
            fail("pthread_sigmask failed");
        }
    }
    if spec.setsid {
        rustix::process::setsid().unwrap_or_else(|e| fail(&format!("setsid: {e}")));
    }

    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("current_exe: {e}")));
    for child in &spec.children {
        spawn_child(&exe, child, None);
    }

    touch_memory(spec.touch_mib);
    listen(spec.listen);

    if !spec.title.is_empty() {
        set_title(&spec.title);
    }
    if std::env::var_os("FAKEPROC_FLIPPED").is_none() {
        write_ready(std::process::id(), std::os::unix::process::parent_id(), &spec.argv);
    }

    if spec.exit_after_spawn {
        std::process::exit(0);
    }
    if !spec.flip.is_empty() {
        std::thread::sleep(Duration::from_millis(3));
        let mut next = spec.clone();
        std::mem::swap(&mut next.argv, &mut next.flip);
        let json = serde_json::to_string(&next).expect("a spec serializes");
        let e = Command::new(&exe)
            .arg0(OsStr::from_bytes(next.argv[0].bytes()))
            .args(next.argv[1..].iter().map(|a| OsStr::from_bytes(a.bytes())))
            .env("FAKEPROC", json)
            .env("FAKEPROC_FLIPPED", "1")
            .exec();
        fail(&format!("exec for flip: {e}"));
    }
    if on_usr1 {
        let set = usr1_set();
        let mut sig: libc::c_int = 0;
        // SAFETY: a valid set and a valid out-pointer. SIGUSR1 is blocked
        // (above), so it is only ever taken here.
        while unsafe { libc::sigwait(&raw const set, &raw mut sig) } != 0 {}
        if !spec.retitle.is_empty() {
            set_title(&spec.retitle);
        }
        for child in &spec.on_usr1 {
            spawn_child(&exe, child, None);
        }
        if let Some(hook) = &spec.hook {
            run_hook(hook);
        }
        if let Some(next) = &spec.exec_on_usr1 {
            exec_as(&exe, next);
        }
    }
    stay(&spec);
}

/// Execs this program as `next` (same pid), SIGUSR1 unblocked again.
fn exec_as(exe: &std::path::Path, next: &Spec) -> ! {
    let set = usr1_set();
    // SAFETY: a valid, initialised set; no old set is asked for.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &raw const set, std::ptr::null_mut()) };
    let json = serde_json::to_string(next).expect("a spec serializes");
    let e = Command::new(exe)
        .arg0(OsStr::from_bytes(next.argv[0].bytes()))
        .args(next.argv[1..].iter().map(|a| OsStr::from_bytes(a.bytes())))
        .env("FAKEPROC", json)
        .env_remove("FAKEPROC_FLIPPED")
        .exec();
    fail(&format!("exec_on_usr1: {e}"));
}

/// What the process does once ready, until it is ended.
fn stay(spec: &Spec) -> ! {
    if spec.subreaper {
        loop {
            match rustix::process::wait(rustix::process::WaitOptions::empty()) {
                Ok(_) => {}
                // No children right now; orphans may be adopted later.
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
    if spec.serve {
        serve();
    }
    loop {
        std::thread::park();
    }
}

/// `serve`: answers each line of its stdin with a line on its stdout, as a
/// stdio server answers requests, until its stdin ends (then it stays, as
/// a server that ignores EOF does).
fn serve() {
    use std::io::{BufRead, Write};
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(out, "{{\"jsonrpc\":\"2.0\",\"result\":{{}},\"request_bytes\":{}}}", line.len());
        let _ = out.flush();
    }
}
