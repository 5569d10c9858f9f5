//! Parsers for what places a process: its `/proc/PID/cgroup` (the systemd
//! unit, the container, the Kubernetes pod it runs in) and a `mountinfo`
//! (where the cgroup hierarchies are mounted). As the other parsers, they
//! take any text and never panic.

/// The cgroup path and the systemd unit it names, from `/proc/PID/cgroup`:
/// the unified (`0::`) line, else systemd's v1 `name=systemd` line. The unit
/// is the innermost `*.service` or `*.scope` component.
pub fn cgroup_unit(text: &str) -> Option<(bool, String, String)> {
    let line = |want: &dyn Fn(&str) -> bool| {
        text.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
            want(ctrl).then(|| path.to_string())
        })
    };
    // systemd's unit suffixes are lowercase, always: not file extensions.
    #[allow(clippy::case_sensitive_file_extension_comparisons)]
    let unit_of =
        |path: &str| path.rsplit('/').find(|c| c.ends_with(".service") || c.ends_with(".scope")).map(str::to_string);
    // A hybrid system can have the unified line at "/" while the v1
    // hierarchy holds the units: take the first path that names one.
    [(true, line(&|c: &str| c.is_empty())), (false, line(&|c: &str| c == "name=systemd"))]
        .into_iter()
        .filter_map(|(v2, p)| Some((v2, p?)))
        .find_map(|(v2, p)| unit_of(&p).map(|u| (v2, p, u)))
}

/// The container engine and short id a cgroup file names, if any: the
/// systemd driver's `docker-ID.scope`, `libpod-ID.scope`,
/// `cri-containerd-ID.scope`, `crio-ID.scope`, or the cgroupfs driver's
/// `/docker/ID`, `/libpod_parent/libpod-ID`, `/kubepods/…/ID`.
pub fn container_of(text: &str) -> Option<String> {
    container_ref(text).map(|(engine, id)| format!("{engine} {}", &id[..12]))
}

/// The container engine and full (64 hex) id a cgroup file names: as
/// [`container_of`], the id whole (runtimes keep their state by it).
pub fn container_ref(text: &str) -> Option<(&'static str, &str)> {
    const ENGINES: [(&str, &str); 5] = [
        ("docker-", "docker"),
        ("libpod-", "podman"),
        ("cri-containerd-", "containerd"),
        ("crio-", "cri-o"),
        ("containerd-", "containerd"),
    ];
    let is_id = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    for line in text.lines() {
        let Some(path) = line.splitn(3, ':').nth(2) else { continue };
        let mut parent = "";
        for comp in path.split('/') {
            let bare = comp.strip_suffix(".scope").unwrap_or(comp);
            let hit = ENGINES
                .iter()
                .find_map(|(pre, engine)| bare.strip_prefix(pre).filter(|id| is_id(id)).map(|id| (*engine, id)))
                .or_else(|| {
                    let engine = match parent {
                        "docker" => "docker",
                        p if p.starts_with("libpod") => "podman",
                        p if p.starts_with("kube") || p.starts_with("pod") => "kubernetes",
                        _ => "container",
                    };
                    is_id(bare).then_some((engine, bare))
                });
            if hit.is_some() {
                return hit;
            }
            parent = comp;
        }
    }
    None
}

/// The UID of the Kubernetes pod a cgroup file names: the kubelet's
/// `kubepods…-pod<UID>.slice` (systemd driver, `-` written `_`) or
/// `kubepods/…/pod<UID>` (cgroupfs driver). Only below a `kubepods`
/// component, so a user's own `pod…` directory is not taken for one.
pub fn pod_of(text: &str) -> Option<String> {
    let is_uid = |s: &str| {
        s.len() == 36
            && s.bytes()
                .enumerate()
                .all(|(i, b)| if matches!(i, 8 | 13 | 18 | 23) { b == b'-' } else { b.is_ascii_hexdigit() })
    };
    for line in text.lines() {
        let Some(path) = line.splitn(3, ':').nth(2) else { continue };
        let mut below_kubepods = false;
        for comp in path.split('/') {
            below_kubepods |= comp.starts_with("kubepods");
            if !below_kubepods {
                continue;
            }
            let bare = comp.strip_suffix(".slice").unwrap_or(comp);
            let Some((_, uid)) = bare.rsplit_once("pod") else { continue };
            let uid = uid.replace('_', "-");
            if is_uid(&uid) {
                return Some(uid.to_ascii_lowercase());
            }
        }
    }
    None
}

/// One line of a `mountinfo`: the mounted directory (root), the mount point,
/// the file system type and its super options, the paths unescaped.
pub struct Mount<'a> {
    pub root: String,
    pub point: String,
    pub fstype: &'a str,
    pub options: &'a str,
}

/// Every well-formed line of a `mountinfo` text.
pub fn mounts(mountinfo: &str) -> impl Iterator<Item = Mount<'_>> {
    mountinfo.lines().filter_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let f: Vec<&str> = pre.split(' ').collect();
        let mut g = post.split(' ');
        let (fstype, _source, options) = (g.next()?, g.next()?, g.next()?);
        (f.len() >= 5).then(|| Mount { root: unescape_mount(f[3]), point: unescape_mount(f[4]), fstype, options })
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 4]).ok().and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// (unified, mount root, mount point) of the cgroup2 mounts and the v1
/// `name=systemd` mounts in a `mountinfo`.
pub fn cgroup_mounts(mountinfo: &str) -> Vec<(bool, String, String)> {
    mounts(mountinfo)
        .filter_map(|m| {
            let v2 = m.fstype == "cgroup2";
            let systemd = m.fstype == "cgroup" && m.options.split(',').any(|o| o == "name=systemd");
            (v2 || systemd).then_some((v2, m.root, m.point))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_mounts_unescaped() {
        let mi = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
                  33 31 0:30 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n\
                  35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                  41 31 0:38 /a\\040b /sys/fs/cgroup/uni\\040fied rw - cgroup2 cgroup2 rw\n\
                  bad line\n";
        assert_eq!(
            cgroup_mounts(mi),
            vec![
                (false, "/".to_string(), "/sys/fs/cgroup/systemd".to_string()),
                (true, "/a b".to_string(), "/sys/fs/cgroup/uni fied".to_string()),
            ]
        );
    }

    #[test]
    fn container_from_cgroup() {
        let id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let cases = [
            (format!("0::/system.slice/docker-{id}.scope\n"), Some("docker 0123456789ab")),
            (format!("12:pids:/docker/{id}\n0::/docker/{id}\n"), Some("docker 0123456789ab")),
            (format!("0::/machine.slice/libpod-{id}.scope/container\n"), Some("podman 0123456789ab")),
            (
                format!("0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-{id}.scope\n"),
                Some("containerd 0123456789ab"),
            ),
            ("0::/user.slice/user-1000.slice/session-2.scope\n".to_string(), None),
            (format!("0::/docker/{}\n", &id[..63]), None),
        ];
        for (text, want) in cases {
            assert_eq!(container_of(&text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn pod_from_cgroup() {
        let uid = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d";
        let u = uid.replace('-', "_");
        let id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let cases = [
            (
                format!(
                    "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/cri-containerd-{id}.scope\n"
                ),
                Some(uid),
            ),
            (format!("0::/kubepods.slice/kubepods-pod{u}.slice/crio-{id}.scope\n"), Some(uid)),
            (format!("12:pids:/kubepods/burstable/pod{uid}/{id}\n0::/\n"), Some(uid)),
            // Seen from a container's own cgroup namespace (the reaper's pod).
            (format!("0::/../../kubepods-besteffort-pod{u}.slice/cri-containerd-{id}.scope\n"), Some(uid)),
            (format!("0::/user.slice/pod{uid}/x\n"), None),
            (format!("0::/system.slice/docker-{id}.scope\n"), None),
            ("0::/kubepods.slice/kubepods-podnot-a-uid.slice\n".to_string(), None),
        ];
        for (text, want) in cases {
            assert_eq!(pod_of(&text).as_deref(), want, "{text}");
        }
    }
}
