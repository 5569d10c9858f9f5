//! Kinds of value a key can hold, each with its check: what TOML gives
//! (`File`), what the config keeps (`Value`), the problem reported at the
//! value's position, and how a change shows in reload logs.

use std::fmt::Debug;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::layer::Layer;
use super::{Mode, patterns};

/// A kind of value; see [`super::keys`] for which key has which.
pub(super) trait Kind {
    /// As read from one file (spans inside lists, so an entry's error points at it).
    type File;
    /// As kept in [`super::Config`].
    type Value: Debug;
    /// Limits the key declares (`1..=86_400`); `()` for none.
    type Bounds;
    /// The value, or `None` after reporting its problem under `key`.
    fn check(l: &mut Layer<'_>, v: Spanned<Self::File>, key: &str, bounds: Self::Bounds) -> Option<Self::Value>;
    /// The reload log's line when a value changed.
    fn diff(label: &str, old: &Self::Value, new: &Self::Value) -> Option<String> {
        let (old, new) = (format!("{old:?}"), format!("{new:?}"));
        (old != new).then(|| format!("{label}: {old} -> {new}"))
    }
}

/// An optional value in the reload log: the value itself (quoted and
/// escaped, as a path may hold anything), or "unset"; never Rust's
/// `Some(..)`/`None`.
pub(super) fn shown_opt<T: Debug>(v: Option<&T>) -> String {
    v.map_or_else(|| "unset".to_string(), |v| format!("{v:?}"))
}

/// Taken as it is: serde already refused what is not one.
macro_rules! any_value {
    ($($t:ty),*) => {$(
        impl Kind for $t {
            type File = $t;
            type Value = $t;
            type Bounds = ();
            fn check(_: &mut Layer<'_>, v: Spanned<$t>, _: &str, (): ()) -> Option<$t> {
                Some(v.into_inner())
            }
        }
    )*};
}
any_value!(bool);

/// As the config writes it (`dry-run`), not as Rust names it.
impl Kind for Mode {
    type File = Mode;
    type Value = Mode;
    type Bounds = ();
    fn check(_: &mut Layer<'_>, v: Spanned<Mode>, _: &str, (): ()) -> Option<Mode> {
        Some(v.into_inner())
    }

    fn diff(label: &str, old: &Mode, new: &Mode) -> Option<String> {
        (old != new).then(|| format!("{label}: {old} -> {new}"))
    }
}

/// An integer in a range. Read as i128, so that a value beyond i64 gets the
/// range message, not a type error.
macro_rules! integer {
    ($($t:ty),*) => {$(
        impl Kind for $t {
            type File = i128;
            type Value = $t;
            type Bounds = RangeInclusive<i128>;
            fn check(l: &mut Layer<'_>, v: Spanned<i128>, key: &str, range: RangeInclusive<i128>) -> Option<$t> {
                let n = *v.get_ref();
                if range.contains(&n) {
                    <$t>::try_from(n).ok()
                } else {
                    let (lo, hi) = range.into_inner();
                    l.err(v.span(), key.to_string(), format!("must be between {lo} and {hi} (got {n})"));
                    None
                }
            }
        }
    )*};
}
integer!(u64, u32);

/// A finite number in a range.
impl Kind for f64 {
    type File = f64;
    type Value = f64;
    type Bounds = RangeInclusive<f64>;
    fn check(l: &mut Layer<'_>, v: Spanned<f64>, key: &str, range: RangeInclusive<f64>) -> Option<f64> {
        let x = *v.get_ref();
        if x.is_finite() && range.contains(&x) {
            Some(x)
        } else {
            let (lo, hi) = range.into_inner();
            l.err(v.span(), key.to_string(), format!("must be between {lo} and {hi} (got {x})"));
            None
        }
    }
}

/// A list of regexes, each checked alone (`[redact]`).
pub(super) enum RegexList {}

impl Kind for RegexList {
    type File = Vec<Spanned<String>>;
    type Value = Vec<String>;
    type Bounds = ();
    fn check(l: &mut Layer<'_>, v: Spanned<Self::File>, key: &str, (): ()) -> Option<Vec<String>> {
        let mut ok = Vec::new();
        let mut good = true;
        let embedded = l.is_embedded();
        for (j, pat) in v.into_inner().into_iter().enumerate() {
            let checked = if embedded {
                // Compiled by its tests, not at every start: see `crate::compiled`.
                crate::compiled::vouch(pat.get_ref());
                patterns::check_uncompiled(pat.get_ref())
            } else {
                patterns::check(pat.get_ref())
            };
            match checked {
                Ok(()) => ok.push(pat.into_inner()),
                Err(msg) => {
                    good = false;
                    l.err(pat.span(), format!("{key}[{j}]"), msg);
                }
            }
        }
        good.then_some(ok)
    }

    fn diff(label: &str, old: &Vec<String>, new: &Vec<String>) -> Option<String> {
        (old != new).then(|| format!("{label}: {} -> {} entries", old.len(), new.len()))
    }
}

/// A role list (`[patterns]`): the list compiled together as the matcher
/// will, here where the list has a position; each regex checked alone only
/// to name the bad ones. (A pattern is then bounded by the list's limit on
/// compiled size, not by the per-pattern one as well.)
pub(super) enum RoleList {}

impl Kind for RoleList {
    type File = Vec<Spanned<String>>;
    type Value = Vec<String>;
    type Bounds = ();
    fn check(l: &mut Layer<'_>, v: Spanned<Self::File>, key: &str, (): ()) -> Option<Vec<String>> {
        let span = v.span();
        // The list compiled as a set (once per load: the matcher reuses it)
        // checks every pattern; only when it fails is each compiled alone,
        // to name the bad ones.
        let texts: Vec<String> = v.get_ref().iter().map(|p| p.get_ref().clone()).collect();
        // The embedded default's lists compile (tested): only the matcher
        // compiles them, and only those no later file replaces.
        let compiles = || l.is_embedded() || patterns::check_list(&texts).is_ok();
        if texts.iter().all(|p| patterns::check_uncompiled(p).is_ok()) && compiles() {
            return Some(texts);
        }
        let ok = RegexList::check(l, v, key, ())?;
        match patterns::check_list(&ok) {
            Ok(()) => Some(ok),
            Err(msg) => {
                l.err(span, key.to_string(), msg);
                None
            }
        }
    }

    fn diff(label: &str, old: &Vec<String>, new: &Vec<String>) -> Option<String> {
        RegexList::diff(label, old, new)
    }
}

/// An absolute path of a file the daemon writes.
pub(super) enum FilePath {}

/// A TCP address to listen on (`[metrics] listen`): `IP:PORT`, or a port
/// alone (`9464`, `:9464`) for the loopback address, so that turning it on
/// never opens it to the network by accident.
pub(super) enum ListenAddr {}

impl Kind for ListenAddr {
    type File = String;
    type Value = SocketAddr;
    type Bounds = ();
    fn check(l: &mut Layer<'_>, v: Spanned<String>, key: &str, (): ()) -> Option<SocketAddr> {
        match listen_addr(v.get_ref()) {
            Ok(a) => Some(a),
            Err(msg) => {
                l.err(v.span(), key.to_string(), msg);
                None
            }
        }
    }
}

/// `IP:PORT`, `[IPv6]:PORT`, `PORT` or `:PORT` (loopback).
pub(super) fn listen_addr(text: &str) -> Result<SocketAddr, String> {
    let port = text.strip_prefix(':').unwrap_or(text);
    if let Ok(p) = port.parse::<u16>() {
        return Ok(SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, p)));
    }
    text.parse().map_err(|_| {
        format!(
            "must be IP:PORT (\"127.0.0.1:9464\", \"[::1]:9464\", \"0.0.0.0:9464\") or a port for the loopback address (got {:?})",
            crate::names::printable(text)
        )
    })
}

/// A list of unix socket paths, each checked alone (`[containers]`).
pub(super) enum SocketList {}

impl Kind for SocketList {
    type File = Vec<Spanned<PathBuf>>;
    type Value = Vec<PathBuf>;
    type Bounds = ();
    fn check(l: &mut Layer<'_>, v: Spanned<Self::File>, key: &str, (): ()) -> Option<Vec<PathBuf>> {
        let mut ok = Vec::new();
        let mut good = true;
        for (j, p) in v.into_inner().into_iter().enumerate() {
            match path_problem(p.get_ref(), true) {
                None => ok.push(p.into_inner()),
                Some(msg) => {
                    good = false;
                    l.err(p.span(), format!("{key}[{j}]"), msg);
                }
            }
        }
        good.then_some(ok)
    }
}

/// An absolute path short enough for a unix socket.
pub(super) enum SocketPath {}

impl Kind for FilePath {
    type File = PathBuf;
    type Value = PathBuf;
    type Bounds = ();
    fn check(l: &mut Layer<'_>, v: Spanned<PathBuf>, key: &str, (): ()) -> Option<PathBuf> {
        checked_path(l, v, key, false)
    }
}

impl Kind for SocketPath {
    type File = PathBuf;
    type Value = PathBuf;
    type Bounds = ();
    fn check(l: &mut Layer<'_>, v: Spanned<PathBuf>, key: &str, (): ()) -> Option<PathBuf> {
        checked_path(l, v, key, true)
    }
}

fn checked_path(l: &mut Layer<'_>, v: Spanned<PathBuf>, key: &str, socket: bool) -> Option<PathBuf> {
    match path_problem(v.get_ref(), socket) {
        None => Some(v.into_inner()),
        Some(msg) => {
            l.err(v.span(), key.to_string(), msg);
            None
        }
    }
}

/// Why a configured path cannot work, caught here rather than when the daemon
/// first uses it.
// Debug on purpose: quoted, with a NUL or control character shown as an escape.
#[allow(clippy::unnecessary_debug_formatting)]
fn path_problem(p: &Path, socket: bool) -> Option<String> {
    use std::os::unix::ffi::OsStrExt as _;
    // sun_path is 108 bytes, its last one the terminating NUL.
    const SUN_PATH_MAX: usize = 107;
    let len = p.as_os_str().len();
    if !p.is_absolute() {
        Some(format!("must be an absolute path (got {p:?})"))
    } else if p.as_os_str().as_bytes().contains(&0) {
        Some(format!("must not contain a NUL byte (got {p:?})"))
    } else if socket && len > SUN_PATH_MAX {
        Some(format!("too long for a unix socket ({len} bytes, limit {SUN_PATH_MAX})"))
    } else {
        None
    }
}
