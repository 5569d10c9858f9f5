//! Every configuration key, declared once. The table at the bottom generates,
//! per key: its field in the file layer (with its span), the merge of two
//! layers, the check into the draft, the move into [`Config`] (an error if a
//! required key has no value even in the embedded default), and the line
//! the reload log shows when it changed. A new key is one line here, its
//! field in [`Config`] and its documentation in `config/default.toml`.
//!
//! A line reads `key: Kind [= bounds] => place in Config [, optional];`.
//! The kinds and their checks are in [`super::kinds`].

use super::kinds::{FilePath, Kind, ListenAddr, RegexList, RoleList, SocketList, SocketPath};
use super::layer::Layer;
use super::{Config, ConfigErrors, Mode};

/// `()` when a key declares no bounds.
macro_rules! bounds {
    () => {
        ()
    };
    ($b:expr) => {
        $b
    };
}

/// Moves a drafted value into its place: required unless `optional`.
macro_rules! place {
    ($place:expr, $v:expr, $name:expr) => {
        $place = $v.ok_or_else(|| super::missing($name))?
    };
    ($place:expr, $v:expr, $name:expr, optional) => {
        $place = $v
    };
}

/// The reload log's line for one key.
macro_rules! diff_line {
    ($kind:ty, $label:expr, $old:expr, $new:expr) => {
        <$kind as Kind>::diff($label, $old, $new)
    };
    ($kind:ty, $label:expr, $old:expr, $new:expr, optional) => {{
        let (old, new) =
            (crate::config::kinds::shown_opt($old.as_ref()), crate::config::kinds::shown_opt($new.as_ref()));
        (old != new).then(|| format!("{}: {} -> {}", $label, old, new))
    }};
}

macro_rules! keys {
    ($(
        [$section:ident] {
            $( $key:ident : $kind:ty $(= $bounds:expr)? => $($place:ident).+ $(, $opt:ident)? ; )*
        }
    )*) => {
        /// Sections and their keys, in the order error messages list them.
        pub(super) const SECTIONS: &[(&str, &[&str])] = &[$( (stringify!($section), &[$(stringify!($key)),*]) ),*];

        $(
            /// One section's structs.
            pub(super) mod $section {
                #[allow(clippy::wildcard_imports)]
                use super::*;

                /// The section as one file wrote it: every key optional, with its span.
                #[derive(serde::Deserialize, Default)]
                #[serde(deny_unknown_fields)]
                pub(in super::super) struct File {
                    $( pub(in super::super) $key: Option<toml::Spanned<<$kind as Kind>::File>>, )*
                }

                impl File {
                    /// Keys this one lacks are taken from `other`.
                    pub(in super::super) fn merge(&mut self, other: File) {
                        $( self.$key = self.$key.take().or(other.$key); )*
                    }
                }

                /// The section's checked values so far, the last layer's winning.
                #[derive(Default)]
                pub(in super::super) struct Draft {
                    $( pub(in super::super) $key: Option<<$kind as Kind>::Value>, )*
                }
            }
        )*

        /// One file's values.
        #[derive(Default)]
        pub(super) struct FileLayer {
            $( $section: Option<$section::File>, )*
        }

        /// Values as they are merged, before they are known to be complete.
        #[derive(Default)]
        pub(super) struct Draft {
            $( $section: $section::Draft, )*
        }

        /// Deserializes a table holding one key of `section` into `layer`.
        pub(super) fn read_key(
            layer: &mut FileLayer,
            section: &str,
            de: toml::de::Deserializer<'_>,
        ) -> Result<(), toml::de::Error> {
            use serde::Deserialize as _;
            match section {
                $( stringify!($section) => {
                    $section::File::deserialize(de).map(|f| layer.$section.get_or_insert_default().merge(f))
                } )*
                // `parse_layer` only passes the sections of SECTIONS.
                _ => Ok(()),
            }
        }

        /// Checks every key a file set and keeps the good values in `draft`.
        pub(super) fn apply(draft: &mut Draft, file: FileLayer, l: &mut Layer<'_>) {
            $( if let Some(f) = file.$section {
                $( if let Some(v) = f.$key {
                    let key = concat!(stringify!($section), ".", stringify!($key));
                    if let Some(ok) = <$kind as Kind>::check(l, v, key, bounds!($($bounds)?)) {
                        draft.$section.$key = Some(ok);
                    }
                } )*
            } )*
        }

        /// Moves every drafted value into `c`.
        pub(super) fn finish(draft: Draft, c: &mut Config) -> Result<(), ConfigErrors> {
            $( $(
                place!(c.$($place).+, draft.$section.$key, concat!(stringify!($section), ".", stringify!($key)) $(, $opt)?);
            )* )*
            Ok(())
        }

        /// The reload log's lines for every key that differs.
        pub(super) fn diff(old: &Config, new: &Config) -> Vec<String> {
            let mut out = Vec::new();
            $( $(
                let label = [$(stringify!($place)),+].join(".");
                out.extend(diff_line!($kind, &label, &old.$($place).+, &new.$($place).+ $(, $opt)?));
            )* )*
            out
        }
    };
}

keys! {
    [reaper] {
        mode: Mode => mode;
        interval_secs: u64 = 1..=86_400 => interval_secs;
        quiet_interval_secs: u64 = 1..=86_400 => quiet_interval_secs;
        grace_secs: u64 = 0..=604_800 => grace_secs;
        term_timeout_secs: f64 = 0.05..=300.0 => term_timeout_secs;
        reap_stale_hosts: bool => reap_stale_hosts;
        reap_other_pid_namespaces: bool => reap_other_pid_namespaces;
        reap_abandoned: bool => reap_abandoned;
        // u32::MAX is (uid_t)-1, "no uid": a floor no user can reach.
        min_uid: u32 = 0..=i128::from(u32::MAX - 1) => min_uid;
    }
    [patterns] {
        hosts: RoleList => patterns.hosts;
        servers: RoleList => patterns.servers;
        launchers: RoleList => patterns.launchers;
        adopters: RoleList => patterns.adopters;
        protect: RoleList => patterns.protect;
        bystanders: RoleList => patterns.bystanders;
    }
    [hosts] {
        read_configs: bool => read_host_configs;
        read_programs: bool => read_server_programs;
    }
    [daemon] {
        socket: SocketPath => socket, optional;
        state_file: FilePath => state_file, optional;
        metrics_textfile: FilePath => metrics_textfile, optional;
    }
    [metrics] {
        listen: ListenAddr => metrics_listen, optional;
    }
    [redact] {
        enabled: bool => redact.enabled;
        patterns: RegexList => redact.patterns;
        extra_patterns: RegexList => redact.extra_patterns;
    }
    [pressure] {
        enabled: bool => pressure.enabled;
        some_avg10_percent: f64 = 0.1..=100.0 => pressure.some_avg10_percent;
        path: FilePath => pressure.path, optional;
    }
    [notify] {
        desktop: bool => notify.desktop;
    }
    [containers] {
        stop_containers: bool => containers.stop;
        engine_sockets: SocketList => containers.engine_sockets;
    }
    [generations] {
        end_idle: bool => generations.end_idle;
        keep_newest: u64 = 1..=1000 => generations.keep_newest;
        idle_secs: u64 = 1..=604_800 => generations.idle_secs;
        respawn_guard_secs: u64 = 1..=3600 => generations.respawn_guard_secs;
        sample_secs: u64 = 1..=3600 => generations.sample_secs;
        notify_copies: u64 = 0..=1_000_000 => generations.notify_copies;
        notify_memory_mib: u64 = 0..=16_777_216 => generations.notify_memory_mib;
    }
}
