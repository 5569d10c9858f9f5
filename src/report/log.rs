//! Logging setup and the structured events users query.
//!
//! Events carry `reaper_*` fields; under journald they become `REAPER_*`
//! journal fields, so `journalctl -t mcp-reaperd REAPER_ACTION=reap` lists
//! every reap.

use std::fmt::Display;
use std::path::Path;
use std::str::FromStr;

use tracing::Subscriber;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::writer::MakeWriterExt as _;
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

use super::journal::{self, Journal};
use crate::reap::Outcome;

/// Where log lines go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogTarget {
    /// journald when started by systemd with its output on the journal
    /// (`JOURNAL_STREAM` set), stderr otherwise.
    Auto,
    Journald,
    Stderr,
}

/// Whether log lines on a terminal get colours (`--color`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    /// When stderr is a terminal and `NO_COLOR` is unset or empty
    /// (<https://no-color.org>).
    Auto,
    Always,
    Never,
}

impl Color {
    /// Whether stderr's lines get ANSI colours.
    pub fn ansi(self) -> bool {
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && rustix::termios::isatty(std::io::stderr())
            }
        }
    }
}

/// Installs the global subscriber. Returns where logs actually go.
pub fn init(level: &str, target: LogTarget, color: Color, ident: &str) -> &'static str {
    let ansi = color.ansi();
    // One level for everything: all an env-filter's directives were used for.
    let filter = LevelFilter::from_str(level).unwrap_or(LevelFilter::INFO);
    let want_journal = match target {
        LogTarget::Journald => true,
        LogTarget::Stderr => false,
        LogTarget::Auto => std::env::var_os("JOURNAL_STREAM").is_some(),
    };
    if want_journal {
        match Journal::new(ident) {
            Ok(layer) => {
                // Entries journald refuses later are written to stderr instead.
                let fallback =
                    stderr_layer(std::io::stderr.with_filter(|_: &tracing::Metadata<'_>| journal::is_down()), ansi);
                let _ = tracing_subscriber::registry().with(filter).with(layer).with(fallback).try_init();
                return "journald";
            }
            Err(e) => eprintln!("{ident}: journald is not reachable at {} ({e}); logging to stderr", journal::SOCKET),
        }
    }
    let _ = tracing_subscriber::registry().with(filter).with(stderr_layer(std::io::stderr, ansi)).try_init();
    "stderr"
}

/// Log lines on stderr: the message says it all; the fields are for journald.
fn stderr_layer<S, W>(writer: W, ansi: bool) -> impl tracing_subscriber::Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let message_only = tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        // One entry, one line: its hostile parts (names, paths) escaped.
        if field.name() == "message" { write!(w, "{}", crate::names::printable(&format!("{value:?}"))) } else { Ok(()) }
    });
    tracing_subscriber::fmt::layer().fmt_fields(message_only).with_writer(writer).with_target(false).with_ansi(ansi)
}

/// A write the daemon repeats (the state file after each grace-book change,
/// the metrics textfile after each cycle): a failure is one warning, not one
/// per cycle, and the first success after failures says the trouble is
/// over. A full disk or a read-only mount must not flood the journal.
#[derive(Debug)]
pub struct Repeated {
    what: &'static str,
    failures: u64,
}

impl Repeated {
    /// `what` names the file's role: "state file", "metrics textfile".
    pub fn new(what: &'static str) -> Repeated {
        Repeated { what, failures: 0 }
    }

    /// Reports the result of one write of `path`.
    pub fn record<E: Display>(&mut self, path: &Path, result: Result<(), E>) {
        let what = self.what;
        match result {
            Err(e) if self.failures == 0 => {
                self.failures = 1;
                tracing::warn!(
                    reaper_action = "error",
                    "cannot write {what} {}: {e}; retrying quietly, and saying when it works again",
                    path.display()
                );
            }
            Err(e) => {
                self.failures += 1;
                tracing::debug!("{what} {} still not writable: {e}", path.display());
            }
            Ok(()) if self.failures > 0 => {
                tracing::info!("{what} {} is writable again, after {} failed write(s)", path.display(), self.failures);
                self.failures = 0;
            }
            Ok(()) => {}
        }
    }
}

/// One entry per tree acted on (or that would be, in dry-run); a tree that
/// could not be fully ended is a warning with `REAPER_ACTION=error`.
pub fn outcome(o: &Outcome) {
    let action = if o.dry_run { "would-reap" } else { "reap" };
    let signals = o.signals.join(",");
    let line = o.line();
    // `ID NAME IMAGE ENDED` per run client's container, `-` where none was tied.
    let containers: Vec<String> = o
        .containers
        .iter()
        .map(|c| {
            let id = c.id.as_deref().map_or("-", |i| i.get(..12).unwrap_or(i));
            format!("{id} {} {} {}", c.name.as_deref().unwrap_or("-"), c.image, c.ended.as_str().replace(' ', "-"))
        })
        .collect();
    let containers = containers.join(", ");
    // As the totals count it: containers ended (or, in dry run, to be).
    let container_bytes: u64 = o
        .containers
        .iter()
        .filter(|c| c.stopped() || c.ended == crate::reap::Ended::WouldStop)
        .filter_map(|c| c.memory_bytes)
        .sum();
    macro_rules! entry {
        ($level:ident, $action:expr) => {
            tracing::$level!(
                reaper_action = $action,
                reaper_verdict = o.verdict.as_str(),
                reaper_reason = %o.reason,
                reaper_root_pid = o.root.pid.get(),
                reaper_members = o.members + o.joined,
                reaper_signals = %signals,
                reaper_reclaimed_bytes = o.reclaimed.total(),
                reaper_duration_ms = o.took_ms,
                reaper_containers = %containers,
                reaper_container_bytes = container_bytes,
                reaper_pod_uid = o.pod_uid.as_deref(),
                reaper_cgroup_container = o.cgroup_container.as_deref(),
                reaper_k8s_namespace = o.pod.as_ref().map(|p| p.namespace.as_str()),
                reaper_k8s_pod = o.pod.as_ref().map(|p| p.name.as_str()),
                reaper_container_name = o.container_name.as_deref(),
                "{line}"
            )
        };
    }
    if o.success() {
        entry!(info, action);
    } else {
        entry!(warn, "error");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::Context;

    use super::*;
    use crate::reap::{ContainerOutcome, Ended};

    /// The fields of every event, by name (what the journal layer turns
    /// into `REAPER_*` fields, see `journal::sanitize`).
    #[derive(Clone, Default)]
    struct Fields(Arc<Mutex<Vec<(String, String)>>>);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.lock().unwrap().push((field.name().to_string(), format!("{value:?}")));
        }
    }

    impl<S: Subscriber> tracing_subscriber::Layer<S> for Fields {
        fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
            event.record(&mut self.clone());
        }
    }

    #[test]
    fn reap_entries_carry_the_containers() {
        let mut o = super::super::outcome::tests::outcome();
        o.containers.push(ContainerOutcome {
            client_pid: 4243,
            id: Some("0123456789abcdef0123".into()),
            name: Some("srv".into()),
            image: "mcp/github".into(),
            memory_bytes: Some(3 << 20),
            ended: Ended::Killed,
            removed: true,
            note: None,
        });
        o.containers.push(ContainerOutcome {
            client_pid: 4244,
            image: "mcp/x".into(),
            memory_bytes: Some(1 << 20),
            ended: Ended::Failed,
            ..ContainerOutcome::default()
        });
        let fields = Fields::default();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(fields.clone()), || outcome(&o));
        let got = fields.0.lock().unwrap().clone();
        let get = |k: &str| got.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("reaper_containers"), Some("0123456789ab srv mcp/github killed, - - mcp/x failed"), "{got:?}");
        // The one that failed to stop freed nothing.
        assert_eq!(get("reaper_container_bytes"), Some("3145728"), "{got:?}");
        assert_eq!(get("reaper_root_pid"), Some("4242"), "{got:?}");
        assert_eq!(get("reaper_k8s_namespace"), None, "{got:?}");
    }

    #[test]
    fn reap_entries_name_the_pod_and_the_container() {
        let mut o = super::super::outcome::tests::outcome();
        o.pod_uid = Some("1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d".into());
        o.pod = Some(crate::scan::PodName { namespace: "agents".into(), name: "s-1".into(), container: None });
        o.container_name = Some("mcp".into());
        let fields = Fields::default();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(fields.clone()), || outcome(&o));
        let got = fields.0.lock().unwrap().clone();
        let get = |k: &str| got.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("reaper_k8s_namespace"), Some("\"agents\""), "{got:?}");
        assert_eq!(get("reaper_k8s_pod"), Some("\"s-1\""), "{got:?}");
        assert_eq!(get("reaper_container_name"), Some("\"mcp\""), "{got:?}");
    }
}
