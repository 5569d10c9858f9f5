//! How a process is named in words: terminal-safe text, a command line cut
//! short, `claude (pid 4100)`. A leaf: `policy` (reasons), `reap` (orders)
//! and `report` (everything shown) all use it, and it uses none of them.

use std::borrow::Cow;

use crate::scan::Process;

/// Whether a character must never reach a terminal raw: C0 and C1 controls
/// (ESC, CSI, OSC … and newlines), DEL, the line and paragraph separators, and
/// the bidirectional embeddings, overrides, isolates and marks that reorder
/// what a person reads (`U+202A`–`U+202E`, `U+2066`–`U+2069`, `U+200E`,
/// `U+200F`, `U+061C`).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
        || matches!(c, '\u{2028}' | '\u{2029}')
}

/// The sanitizer: every text a person reads (scan, status, hosts, run's
/// messages, log lines on a terminal, notifications, error messages) goes
/// through it or [`printable_lines`]. Text from a process or a user's file
/// (argv, comm, cwd, config keys and values) is hostile: each unsafe
/// character ([`is_unsafe`]) is shown escaped (`\n`, `\u{1b}`, `\u{202e}`),
/// so a name cannot set a terminal's title, write its clipboard (OSC 52),
/// colour it, forge a line or reorder one. The escapes are plain ASCII:
/// escaping twice changes nothing.
pub fn printable(s: &str) -> Cow<'_, str> {
    escape_if(s, is_unsafe)
}

/// [`printable`] for a text of several lines the reaper wrote itself: its
/// newlines are kept, every other unsafe character escaped. The hostile
/// parts of such a text must have gone through [`printable`] first (or a
/// newline in them would start a line of their own).
pub fn printable_lines(s: &str) -> Cow<'_, str> {
    escape_if(s, |c| c != '\n' && is_unsafe(c))
}

fn escape_if(s: &str, unsafe_: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&unsafe_) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// JSON as printed (`--json`): serde escapes C0 controls in strings but
/// writes DEL, C1 controls and bidi characters raw. Outside strings JSON
/// has only ASCII, so each such character left is inside a string and is
/// written as a `\uXXXX` escape: the same JSON value, safe on a terminal.
pub fn printable_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(|c| c != '\n' && is_unsafe(c)) {
        return json.into();
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c != '\n' && is_unsafe(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = std::fmt::Write::write_fmt(&mut out, format_args!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// `println!` through [`printable_lines`]: what `reaperctl` and the daemon
/// print for a person.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => { $crate::stdout::print(&($crate::names::printable_lines(&format!($($arg)*)) + "\n")) };
}

/// `eprintln!` through [`printable_lines`]: messages and errors on stderr.
#[macro_export]
macro_rules! say_err {
    ($($arg:tt)*) => { eprintln!("{}", $crate::names::printable_lines(&format!($($arg)*))) };
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
    let mut cmd = printable(&p.display_cmd()).into_owned();
    cut(&mut cmd, max);
    cmd
}

/// `s` cut in place to `max` characters, the last one an ellipsis.
pub fn cut(s: &mut String, max: usize) {
    if let Some((at, _)) = s.char_indices().nth(max.saturating_sub(1))
        && s.chars().nth(max).is_some()
    {
        s.truncate(at);
        s.push('…');
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

    #[test]
    fn every_unsafe_class_is_escaped() {
        // C1 CSI, DEL, OSC 52 with BEL, bidi override and isolate, line separator.
        let s = "a\u{9b}b\u{7f}c\x1b]52;c;ZXZpbA==\x07d\u{202e}e\u{2066}f\u{2028}g\rh";
        let p = printable(s);
        assert!(!p.chars().any(is_unsafe), "{p}");
        assert_eq!(p, "a\\u{9b}b\\u{7f}c\\u{1b}]52;c;ZXZpbA==\\u{7}d\\u{202e}e\\u{2066}f\\u{2028}g\\rh");
        assert_eq!(printable(&p), p, "escaping twice changes nothing");
        assert_eq!(printable_lines("one\ntwo\x1b"), "one\ntwo\\u{1b}");
    }

    #[test]
    fn json_stays_json() {
        let v = serde_json::json!({"k\u{202e}": "a\u{9b}\u{7f}\x1b\n\u{1F600}"});
        let text = serde_json::to_string_pretty(&v).unwrap();
        let safe = printable_json(&text);
        assert!(!safe.chars().any(|c| c != '\n' && is_unsafe(c)), "{safe}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v);
    }
}
