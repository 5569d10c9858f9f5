//! The fallback socket directory (`$TMPDIR/mcp-reaper-UID`, used without
//! `XDG_RUNTIME_DIR`) is refused when it is not ours alone.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_reaper::exit;

use super::common::{self, Sandbox, TempDir, s, text};

// ------------------------------------------------------------------ the socket's directory

/// Runs `mcp-reaperd` (as `uid`, through setpriv when that is not ours)
/// with no `XDG_RUNTIME_DIR` and `TMPDIR=tmp`, so its socket falls back to
/// `tmp/mcp-reaper-UID/mcp-reaper/control.sock`.
fn daemon_without_runtime_dir(sb: &Sandbox, tmp: &Path, uid: u32) -> Child {
    let config = sb.dir().config(60, "");
    let state = tmp.join("state.json");
    let mut cmd = if uid == rustix::process::geteuid().as_raw() {
        Command::new(env!("CARGO_BIN_EXE_mcp-reaperd"))
    } else {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", &s(uid), "--regid", &s(uid), "--clear-groups", env!("CARGO_BIN_EXE_mcp-reaperd")]);
        c
    };
    cmd.arg("--config")
        .arg(&config)
        .args(["--dry-run", "--scope", &s(sb.scope_pid()), "--log-target", "stderr", "--state-file"])
        .arg(&state)
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning mcp-reaperd")
}

/// Waits (10 s at most) for the daemon to exit; its code and stderr.
fn refused(mut child: Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("mcp-reaperd kept running on an unsafe socket directory");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), text(&out.stderr))
}

/// Without `XDG_RUNTIME_DIR` a user daemon's socket falls back to
/// `$TMPDIR/mcp-reaper-UID`, a name anyone may take first. The daemon refuses
/// that directory when others may write it or another user owns it (exit
/// 73, naming the directory and the problem), and makes it 0700 when missing.
/// As root (whose socket is under /run) the daemon runs as uid 65534.
#[test]
fn daemon_refuses_a_shared_socket_directory_it_does_not_own_alone() {
    const TEST: &str = "daemon_refuses_a_shared_socket_directory_it_does_not_own_alone";
    let root = common::is_root();
    if root
        && (common::find_tool("setpriv").is_none()
            || !common::world_executable(Path::new(env!("CARGO_BIN_EXE_mcp-reaperd"))))
    {
        return common::skip(TEST, "as root this needs setpriv and an mcp-reaperd other users can run");
    }
    let uid = if root { 65534 } else { rustix::process::geteuid().as_raw() };
    let sb = Sandbox::new(vec![]);
    let tmp = TempDir::new("sockdir");
    // Like /tmp: anyone may create a name in it.
    std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let dir = tmp.path().join(format!("mcp-reaper-{uid}"));
    let chown = |owner: u32| rustix::fs::chown(&dir, Some(rustix::fs::Uid::from_raw(owner)), None).unwrap();
    let chmod = |mode: u32| std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();

    // Writable by others: refused.
    std::fs::create_dir(&dir).unwrap();
    chmod(0o777);
    if root {
        chown(uid);
    }
    let (code, err) = refused(daemon_without_runtime_dir(&sb, tmp.path(), uid));
    assert_eq!(code, Some(i32::from(exit::CANTCREAT)), "{err}");
    let want =
        format!("refusing the socket's directory {}: it is writable by group or others (mode 0777)", dir.display());
    assert!(err.contains(&want), "{err}");
    assert!(!dir.join("mcp-reaper").exists(), "nothing is created inside a refused directory");

    // Owned by another user: refused.
    if root {
        chmod(0o755);
        chown(0);
        let (code, err) = refused(daemon_without_runtime_dir(&sb, tmp.path(), uid));
        assert_eq!(code, Some(i32::from(exit::CANTCREAT)), "{err}");
        let want = format!("{}: it is owned by uid 0, not by us (uid {uid})", dir.display());
        assert!(err.contains(&want), "{err}");
    } else {
        common::skip(TEST, "the case of a directory another user owns needs root (to chown it)");
    }

    // Missing: made 0700, and the daemon starts.
    std::fs::remove_dir(&dir).unwrap();
    let mut child = daemon_without_runtime_dir(&sb, tmp.path(), uid);
    let socket = dir.join("mcp-reaper/control.sock");
    let up = common::wait_until(Duration::from_secs(60), || socket.exists());
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(up, "no socket at {}:\n{}", socket.display(), text(&out.stderr));
    let meta = std::fs::symlink_metadata(&dir).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777, 0o700);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), uid);
}

/// `reaperctl` asks nothing of a socket in a fallback directory that others
/// may write: whoever answers there could be anyone. As root (whose socket is
/// under /run) it runs as uid 65534.
#[test]
fn reaperctl_refuses_a_shared_socket_directory_it_does_not_own_alone() {
    const TEST: &str = "reaperctl_refuses_a_shared_socket_directory_it_does_not_own_alone";
    let bin = Path::new(env!("CARGO_BIN_EXE_reaperctl"));
    let me = rustix::process::geteuid().as_raw();
    let uid = if me == 0 { 65534 } else { me };
    if me == 0 && (common::find_tool("setpriv").is_none() || !common::world_executable(bin)) {
        return common::skip(
            TEST,
            "as root this runs reaperctl as uid 65534: needs setpriv and a world-executable binary",
        );
    }
    let tmp = TempDir::new("ctl-sockdir");
    std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let shared = tmp.path().join(format!("mcp-reaper-{uid}"));
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let config = tmp.write("c.toml", "");
    std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    if me == 0 {
        std::os::unix::fs::chown(&shared, Some(uid), Some(uid)).unwrap();
    }
    let mut cmd = if me == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", &s(uid), "--regid", &s(uid), "--clear-groups"]).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    let out = cmd
        .args(["--config", config.to_str().unwrap(), "status"])
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(i32::from(exit::UNAVAILABLE)), "{err}");
    assert!(err.contains("writable by group or others") && err.contains(&shared.display().to_string()), "{err}");
}
