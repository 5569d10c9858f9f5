//! Words and JSON for [`Outcome`]: the one log line per tree, and its JSON
//! (`mcp-reaperd --once --json`) with the fields every tree view shares.

use std::fmt::Write as _;

use serde::{Serialize, Serializer};

use crate::ids::{Identity, Pid};
use crate::policy::Verdict;
use crate::reap::{ContainerOutcome, Memory, Outcome};

impl Outcome {
    /// `; container NAME (image) killed and removed, 1.2 MiB` per run client.
    fn container_words(&self) -> String {
        self.containers.iter().fold(String::new(), |mut s, c| {
            let _ = write!(s, "; {}", c.words());
            s
        })
    }

    /// ` in pod agents/session-7f9c, container containerd 0123456789ab
    /// (agent)` (the pod by its UID when no runtime state names it), when
    /// the cgroups say.
    fn workload_words(&self) -> String {
        let pod = self.pod.as_ref().map(|p| crate::names::printable(&p.to_string()).into_owned());
        let pod = pod.as_deref().or(self.pod_uid.as_deref());
        let container = self.cgroup_container.as_deref().map(|c| match &self.container_name {
            Some(n) => format!("{c} ({})", crate::names::printable(n)),
            None => c.to_string(),
        });
        match (pod, container) {
            (Some(p), Some(c)) => format!(" in pod {p}, container {c}"),
            (Some(p), None) => format!(" in pod {p}"),
            (None, Some(c)) => format!(" in container {c}"),
            (None, None) => String::new(),
        }
    }

    /// The one log line per tree.
    pub fn line(&self) -> String {
        let mem = format!(
            "{} (pss {}, swap {}{})",
            super::bytes(self.reclaimed.total()),
            super::bytes(self.reclaimed.pss_bytes),
            super::bytes(self.reclaimed.swap_bytes),
            if self.reclaimed.estimated_from_rss { ", from rss" } else { "" }
        );
        if self.dry_run {
            return format!(
                "would reap {} tree root={} ({}){} members={} signals=TERM,KILL after {:.1}s if still alive \
                 (group signals={}, member signals={}) estimate={mem}",
                self.verdict,
                self.root.pid,
                self.root_cmd,
                self.workload_words(),
                self.members,
                self.term_timeout_secs,
                self.group_signals,
                self.member_signals
            ) + &self.container_words()
                + &self.reason_words();
        }
        let verb = if self.success() {
            "reaped"
        } else if self.gone == 0 {
            "failed to reap"
        } else {
            "partly reaped"
        };
        let mut s = format!(
            "{verb} {} tree root={} ({}){} members={} signals={} took={}ms reclaimed={mem}",
            self.verdict,
            self.root.pid,
            self.root_cmd,
            self.workload_words(),
            self.members + self.joined,
            self.signals.join(","),
            self.took_ms
        );
        if let Some(d) = self.mem_available_delta {
            let _ = write!(s, "; MemAvailable {}", super::signed_mib(d));
        }
        if !self.unkillable.is_empty() {
            let u: Vec<String> = self.unkillable.iter().map(|(id, st)| format!("{} ({st})", id.pid)).collect();
            let _ = write!(s, "; unkillable: {}", u.join(", "));
        }
        if !self.errors.is_empty() {
            let _ = write!(s, "; errors: {}", self.errors.join("; "));
        }
        if self.dropped > 0 {
            let _ = write!(s, "; {} pid(s) dropped (exited or reused)", self.dropped);
        }
        s.push_str(&self.container_words());
        s.push_str(&self.reason_words());
        s
    }

    /// `; reason: …`, last on the line: the reason is free text (it may hold
    /// `; ` and `=`), so everything before it still parses the same.
    fn reason_words(&self) -> String {
        if self.reason.is_empty() { String::new() } else { format!("; reason: {}", self.reason) }
    }
}

/// The JSON of an outcome: its fields as they always were (`root` the
/// identity object, `members` the members verified at the signal), and the
/// fields every tree view shares: `root_pid`, `root_start_time`,
/// `member_count` (verified at the signal plus those that joined).
#[derive(Serialize)]
struct Wire<'a> {
    verdict: Verdict,
    reason: &'a str,
    root: Identity,
    root_pid: Pid,
    root_start_time: u64,
    root_cmd: &'a str,
    dry_run: bool,
    members: usize,
    member_count: usize,
    joined: usize,
    dropped: usize,
    signals: &'a [&'static str],
    escalated: bool,
    group_signals: usize,
    member_signals: usize,
    gone: usize,
    unkillable: &'a [(Identity, char)],
    errors: &'a [String],
    took_ms: u64,
    term_to_kill_ms: Option<u64>,
    term_timeout_secs: f64,
    reclaimed: Memory,
    mem_available_delta: Option<i64>,
    swap_free_delta: Option<i64>,
    containers: &'a [ContainerOutcome],
    /// The Kubernetes pod (its UID) and the container (engine and short
    /// id) the tree's cgroups name; null when they name none.
    pod_uid: Option<&'a str>,
    cgroup_container: Option<&'a str>,
    /// The pod's namespace and name, where the container runtime's state
    /// on the node names them, and the container's name (the Kubernetes
    /// container's, or a Docker/Podman container's); null when unknown.
    pod_namespace: Option<&'a str>,
    pod_name: Option<&'a str>,
    container_name: Option<&'a str>,
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Wire {
            verdict: self.verdict,
            reason: &self.reason,
            root: self.root,
            root_pid: self.root.pid,
            root_start_time: self.root.start_time.0,
            root_cmd: &self.root_cmd,
            dry_run: self.dry_run,
            members: self.members,
            member_count: self.members + self.joined,
            joined: self.joined,
            dropped: self.dropped,
            signals: &self.signals,
            escalated: self.escalated,
            group_signals: self.group_signals,
            member_signals: self.member_signals,
            gone: self.gone,
            unkillable: &self.unkillable,
            errors: &self.errors,
            took_ms: self.took_ms,
            term_to_kill_ms: self.term_to_kill_ms,
            term_timeout_secs: self.term_timeout_secs,
            reclaimed: self.reclaimed,
            mem_available_delta: self.mem_available_delta,
            swap_free_delta: self.swap_free_delta,
            containers: &self.containers,
            pod_uid: self.pod_uid.as_deref(),
            cgroup_container: self.cgroup_container.as_deref(),
            pod_namespace: self.pod.as_ref().map(|p| p.namespace.as_str()),
            pod_name: self.pod.as_ref().map(|p| p.name.as_str()),
            container_name: self.container_name.as_deref(),
        }
        .serialize(s)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use crate::ids::{Identity, Pid, StartTime};
    use crate::policy::Verdict;
    use crate::reap::{Memory, Outcome};
    use serde_json::Value;

    /// A partly reaped tree (also for `log`'s tests).
    pub(in crate::report) fn outcome() -> Outcome {
        let root = Identity { pid: Pid::new(4242).unwrap(), start_time: StartTime(123) };
        Outcome {
            verdict: Verdict::Orphan,
            reason: "adopted".into(),
            root,
            root_cmd: "npm exec @playwright/mcp".into(),
            dry_run: false,
            members: 3,
            joined: 1,
            dropped: 0,
            signals: vec!["TERM", "KILL"],
            escalated: true,
            group_signals: 1,
            member_signals: 0,
            gone: 3,
            unkillable: vec![(root, 'D')],
            errors: vec![],
            took_ms: 5,
            term_to_kill_ms: Some(5000),
            term_timeout_secs: 5.0,
            reclaimed: Memory { pss_bytes: 1 << 20, swap_bytes: 0, estimated_from_rss: false },
            mem_available_delta: None,
            swap_free_delta: None,
            containers: vec![],
            pod_uid: None,
            cgroup_container: None,
            pod: None,
            container_name: None,
        }
    }

    #[test]
    fn outcome_json_keeps_its_fields_and_adds_the_shared_ones() {
        let v = serde_json::to_value(outcome()).unwrap();
        // As before: `root` the identity, `members` those verified at the signal.
        assert_eq!(v["root"], serde_json::json!({"pid": 4242, "start_time": 123}));
        assert_eq!(v["members"], 3);
        assert_eq!(v["unkillable"], serde_json::json!([[{"pid": 4242, "start_time": 123}, "D"]]));
        assert_eq!(v["reclaimed"]["pss_bytes"], 1 << 20);
        // Added: the same names as in every tree view.
        assert_eq!((v["root_pid"].as_i64(), v["root_start_time"].as_u64()), (Some(4242), Some(123)));
        assert_eq!(v["member_count"], 4);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 30, "{keys:?}");
        assert_eq!((&v["pod_uid"], &v["cgroup_container"]), (&serde_json::Value::Null, &serde_json::Value::Null));
    }

    #[test]
    fn a_pods_tree_names_its_pod_and_container_in_the_line_and_the_json() {
        let mut o = outcome();
        o.pod_uid = Some("1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d".into());
        o.cgroup_container = Some("containerd 0123456789ab".into());
        let line = o.line();
        assert!(
            line.starts_with(
                "partly reaped orphan tree root=4242 (npm exec @playwright/mcp) in pod 1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d, container containerd 0123456789ab members=4"
            ),
            "{line}"
        );
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["pod_uid"], "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d");
        assert_eq!(v["cgroup_container"], "containerd 0123456789ab");
        assert_eq!(
            (&v["pod_namespace"], &v["pod_name"], &v["container_name"]),
            (&Value::Null, &Value::Null, &Value::Null)
        );
        o.pod = Some(crate::scan::PodName {
            namespace: "agents".into(),
            name: "s-1".into(),
            container: Some("mcp".into()),
        });
        o.container_name = Some("mcp".into());
        let line = o.line();
        assert!(
            line.contains(
                " (npm exec @playwright/mcp) in pod agents/s-1, container containerd 0123456789ab (mcp) members=4"
            ),
            "{line}"
        );
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(
            (&v["pod_namespace"], &v["pod_name"], &v["container_name"]),
            (&"agents".into(), &"s-1".into(), &"mcp".into())
        );
        assert_eq!(v["pod_uid"], "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d");
    }

    #[test]
    fn line_names_the_tree_and_what_was_done() {
        let line = outcome().line();
        assert!(line.starts_with("partly reaped orphan tree root=4242 (npm exec @playwright/mcp) members=4"), "{line}");
        assert!(line.contains("unkillable: 4242 (D)"), "{line}");
        assert!(line.ends_with("; reason: adopted"), "{line}");
        let mut dry = outcome();
        dry.dry_run = true;
        let line = dry.line();
        assert!(line.starts_with("would reap orphan tree root=4242 "), "{line}");
        assert!(line.ends_with("; reason: adopted"), "the reason is on every would-reap line too: {line}");
    }

    #[test]
    fn containers_show_in_the_line_and_the_json() {
        let mut o = outcome();
        o.containers.push(crate::reap::ContainerOutcome {
            client_pid: 4243,
            id: Some("0123456789abcdef".into()),
            name: Some("srv".into()),
            image: "mcp/github".into(),
            memory_bytes: Some(3 << 20),
            ended: crate::reap::Ended::Killed,
            removed: true,
            note: None,
        });
        o.containers.push(crate::reap::ContainerOutcome {
            client_pid: 4244,
            image: "mcp/x".into(),
            ended: crate::reap::Ended::NotStopped,
            note: Some("engine at /x.sock: cannot connect".into()),
            ..Default::default()
        });
        let line = o.line();
        assert!(line.contains("; container srv (mcp/github) killed and removed, 3 MiB"), "{line}");
        assert!(
            line.contains("; container of client 4244 (mcp/x) not stopped: engine at /x.sock: cannot connect"),
            "{line}"
        );
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["containers"][0]["name"], "srv");
        assert_eq!(v["containers"][0]["memory_bytes"], 3 << 20);
        assert_eq!(v["containers"][1]["ended"], "not_stopped");
        o.dry_run = true;
        o.containers.truncate(1);
        o.containers[0].ended = crate::reap::Ended::WouldStop;
        o.containers[0].removed = false;
        assert!(o.line().contains("; would stop container srv (mcp/github), 3 MiB"), "{}", o.line());
    }
}
