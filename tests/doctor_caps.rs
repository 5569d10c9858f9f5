//! `reaperctl doctor` tries each capability the system unit keeps on a
//! process of another uid and, run as root under the unit's bounding set
//! less one of them, names the one missing and what that costs; the cost
//! it states is then checked against what the scanner and the reaper
//! actually do without it (issue 36, item 2).
//!
//! Root only (another uid's processes, `setpriv --bounding-set`); skipped
//! with the reason otherwise. Safety: every scan and `--once` is scoped to
//! the test's sandbox; the only call doctor aims at other processes is
//! `kill(pid, 0)`, which sends no signal.

mod common;

use std::process::{Command, Output, Stdio};

use common::{Sandbox, Spec, s, skip, text, tree_rooted_at};
use serde_json::Value;

const NOBODY: u32 = 65534;
const CLAUDE: &[&str] = &["claude", "--resume"];
const NPM_PLAYWRIGHT: &[&str] = &["npm", "exec", "@playwright/mcp@latest"];
const REAPERCTL: &str = env!("CARGO_BIN_EXE_reaperctl");
const REAPERD: &str = env!("CARGO_BIN_EXE_mcp-reaperd");

/// systemd/mcp-reaper.service's `CapabilityBoundingSet=`, as setpriv's
/// names (a unit test in src/ctl/doctor/caps.rs keeps doctor's list equal
/// to the unit's).
const UNIT: [&str; 3] = ["kill", "sys_ptrace", "dac_read_search"];

/// `bin args` as root with only `caps` in its bounding set (for a root
/// process, its capabilities), as `CapabilityBoundingSet=` runs the daemon.
fn with_caps(caps: &[&str], bin: &str, args: &[String]) -> Output {
    let set: String =
        std::iter::once("-all".to_string()).chain(caps.iter().map(|c| format!("+{c}"))).collect::<Vec<_>>().join(",");
    Command::new("setpriv")
        .arg(format!("--bounding-set={set}"))
        .arg("--inh-caps=-all")
        .arg("--")
        .arg(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running setpriv: {e}"))
}

fn doctor(caps: &[&str], json: bool) -> (Option<Vec<Value>>, Output) {
    let mut args = vec![s("doctor"), s("--config"), s("-"), s("--socket"), s("/nonexistent/control.sock")];
    if json {
        args.push(s("--json"));
    }
    let out = with_caps(caps, REAPERCTL, &args);
    let checks = json.then(|| {
        serde_json::from_slice::<Vec<Value>>(&out.stdout)
            .unwrap_or_else(|e| panic!("doctor JSON ({e}): {}\n{}", text(&out.stdout), text(&out.stderr)))
    });
    (checks, out)
}

fn check<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no check {name}: {checks:#?}"))
}

/// Root that may shrink its bounding set (`CAP_SETPCAP`) and holds the
/// unit's capabilities to begin with, and setpriv; else the skip.
fn runnable(test: &str) -> bool {
    if !common::is_root() {
        skip(test, "needs root (another uid's processes, a bounding set of the unit's capabilities)");
        return false;
    }
    if common::find_tool("setpriv").is_none() {
        skip(test, "setpriv (util-linux) is not installed");
        return false;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff =
        status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|h| u64::from_str_radix(h.trim(), 16).ok());
    // CAP_DAC_READ_SEARCH 2, CAP_KILL 5, CAP_SETPCAP 8, CAP_SYS_PTRACE 19.
    let need = (1u64 << 2) | (1 << 5) | (1 << 8) | (1 << 19);
    if eff.is_none_or(|e| e & need != need) {
        skip(
            test,
            &format!("this root lacks CAP_KILL, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH or CAP_SETPCAP (CapEff {eff:?})"),
        );
        return false;
    }
    true
}

#[test]
fn doctor_names_each_capability_the_unit_keeps_that_is_missing_and_what_that_costs() {
    const TEST: &str = "doctor_names_each_capability_the_unit_keeps_that_is_missing_and_what_that_costs";
    if !runnable(TEST) {
        return;
    }
    // An orphaned server of another uid: what the capabilities are for.
    let sb = Sandbox::new(vec![Spec::new(CLAUDE).uid(NOBODY).child(Spec::new(NPM_PLAYWRIGHT).uid(NOBODY))]);
    let server = sb.pid_of("npm exec");
    sb.kill_host(sb.pid_of("claude"));
    let cfg = sb.dir().config_with(0, "term_timeout_secs = 0.5", "");
    let scan = |caps: &[&str]| {
        let args = [s("scan"), s("--json"), s("--config"), s(cfg.display()), s("--scope"), s(sb.scope_pid())];
        let out = with_caps(caps, REAPERCTL, &args);
        assert!(out.status.success(), "scan under {caps:?}: {}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        tree_rooted_at(&v, server).clone()
    };

    // The unit as shipped: each capability works on the sandbox's uid.
    let (checks, out) = doctor(&UNIT, true);
    let checks = checks.unwrap();
    assert_eq!(out.status.code(), Some(0), "{checks:#?}");
    for name in ["CAP_KILL", "CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH"] {
        let c = check(&checks, name);
        assert_eq!(c["health"], "ok", "{c:#}");
        assert!(c["found"].as_str().unwrap().starts_with("in CapEff; "), "{c:#}");
        assert!(c["found"].as_str().unwrap().ends_with(" works"), "{c:#}");
    }
    assert_eq!(scan(&UNIT)["verdict"], "orphan");

    // The unit less one capability: that one is missing, by name, with
    // what the kernel said when doctor tried it and what that costs.
    for (gone, name, refused, cost) in [
        ("dac_read_search", "CAP_DAC_READ_SEARCH", "Permission denied", "cannot read the stdio (fd 0, 1)"),
        ("sys_ptrace", "CAP_SYS_PTRACE", "Permission denied", "cannot read the stdio (fd 0, 1)"),
        ("kill", "CAP_KILL", "Operation not permitted", "every reap of them fails"),
    ] {
        let kept: Vec<&str> = UNIT.iter().copied().filter(|c| *c != gone).collect();
        let (checks, out) = doctor(&kept, true);
        let checks = checks.unwrap();
        assert_eq!(out.status.code(), Some(69), "without {name}: {checks:#?}");
        let c = check(&checks, name);
        assert_eq!(c["health"], "missing", "{c:#}");
        let found = c["found"].as_str().unwrap();
        assert!(found.starts_with("not in CapEff; "), "{c:#}");
        assert!(found.contains(&format!("failed: {refused}")), "{c:#}");
        assert!(c["cost"].as_str().unwrap().contains(cost), "{c:#}");
        for other in ["CAP_KILL", "CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH"].into_iter().filter(|n| *n != name) {
            assert_eq!(check(&checks, other)["health"], "ok", "without {name}: {checks:#?}");
        }
        let (_, words) = doctor(&kept, false);
        let words = text(&words.stdout);
        let line = words
            .lines()
            .position(|l| l.starts_with(&format!("MISSING  {name} ")))
            .unwrap_or_else(|| panic!("{words}"));
        assert!(words.lines().nth(line + 1).unwrap().trim_start().starts_with("without it: "), "{words}");

        // What doctor says it costs is what happens.
        if gone == "kill" {
            let args = [
                s("--once"),
                s("--json"),
                s("--log-target"),
                s("stderr"),
                s("--config"),
                s(cfg.display()),
                s("--scope"),
                s(sb.scope_pid()),
            ];
            let out = with_caps(&kept, REAPERD, &args);
            let v: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("--once JSON ({e}): {}\n{}", text(&out.stdout), text(&out.stderr)));
            let said = v.to_string();
            assert!(said.contains("Operation not permitted"), "--once without CAP_KILL: {v:#}\n{}", text(&out.stderr));
            sb.assert_alive(&[server]);
        } else {
            let t = scan(&kept);
            assert_eq!(t["verdict"], "protected", "without {name}: {t:#}");
            assert!(t["reason"].as_str().unwrap().contains(cost), "without {name}: {t:#}");
        }
    }
}
