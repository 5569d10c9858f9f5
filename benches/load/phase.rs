//! One phase: the daemon in one mode through the churn, then the burst.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcp_reaper::proto::Status;
use rustix::process::Signal;

use crate::bench::{Bench, Kind, OrphanTree, bound};
use crate::node::Node;
use crate::procfs::{cpu_split, cpu_ticks, exited, pidfd, status_number};
use crate::{BURST_TOUCH_MIB, TERM_TIMEOUT_SECS};

#[derive(Default, Clone)]
pub(crate) struct BurstResult {
    pub(crate) trees: usize,
    pub(crate) stubborn: usize,
    pub(crate) members: usize,
    pub(crate) all_gone: Option<Duration>,
    pub(crate) reaped_by_bench_count: usize,
    pub(crate) daemon_trees: u64,
    pub(crate) daemon_escalations: u64,
    pub(crate) daemon_failures: u64,
    pub(crate) daemon_reclaimed: u64,
    pub(crate) measured: u64,
}

#[derive(Default)]
pub(crate) struct PhaseResult {
    pub(crate) mode: String,
    pub(crate) event_mode: String,
    pub(crate) steady_secs: f64,
    pub(crate) created: usize,
    /// Trees made and reaped, by [`Kind`]: orphan, abandoned, stale.
    pub(crate) made: [usize; 3],
    pub(crate) reaped_kind: [usize; 3],
    pub(crate) stubborn: usize,
    pub(crate) reaped: usize,
    pub(crate) late: usize,
    pub(crate) missed: usize,
    pub(crate) tree_lat_ms: Vec<f64>,
    pub(crate) server_lat_ms: Vec<f64>,
    /// Host death → a member's SIGTERM received (orphan trees whose members
    /// heed SIGTERM).
    pub(crate) signal_lat_ms: Vec<f64>,
    pub(crate) wrong_kills: usize,
    pub(crate) rss_start: u64,
    pub(crate) rss_end: u64,
    pub(crate) rss_max: u64,
    pub(crate) rss_after_burst: u64,
    pub(crate) cpu_steady: f64,
    pub(crate) cpu_user: f64,
    pub(crate) cpu_sys: f64,
    /// The daemon's main thread's wake-ups a second (voluntary context
    /// switches) in the churn phase: each costs a switch, whatever it does.
    pub(crate) wakeups: f64,
    pub(crate) cpu_all: f64,
    /// (seconds into the churn phase, the lowest `VmRSS` KiB of the minute
    /// before), once a minute: the low is the daemon between scans, which a
    /// sample catching a scan's snapshot in flight (about 2 MiB more at
    /// 10,000 processes) cannot hide.
    pub(crate) rss_trace: Vec<(u64, u64)>,
    /// The same for `RssAnon` (the heap and anonymous maps: what a leak
    /// grows; the rest of RSS is the binary's and libraries' pages, which
    /// grow as code paths are first run, up to the files' sizes).
    pub(crate) anon_trace: Vec<u64>,
    /// The lowest `RssAnon` since the last whole minute of the churn phase
    /// (the whole phase when shorter): the heap as the run left it.
    pub(crate) anon_end: u64,
    pub(crate) scans: u64,
    pub(crate) last_scan_ms: f64,
    pub(crate) last_processes: usize,
    pub(crate) totals_trees: u64,
    pub(crate) totals_processes: u64,
    pub(crate) totals_escalations: u64,
    pub(crate) totals_failures: u64,
    pub(crate) totals_reclaimed: u64,
    pub(crate) steady_daemon_trees: u64,
    pub(crate) steady_daemon_escalations: u64,
    pub(crate) steady_daemon_reclaimed: u64,
    pub(crate) steady_measured: u64,
    pub(crate) burst: BurstResult,
    pub(crate) log_lines: usize,
    /// Log lines about a (new) live tree: the MCP-looking churn was seen.
    pub(crate) live_logged: usize,
    pub(crate) daemon_exit: String,
}

impl Bench {
    #[allow(clippy::too_many_lines)] // one phase, read top to bottom
    pub(crate) fn run_phase(&mut self, mode: &str) -> PhaseResult {
        self.phase += 1;
        let phase = self.phase;
        let p = self.p.clone();
        let mut r = PhaseResult { mode: mode.to_string(), ..PhaseResult::default() };
        // In a directory of its own, as in /etc/mcp-reaper: the daemon
        // watches the config's directory for edits, and this temp dir holds
        // the bench's events file, written dozens of times a second (each
        // close woke the daemon: 80 wake-ups a second no real config dir makes).
        let etc = self.dir.join("etc");
        std::fs::create_dir_all(&etc).expect("creating the config's directory");
        let cfg = etc.join("config.toml");
        std::fs::write(
            &cfg,
            format!(
                "[reaper]\nmode = \"enforce\"\ngrace_secs = 0\nmin_uid = 0\ninterval_secs = {}\nterm_timeout_secs = {TERM_TIMEOUT_SECS}\n",
                p.interval
            ),
        )
        .expect("writing the config");
        let sock = self.dir.join(format!("{mode}.sock"));
        let log = self.dir.join(format!("{mode}.log"));
        let mut cmd = Command::new(&self.daemon_bin);
        cmd.arg("--config")
            .arg(&cfg)
            .args(["--scope", &self.me.to_string(), "--log-target", "stderr", "--log-level", &p.log_level])
            .arg("--socket")
            .arg(&sock)
            .arg("--state-file")
            .arg(self.dir.join(format!("{mode}.state")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("daemon log"));
        if mode == "pidfd" {
            cmd.arg("--no-events");
        }
        mcp_reaper::sys::kill_with_parent(&mut cmd);
        let daemon = cmd.spawn().expect("starting mcp-reaperd").id().cast_signed();
        self.daemon_pid = Some(daemon);
        self.daemon_status = None;
        let daemon_fd = pidfd(daemon).expect("pidfd of the daemon");
        let first = self.wait_status(&sock, Duration::from_secs(120), |s| s.scans.count >= 1);
        let Some(first) = first else {
            panic!("mcp-reaperd ({mode}) did not answer within 120 s; log: {}", log.display());
        };
        r.event_mode.clone_from(&first.event_mode);
        eprintln!(
            "[{mode}] daemon {daemon} up: events={}, first scan of {} processes took {:.1} ms",
            first.event_mode, first.scans.last_processes, first.scans.last_duration_ms
        );

        // ---- steady phase: churn plus an orphan tree every few seconds
        let tck = rustix::param::clock_ticks_per_second() as f64;
        let (c0, t0) = (cpu_ticks(daemon), Instant::now());
        let (u0, s0) = cpu_split(daemon);
        let w0 = status_number(daemon, "voluntary_ctxt_switches:");
        r.rss_start = status_number(daemon, "VmRSS:");
        r.rss_max = r.rss_start;
        let every = Duration::from_secs_f64(p.orphan_every);
        let host_lives = [0.3, 1.5, 3.0, 6.0, 0.8, 4.5];
        let mut next_orphan = t0 + Duration::from_secs(1);
        let mut next_sample = t0 + Duration::from_secs(1);
        let (mut minute_low, mut anon_low) = (u64::MAX, u64::MAX);
        let mut next_progress = t0 + Duration::from_secs(60);
        let mut k = 0usize;
        let end = t0 + Duration::from_secs(p.secs);
        while Instant::now() < end {
            self.tick(Duration::from_millis(5));
            let now = Instant::now();
            if now >= next_orphan {
                let life = Duration::from_secs_f64(host_lives[k % host_lives.len()]);
                // Abandoned and stale trees are used for a while first: the
                // daemon has judged them live at least once (a full scan
                // every interval) before their host lets go.
                let used = Duration::from_secs(p.interval + 2) + life / 4;
                match k % 6 {
                    2 => self.spawn_abandoned(used),
                    4 => self.spawn_stale(used),
                    n => self.spawn_orphan(n == 3, life),
                }
                k += 1;
                next_orphan += every;
            }
            self.kill_due_hosts(false);
            if now >= next_sample {
                let rss = status_number(daemon, "VmRSS:");
                r.rss_max = r.rss_max.max(rss);
                minute_low = minute_low.min(rss);
                anon_low = anon_low.min(status_number(daemon, "RssAnon:"));
                next_sample += Duration::from_secs(1);
            }
            if now >= next_progress {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // whole seconds since t0
                r.rss_trace
                    .push((t0.elapsed().as_secs_f64().round() as u64, std::mem::replace(&mut minute_low, u64::MAX)));
                r.anon_trace.push(std::mem::replace(&mut anon_low, u64::MAX));
                let ts: Vec<&OrphanTree> = self.trees.values().filter(|t| t.phase == phase && !t.burst).collect();
                eprintln!(
                    "[{mode}] {:4.0} s: orphans {} created, {} reaped; wrong kills {}; daemon RSS {} KiB (max {}), CPU {:.2} %",
                    t0.elapsed().as_secs_f64(),
                    ts.len(),
                    ts.iter().filter(|t| t.tree_latency.is_some()).count(),
                    self.wrong.len(),
                    status_number(daemon, "VmRSS:"),
                    r.rss_max,
                    (cpu_ticks(daemon) - c0) as f64 / tck / t0.elapsed().as_secs_f64() * 100.0
                );
                next_progress += Duration::from_secs(60);
            }
            if exited(&daemon_fd) {
                break;
            }
        }
        r.steady_secs = t0.elapsed().as_secs_f64();
        r.cpu_steady = (cpu_ticks(daemon) - c0) as f64 / tck / r.steady_secs * 100.0;
        let (u1, s1) = cpu_split(daemon);
        r.cpu_user = (u1 - u0) as f64 / tck / r.steady_secs * 100.0;
        r.cpu_sys = (s1 - s0) as f64 / tck / r.steady_secs * 100.0;
        r.wakeups = status_number(daemon, "voluntary_ctxt_switches:").saturating_sub(w0) as f64 / r.steady_secs;
        r.rss_end = status_number(daemon, "VmRSS:");
        r.rss_max = r.rss_max.max(r.rss_end);
        r.anon_end = if anon_low == u64::MAX { r.anon_trace.last().copied().unwrap_or(0) } else { anon_low };
        // The last trees: kill their hosts now, wait out the bound. A tree
        // made just before the end may still be starting its members: its
        // host is killed once they are all up (or it is given up on after
        // 30 s), never left alive and counted as missed.
        let ready_by = Instant::now() + Duration::from_secs(35);
        loop {
            self.kill_due_hosts(true);
            let starting = self
                .trees
                .values()
                .any(|t| t.phase == phase && t.kind == Kind::Orphan && t.killed_at.is_none() && !t.abandoned);
            if !starting || Instant::now() > ready_by {
                break;
            }
            self.tick(Duration::from_millis(5));
        }
        let last_kill = Instant::now();
        while Instant::now() < last_kill + bound(&p) + Duration::from_secs(5) {
            // Trees let go and not yet gone, and trees whose host has yet to
            // drop them.
            let pending = self.trees.values().any(|t| {
                t.phase == phase
                    && t.tree_latency.is_none()
                    && !t.abandoned
                    && (t.killed_at.is_some() || t.kind == Kind::Abandoned)
            });
            if !pending {
                break;
            }
            self.tick(Duration::from_millis(5));
        }
        let before_burst = self.wait_status(&sock, Duration::from_secs(10), |_| true);
        if let Some(s) = &before_burst {
            r.steady_daemon_trees = s.totals.trees_reaped;
            r.steady_daemon_escalations = s.totals.escalations;
            r.steady_daemon_reclaimed = s.totals.reclaimed_bytes;
        }

        // ---- burst: many orphan trees at once
        if p.burst > 0 && !exited(&daemon_fd) {
            r.burst = self.burst(&sock, before_burst.as_ref());
        }
        r.rss_after_burst = status_number(daemon, "VmRSS:");
        r.rss_max = r.rss_max.max(r.rss_after_burst);
        r.cpu_all = (cpu_ticks(daemon) - c0) as f64 / tck / t0.elapsed().as_secs_f64() * 100.0;
        let end_status = self.wait_status(&sock, Duration::from_secs(10), |_| true);

        // ---- results of the phase
        let bnd = bound(&p);
        let mut csv = String::from(
            "tree,kind,burst,stubborn,host_life_ms,host_killed_unix,tree_gone_ms,server_gone_ms,measured_bytes,members\n",
        );
        let mut ids: Vec<&u64> = self.trees.iter().filter(|(_, t)| t.phase == phase).map(|(id, _)| id).collect();
        ids.sort();
        for id in ids {
            let t = &self.trees[id];
            let ms = |d: Option<Duration>| d.map_or(String::new(), |d| format!("{:.1}", d.as_secs_f64() * 1000.0));
            let _ = writeln!(
                csv,
                "{id},{},{},{},{},{:.3},{},{},{},{}",
                t.kind.as_str(),
                t.burst,
                t.stubborn,
                t.killed_at.map_or(String::new(), |k| k.saturating_duration_since(t.created).as_millis().to_string()),
                t.killed_unix,
                ms(t.tree_latency),
                ms(t.server_latency),
                t.measured,
                t.members.iter().map(|m| m.pid.to_string()).collect::<Vec<_>>().join(" ")
            );
        }
        let _ = std::fs::write(self.dir.join(format!("trees-{mode}.csv")), csv);
        for t in self.trees.values_mut().filter(|t| t.phase == phase && !t.burst) {
            r.created += 1;
            r.made[t.kind as usize] += 1;
            r.stubborn += usize::from(t.stubborn);
            r.steady_measured += t.measured;
            if let Some(l) = t.tree_latency {
                r.reaped += 1;
                r.reaped_kind[t.kind as usize] += 1;
                r.late += usize::from(l > bnd);
                r.tree_lat_ms.push(l.as_secs_f64() * 1000.0);
                if let Some(s) = t.server_latency {
                    r.server_lat_ms.push(s.as_secs_f64() * 1000.0);
                }
                if let Some(s) = t.signal_latency.filter(|_| t.kind == Kind::Orphan) {
                    r.signal_lat_ms.push(s.as_secs_f64() * 1000.0);
                }
            } else {
                r.missed += 1;
                let alive: Vec<String> = t
                    .members
                    .iter()
                    .filter(|m| m.gone_at.is_none())
                    .map(|m| format!("{} ({})", m.pid, m.argv))
                    .collect();
                self.errors.push(format!(
                    "[{mode}] MISSED {} tree (host {}, let go {:?} ago): still alive: {}",
                    t.kind.as_str(),
                    t.host,
                    t.killed_at.map(|k| k.elapsed()),
                    alive.join(", ")
                ));
                // Don't leave it running.
                for m in t.members.iter().filter(|m| m.gone_at.is_none()) {
                    let _ = rustix::process::pidfd_send_signal(&m.fd, Signal::KILL);
                }
                t.abandoned = true;
            }
        }
        if let Some(s) = &end_status {
            r.scans = s.scans.count;
            r.last_scan_ms = s.scans.last_duration_ms;
            r.last_processes = s.scans.last_processes;
            r.totals_trees = s.totals.trees_reaped;
            r.totals_processes = s.totals.processes_reaped;
            r.totals_escalations = s.totals.escalations;
            r.totals_failures = s.totals.failures;
            r.totals_reclaimed = s.totals.reclaimed_bytes;
        }
        r.wrong_kills = self.wrong.iter().filter(|(ph, _)| *ph == phase).count();

        // ---- stop the daemon
        let _ = rustix::process::pidfd_send_signal(&daemon_fd, Signal::TERM);
        let t = Instant::now();
        while self.daemon_status.is_none() && t.elapsed() < Duration::from_secs(15) {
            self.tick(Duration::from_millis(10));
        }
        if self.daemon_status.is_none() {
            let _ = rustix::process::pidfd_send_signal(&daemon_fd, Signal::KILL);
            while self.daemon_status.is_none() && t.elapsed() < Duration::from_secs(20) {
                self.tick(Duration::from_millis(10));
            }
        }
        r.daemon_exit = match self.daemon_status {
            Some(st) => match (st.exit_status(), st.terminating_signal()) {
                (Some(c), _) => format!("exit {c}"),
                (_, Some(sig)) => format!("signal {sig}"),
                _ => "?".into(),
            },
            None => "did not stop".into(),
        };
        self.daemon_pid = None;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        r.log_lines = text.lines().count();
        r.live_logged = text.lines().filter(|l| l.contains("live tree root=")).count();
        r
    }

    pub(crate) fn burst(&mut self, sock: &Path, before: Option<&Status>) -> BurstResult {
        let p = self.p.clone();
        let mut b = BurstResult { trees: p.burst, ..BurstResult::default() };
        let hosts_n = p.burst.div_ceil(10);
        let far = Instant::now() + Duration::from_secs(3600);
        let mut ids = Vec::new();
        let mut made = 0;
        for h in 0..hosts_n {
            let mut host = Node::new(&["claude", "--burst-host", &h.to_string()], "orphan-host");
            let mut mine = Vec::new();
            while made < p.burst && mine.len() < 10 {
                let stubborn = made * 30 / 100 != (made + 1) * 30 / 100;
                let (id, launcher) = self.orphan_tree_spec(stubborn, BURST_TOUCH_MIB);
                host = host.child(launcher);
                mine.push((id, stubborn));
                made += 1;
            }
            let pid = self.spawn_host(&host);
            for (id, stubborn) in mine {
                b.stubborn += usize::from(stubborn);
                self.new_tree(id, pid, stubborn, true, far);
                ids.push(id);
            }
        }
        // All ready, then one interval so that the hosts are known (watched) in both modes.
        let t = Instant::now();
        while ids.iter().any(|id| self.trees[id].members.len() < 3) && t.elapsed() < Duration::from_secs(60) {
            self.tick(Duration::from_millis(10));
        }
        let settle = Instant::now() + Duration::from_secs(p.interval + 1);
        while Instant::now() < settle {
            self.tick(Duration::from_millis(10));
        }
        for id in &ids {
            self.trees.get_mut(id).unwrap().kill_at = Instant::now();
        }
        let first_kill = Instant::now();
        self.kill_due_hosts(true);
        while ids.iter().any(|id| self.trees[id].tree_latency.is_none() && !self.trees[id].abandoned)
            && first_kill.elapsed() < Duration::from_secs(60)
        {
            self.tick(Duration::from_millis(2));
        }
        let done: Vec<&OrphanTree> = ids.iter().map(|id| &self.trees[id]).collect();
        b.members = done.iter().map(|t| t.members.len()).sum();
        b.measured = done.iter().map(|t| t.measured).sum();
        b.reaped_by_bench_count = done.iter().filter(|t| t.tree_latency.is_some()).count();
        if b.reaped_by_bench_count == done.len() {
            let last = done.iter().flat_map(|t| t.members.iter().filter_map(|m| m.gone_at)).max();
            b.all_gone = last.map(|l| l.saturating_duration_since(first_kill));
        }
        let (t0, e0, f0, m0) = before
            .map(|s| (s.totals.trees_reaped, s.totals.escalations, s.totals.failures, s.totals.reclaimed_bytes))
            .unwrap_or_default();
        let want = t0 + p.burst as u64;
        if let Some(s) = self.wait_status(sock, Duration::from_secs(15), |s| s.totals.trees_reaped >= want) {
            b.daemon_trees = s.totals.trees_reaped - t0;
            b.daemon_escalations = s.totals.escalations - e0;
            b.daemon_failures = s.totals.failures - f0;
            b.daemon_reclaimed = s.totals.reclaimed_bytes - m0;
        }
        b
    }
}
