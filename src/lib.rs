//! mcp-reaper: finds MCP server process trees whose AI client is gone and ends them.
//!
//! The pipeline, one module per stage:
//! `scan` (read /proc) → `tree` (ancestry, roles, server trees) → `policy`
//! (verdicts) → `reap` (signals) → `report` (words and JSON).
//! Only `scan` reads the system and only `reap` (through `sys`) changes it.

pub mod config;
pub mod ids;
pub mod scan;
pub mod sys;
pub mod policy;
pub mod tree;
pub mod cycle;
pub mod report;
pub mod ctl;
pub mod exit;
pub mod paths;
pub mod reap;
pub mod state;
pub mod daemon;
