//! Logging setup and the structured events users query.
//!
//! Events carry `reaper_*` fields; under journald they become `REAPER_*`
//! journal fields, so `journalctl -t mcp-reaperd REAPER_ACTION=reap` lists
//! every reap.

use std::str::FromStr;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

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

/// Installs the global subscriber. Returns where logs actually go.
pub fn init(level: &str, target: LogTarget, ident: &str) -> &'static str {
    let filter = EnvFilter::from_str(&format!("{level},mcp_reaper={level}")).unwrap_or_else(|_| EnvFilter::new("info"));
    let want_journal = match target {
        LogTarget::Journald => true,
        LogTarget::Stderr => false,
        LogTarget::Auto => std::env::var_os("JOURNAL_STREAM").is_some(),
    };
    if want_journal {
        match tracing_journald::layer() {
            Ok(layer) => {
                let layer = layer.with_field_prefix(None).with_syslog_identifier(ident.to_string());
                let _ = tracing_subscriber::registry().with(filter).with(layer).try_init();
                return "journald";
            }
            Err(e) => eprintln!("{ident}: journald is not reachable ({e}); logging to stderr"),
        }
    }
    // On stderr the message says it all; the fields are for journald.
    let message_only = tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        if field.name() == "message" { write!(w, "{value:?}") } else { Ok(()) }
    });
    let fmt = tracing_subscriber::fmt::layer()
        .fmt_fields(message_only)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(rustix::termios::isatty(std::io::stderr()));
    let _ = tracing_subscriber::registry().with(filter).with(fmt).try_init();
    "stderr"
}

/// One entry per tree acted on (or that would be, in dry-run); a tree that
/// could not be fully ended is a warning with `REAPER_ACTION=error`.
pub fn outcome(o: &Outcome) {
    let action = if o.dry_run { "would-reap" } else { "reap" };
    let signals = o.signals.join(",");
    let line = o.line();
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
