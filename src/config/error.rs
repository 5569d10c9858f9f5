//! Config errors: one problem in one file (`file:line:col: key: message`),
//! and every problem of a load, so a user fixes them all in one go.

use std::fmt;

/// One problem in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// Dotted key path (`reaper.grace_secs`, `patterns.hosts[3]`), when known.
    pub key: Option<String>,
    pub message: String,
}

impl ConfigError {
    /// A problem of a whole file (it cannot be read, it is too large).
    pub(super) fn file(file: &str, message: String) -> ConfigError {
        ConfigError { file: file.to_string(), position: None, key: None, message }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        write!(f, ": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

/// Every problem found, so a user fixes them all in one go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl ConfigErrors {
    /// In the order a reader meets them: files in the order they were read
    /// (the order problems first name them), each file's problems by line
    /// and column, a whole-file problem first (found per pass: syntax, keys,
    /// values, so otherwise out of order).
    #[must_use]
    pub fn in_file_order(mut self) -> ConfigErrors {
        let mut files: Vec<String> = Vec::new();
        for e in &self.0 {
            if !files.contains(&e.file) {
                files.push(e.file.clone());
            }
        }
        let rank = |f: &str| files.iter().position(|x| x == f).unwrap_or(usize::MAX);
        self.0.sort_by_key(|e| (rank(&e.file), e.position.unwrap_or((0, 0))));
        self
    }
}
