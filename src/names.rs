//! How a process is named in words: terminal-safe text, a command line cut
//! short, `claude (pid 4100)`. A leaf: `policy` (reasons), `reap` (orders)
//! and `report` (everything shown) all use it, and it uses none of them.

use std::borrow::Cow;

use crate::scan::Process;

/// Text from a process (argv, comm) made safe for a terminal or a log line:
/// control characters (newlines, escape sequences) are shown escaped.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return s.into();
    }
    s.chars()
        .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
        .collect::<String>()
        .into()
}

/// A short name for a process in a reason: `claude (pid 4100)`.
pub fn name(p: &Process) -> String {
    format!("{} (pid {})", short_cmd(p, 48), p.pid())
}

/// A process by its program: `mcp-server-filesystem (pid 4100)`.
pub fn program_ref(p: &Process) -> String {
    let prog = crate::redact::redact(p.program.name(&p.cmdline)).into_owned();
    format!("{} (pid {})", printable(&prog), p.pid())
}

/// The command line cut to `max` characters, with an ellipsis.
pub fn short_cmd(p: &Process, max: usize) -> String {
    let cmd = printable(&p.display_cmd()).into_owned();
    if cmd.chars().count() <= max {
        cmd
    } else {
        let mut s: String = cmd.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// A nested PID namespace, for reasons: its container when the cgroup names
/// one (`container docker 0123456789ab`, `… in pod <UID>` for a Kubernetes
/// pod's), else its `ns/pid` inode.
pub fn namespace_of(d: &crate::scan::Details) -> String {
    match (&d.container, d.pidns) {
        (Some(c), _) => match &c.pod_uid {
            Some(pod) => format!("container {c} in pod {pod}"),
            None => format!("container {c}"),
        },
        (None, Some(ino)) => format!("pid:[{ino}]"),
        (None, None) => "its inode unreadable".to_string(),
    }
}

/// Where a tree runs, when its members' cgroups say: the pod UID and the
/// container of the first member whose details name them.
pub fn workload<'a>(members: impl IntoIterator<Item = &'a Process>) -> (Option<String>, Option<String>) {
    let (mut pod, mut container) = (None, None);
    for p in members {
        pod = pod.or(p.pod_uid());
        container = container.or(p.container());
        if pod.is_some() && container.is_some() {
            break;
        }
    }
    (pod.map(str::to_string), container.map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("a\nb\x1b[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(printable("plain"), "plain");
    }
}
