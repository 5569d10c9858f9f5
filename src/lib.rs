//! mcp-reaper: finds MCP server process trees whose AI client is gone and ends them.
//!
//! The pipeline, one module per stage:
//! `scan` (read /proc) → `tree` (ancestry, roles, server trees) → `policy`
//! (verdicts) → `reap` (signals) → `report` (words and JSON).
//! Only `scan` reads the system and only `reap` (through `sys`) changes it.

pub mod config;
pub mod ctl;
pub mod cycle;
pub mod daemon;
pub mod exit;
pub mod ids;
pub mod paths;
pub mod policy;
pub mod reap;
pub mod redact;
pub mod report;
pub mod scan;
pub mod state;
pub mod sys;
pub mod tree;
