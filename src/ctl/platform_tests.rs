//! Platform detection on fixture roots: the files each platform leaves, in a
//! temp dir standing for `/`.

use std::collections::HashMap;
use std::path::Path;

use super::*;

/// A fake `/` holding `files` (path, content); a content of `None` makes a
/// directory.
fn root(files: &[(&str, Option<&str>)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, content) in files {
        let p = dir.path().join(rel);
        match content {
            Some(text) => {
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, text).unwrap();
            }
            None => std::fs::create_dir_all(&p).unwrap(),
        }
    }
    dir
}

fn detect_with(dir: &Path, env: &[(&str, &str)]) -> Platform {
    let env: HashMap<String, String> = env.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect();
    detect(dir, &|name| env.get(name).cloned())
}

const WSL2_KERNEL: &str = "5.15.167.4-microsoft-standard-WSL2\n";

#[test]
fn wsl2_without_systemd_has_init_as_pid_1() {
    let r = root(&[
        ("proc/sys/kernel/osrelease", Some(WSL2_KERNEL)),
        ("proc/1/comm", Some("init\n")),
        ("proc/1/cmdline", Some("/init\0")),
        ("run/WSL", None),
    ]);
    let p = detect_with(r.path(), &[("WSL_DISTRO_NAME", "Ubuntu-24.04")]);
    assert_eq!(p.kind, Kind::Wsl2);
    assert!(!p.systemd);
    assert_eq!(p.distro.as_deref(), Some("Ubuntu-24.04"));
    assert_eq!(p.pid1.comm.as_deref(), Some("init"));
    assert_eq!(
        p.summary(),
        "WSL2 (Ubuntu-24.04) without systemd, PID 1 init (/init); from kernel 5.15.167.4-microsoft-standard-WSL2, \
         /run/WSL, WSL_DISTRO_NAME=Ubuntu-24.04"
    );
}

#[test]
fn wsl2_with_systemd_true_has_systemd_as_pid_1() {
    let r = root(&[
        ("proc/sys/kernel/osrelease", Some(WSL2_KERNEL)),
        ("proc/1/comm", Some("systemd\n")),
        ("proc/1/cmdline", Some("/sbin/init\0")),
        ("run/systemd/system", None),
        ("run/WSL", None),
    ]);
    let p = detect_with(r.path(), &[]);
    assert_eq!(p.kind, Kind::Wsl2);
    assert!(p.systemd);
    assert!(p.summary().starts_with("WSL2 with systemd (systemd=true), PID 1 systemd (/sbin/init)"), "{}", p.summary());
}

#[test]
fn wsl2_is_known_by_proc_version_when_osrelease_is_missing_and_wsl1_apart() {
    let r = root(&[("proc/version", Some("Linux version 5.10.16.3-microsoft-standard-WSL2 (oe-user@oe-host)"))]);
    assert_eq!(detect_with(r.path(), &[]).kind, Kind::Wsl2);
    let r = root(&[("proc/sys/kernel/osrelease", Some("4.4.0-19041-Microsoft\n"))]);
    assert_eq!(detect_with(r.path(), &[]).kind, Kind::Wsl1);
}

#[test]
fn docker_with_tini_as_pid_1() {
    let r = root(&[
        (".dockerenv", Some("")),
        ("proc/1/comm", Some("tini\n")),
        ("proc/1/cmdline", Some("/sbin/tini\0--\0sleep\0infinity\0")),
        ("proc/1/cgroup", Some("0::/\n")),
    ]);
    let p = detect_with(r.path(), &[]);
    assert_eq!(p.kind, Kind::Container);
    assert_eq!(p.engine.as_deref(), Some("docker"));
    assert!(!p.systemd);
    assert_eq!(p.summary(), "container (docker), PID 1 tini (/sbin/tini -- sleep infinity); from /.dockerenv");
}

#[test]
fn a_container_on_a_wsl2_kernel_is_a_container() {
    // Docker Desktop's WSL2 backend: the kernel is WSL2's, the processes the container's.
    let r = root(&[
        ("proc/sys/kernel/osrelease", Some(WSL2_KERNEL)),
        (".dockerenv", Some("")),
        ("proc/1/comm", Some("sh\n")),
        ("proc/1/cmdline", Some("/bin/sh\0-c\0echo Container started\0")),
    ]);
    let p = detect_with(r.path(), &[]);
    assert_eq!(p.kind, Kind::Container);
    assert_eq!(p.pid1_words(), "sh (/bin/sh -c echo Container started)");
}

#[test]
fn podman_toolbox_names_its_container() {
    let r = root(&[
        (
            "run/.containerenv",
            Some(
                "engine=\"podman-4.9.4\"\nname=\"fedora-toolbox-40\"\nid=\"4c1e\"\n\
                 image=\"registry.fedoraproject.org/fedora-toolbox:40\"\nrootless=1\n",
            ),
        ),
        ("run/.toolboxenv", Some("")),
        ("proc/1/comm", Some("systemd\n")),
    ]);
    let p = detect_with(r.path(), &[]);
    assert_eq!(p.kind, Kind::Toolbox);
    assert_eq!(p.engine.as_deref(), Some("podman"));
    assert_eq!(p.name.as_deref(), Some("fedora-toolbox-40"));
    assert_eq!(
        p.summary(),
        "toolbox container fedora-toolbox-40, PID 1 systemd; from /run/.toolboxenv, /run/.containerenv"
    );
}

#[test]
fn distrobox_by_its_tools_and_podman_by_pid_1s_environment() {
    let r = root(&[("usr/bin/distrobox-export", Some("#!/bin/sh\n")), ("run/.containerenv", Some(""))]);
    let p = detect_with(r.path(), &[]);
    assert_eq!((p.kind, p.engine.as_deref()), (Kind::Distrobox, Some("podman")));
    let r =
        root(&[("proc/1/environ", Some("PATH=/usr/bin\0container=podman\0")), ("proc/1/comm", Some("catatonit\n"))]);
    let p = detect_with(r.path(), &[]);
    assert_eq!((p.kind, p.engine.as_deref()), (Kind::Container, Some("podman")));
    assert!(p.evidence.contains(&"PID 1's container=podman".to_string()), "{:?}", p.evidence);
}

#[test]
fn kubernetes_and_cgroup_paths_hint_at_a_container() {
    let r = root(&[("proc/1/cgroup", Some("12:pids:/kubepods/burstable/pod1/abc\n0::/\n"))]);
    assert_eq!(detect_with(r.path(), &[]).engine.as_deref(), Some("kubernetes"));
    let r = root(&[("proc/1/cgroup", Some("0::/system.slice/docker-0123.scope\n"))]);
    assert_eq!(detect_with(r.path(), &[]).engine.as_deref(), Some("docker"));
    let r = root(&[]);
    assert_eq!(detect_with(r.path(), &[("KUBERNETES_SERVICE_HOST", "10.0.0.1")]).kind, Kind::Container);
}

#[test]
fn plain_host_with_systemd() {
    let r = root(&[
        ("proc/sys/kernel/osrelease", Some("6.8.0-45-generic\n")),
        ("proc/1/comm", Some("systemd\n")),
        ("proc/1/cmdline", Some("/sbin/init\0splash\0")),
        ("proc/1/cgroup", Some("0::/init.scope\n")),
        ("run/systemd/system", None),
    ]);
    let p = detect_with(r.path(), &[]);
    assert_eq!(p.kind, Kind::Host);
    assert!(p.systemd);
    assert!(p.evidence.is_empty(), "{:?}", p.evidence);
    assert_eq!(p.summary(), "host with systemd as PID 1 (systemd (/sbin/init splash))");
}

#[test]
fn plain_host_with_another_init_and_an_unreadable_pid_1() {
    let r = root(&[("proc/1/comm", Some("openrc-init\n"))]);
    let p = detect_with(r.path(), &[]);
    assert_eq!((p.kind, p.systemd), (Kind::Host, false));
    assert_eq!(p.summary(), "host without systemd, PID 1 openrc-init");
    let p = detect_with(root(&[]).path(), &[]);
    assert_eq!(p.summary(), "host without systemd, PID 1 unreadable");
}

#[test]
fn a_hostile_pid_1_command_line_is_cut_and_escaped() {
    let long = format!("/bin/sh\0-c\0{}\nfake line\0", "x".repeat(200));
    let r = root(&[(".dockerenv", Some("")), ("proc/1/comm", Some("sh\n")), ("proc/1/cmdline", Some(&long))]);
    let words = detect_with(r.path(), &[]).pid1_words();
    assert!(!words.contains('\n') && words.ends_with("…)") && words.len() < 120, "{words}");
}
