//! How interpreters and launchers name the program they run: which options
//! take a value (so the program is not mistaken for one), which subcommands
//! run a package, a script or a command. From each tool's own `--help` and the
//! launch chains measured in `shared/docs/hosts.md`.

/// Interpreters: the program is their script, module, jar or main class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interp {
    Node,
    Python,
    Java,
    Ruby,
    Perl,
    /// `tsx`/`ts-node`: a script after options.
    TsRunner,
}

pub fn interpreter(base: &str) -> Option<Interp> {
    let versioned = |prefix: &str| {
        base.strip_prefix(prefix).is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
    };
    Some(match base {
        "node" | "nodejs" => Interp::Node,
        "java" => Interp::Java,
        "ruby" => Interp::Ruby,
        "perl" => Interp::Perl,
        "tsx" | "ts-node" | "ts-node-esm" => Interp::TsRunner,
        _ if versioned("python") || versioned("pypy") || versioned("node") => {
            if base.starts_with("node") {
                Interp::Node
            } else {
                Interp::Python
            }
        }
        _ => return None,
    })
}

/// Options that take the next word as their value, per interpreter.
pub fn interp_value_opts(i: Interp) -> &'static [&'static str] {
    match i {
        Interp::Node => &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
            "-C",
            "--conditions",
            "--title",
            "--env-file",
            "--inspect-port",
            "--input-type",
            "--stack-size",
        ],
        Interp::Python => &["-W", "-X", "-Q"],
        Interp::Java => &[
            "-cp",
            "-classpath",
            "--class-path",
            "-p",
            "--module-path",
            "--add-opens",
            "--add-exports",
            "--add-modules",
            "--add-reads",
            "--upgrade-module-path",
            "--limit-modules",
            "--patch-module",
        ],
        Interp::Ruby | Interp::Perl => &["-I", "-r", "-C"],
        Interp::TsRunner => &["-r", "--require", "--tsconfig", "-P", "--project", "--import", "-C", "--compiler"],
    }
}

/// Options meaning "the code is in argv": no script to name.
pub fn inline_opts(i: Interp) -> &'static [&'static str] {
    match i {
        Interp::Node | Interp::TsRunner => &["-e", "--eval", "-p", "--print"],
        Interp::Python => &["-c"],
        Interp::Ruby | Interp::Perl => &["-e", "-E"],
        Interp::Java => &[],
    }
}

/// Scripts node runs that are package tools themselves (`node …/pnpm.cjs dlx`,
/// `node …/npm-cli.js exec`): handled as that tool.
pub fn node_tool(script_base: &str) -> Option<&'static str> {
    let stem = script_base.trim_end_matches(".js").trim_end_matches(".cjs").trim_end_matches(".mjs");
    Some(match stem {
        "npm-cli" | "npm" => "npm",
        "npx-cli" | "npx" => "npx",
        "pnpm" => "pnpm",
        "pnpx" => "pnpx",
        "yarn" => "yarn",
        "tsx" => "tsx",
        _ => return None,
    })
}

/// Launchers that are Python scripts an interpreter may be seen running
/// (a shebang read by `python3`, or called through it): handled as that
/// launcher, never as a script of that name.
pub fn python_tool(script_base: &str) -> bool {
    matches!(script_base, "pipx" | "uvx" | "uv" | "poetry" | "pipenv" | "pdm" | "hatch" | "rye")
}

/// npm, npx and pnpm options that take a value.
pub const NPM_OPTS: &[&str] =
    &["--prefix", "-C", "--dir", "-w", "--workspace", "--filter", "-F", "--package", "-p", "-c", "--call", "--cache"];

/// uv's global and `run`/`tool run` options that take a value.
pub const UV_OPTS: &[&str] = &[
    "--directory",
    "--project",
    "--cache-dir",
    "--config-file",
    "--python",
    "-p",
    "--color",
    "--with",
    "--with-editable",
    "--with-requirements",
    "--from",
    "--index",
    "--index-url",
    "--extra-index-url",
    "--default-index",
    "--find-links",
    "-f",
    "--constraints",
    "--overrides",
    "--build-constraints",
    "--env-file",
    "--package",
    "--extra",
    "--group",
    "--allow-insecure-host",
    "--python-preference",
    "--index-strategy",
    "--keyring-provider",
    "--resolution",
    "--prerelease",
    "--exclude-newer",
    "--link-mode",
    "--refresh-package",
    "--reinstall-package",
    "--upgrade-package",
    "-P",
    "-w",
    "--no-group",
    "--only-group",
    "--fork-strategy",
    "--config-setting",
    "-C",
    "--python-platform",
    "--exclude-newer-package",
    "--no-build-isolation-package",
    "--no-binary-package",
    "--no-build-package",
    "--no-sources-package",
];

/// pipx `run` options that take a value.
pub const PIPX_OPTS: &[&str] = &["--spec", "--python", "--pip-args", "--index-url", "-i", "--backend"];

/// bun options that take a value.
pub const BUN_OPTS: &[&str] =
    &["--cwd", "--env-file", "--preload", "-r", "--config", "-c", "--tsconfig-override", "--port"];

/// deno `run` options that take a value (most use `=`).
pub const DENO_OPTS: &[&str] =
    &["--config", "-c", "--import-map", "--location", "--lock", "--cert", "--env-file", "--seed"];

/// Container engines' global options that take a value.
pub const ENGINE_GLOBAL_OPTS: &[&str] = &[
    "-H",
    "--host",
    "--context",
    "-c",
    "--config",
    "-l",
    "--log-level",
    "--tlscacert",
    "--tlscert",
    "--tlskey",
    "--url",
    "--connection",
    "--root",
    "--runroot",
    "--storage-driver",
    "--cgroup-manager",
    "--events-backend",
    "--runtime",
    "--tmpdir",
    "--identity",
    "--module",
];

/// `docker run` / `podman run` options that take a value.
pub const RUN_OPTS: &[&str] = &[
    "-a",
    "--attach",
    "--add-host",
    "--annotation",
    "--blkio-weight",
    "--cap-add",
    "--cap-drop",
    "--cgroup-parent",
    "--cgroupns",
    "--cidfile",
    "--cpu-period",
    "--cpu-quota",
    "--cpu-shares",
    "-c",
    "--cpus",
    "--cpuset-cpus",
    "--device",
    "--dns",
    "--dns-option",
    "--dns-search",
    "--entrypoint",
    "-e",
    "--env",
    "--env-file",
    "--expose",
    "--gpus",
    "--group-add",
    "--health-cmd",
    "--health-interval",
    "--health-retries",
    "--health-timeout",
    "-h",
    "--hostname",
    "--ip",
    "--ip6",
    "--ipc",
    "--isolation",
    "-l",
    "--label",
    "--label-file",
    "--link",
    "--log-driver",
    "--log-opt",
    "--mac-address",
    "-m",
    "--memory",
    "--memory-swap",
    "--mount",
    "--name",
    "--network",
    "--net",
    "--network-alias",
    "--pid",
    "--pids-limit",
    "--platform",
    "-p",
    "--publish",
    "--pull",
    "--restart",
    "--runtime",
    "--security-opt",
    "--shm-size",
    "--stop-signal",
    "--stop-timeout",
    "--storage-opt",
    "--sysctl",
    "--tmpfs",
    "-u",
    "--user",
    "--ulimit",
    "--userns",
    "--uts",
    "-v",
    "--volume",
    "--volumes-from",
    "-w",
    "--workdir",
    "--arch",
    "--os",
    "--secret",
    "--pod",
];

/// Short `run` flags that take a value, for grouped flags such as `-ite`.
pub const RUN_SHORT_VALUE: &str = "aechlmpuvw";

/// Project and task runners that stay alive as the parent of the command
/// they run: the program is that command. Options taking a value listed.
pub fn runner(base: &str) -> Option<&'static [&'static str]> {
    Some(match base {
        "poetry" | "pipenv" | "pdm" | "hatch" | "rye" => &["-C", "--directory", "--project", "-P"],
        "conda" | "mamba" | "micromamba" => &["-n", "--name", "-p", "--prefix", "--cwd"],
        "timeout" => &["-s", "--signal", "-k", "--kill-after"],
        "volta" => &["--node", "--npm", "--yarn", "--pnpm"],
        "mise" | "rtx" => &["-C", "--cd", "-E", "--env", "-j", "--jobs"],
        _ => return None,
    })
}

/// Shells: `sh -c STRING` and `sh SCRIPT`.
pub fn is_shell(base: &str) -> bool {
    matches!(base, "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "fish")
}
