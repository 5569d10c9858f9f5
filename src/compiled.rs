//! Each regex compiled once per config load. Checking a config compiled
//! every pattern alone and every role list as a set, and building the
//! matcher and the redactor compiled them all again: 3× the work on every
//! start of `reaperctl` and `mcp-reaperd --once`. While [`once`] runs, what
//! is compiled is kept (by its text and limits) and handed out again as a
//! cheap clone (`Regex` and `RegexSet` share their automata); outside it,
//! nothing is kept, so a daemon's reloads hold no stale programs.
//!
//! The embedded default's patterns are known to compile (its unit tests
//! compile each, as every other layer's are): checking its layer compiles
//! none of them but vouches for their texts here, so that what only they
//! feed (the redactor) can compile them when first used, not at every
//! start. A pattern from any other file is compiled and checked as ever.

use std::cell::RefCell;
use std::collections::HashMap;

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};

#[derive(Default)]
struct Memo {
    one: HashMap<(String, usize, usize), Result<Regex, regex::Error>>,
    sets: HashMap<(Vec<String>, usize, usize), Result<RegexSet, regex::Error>>,
    /// Texts of the embedded default's patterns, checked by its tests.
    vouched: std::collections::HashSet<String>,
}

thread_local! {
    static MEMO: RefCell<Option<Memo>> = const { RefCell::new(None) };
}

/// Runs `f` with compiled regexes kept for its duration (not nested: an
/// inner call keeps the outer one's memo).
pub(crate) fn once<T>(f: impl FnOnce() -> T) -> T {
    struct Clear(bool);
    impl Drop for Clear {
        fn drop(&mut self) {
            if self.0 {
                MEMO.with(|m| *m.borrow_mut() = None);
            }
        }
    }
    let outer = MEMO.with(|m| {
        let mut m = m.borrow_mut();
        let fresh = m.is_none();
        if fresh {
            *m = Some(Memo::default());
        }
        fresh
    });
    let _clear = Clear(outer);
    f()
}

/// Records that `pattern` is one of the embedded default's (see the module
/// comment); kept only while [`once`] runs.
pub(crate) fn vouch(pattern: &str) {
    MEMO.with(|m| {
        if let Some(memo) = m.borrow_mut().as_mut() {
            memo.vouched.insert(pattern.to_string());
        }
    });
}

/// Whether every pattern of `patterns` is one the embedded default vouched for.
pub(crate) fn all_vouched<S: AsRef<str>>(patterns: &[S]) -> bool {
    MEMO.with(|m| m.borrow().as_ref().is_some_and(|memo| patterns.iter().all(|p| memo.vouched.contains(p.as_ref()))))
}

/// One regex with these limits (compiled program, lazy DFA cache).
pub(crate) fn regex(pattern: &str, size_limit: usize, dfa_limit: usize) -> Result<Regex, regex::Error> {
    let build = || RegexBuilder::new(pattern).size_limit(size_limit).dfa_size_limit(dfa_limit).build();
    MEMO.with(|m| match m.borrow_mut().as_mut() {
        Some(memo) => memo.one.entry((pattern.to_string(), size_limit, dfa_limit)).or_insert_with(build).clone(),
        None => build(),
    })
}

/// One set of regexes with these limits.
pub(crate) fn set<S: AsRef<str>>(
    patterns: &[S],
    size_limit: usize,
    dfa_limit: usize,
) -> Result<RegexSet, regex::Error> {
    let build = || {
        RegexSetBuilder::new(patterns.iter().map(AsRef::as_ref))
            .size_limit(size_limit)
            .dfa_size_limit(dfa_limit)
            .build()
    };
    MEMO.with(|m| match m.borrow_mut().as_mut() {
        Some(memo) => {
            let key = (patterns.iter().map(|p| p.as_ref().to_string()).collect(), size_limit, dfa_limit);
            memo.sets.entry(key).or_insert_with(build).clone()
        }
        None => build(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_within_once_and_dropped_after() {
        let count = || MEMO.with(|m| m.borrow().as_ref().map(|m| m.one.len() + m.sets.len()));
        once(|| {
            let a = regex("^a+$", 1 << 20, 1 << 18).unwrap();
            let b = regex("^a+$", 1 << 20, 1 << 18).unwrap();
            assert!(a.is_match("aa") && b.is_match("a"));
            set(&["x", "y"], 1 << 20, 1 << 18).unwrap();
            set(&["x".to_string(), "y".to_string()], 1 << 20, 1 << 18).unwrap();
            assert!(regex("(", 1 << 20, 1 << 18).is_err());
            assert_eq!(count(), Some(3));
            once(|| assert_eq!(count(), Some(3), "nested: the outer memo stays"));
            assert_eq!(count(), Some(3));
            vouch("a+");
            assert!(all_vouched(&["a+"]) && !all_vouched(&["a+", "b"]));
        });
        assert_eq!(count(), None);
        assert!(!all_vouched(&["a+"]), "outside once nothing is vouched for");
        assert!(regex("^b$", 1 << 20, 1 << 18).unwrap().is_match("b"));
        assert_eq!(count(), None, "outside once nothing is kept");
    }
}
