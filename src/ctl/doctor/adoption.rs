//! Who adopts orphans on this platform, and whether the config's
//! `adopters` patterns know that adopter.

use super::check::{Check, ok, warn};
use crate::config::{Config, Role};
use crate::ctl::platform::{Kind, Platform};

/// Who adopts orphans here, and whether mcp-reaper sees that adopter for
/// what it is: PID 1 of a namespace always is; a child subreaper is when
/// the `adopters` patterns name it (else only the daemon tells, from a
/// parent it saw change or from sessions).
pub fn adoption(here: &Platform, cfg: &Config) -> Check {
    const PID1: &str = "mcp-reaper takes every PID namespace's PID 1 as its adopter";
    const SEEN: &str = "; the daemon also takes as adopted any process whose parent it saw change";
    let pid1 = here.pid1.comm.as_deref().unwrap_or("unreadable");
    let known = |cmdline: &str, exe: Option<&str>| {
        let m = cfg.matcher.classify(cmdline, exe);
        (m.role == Role::Adopter).then(|| {
            let pattern = cfg.matcher.pattern_text(Role::Adopter, m.pattern.unwrap_or(0));
            format!("mcp-reaper knows it by the adopters pattern '{pattern}'")
        })
    };
    // (who adopts, how mcp-reaper knows it or None: the patterns miss it, a note)
    let (who, knows, note) = match here.kind {
        Kind::Wsl2 => (
            format!(
                "orphans of a terminal session go to its /init relay (a child subreaper whose executable is /init), \
                 not to PID 1 ({pid1})"
            ),
            known("/init", Some("/init")),
            "",
        ),
        Kind::Toolbox | Kind::Distrobox => (
            "orphans go to conmon, podman's container monitor (a child subreaper)".to_string(),
            known("conmon", None),
            "; toolbox, and distrobox unless made with --unshare-process, share the machine's PID namespace: \
             a daemon on the machine sees them too",
        ),
        Kind::Container => (
            format!("orphans go to PID 1 ({pid1}) or a child subreaper below it"),
            Some(PID1.to_string()),
            "; mcp-reaperd here sees only this container's PID namespace, nothing of the machine outside it",
        ),
        Kind::Host if here.systemd => (
            "orphans go to systemd (PID 1) or to a user's `systemd --user` (a child subreaper)".to_string(),
            known("systemd --user", None),
            "",
        ),
        Kind::Host | Kind::Wsl1 => (
            format!("orphans go to PID 1 ({pid1}) or to the nearest child subreaper"),
            Some(format!("{PID1}, a subreaper by the adopters patterns")),
            "",
        ),
    };
    match knows {
        Some(how) => ok("adoption", format!("{who}: {how}{note}{SEEN}")),
        None => warn(
            "adoption",
            format!("{who}: no adopters pattern of the config matches that adopter{note}"),
            "`reaperctl scan` and `mcp-reaperd --once` call its trees foreign instead of orphaned (the daemon still \
             sees the adoption when it saw the parent change, or by sessions): put the default's adopters pattern \
             back in `[patterns] adopters`",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctl::doctor::check::Health;
    use crate::ctl::doctor::fixtures::platform;

    #[test]
    fn wsl2s_relay_is_known_by_the_default_patterns_with_or_without_systemd() {
        let cfg = Config::embedded();
        for (systemd, pid1) in [(false, "init"), (true, "systemd")] {
            let c = adoption(&platform(Kind::Wsl2, systemd, pid1), &cfg);
            assert_eq!(c.health, Health::Ok, "{c:?}");
            assert!(
                c.found.contains(&format!(
                    "/init relay (a child subreaper whose executable is /init), not to PID 1 ({pid1})"
                )),
                "{}",
                c.found
            );
            assert!(c.found.contains("adopters pattern 'exe:^/init$'"), "{}", c.found);
            assert!(c.found.ends_with("any process whose parent it saw change"), "{}", c.found);
        }
    }

    #[test]
    fn an_adopter_the_patterns_miss_is_a_warning_with_its_cost() {
        let cfg = Config::from_str_with_default("test.toml", "[patterns]\nadopters = ['^tini$']\n").unwrap();
        let c = adoption(&platform(Kind::Toolbox, false, "catatonit"), &cfg);
        assert_eq!(c.health, Health::Warn, "{c:?}");
        assert!(c.found.starts_with("orphans go to conmon"), "{}", c.found);
        assert!(c.cost.unwrap().contains("call its trees foreign"));
        let c = adoption(&platform(Kind::Host, true, "systemd"), &cfg);
        assert_eq!(c.health, Health::Warn, "{c:?}");
    }

    #[test]
    fn pid_1_adopts_in_a_container_and_on_a_host_without_systemd() {
        let cfg = Config::embedded();
        let c = adoption(&platform(Kind::Container, false, "tini"), &cfg);
        assert_eq!(c.health, Health::Ok);
        assert!(c.found.starts_with("orphans go to PID 1 (tini) or a child subreaper below it"), "{}", c.found);
        assert!(c.found.contains("sees only this container's PID namespace"), "{}", c.found);
        let c = adoption(&platform(Kind::Host, false, "openrc-init"), &cfg);
        assert!(
            c.found.starts_with("orphans go to PID 1 (openrc-init) or to the nearest child subreaper"),
            "{}",
            c.found
        );
        let c = adoption(&platform(Kind::Toolbox, true, "systemd"), &cfg);
        assert!(c.found.contains("adopters pattern '^conmon$'"), "{}", c.found);
        let c = adoption(&platform(Kind::Host, true, "systemd"), &cfg);
        assert!(c.found.contains("adopters pattern 'args:^systemd --user( |$)'"), "{}", c.found);
    }
}
