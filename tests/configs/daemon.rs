//! A running daemon asked to reload broken configs keeps its last good one;
//! a config reached through symlinks (or a ConfigMap-style `..data` swap) is
//! watched through them.

use std::path::Path;
use std::time::{Duration, Instant};

use mcp_reaper::exit;

use super::common::{Daemon, Launch, Sandbox, s, text};
use super::{Case, corpus, generated, put};

// ------------------------------------------------------------------ the daemon

/// A running `mcp-reaperd --dry-run` scoped to `sb`, with its socket, state
/// file and log in the sandbox's directory; stopped on drop.
fn dry_run_daemon(sb: &Sandbox, config: &Path) -> Daemon {
    Daemon::start_in(sb.scope_pid(), config, sb.dir().path(), &Launch::with_args(&["--dry-run"]))
}

/// The first case of each category (its name up to the first `-`) and every
/// drop-in case: the daemon loads through the code `validate` runs on every
/// case, so these cover what is the daemon's own (reload, status, `config.d/`).
fn representative(cases: Vec<Case>) -> Vec<Case> {
    let mut seen = std::collections::HashSet::new();
    let category = |c: &Case| c.name.split('-').next().unwrap_or_default().to_string();
    let picked: Vec<Case> =
        cases.into_iter().filter(|c| c.name.starts_with("dropin-") || seen.insert(category(c))).collect();
    assert!(picked.len() >= 10, "only {} representative cases", picked.len());
    picked
}

/// Empties `config.d/` of the previous case.
fn clear_dropins(etc: &Path) {
    if let Ok(rd) = std::fs::read_dir(etc.join("config.d")) {
        for e in rd {
            let _ = std::fs::remove_file(e.unwrap().path());
        }
    }
}

#[test]
fn daemon_refuses_every_broken_config_and_keeps_the_last_good_one() {
    let sb = Sandbox::new(vec![]);
    let etc = sb.dir().path().join("etc");
    let cfg = etc.join("config.toml");
    put(&cfg, sb.dir().config_text(60, "interval_secs = 37", "").as_bytes());
    let d = dry_run_daemon(&sb, &cfg);
    let st = d.status();
    assert_eq!((st["grace_secs"].as_u64(), st["interval_secs"].as_u64()), (Some(60), Some(37)), "{st:#}");

    let cases = representative(corpus().into_iter().chain(generated()).collect());
    let t = Instant::now();
    let mut wrong = Vec::new();
    for case in &cases {
        clear_dropins(&etc);
        case.install(&etc, Path::new("config.toml"));
        let out = d.ctl(&["reload"]);
        let stdout = text(&out.stdout);
        if out.status.code() != Some(i32::from(exit::CONFIG)) || !stdout.contains("keeps its previous config") {
            wrong.push(format!("{}: reload exit {:?}:\n{stdout}{}", case.name, out.status, text(&out.stderr)));
        }
        wrong.extend(case.check(&stdout, &etc, Path::new("config.toml")));
        let st = d.status();
        let first = &case.expects[0];
        let want = match first.position {
            Some((l, c)) => {
                format!("{}:{l}:{c}: ", etc.join(case.placed(&first.file, Path::new("config.toml"))).display())
            }
            None => format!("{}: ", cfg.display()),
        };
        let reload = &st["last_reload"];
        if reload["ok"] != false || !reload["messages"].to_string().contains(&want) {
            wrong.push(format!("{}: status shows another last reload than `{want}…`: {reload:#}", case.name));
        }
        if (st["grace_secs"].as_u64(), st["interval_secs"].as_u64()) != (Some(60), Some(37)) {
            wrong.push(format!("{}: the config in force changed: {st:#}", case.name));
        }
    }
    eprintln!("{} broken configs refused by the daemon in {} ms", cases.len(), t.elapsed().as_millis());
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    assert!(d.log_text().contains("keeping the previous config"), "{}", d.log_text());

    // A good config again, with two drop-ins setting one key: the later one in
    // name order wins.
    clear_dropins(&etc);
    put(&etc.join("config.d/20-b.toml"), b"[reaper]\ninterval_secs = 13\n");
    put(&etc.join("config.d/10-a.toml"), b"[reaper]\ninterval_secs = 11\n");
    put(&cfg, sb.dir().config_text(7, "", "").as_bytes());
    let out = d.ctl(&["reload"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    let st = d.status();
    assert_eq!(st["last_reload"]["ok"], true, "{st:#}");
    assert_eq!((st["grace_secs"].as_u64(), st["interval_secs"].as_u64()), (Some(7), Some(13)), "{st:#}");
    let sources: Vec<&str> = st["config_sources"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let d10 = etc.join("config.d/10-a.toml");
    let d20 = etc.join("config.d/20-b.toml");
    assert_eq!(sources[1..], [s(cfg.display()), s(d10.display()), s(d20.display())], "{st:#}");
}

// ------------------------------------------------------------------ symlinks

/// An editor's save of a symlinked config's target (a new file renamed over
/// it, in the target's own directory) reloads without a SIGHUP; so does
/// retargeting the link, after which the new target is the one watched.
#[test]
fn editing_the_target_of_a_symlinked_config_reloads_it() {
    let sb = Sandbox::new(vec![]);
    let dir = sb.dir();
    let etc = dir.path().join("etc");
    let (real1, real2) = (dir.path().join("srv1/reaper.toml"), dir.path().join("srv2/reaper.toml"));
    put(&real1, dir.config_text(60, "", "").as_bytes());
    std::fs::create_dir_all(&etc).unwrap();
    let cfg = etc.join("config.toml");
    std::os::unix::fs::symlink(&real1, &cfg).unwrap();
    let d = dry_run_daemon(&sb, &cfg);
    assert_eq!(d.status()["grace_secs"], 60);

    put(&real1, dir.config_text(42, "", "").as_bytes());
    let st =
        d.status_until(Duration::from_secs(60), "an edit of the link's target reloads", |st| st["grace_secs"] == 42);
    assert_eq!(st["last_reload"]["ok"], true, "{st:#}");
    assert!(st["last_reload"]["messages"].to_string().contains("grace_secs: 60 -> 42"), "{st:#}");

    // `ln -sfn`: a new link renamed over the old one.
    put(&real2, dir.config_text(43, "", "").as_bytes());
    let tmp_link = etc.join(".config.toml.new");
    std::os::unix::fs::symlink(&real2, &tmp_link).unwrap();
    std::fs::rename(&tmp_link, &cfg).unwrap();
    d.status_until(Duration::from_secs(60), "retargeting the link reloads", |st| st["grace_secs"] == 43);

    put(&real2, dir.config_text(44, "", "").as_bytes());
    d.status_until(Duration::from_secs(60), "an edit of the new target reloads", |st| st["grace_secs"] == 44);
    assert!(!d.log_text().contains("SIGHUP"), "{}", d.log_text());
}

/// A Kubernetes `ConfigMap` volume: `config.toml -> ..data/config.toml`, and
/// an update swaps `..data` to a new timestamped directory.
#[test]
fn a_configmap_style_data_swap_reloads_the_config() {
    let sb = Sandbox::new(vec![]);
    let dir = sb.dir();
    let etc = dir.path().join("etc");
    put(&etc.join("..v1/config.toml"), dir.config_text(60, "", "").as_bytes());
    std::os::unix::fs::symlink("..v1", etc.join("..data")).unwrap();
    let cfg = etc.join("config.toml");
    std::os::unix::fs::symlink("..data/config.toml", &cfg).unwrap();
    let d = dry_run_daemon(&sb, &cfg);
    assert_eq!(d.status()["grace_secs"], 60);

    // What kubelet's atomic writer does: new directory, new link, rename, clean up.
    let swap = |from: &str, to: &str, grace: u64| {
        put(&etc.join(to).join("config.toml"), dir.config_text(grace, "", "").as_bytes());
        std::os::unix::fs::symlink(to, etc.join("..data_tmp")).unwrap();
        std::fs::rename(etc.join("..data_tmp"), etc.join("..data")).unwrap();
        std::fs::remove_dir_all(etc.join(from)).unwrap();
    };
    swap("..v1", "..v2", 42);
    d.status_until(Duration::from_secs(60), "the first swap reloads", |st| st["grace_secs"] == 42);
    swap("..v2", "..v3", 43);
    d.status_until(Duration::from_secs(60), "the second swap reloads", |st| st["grace_secs"] == 43);
}
