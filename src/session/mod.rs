//! Run sessions (`reaperctl run`): a host started inside a session of its own
//! that nothing it starts can leave, so whatever is left when the host exits
//! is known exactly. [`cgroup`] makes and ends the cgroup v2 leaf,
//! [`supervise`] is the wrapper at work (signals, the grace), [`leftovers`]
//! finds and reaps what is left, [`status`] lists sessions for the daemon's
//! status. The names here are how the
//! daemon and `reaperctl scan` recognise a session from `/proc` alone (no
//! registration: a daemon started or restarted later still sees it).

pub mod cgroup;
pub mod leftovers;
pub mod memcg_v1;
pub mod memory;
pub mod stale;
pub mod status;
pub mod supervise;
pub mod systemd;

/// The prefix of a session's cgroup leaf (`mcp-reaper-run-<wrapper pid>`,
/// with `.scope` when systemd made it).
pub const LEAF_PREFIX: &str = "mcp-reaper-run-";

/// The leaf (or transient scope unit, without `.scope`) name for a wrapper.
pub fn leaf_name(wrapper: u32) -> String {
    format!("{LEAF_PREFIX}{wrapper}")
}

/// The wrapper pid a cgroup path names, if one of its components is a run
/// session's leaf (`/…/mcp-reaper-run-123` or `/…/mcp-reaper-run-123.scope`).
pub fn session_of_cgroup(path: &str) -> Option<i32> {
    path.rsplit('/').find_map(|c| {
        let rest = c.strip_prefix(LEAF_PREFIX)?;
        let digits = rest.strip_suffix(".scope").unwrap_or(rest);
        digits.parse().ok().filter(|&p: &i32| p > 0)
    })
}

/// Whether a command line (argv joined by spaces) is a `reaperctl run`
/// wrapper: its program is `reaperctl` and `run` is its subcommand (global
/// options such as `--config PATH` may come before it).
pub fn is_run_wrapper(cmdline: &str) -> bool {
    // Asked of every process a judgement passes: the program's name first,
    // from the end of the first word, without a pass over the line.
    let first = cmdline.split_once(' ').map_or(cmdline, |(w, _)| w);
    if first.strip_suffix("reaperctl").is_none_or(|dir| !(dir.is_empty() || dir.ends_with('/'))) {
        return false;
    }
    let words = cmdline.split(' ').skip(1);
    let mut skip_value = false;
    for w in words {
        if skip_value {
            skip_value = false;
            continue;
        }
        match w {
            "run" => return true,
            "--config" | "--socket" => skip_value = true,
            w if w.starts_with('-') => {}
            _ => return false, // another subcommand
        }
    }
    false
}

/// The host a live wrapper runs, as the wrapper shows it: the pid its
/// pidfd of the host refers to (`Pid:` in the fd's fdinfo), 0 when it holds
/// no pidfd (the host is gone: the wrapper drops it once it has waited for
/// the host). `None` when its fds cannot be read.
pub fn host_of_wrapper(proc_root: &std::path::Path, wrapper: crate::ids::Pid) -> Option<i32> {
    let dir = proc_root.join(wrapper.to_string());
    let fds = std::fs::read_dir(dir.join("fd")).ok()?;
    for e in fds.flatten() {
        if std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == "anon_inode:[pidfd]") {
            let info = std::fs::read_to_string(dir.join("fdinfo").join(e.file_name())).ok()?;
            let pid = info.lines().find_map(|l| l.strip_prefix("Pid:"))?.trim().parse::<i32>().ok()?;
            return Some(pid.max(0));
        }
    }
    Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names() {
        assert_eq!(session_of_cgroup("/user.slice/mcp-reaper-run-42.scope"), Some(42));
        assert_eq!(session_of_cgroup("/mcp-reaper-run-7"), Some(7));
        assert_eq!(session_of_cgroup("/a/mcp-reaper-run-7/inner"), Some(7));
        assert_eq!(session_of_cgroup("/mcp-reaper-run-x"), None);
        assert_eq!(session_of_cgroup("/mcp-reaper-run-0"), None);
        assert_eq!(session_of_cgroup("/"), None);
    }

    #[test]
    fn wrappers() {
        assert!(is_run_wrapper("reaperctl run -- claude"));
        assert!(is_run_wrapper("/usr/bin/reaperctl --config /x.toml run --grace 3 -- claude --resume"));
        assert!(!is_run_wrapper("reaperctl status"));
        assert!(!is_run_wrapper("reaperctl scan run"));
        assert!(!is_run_wrapper("claude run"));
        assert!(!is_run_wrapper("/opt/notreaperctl run -- claude"));
        assert!(!is_run_wrapper(""));
    }
}
