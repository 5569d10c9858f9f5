//! Issue 34: what a person reads is bounded whatever users start. A live
//! server with 1,500 children, each named by a 3 KB `argv[0]` (a fork pool
//! gone wild): `reaperctl scan` lists 40 members and counts the rest, cuts
//! each line to 200 columns when stdout is a pipe, and `--json` still has
//! every member in full.

mod common;

use std::time::Duration;

use common::{Sandbox, Spec, s, scan_json, text, tree_holding, wait_until};

const FORKS: usize = 1500;

#[test]
fn a_tree_of_1500_long_named_forks_reads_in_a_few_lines() {
    let dir = common::TempDir::new("bounded-output");
    let marker = dir.path().join("spawned");
    let spawn = format!(
        "n=$(head -c 3000 /dev/zero | tr '\\0' n); for i in $(seq {FORKS}); do (exec -a \"pool-$i-$n\" sleep 600) & done; \
         until [ \"$(wc -w < /proc/$$/task/$$/children)\" -ge {FORKS} ]; do sleep 0.05; done; echo > {}; wait",
        marker.display()
    );
    let server = Spec::new(&["npx", "-y", "@playwright/mcp@latest"]).child(Spec::new(&["bash", "-c", &spawn]).real());
    let sb = Sandbox::new(vec![Spec::new(&["claude", "--resume"]).stdio_pty().child(server)]);
    assert!(wait_until(Duration::from_secs(300), || marker.exists()), "the forks were not spawned");
    let cfg = sb.dir().config(0, "");
    let scope = s(sb.scope_pid());

    let v = scan_json(&cfg, &["--scope", &scope]);
    let t = tree_holding(&v, sb.pid_of("npx"));
    let members = t["members"].as_array().unwrap();
    assert_eq!(members.len(), FORKS + 2, "--json has every member");
    assert!(members.iter().any(|m| m["cmdline"].as_str().is_some_and(|c| c.len() > 3000)), "in full");

    let out = common::reaperctl(["scan", "--config", &s(cfg.display()), "--scope", &scope]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let words = text(&out.stdout);
    eprintln!("human scan: {} bytes, {} lines", words.len(), words.lines().count());
    assert!(words.contains(&format!("… and {} more process(es) in this tree", FORKS + 2 - 40)), "{words}");
    assert!(words.lines().count() < 60, "{words}");
    let long = words.lines().find(|l| l.chars().count() > 200);
    assert!(long.is_none(), "a line over 200 columns: {long:?}");
}
