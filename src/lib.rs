//! mcp-reaper: finds MCP server process trees whose AI client is gone and ends them.
//!
//! The pipeline, one module per stage:
//! `scan` (read /proc) → `tree` (ancestry, roles, server trees) → `policy`
//! (verdicts) → `reap` (signals) → `report` (words and JSON).
//! Only `scan` reads the system and only `reap` (through `sys`) changes it.

// Lints (clippy's pedantic group and what it leaves out, `unsafe_code`
// denied but in `sys`) are set for every target in Cargo.toml `[lints]`.

// Unit tests compare exact expected floats, spell out fixture numbers as the
// kernel prints them, and build small identities from loop counters.
#![cfg_attr(
    test,
    allow(clippy::float_cmp, clippy::unreadable_literal, clippy::cast_sign_loss, clippy::cast_possible_truncation)
)]

pub mod access;
pub(crate) mod atomic;
pub(crate) mod compiled;
pub mod config;
pub mod ctl;
pub mod cycle;
pub mod daemon;
pub mod engine;
pub mod exit;
pub(crate) mod history;
pub mod hostcfg;
pub mod ids;
pub(crate) mod names;
pub(crate) mod paths;
pub mod policy;
pub mod program;
pub mod proto;
pub mod reap;
pub(crate) mod redact;
pub(crate) mod report;
pub mod role;
pub mod scan;
pub mod session;
pub(crate) mod state;
pub(crate) mod stdout;
pub mod sys;
pub(crate) mod tree;
pub(crate) mod userfile;
