//! Beyond one machine: the metrics over HTTP (`[metrics] listen`) of a real
//! daemon, and the container image (`Containerfile`) run by a real engine.
//!
//! Safety: every daemon is `--scope`d to its test's sandbox and runs in
//! `--dry-run` unless it is inside the image test's own container, itself
//! scoped to the test's sandbox; signals only ever go to sandbox processes
//! and to daemons these tests started.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{Daemon, Launch, Sandbox, Spec, alive, text, wait_until};

const CLAUDE: &[&str] = &["claude", "--resume"];
const SERVER: &[&str] = &["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"];
const BYSTANDER: &[&str] = &["sleep", "600"];

/// One HTTP/1.1 request (`Connection: close`): status code, headers, body.
fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connecting to the metrics address");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: reaper\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("reading the answer");
    let raw = text(&raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no header end in {raw:?}"));
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("status line: {head}"));
    (code, head.to_string(), body.to_string())
}

/// The address the daemon's log says it serves metrics on.
fn served_on(d: &Daemon) -> SocketAddr {
    let mut addr = None;
    let found = wait_until(Duration::from_secs(20), || {
        addr = d.log_text().lines().find_map(|l| {
            let rest = l.split_once("metrics served on http://")?.1;
            rest.split_once("/metrics")?.0.parse().ok()
        });
        addr.is_some()
    });
    assert!(found, "no 'metrics served on' line:\n{}", d.log_text());
    addr.unwrap()
}

/// A sample's value in an exposition text, through a real parser.
fn sample(exposition: &str, name: &str, label: Option<(&str, &str)>) -> Option<f64> {
    let scrape =
        prometheus_parse::Scrape::parse(exposition.lines().map(|l| Ok(l.to_string()))).expect("valid exposition");
    scrape.samples.iter().find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v))).map(|s| {
        match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
            _ => f64::NAN,
        }
    })
}

#[test]
fn metrics_and_healthz_over_http_on_an_ephemeral_loopback_port() {
    let sb = Sandbox::new(vec![
        Spec::new(CLAUDE).child(Spec::new(SERVER)),
        Spec::new(CLAUDE).child(Spec::new(SERVER)),
        Spec::new(BYSTANDER),
    ]);
    let hosts: Vec<i32> = sb.ready().iter().filter(|r| r.cmd == CLAUDE.join(" ")).map(|r| r.pid).collect();
    let servers: Vec<i32> = sb.ready().iter().filter(|r| r.cmd == SERVER.join(" ")).map(|r| r.pid).collect();
    let bystander = sb.pid_of("sleep");
    // Port 0: the kernel picks a free one, and the log says which.
    let cfg = sb.dir().config_with(0, "interval_secs = 1", "[metrics]\nlisten = \"127.0.0.1:0\"\n");
    let d = Daemon::start_in(sb.scope_pid(), &cfg, sb.dir().path(), &Launch::with_args(&["--dry-run"]));
    let addr = served_on(&d);
    assert!(addr.ip().is_loopback(), "{addr}");

    let (code, head, body) = http(addr, "GET", "/healthz");
    assert_eq!(code, 200, "{head}\n{body}");
    assert!(body.starts_with("ok "), "{body}");

    sb.kill_host(hosts[0]);
    let mut last = String::new();
    let seen = wait_until(Duration::from_secs(30), || {
        let (code, _, body) = http(addr, "GET", "/metrics");
        last = body;
        code == 200
            && sample(&last, "mcp_reaper_trees", Some(("verdict", "orphan"))) == Some(1.0)
            && sample(&last, "mcp_reaper_trees", Some(("verdict", "live"))) == Some(1.0)
    });
    assert!(seen, "no orphan and live tree in /metrics:\n{last}\nlog:\n{}", d.log_text());
    let (_, head, body) = http(addr, "GET", "/metrics");
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
    assert!(sample(&body, "mcp_reaper_scans_total", None).is_some_and(|n| n >= 1.0), "{body}");
    // The same series as `reaperctl metrics` (values move between the two reads).
    let names = |t: &str| t.lines().filter(|l| l.starts_with("# TYPE")).map(str::to_string).collect::<Vec<_>>();
    let ctl = text(&d.ctl(&["metrics"]).stdout);
    assert_eq!(names(&body), names(&ctl), "HTTP and reaperctl metrics differ");

    assert_eq!(http(addr, "HEAD", "/healthz").0, 200);
    assert_eq!(http(addr, "GET", "/nothing").0, 404);
    assert_eq!(http(addr, "POST", "/metrics").0, 405);
    // A dry run: the orphan is counted, never signalled.
    assert!(d.count("would reap") >= 1, "{}", d.log_text());
    sb.assert_alive(&[servers[0], servers[1], hosts[1], bystander]);
    assert!(alive(servers[0]));
}
