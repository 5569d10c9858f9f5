//! Unit tests of loading: layers, errors with positions, drop-ins, `[redact]`.

use super::*;

#[test]
fn embedded_default_is_complete_and_valid() {
    let c = Config::embedded();
    assert_eq!(c.mode, Mode::Enforce);
    assert_eq!(c.grace_secs, 60);
    assert!(c.patterns.hosts.len() >= 10);
    assert!(!c.patterns.protect.is_empty() && !c.patterns.bystanders.is_empty());
}

#[test]
fn user_file_overrides_only_its_keys() {
    let c = Config::from_str_with_default("u.toml", "[reaper]\ngrace_secs = 5\n[patterns]\nprotect = ['x']\n").unwrap();
    assert_eq!(c.grace_secs, 5);
    assert_eq!(c.interval_secs, 10);
    assert_eq!(c.patterns.protect, vec!["x".to_string()]);
    assert!(!c.patterns.servers.is_empty());
}

#[test]
fn every_semantic_error_is_reported_with_position_and_key() {
    let text = "[reaper]\ninterval_secs = 0\ngrace_secs = -1\nterm_timeout_secs = 1000.0\n[patterns]\nhosts = ['ok', '(unclosed']\n";
    let errs = Config::from_str_with_default("u.toml", text).unwrap_err().0;
    let shown: Vec<String> = errs.iter().map(std::string::ToString::to_string).collect();
    assert_eq!(errs.len(), 4, "{shown:#?}");
    assert!(shown[0].starts_with("u.toml:2:17: reaper.interval_secs: must be between 1 and 86400"), "{}", shown[0]);
    assert!(shown[1].starts_with("u.toml:3:14: reaper.grace_secs"), "{}", shown[1]);
    assert!(shown[2].starts_with("u.toml:4:21: reaper.term_timeout_secs"), "{}", shown[2]);
    assert!(shown[3].starts_with("u.toml:6:16: patterns.hosts[1]: invalid regex"), "{}", shown[3]);
}

#[test]
fn syntax_type_and_unknown_key_errors_carry_line_and_column() {
    let e = Config::from_str_with_default("u.toml", "[reaper]\ngrace_secs = \"ten\"\n").unwrap_err().0;
    assert_eq!(e[0].position, Some((2, 14)), "{}", e[0]);
    let e = Config::from_str_with_default("u.toml", "[reaper]\ngrace = 3\n").unwrap_err().0;
    assert_eq!(e[0].position, Some((2, 1)), "{}", e[0]);
    assert!(e[0].message.contains("unknown field `grace`"), "{}", e[0]);
    let e = Config::from_str_with_default("u.toml", "[reaper\n").unwrap_err().0;
    assert_eq!(e[0].position.map(|p| p.0), Some(1), "{}", e[0]);
    let e = Config::from_str_with_default("u.toml", "[reaper]\nmode = \"kill-all\"\n").unwrap_err().0;
    assert_eq!(e[0].position, Some((2, 8)), "{}", e[0]);
}

#[test]
fn every_syntax_type_and_key_problem_is_reported_at_once() {
    let text = "[reaper]\ngrace = 3\ninterval_secs = \"ten\"\nmin_uid = -1\nmode = \"x\"\n[patterns]\nhosts = ['(']\n[extra]\n";
    let errs = Config::from_str_with_default("u.toml", text).unwrap_err().0;
    let shown: Vec<String> = errs.iter().map(std::string::ToString::to_string).collect();
    assert_eq!(errs.len(), 6, "{shown:#?}");
    for want in [
        "u.toml:2:1",
        "u.toml:3:17: reaper.interval_secs",
        "u.toml:4:11: reaper.min_uid",
        "u.toml:5:8: reaper.mode",
        "u.toml:7:10: patterns.hosts[0]",
        "u.toml:8:2",
    ] {
        assert!(shown.iter().any(|s| s.starts_with(want)), "missing {want} in {shown:#?}");
    }
    let errs = Config::from_str_with_default("u.toml", "a = [\nb = \"unterminated\n").unwrap_err().0;
    assert!(!errs.is_empty() && errs[0].position.is_some(), "{errs:?}");
}

#[test]
fn relative_paths_are_refused() {
    let e = Config::from_str_with_default("u.toml", "[daemon]\nsocket = \"x.sock\"\n").unwrap_err().0;
    assert_eq!(e[0].key.as_deref(), Some("daemon.socket"));
}

#[test]
fn dropins_apply_in_name_order_after_the_main_file() {
    let dir = std::env::temp_dir().join(format!("mcp-reaper-cfg-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("config.d")).unwrap();
    std::fs::write(dir.join("config.toml"), "[reaper]\ngrace_secs = 1\ninterval_secs = 7\n").unwrap();
    std::fs::write(dir.join("config.d/20-b.toml"), "[reaper]\ngrace_secs = 3\n").unwrap();
    std::fs::write(dir.join("config.d/10-a.toml"), "[reaper]\ngrace_secs = 2\n").unwrap();
    std::fs::write(dir.join("config.d/ignored.txt"), "garbage").unwrap();
    let c = Config::load(&Sources::explicit(dir.join("config.toml"))).unwrap();
    assert_eq!((c.grace_secs, c.interval_secs), (3, 7));
    assert_eq!(c.sources.len(), 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn missing_explicit_file_is_an_error() {
    let e = Config::load(&Sources::explicit("/nonexistent/mcp-reaper.toml")).unwrap_err();
    assert!(e.to_string().contains("cannot read"), "{e}");
}

#[test]
fn redact_extra_patterns_extend_and_patterns_replace_the_defaults() {
    let d = Config::embedded();
    assert!(d.redact.enabled && d.redact.patterns.len() >= 10 && d.redact.extra_patterns.is_empty());
    let cmd = "srv --token=abc --acme=internal1";
    assert_eq!(d.redactor.redact(cmd), "srv --token=*** --acme=internal1");

    let c = Config::from_str_with_default("u.toml", "[redact]\nextra_patterns = ['--acme=(\\S+)']\n").unwrap();
    assert_eq!(c.redact.patterns, d.redact.patterns);
    assert_eq!(c.redactor.redact(cmd), "srv --token=*** --acme=***");

    let c = Config::from_str_with_default("u.toml", "[redact]\npatterns = ['--acme=(\\S+)']\n").unwrap();
    assert_eq!(c.redact.patterns, vec!["--acme=(\\S+)".to_string()]);
    assert_eq!(c.redactor.redact(cmd), "srv --token=abc --acme=***");

    let c = Config::from_str_with_default("u.toml", "[redact]\nenabled = false\n").unwrap();
    assert!(!c.redactor.is_enabled());
    assert_eq!(c.redactor.redact(cmd), cmd);
    assert!(d.diff(&c).iter().any(|l| l == "redact.enabled: true -> false"), "{:?}", d.diff(&c));
}

#[test]
fn bad_redact_patterns_are_refused_with_position_and_key() {
    let text = "[redact]\nextra_patterns = ['ok', '(unclosed']\npatterns = [\n  '[z-a]',\n]\nenable = true\n";
    let errs = Config::from_str_with_default("u.toml", text).unwrap_err().0;
    let shown: Vec<String> = errs.iter().map(std::string::ToString::to_string).collect();
    assert_eq!(errs.len(), 3, "{shown:#?}");
    for want in [
        "u.toml:2:25: redact.extra_patterns[1]: invalid regex",
        "u.toml:4:3: redact.patterns[0]: invalid regex",
        "u.toml:6:1: unknown field `enable` in [redact]",
    ] {
        assert!(shown.iter().any(|s| s.starts_with(want)), "missing {want} in {shown:#?}");
    }
    let e = Config::from_str_with_default("u.toml", "[redact]\nenabled = \"yes\"\n").unwrap_err().0;
    assert_eq!((e[0].position, e[0].key.as_deref()), (Some((2, 11)), Some("redact.enabled")), "{}", e[0]);
}

#[test]
fn reload_diff_names_every_kind_of_key_as_before() {
    let d = Config::embedded();
    let text = "[reaper]\nmode = 'dry-run'\ngrace_secs = 5\nterm_timeout_secs = 0.5\n\
                [patterns]\nprotect = ['x']\n[daemon]\nsocket = '/run/x.sock'\n";
    let c = Config::from_str_with_default("u.toml", text).unwrap();
    let protect = d.patterns.protect.len();
    assert_eq!(
        d.diff(&c),
        vec![
            "mode: enforce -> dry-run".to_string(),
            "grace_secs: 60 -> 5".into(),
            "term_timeout_secs: 2.0 -> 0.5".into(),
            format!("patterns.protect: {protect} -> 1 entries"),
            "socket: unset -> \"/run/x.sock\"".into(),
        ]
    );
    assert!(c.diff(&c).is_empty());
}

#[test]
fn the_redact_fallback_masks_as_the_embedded_default_does() {
    let d = Config::embedded();
    let cmd = "srv --token=abc --header Authorization: Bearer x postgres://u:pw@h/db";
    assert_eq!(crate::redact::Redactor::default().redact(cmd), cmd, "the default Redactor is disabled");
    assert_eq!(d.redactor.redact(cmd), crate::redact::redact(cmd));
}

#[test]
fn metrics_listen_is_off_by_default_and_loopback_for_a_bare_port() {
    assert_eq!(Config::embedded().metrics_listen, None);
    let at = |v: &str| {
        Config::from_str_with_default("u.toml", &format!("[metrics]\nlisten = {v:?}\n")).map(|c| c.metrics_listen)
    };
    assert_eq!(at("9464").unwrap(), Some("127.0.0.1:9464".parse().unwrap()));
    assert_eq!(at(":9464").unwrap(), Some("127.0.0.1:9464".parse().unwrap()));
    assert_eq!(at("0.0.0.0:9464").unwrap(), Some("0.0.0.0:9464".parse().unwrap()));
    assert_eq!(at("[::1]:0").unwrap(), Some("[::1]:0".parse().unwrap()));
    for bad in ["localhost:9464", "70000", "1.2.3.4", ""] {
        let e = at(bad).unwrap_err().0;
        assert!(e[0].to_string().starts_with("u.toml:2:10: metrics.listen: must be IP:PORT"), "{bad}: {}", e[0]);
    }
    let e = Config::from_str_with_default("u.toml", "[metrics]\naddress = \"9464\"\n").unwrap_err().0;
    assert!(e[0].message.contains("unknown field `address`"), "{}", e[0]);
}

/// The embedded default's layer compiles none of its patterns (see
/// `crate::compiled`): the same text as any other file is checked in full.
#[test]
fn the_embedded_default_passes_every_check_as_any_other_file() {
    let c = Config::from_str_with_default("copy-of-default.toml", super::DEFAULT_TOML).unwrap();
    let d = Config::embedded();
    assert_eq!(c.patterns, d.patterns);
    assert_eq!(c.redact, d.redact);
    assert_eq!(c.redactor.redact("srv --token=abc"), d.redactor.redact("srv --token=abc"));
    // One changed pattern in a file is compiled and refused as before.
    let bad = super::DEFAULT_TOML.replacen("'^qwen$'", "'^qwen($'", 1);
    let e = Config::from_str_with_default("bad.toml", &bad).unwrap_err().0;
    assert!(
        e.iter().any(|e| e.to_string().contains("patterns.hosts[") && e.to_string().contains("invalid regex")),
        "{e:?}"
    );
}
