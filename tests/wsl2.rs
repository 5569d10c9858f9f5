//! Issue 33: WSL2's shape, built with real processes (root only). WSL2
//! cannot run here; what makes it different can: orphans go to the
//! session's `/init` relay, a child subreaper whose executable is `/init`,
//! not to PID 1 — which is systemd with `systemd=true`, or `/init` itself.
//!
//! Each case runs in a PID and mount namespace of its own, chrooted into a
//! tmpfs root that bind-mounts the machine's directories and fakeproc at
//! `/init` (so `/proc/PID/exe` reads `/init`, as on WSL2). A driver script
//! inside SIGKILLs the host (claude on a terminal of its own, its server
//! on a socketpair), waits until the server is the relay's, and runs an
//! enforcing `mcp-reaperd --once` there (a PID namespace of its own: it
//! sees nothing else). The relay, the host's terminal and a login shell
//! under the same relay are kept.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{Spec, TempDir, pid_namespace_tool, text};
use serde_json::Value;

/// Builds the root and runs `DRIVE` as the spec's PID 1 in it.
const OUTSIDE: &str = r#"set -eu
R="$DIR/root"
mkdir -p "$R"
mount -t tmpfs wsl "$R"
# Every top-level directory but /proc: wherever the clone and its target
# are (a CI runner checks out under a directory of its own).
for p in /*; do
  d=${p#/}
  [ "$d" = proc ] && continue
  if [ -L "$p" ]; then ln -s "$(readlink "$p")" "$R/$d"
  elif [ -d "$p" ]; then mkdir "$R/$d"; mount --rbind "$p" "$R/$d"
  fi
done
mkdir "$R/proc"; mount -t proc proc "$R/proc"
touch "$R/init"; mount --bind "$FP" "$R/init"
cd /
exec chroot "$R" bash -c 'exec -a "$0" "$1"' "$PID1_ARG0" "$PID1_EXE"
"#;

/// Inside, as a real child of the tree: drives the crash and the reap.
const DRIVE: &str = r#"set -u
pid_of() { awk -v w="$1" '$3 == w { print $1; exit }' "$FAKEPROC_READY"; }
n=0
while [ "$(wc -l < "$FAKEPROC_READY")" -lt "$TOTAL" ]; do
  n=$((n + 1)); [ $n -gt 6000 ] && { echo "not ready" >&2; exit 1; }; sleep 0.01
done
host=$(pid_of claude); server=$(pid_of npx)
relay=$(awk '$3 == "xterm" { print $2; exit }' "$FAKEPROC_READY")
keep="$relay $(pid_of xterm) $(pid_of -bash)"
echo "pids host=$host server=$server relay=$relay pid1_exe=$(readlink /proc/1/exe) relay_exe=$(readlink /proc/$relay/exe)"
kill -9 "$host"
n=0
until [ "$(awk '{ print $4 }' /proc/$server/stat 2>/dev/null)" = "$relay" ]; do
  n=$((n + 1)); [ $n -gt 6000 ] && { echo "server not adopted by the relay" >&2; exit 1; }; sleep 0.01
done
"$REAPERD" --once --json --log-target stderr --config "$CFG" --state-file "$DIR/state.json" > "$DIR/once.json" 2> "$DIR/once.log"
n=0
while [ -d /proc/$server ] && [ "$(awk '{ print $3 }' /proc/$server/stat 2>/dev/null)" != Z ]; do
  n=$((n + 1)); [ $n -gt 6000 ] && break; sleep 0.01
done
[ -d /proc/$server ] && [ "$(awk '{ print $3 }' /proc/$server/stat 2>/dev/null)" != Z ] && echo "server alive"
for p in $keep; do [ -d /proc/$p ] || echo "bystander $p gone"; done
echo done
"#;

/// Runs one case; `pid1` is PID 1's argv[0]: `/init` for WSL2 without
/// systemd (then its executable too), or systemd's path. Returns the
/// driver's output and the report.
fn run(test: &str, pid1: &str) -> Option<(String, Value)> {
    let unshare = pid_namespace_tool(test, "a PID and mount namespace with a chroot")?;
    let dir = TempDir::new("wsl2");
    let drive = dir.write("drive.sh", DRIVE);
    let out_file = dir.path().join("drive.out");
    let terminal = Spec::new(&["xterm"]).child(
        Spec::new(&["claude", "--resume"])
            .stdio_pty()
            .child(Spec::new(&["npx", "-y", "@playwright/mcp"]).stdio_socket()),
    );
    let relay = Spec::new(&["/init"])
        .exe(Path::new("/init"))
        .subreaper()
        .child(terminal)
        .child(Spec::new(&["-bash"]).stdio_pty());
    let driver = Spec::new(&["sh", "-c", &format!("sh {} > {} 2>&1", drive.display(), out_file.display())]).real();
    // PID 1 (systemd, or /init itself) → the session's /init relay and the driver.
    let init = Spec::new(&[pid1]).subreaper().child(relay).child(driver);
    let exe = if pid1 == "/init" { "/init".to_string() } else { common::fakeproc_path().display().to_string() };
    let total = init.count();
    let script = dir.write("outside.sh", OUTSIDE);
    let cfg = dir.config(0, "");
    let ready = dir.path().join("ready");
    std::fs::write(&ready, "").unwrap();
    let out = Command::new(unshare)
        .args(["--pid", "--fork", "--mount", "--propagation", "private", "sh"])
        .arg(&script)
        .env("DIR", dir.path())
        .env("FP", common::fakeproc_path())
        .env("PID1_EXE", &exe)
        .env("PID1_ARG0", pid1)
        .env("FAKEPROC", init.to_json().to_string())
        .env("FAKEPROC_READY", &ready)
        .env("TOTAL", total.to_string())
        .env("REAPERD", env!("CARGO_BIN_EXE_mcp-reaperd"))
        .env("CFG", &cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running unshare");
    // PID 1 never exits by itself: wait for the driver, then end it all.
    let finished = common::wait_until(std::time::Duration::from_secs(120), || {
        std::fs::read_to_string(&out_file).is_ok_and(|t| t.contains("done") || t.contains("not ") || t.contains("exit"))
    });
    let unshare_pid = out.id().cast_signed();
    if let Some(&first) = common::descendants_of(unshare_pid).first() {
        common::sigkill(first);
    }
    let out = out.wait_with_output().expect("waiting for unshare");
    let drive_out = std::fs::read_to_string(&out_file).unwrap_or_default();
    let once_log = std::fs::read_to_string(dir.path().join("once.log")).unwrap_or_default();
    let ctx = format!("driver:\n{drive_out}\nreaper log:\n{once_log}\nunshare stderr:\n{}", text(&out.stderr));
    assert!(finished && drive_out.contains("done"), "the driver did not finish: {ctx}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("once.json")).unwrap_or_default())
            .unwrap_or_else(|e| panic!("no report ({e}): {ctx}"));
    Some((format!("{drive_out}\n{ctx}"), report))
}

fn check(out: &str, report: &Value) {
    eprintln!("{}", out.lines().next().unwrap_or_default());
    assert!(out.contains("relay_exe=/init"), "the relay must read as /init: {out}");
    let o = report["outcomes"].as_array().unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(o.len(), 1, "{report:#}\n{out}");
    assert_eq!(o[0]["verdict"], "orphan", "{report:#}");
    let reason = o[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("adopted by /init") && reason.contains("a subreaper by its identity"), "{reason}");
    assert!(!out.contains("server alive"), "{out}");
    assert!(!out.contains("bystander"), "{out}");
}

#[test]
fn wsl2_with_systemd_orphans_go_to_the_init_relay_and_are_reaped() {
    if let Some((out, report)) =
        run("wsl2_with_systemd_orphans_go_to_the_init_relay_and_are_reaped", "/lib/systemd/systemd")
    {
        assert!(!out.contains("pid1_exe=/init"), "PID 1 is systemd here: {out}");
        check(&out, &report);
    }
}

#[test]
fn wsl2_without_systemd_orphans_go_to_the_init_relay_and_are_reaped() {
    if let Some((out, report)) = run("wsl2_without_systemd_orphans_go_to_the_init_relay_and_are_reaped", "/init") {
        assert!(out.contains("pid1_exe=/init"), "PID 1 is /init too: {out}");
        check(&out, &report);
    }
}
