//! One finding of `reaperctl doctor`: what was found and, where something
//! is missing, what that costs.

use serde::Serialize;

use crate::ctl::platform::Platform;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    Ok,
    /// Works, with less: `cost` says what is lost.
    Warn,
    /// The reaper cannot do its work: `cost` says what fails.
    Missing,
}

#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub health: Health,
    /// What was found.
    pub found: String,
    /// What the missing part costs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<String>,
    /// The `platform` check only: what was found, field by field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
}

pub fn ok(name: &'static str, found: impl Into<String>) -> Check {
    Check { name, health: Health::Ok, found: found.into(), cost: None, platform: None }
}

pub fn warn(name: &'static str, found: impl Into<String>, cost: impl Into<String>) -> Check {
    Check { name, health: Health::Warn, found: found.into(), cost: Some(cost.into()), platform: None }
}

pub fn missing(name: &'static str, found: impl Into<String>, cost: impl Into<String>) -> Check {
    Check { name, health: Health::Missing, found: found.into(), cost: Some(cost.into()), platform: None }
}
