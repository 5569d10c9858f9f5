//! The Kubernetes pod a container runs in, by namespace and name, from the
//! CRI runtime's own state: the OCI bundle `config.json` that containerd
//! (`/run/containerd/io.containerd.runtime.v2.task/k8s.io/<ID>/`) and CRI-O
//! (`/run/containers/storage/overlay-containers/<ID>/userdata/`) write for
//! each container, whose annotations name the pod (containerd:
//! `io.kubernetes.cri.sandbox-namespace|-name|-uid`, CRI-O:
//! `io.kubernetes.pod.namespace|name|uid`) and the container's name.
//!
//! Why these files and not the CRI or the kubelet: the kubelet's API needs
//! credentials a node agent should not hold, and the CRI is gRPC on a socket
//! that also creates and execs containers; the bundle is root-owned runtime
//! state on the node, readable with the capabilities the reaper already has.
//! The files are read through `/proc/1/root` first, so a reaper in a pod
//! with `hostPID` reads the node's `/run` with no extra mount; that needs
//! ptrace read access to PID 1, which an LSM may refuse a container (and
//! some sandboxes refuse even root), so then below `/`, where a pod may
//! mount the runtime's state directory read-only at its own path.
//!
//! Trust: only a regular file owned by root, writable by no one else, at
//! most [`CAP`] bytes, opened without following a final symlink and without
//! blocking; the pod UID in it must be the one the cgroup path names; the
//! names must be Kubernetes names (DNS labels/subdomains), else the pod is
//! named by its UID alone. Only the annotations are kept (the file also holds
//! the container's environment). Results are cached per container id.

use std::collections::HashMap;
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Largest `config.json` read (a container's bundle is a few KiB; its
/// environment and mounts make the rest).
pub const CAP: u64 = 1 << 20;

/// Containers remembered; beyond this the cache starts over.
const CACHE: usize = 4096;

/// Where each runtime keeps a container's bundle, below the runtime root.
const BUNDLES: [(&str, &str); 3] = [
    ("run/containerd/io.containerd.runtime.v2.task/k8s.io", "config.json"),
    ("run/containerd/io.containerd.runtime.v1.linux/k8s.io", "config.json"),
    ("run/containers/storage/overlay-containers", "userdata/config.json"),
];

/// Where the node's files are: PID 1's root (the node's own from a pod with
/// `hostPID`, `/` on the host itself), then this process's own root.
pub const DEFAULT_ROOTS: [&str; 2] = ["/proc/1/root", "/"];

/// A Kubernetes pod by namespace and name, and the container's name in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodName {
    pub namespace: String,
    pub name: String,
    pub container: Option<String>,
}

impl std::fmt::Display for PodName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The runtime state a scan reads pod names from, with its cache.
#[derive(Debug)]
pub struct Runtimes {
    roots: Vec<PathBuf>,
    cache: Mutex<HashMap<String, Option<PodName>>>,
    /// Docker/Podman containers' names as their engines gave them, by the
    /// user asked for and the short id (see `cycle::containers`).
    engine_names: Mutex<HashMap<(u32, String), Option<String>>>,
}

impl Runtimes {
    /// The runtime state below `root` alone.
    pub fn new(root: impl Into<PathBuf>) -> Runtimes {
        Runtimes::below(vec![root.into()])
    }

    fn below(roots: Vec<PathBuf>) -> Runtimes {
        Runtimes { roots, cache: Mutex::new(HashMap::new()), engine_names: Mutex::new(HashMap::new()) }
    }

    pub fn engine_name(&self, uid: u32, id: &str) -> Option<Option<String>> {
        self.engine_names.lock().ok()?.get(&(uid, id.to_string())).cloned()
    }

    pub fn remember_engine_name(&self, uid: u32, id: &str, name: Option<String>) {
        let Ok(mut names) = self.engine_names.lock() else { return };
        if names.len() >= CACHE {
            names.clear();
        }
        names.insert((uid, id.to_string()), name);
    }

    /// The pod of container `id` (its full 64-hex id), whose cgroup names
    /// pod `pod_uid`; `None` when no runtime state names it.
    pub fn pod(&self, id: &str, pod_uid: &str) -> Option<PodName> {
        if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let key = format!("{id}/{pod_uid}");
        if let Some(hit) = self.cache.lock().ok()?.get(&key) {
            return hit.clone();
        }
        let found = self.roots.iter().find_map(|root| {
            BUNDLES.iter().find_map(|(dir, file)| {
                let bytes = read_root_file(&root.join(dir).join(id).join(file))?;
                pod_of_config(&bytes, pod_uid)
            })
        });
        let mut cache = self.cache.lock().ok()?;
        if cache.len() >= CACHE {
            cache.clear();
        }
        cache.insert(key, found.clone());
        found
    }
}

impl Default for Runtimes {
    fn default() -> Runtimes {
        Runtimes::below(DEFAULT_ROOTS.iter().map(PathBuf::from).collect())
    }
}

/// A root-owned regular file no one else may write, at most [`CAP`] bytes.
/// containerd writes the spec with mode 0666 less its umask; in its bundle
/// directory (0700, root's) even a writable file is out of others' reach.
fn read_root_file(path: &Path) -> Option<Vec<u8>> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.file_type().is_file() || m.uid() != 0 || m.len() > CAP {
        return None;
    }
    if m.mode() & 0o022 != 0 {
        let dir = std::fs::metadata(path.parent()?).ok()?;
        if dir.uid() != 0 || dir.mode() & 0o077 != 0 {
            return None;
        }
    }
    let mut bytes = Vec::new();
    f.take(CAP + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= CAP).then_some(bytes)
}

#[derive(serde::Deserialize)]
struct Config {
    #[serde(default)]
    annotations: HashMap<String, String>,
}

/// The pod an OCI `config.json` names (containerd's or CRI-O's
/// annotations), if its pod UID, where given, is `pod_uid`.
pub fn pod_of_config(json: &[u8], pod_uid: &str) -> Option<PodName> {
    let c: Config = serde_json::from_slice(json).ok()?;
    let a = |keys: [&str; 2]| keys.iter().find_map(|k| c.annotations.get(*k)).map(String::as_str);
    let namespace = a(["io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace"])?;
    let name = a(["io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"])?;
    if a(["io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid"]).is_some_and(|u| !u.eq_ignore_ascii_case(pod_uid)) {
        return None;
    }
    if !is_label(namespace) || !is_subdomain(name) {
        return None;
    }
    let container = a(["io.kubernetes.cri.container-name", "io.kubernetes.container.name"])
        .filter(|n| is_label(n))
        .map(str::to_string);
    Some(PodName { namespace: namespace.to_string(), name: name.to_string(), container })
}

/// A DNS-1123 label: what Kubernetes allows as a namespace or container name.
fn is_label(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain: what Kubernetes allows as a pod name.
fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d";
    const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn containerd(ns: &str, name: &str, uid: &str) -> String {
        serde_json::json!({
            "ociVersion": "1.1.0",
            "process": {"env": ["SECRET=x"], "args": ["node", "server.js"]},
            "annotations": {
                "io.kubernetes.cri.container-type": "container",
                "io.kubernetes.cri.container-name": "agent",
                "io.kubernetes.cri.sandbox-id": "ff",
                "io.kubernetes.cri.sandbox-name": name,
                "io.kubernetes.cri.sandbox-namespace": ns,
                "io.kubernetes.cri.sandbox-uid": uid,
            }
        })
        .to_string()
    }

    #[test]
    fn containerd_and_cri_o_annotations_name_the_pod() {
        let p = pod_of_config(containerd("agents", "session-7f9c", UID).as_bytes(), UID).unwrap();
        assert_eq!(
            p,
            PodName { namespace: "agents".into(), name: "session-7f9c".into(), container: Some("agent".into()) }
        );
        assert_eq!(p.to_string(), "agents/session-7f9c");
        let crio = serde_json::json!({"annotations": {
            "io.kubernetes.pod.namespace": "ci", "io.kubernetes.pod.name": "eval-0.shard",
            "io.kubernetes.pod.uid": UID.to_uppercase(), "io.kubernetes.container.name": "mcp"}})
        .to_string();
        let p = pod_of_config(crio.as_bytes(), UID).unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.name.as_str(), p.container.as_deref()),
            ("ci", "eval-0.shard", Some("mcp"))
        );
        // An older containerd without the sandbox UID: the bundle's id is the cgroup's.
        let old = serde_json::json!({"annotations": {
            "io.kubernetes.cri.sandbox-namespace": "default", "io.kubernetes.cri.sandbox-name": "web"}})
        .to_string();
        assert_eq!(pod_of_config(old.as_bytes(), UID).unwrap().container, None);
    }

    #[test]
    fn another_pods_uid_or_names_that_are_no_kubernetes_names_name_nothing() {
        let other = "9b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d";
        assert_eq!(pod_of_config(containerd("agents", "web", other).as_bytes(), UID), None);
        for (ns, name) in
            [("Agents", "web"), ("agents", "web\n\x1b[31m"), ("", "web"), ("a/b", "web"), ("agents", "-web")]
        {
            assert_eq!(pod_of_config(containerd(ns, name, UID).as_bytes(), UID), None, "{ns:?} {name:?}");
        }
        assert_eq!(pod_of_config(b"{\"annotations\": {}}", UID), None);
        assert_eq!(pod_of_config(b"not json", UID), None);
        assert_eq!(pod_of_config(b"{\"annotations\": {\"io.kubernetes.pod.name\": 3}}", UID), None);
    }

    #[test]
    fn bundles_are_found_below_the_runtime_root_and_cached() {
        let dir = std::env::temp_dir().join(format!("reaper-runtime-{}", std::process::id()));
        let bundle = dir.join("run/containers/storage/overlay-containers").join(ID).join("userdata");
        std::fs::create_dir_all(&bundle).unwrap();
        let cfg = bundle.join("config.json");
        std::fs::write(&cfg, containerd("agents", "web", UID)).unwrap();
        let owned_by_root = std::fs::metadata(&cfg).unwrap().uid() == 0;
        let r = Runtimes::new(&dir);
        let want = owned_by_root.then(|| PodName {
            namespace: "agents".into(),
            name: "web".into(),
            container: Some("agent".into()),
        });
        assert_eq!(r.pod(ID, UID), want, "owned by root: {owned_by_root}");
        // A root that cannot be read (PID 1's, refused) gives way to the next.
        let fallback = Runtimes::below(vec![dir.join("nothing-here"), dir.clone()]);
        assert_eq!(fallback.pod(ID, UID), want, "the second root");
        std::fs::remove_file(&cfg).unwrap();
        assert_eq!(r.pod(ID, UID), want, "cached per container");
        assert_eq!(r.pod("../../etc", UID), None);
        // A writable spec counts only in a directory no one else may enter.
        std::fs::write(&cfg, containerd("agents", "web", UID)).unwrap();
        let mode = |p: &Path, m| std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap();
        mode(&cfg, 0o666);
        mode(&bundle, 0o755);
        assert_eq!(Runtimes::new(&dir).pod(ID, UID), None);
        mode(&bundle, 0o700);
        assert_eq!(Runtimes::new(&dir).pod(ID, UID), want);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
