//! mcp-reaper: finds MCP server process trees whose AI client is gone and ends them.
//!
//! The pipeline, one module per stage:
//! `scan` (read /proc) → `tree` (ancestry, roles, server trees) → `policy`
//! (verdicts) → `reap` (signals) → `report` (words and JSON).
//! Only `scan` reads the system and only `reap` (through `sys`) changes it.

// Clippy's pedantic group holds for all of `src/` (CI runs clippy with
// `-D warnings`). Left out, on purpose: this library serves two binaries and
// is no published API, so `#[must_use]` on every getter and `# Errors` /
// `# Panics` sections on every function would be noise; names that repeat
// their module (`scan::ScanError`) and short or similar local names
// (`pid`/`ppid`, `a`/`j`) read better here than their alternatives; floats
// only ever hold display values and ages, where 52 bits are plenty.
#![warn(clippy::pedantic)]
#![allow(
    clippy::must_use_candidate,
    clippy::missing_errors_doc,
    clippy::missing_panics_doc,
    clippy::module_name_repetitions,
    clippy::similar_names,
    clippy::many_single_char_names,
    clippy::cast_precision_loss
)]
// Unit tests compare exact expected floats, spell out fixture numbers as the
// kernel prints them, and build small identities from loop counters.
#![cfg_attr(
    test,
    allow(clippy::float_cmp, clippy::unreadable_literal, clippy::cast_sign_loss, clippy::cast_possible_truncation)
)]

pub mod atomic;
pub mod config;
pub mod ctl;
pub mod cycle;
pub mod daemon;
pub mod exit;
pub mod ids;
pub mod names;
pub mod paths;
pub mod policy;
pub mod program;
pub mod reap;
pub mod redact;
pub mod report;
pub mod scan;
pub mod state;
pub mod sys;
pub mod tree;
