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
/// one (`container docker 0123456789ab`; for a Kubernetes pod's
/// `container containerd 0123456789ab (agent) in pod agents/session-7f9c`,
/// or `… in pod <UID>` when no runtime state names the pod), else its
/// `ns/pid` inode.
pub fn namespace_of(d: &crate::scan::Details) -> String {
    match (&d.container, d.pidns) {
        (Some(c), _) => format!("container {}", container_words(c)),
        (None, Some(ino)) => format!("pid:[{ino}]"),
        (None, None) => "its inode unreadable".to_string(),
    }
}

/// A cgroup's container in words: `containerd 0123456789ab (agent) in pod
/// agents/session-7f9c`, `… in pod <UID>`, or `docker 0123456789ab`.
pub fn container_words(c: &crate::scan::CgroupContainer) -> String {
    match (&c.pod, &c.pod_uid) {
        (Some(p), _) => {
            let named = p.container.as_deref().map(|n| format!(" ({})", printable(n))).unwrap_or_default();
            format!("{c}{named} in pod {}", printable(&p.to_string()))
        }
        (None, Some(uid)) => format!("{c} in pod {uid}"),
        (None, None) => c.to_string(),
    }
}

/// Where a tree runs, as its members' cgroups (and the runtimes' state)
/// say: the first member's that names each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workload {
    /// The Kubernetes pod's UID, from the cgroup path.
    pub pod_uid: Option<String>,
    /// Engine and short id: `containerd 0123456789ab`.
    pub cgroup_container: Option<String>,
    /// The pod's namespace and name, where the runtime's state names them.
    pub pod: Option<crate::scan::PodName>,
}

pub fn workload<'a>(members: impl IntoIterator<Item = &'a Process>) -> Workload {
    let (mut pod_uid, mut container, mut pod) = (None, None, None);
    for p in members {
        pod_uid = pod_uid.or(p.pod_uid());
        container = container.or(p.container());
        pod = pod.or(p.pod());
        if pod_uid.is_some() && container.is_some() && pod.is_some() {
            break;
        }
    }
    Workload {
        pod_uid: pod_uid.map(str::to_string),
        cgroup_container: container.map(str::to_string),
        pod: pod.cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("a\nb\x1b[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(printable("plain"), "plain");
    }

    #[test]
    fn a_pods_container_is_named_by_the_pod_when_known_else_by_its_uid() {
        let uid = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d";
        let mut c = crate::scan::CgroupContainer::from("containerd 0123456789ab");
        assert_eq!(container_words(&c), "containerd 0123456789ab");
        c.pod_uid = Some(uid.into());
        assert_eq!(container_words(&c), format!("containerd 0123456789ab in pod {uid}"));
        c.pod = Some(crate::scan::PodName {
            namespace: "agents".into(),
            name: "s-1".into(),
            container: Some("mcp".into()),
        });
        assert_eq!(container_words(&c), "containerd 0123456789ab (mcp) in pod agents/s-1");
        let d = crate::scan::Details { container: Some(c), ..Default::default() };
        assert_eq!(namespace_of(&d), "container containerd 0123456789ab (mcp) in pod agents/s-1");
    }
}
