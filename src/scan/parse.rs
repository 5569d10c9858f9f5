//! Parsers for the few `/proc` files the reaper reads. They take bytes and never
//! panic: a process may write anything into its `comm` and argv.

use std::fmt;

/// What `/proc/PID/stat` tells us. Field numbers follow proc(5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    pub pid: i32,
    /// Field 2 without the parentheses, lossily decoded. May contain anything.
    pub comm: String,
    pub state: u8,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    pub tty_nr: u32,
    pub flags: u32,
    pub num_threads: i64,
    pub start_time: u64,
    /// Resident set size in pages.
    pub rss_pages: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub what: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed {}", self.what)
    }
}

impl std::error::Error for ParseError {}

fn bad(what: &'static str) -> ParseError {
    ParseError { what }
}

/// `PF_KTHREAD` from include/linux/sched.h.
pub const PF_KTHREAD: u32 = 0x0020_0000;

/// Parses `/proc/PID/stat`. The comm field is delimited by the first `(` and the
/// *last* `)`: the kernel does not escape it, so `a) S (b` is a legal comm.
pub fn parse_stat(buf: &[u8]) -> Result<Stat, ParseError> {
    let open = buf.iter().position(|&b| b == b'(').ok_or(bad("stat: no '('"))?;
    let close = buf.iter().rposition(|&b| b == b')').ok_or(bad("stat: no ')'"))?;
    if close < open {
        return Err(bad("stat: ')' before '('"));
    }
    // The kernel never writes a pid below 1; a Stat with one would name a process group or everyone.
    let pid = parse_num::<i32>(trim_ascii(&buf[..open])).filter(|&p| p > 0).ok_or(bad("stat: pid"))?;
    let comm = String::from_utf8_lossy(&buf[open + 1..close]).into_owned();
    let mut rest = buf[close + 1..].split(u8::is_ascii_whitespace).filter(|f| !f.is_empty());
    // After the comm, field 3 (state) is index 0.
    let mut field = |n: usize| -> Option<&[u8]> {
        // `n` counts from field 3; callers ask in increasing order.
        rest.nth(n)
    };
    let state = *field(0).and_then(|f| f.first()).ok_or(bad("stat: state"))?;
    let ppid = num(field(0), "stat: ppid")?;
    let pgrp = num(field(0), "stat: pgrp")?;
    let session = num(field(0), "stat: session")?;
    // tty_nr is a dev_t printed as a signed int.
    let tty_nr = num::<i32>(field(0), "stat: tty_nr")?.cast_unsigned();
    let flags = num::<u32>(field(1), "stat: flags")?; // skip tpgid
    let num_threads = num::<i64>(field(10), "stat: num_threads")?; // fields 10..19 skipped
    let start_time = num::<u64>(field(1), "stat: starttime")?; // skip itrealvalue
    let rss_pages = u64::try_from(num::<i64>(field(1), "stat: rss")?).unwrap_or(0); // skip vsize
    Ok(Stat { pid, comm, state, ppid, pgrp, session, tty_nr, flags, num_threads, start_time, rss_pages })
}

fn num<T: std::str::FromStr>(f: Option<&[u8]>, what: &'static str) -> Result<T, ParseError> {
    f.and_then(parse_num).ok_or(bad(what))
}

fn parse_num<T: std::str::FromStr>(f: &[u8]) -> Option<T> {
    std::str::from_utf8(f).ok()?.parse().ok()
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

/// The lines of `/proc/PID/status` the reaper uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub real_uid: Option<u32>,
    pub vm_swap_bytes: Option<u64>,
    pub vm_rss_bytes: Option<u64>,
    /// Number of entries on the `NSpid:` line: how deep in nested PID namespaces
    /// the process lives, counted from the namespace this /proc belongs to.
    pub nspid_depth: Option<usize>,
    /// The last entry of `NSpid:`: the pid in its own, innermost namespace
    /// (1 for a namespace's init).
    pub nspid_inner: Option<u32>,
}

/// Parses `/proc/PID/status`. Unknown or malformed lines are ignored: the file's
/// format grows with the kernel. The `Name:` line is escaped by the kernel, but
/// we never need it (stat's comm is enough).
pub fn parse_status(buf: &[u8]) -> Status {
    let mut s = Status::default();
    for line in buf.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (key, val) = (&line[..colon], &line[colon + 1..]);
        match key {
            b"Uid" => s.real_uid = first_num(val),
            b"VmSwap" => s.vm_swap_bytes = kib(val),
            b"VmRSS" => s.vm_rss_bytes = kib(val),
            b"NSpid" => {
                let mut pids = val.split(u8::is_ascii_whitespace).filter(|f| !f.is_empty());
                s.nspid_depth = Some(pids.clone().count());
                s.nspid_inner = pids.next_back().and_then(parse_num);
            }
            _ => {}
        }
    }
    s
}

fn first_num<T: std::str::FromStr>(val: &[u8]) -> Option<T> {
    val.split(u8::is_ascii_whitespace).find(|f| !f.is_empty()).and_then(parse_num)
}

/// `"   1234 kB"` → bytes.
fn kib(val: &[u8]) -> Option<u64> {
    first_num::<u64>(val).map(|k| k.saturating_mul(1024))
}

/// Proportional memory from `/proc/PID/smaps_rollup`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rollup {
    pub pss_bytes: u64,
    pub swap_pss_bytes: u64,
}

pub fn parse_smaps_rollup(buf: &[u8]) -> Option<Rollup> {
    let mut pss = None;
    let mut swap_pss = None;
    for line in buf.split(|&b| b == b'\n') {
        if let Some(v) = line.strip_prefix(b"Pss:") {
            pss = kib(v);
        } else if let Some(v) = line.strip_prefix(b"SwapPss:") {
            swap_pss = kib(v);
        }
    }
    Some(Rollup { pss_bytes: pss?, swap_pss_bytes: swap_pss.unwrap_or(0) })
}

/// System-wide figures from `/proc/meminfo`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemInfo {
    pub mem_available_bytes: u64,
    pub swap_free_bytes: u64,
}

pub fn parse_meminfo(buf: &[u8]) -> MemInfo {
    let mut m = MemInfo::default();
    for line in buf.split(|&b| b == b'\n') {
        if let Some(v) = line.strip_prefix(b"MemAvailable:") {
            m.mem_available_bytes = kib(v).unwrap_or(0);
        } else if let Some(v) = line.strip_prefix(b"SwapFree:") {
            m.swap_free_bytes = kib(v).unwrap_or(0);
        }
    }
    m
}

/// NUL-separated argv → one line, args joined by single spaces, lossily decoded.
/// A process that rewrote its argv (node, npm set the title) may leave no NULs
/// between words, or trailing NULs: both come out as expected.
pub fn join_cmdline(buf: &[u8]) -> String {
    join_argv(buf, &mut Vec::new())
}

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

/// [`join_cmdline`], noting where each argv element lies in the joined text.
/// [`join_argv`] of at most the first `keep` bytes of a `cmdline` (`buf`
/// may hold more: then the line was longer). Only whole arguments are kept;
/// a line that did not fit ends in ` …`, outside every span.
pub fn join_argv_kept(buf: &[u8], keep: usize, spans: &mut Vec<crate::program::Span>) -> String {
    if buf.len() <= keep {
        return join_argv(buf, spans);
    }
    // The arguments that end (with their NUL) within `keep` bytes.
    let whole = buf[..keep].iter().rposition(|&b| b == 0).map_or(0, |i| i + 1);
    let mut text = join_argv(&buf[..whole], spans);
    text.push_str(if text.is_empty() { "…" } else { " …" });
    text
}

pub fn join_argv(buf: &[u8], spans: &mut Vec<crate::program::Span>) -> String {
    spans.clear();
    let mut out = String::with_capacity(buf.len());
    for arg in buf.split(|&b| b == 0) {
        if arg.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        let start = out.len();
        out.push_str(&String::from_utf8_lossy(arg));
        spans.push(crate::program::Span::new(start, out.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &[u8] = b"4242 (npm exec @playwri) S 1 4242 4242 0 -1 4194560 1 0 0 0 3 1 0 0 20 0 11 0 123456 1000 2500 18446744073709551615\n";

    #[test]
    fn a_long_argv_keeps_whole_arguments() {
        let mut spans = Vec::new();
        let buf = b"node\0/x/.bin/srv\0AAAAAAAAAA\0B";
        // Fits: as it is.
        assert_eq!(join_argv_kept(buf, buf.len(), &mut spans), "node /x/.bin/srv AAAAAAAAAA B");
        // Cut inside the third argument: it goes whole, and the line says so.
        assert_eq!(join_argv_kept(buf, 20, &mut spans), "node /x/.bin/srv …");
        assert_eq!(spans.len(), 2);
        // argv[0] alone is too long: nothing of it is a program.
        assert_eq!(join_argv_kept(buf, 3, &mut spans), "…");
        assert!(spans.is_empty());
    }

    #[test]
    fn stat_plain() {
        let s = parse_stat(STAT).unwrap();
        assert_eq!(s.pid, 4242);
        assert_eq!(s.comm, "npm exec @playwri");
        assert_eq!(s.state, b'S');
        assert_eq!((s.ppid, s.pgrp, s.session, s.tty_nr), (1, 4242, 4242, 0));
        assert_eq!(s.flags, 4194560);
        assert_eq!(s.num_threads, 11);
        assert_eq!(s.start_time, 123456);
        assert_eq!(s.rss_pages, 2500);
    }

    #[test]
    fn stat_hostile_comm() {
        let s = parse_stat(b"7 (a) S (b) R 3 4 5 34817 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 7\n").unwrap();
        assert_eq!(s.comm, "a) S (b");
        assert_eq!(s.state, b'R');
        assert_eq!(s.ppid, 3);
        assert_eq!(s.tty_nr, 34817);
        assert_eq!(s.start_time, 99);
        let s = parse_stat(b"8 (x\ny) ) Z 1 8 8 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n").unwrap();
        assert_eq!(s.comm, "x\ny) ");
        assert_eq!(s.state, b'Z');
    }

    #[test]
    fn stat_garbage_is_an_error_not_a_panic() {
        for junk in [&b""[..], b"12", b"12 (x", b"12 x) S", b"12 (x) S 1", b")(", b"(\xff) S 1 2 3 4 5 6"] {
            assert!(parse_stat(junk).is_err(), "{junk:?}");
        }
    }

    #[test]
    fn status_fields() {
        let s = parse_status(
            b"Name:\tnode\nUid:\t1000\t1000\t1000\t1000\nNSpid:\t812\t1\nVmRSS:\t  2048 kB\nVmSwap:\t  4 kB\n",
        );
        assert_eq!(s.real_uid, Some(1000));
        assert_eq!(s.vm_swap_bytes, Some(4096));
        assert_eq!(s.vm_rss_bytes, Some(2048 * 1024));
        assert_eq!(s.nspid_depth, Some(2));
        assert_eq!(s.nspid_inner, Some(1));
        assert_eq!(parse_status(b"\xff\xfe:\n::"), Status::default());
    }

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

    #[test]
    fn rollup_and_meminfo() {
        let r =
            parse_smaps_rollup(b"55d0-7ff [rollup]\nRss: 100 kB\nPss: 80 kB\nSwap: 10 kB\nSwapPss: 6 kB\n").unwrap();
        assert_eq!(r, Rollup { pss_bytes: 80 * 1024, swap_pss_bytes: 6 * 1024 });
        assert_eq!(parse_smaps_rollup(b""), None);
        let m = parse_meminfo(b"MemTotal: 10 kB\nMemAvailable:  7 kB\nSwapFree: 3 kB\n");
        assert_eq!(m, MemInfo { mem_available_bytes: 7168, swap_free_bytes: 3072 });
    }

    #[test]
    fn cmdline_joining() {
        assert_eq!(join_cmdline(b"npm\0exec\0@playwright/mcp\0"), "npm exec @playwright/mcp");
        assert_eq!(join_cmdline(b"node title rewritten\0\0\0"), "node title rewritten");
        assert_eq!(join_cmdline(b"py\0\xffbad\0"), "py \u{fffd}bad");
        assert_eq!(join_cmdline(b""), "");
    }
}
