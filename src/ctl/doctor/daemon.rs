//! Whether `mcp-reaperd` runs and answers on its socket, and how it is
//! started where it does not.

use super::check::{Check, ok, warn};
use crate::config::Config;
use crate::ctl::platform::{Kind, Platform};
use crate::ctl::{Cli, proto};

pub fn daemon(cli: &Cli, cfg: &Config, here: &Platform) -> Check {
    let socket = crate::ctl::socket_path(cli, Some(cfg));
    if !socket.exists() {
        return warn(
            "daemon",
            format!("no socket at {}", socket.display()),
            format!("nothing is reaped until mcp-reaperd runs ({})", start_hint(here, crate::paths::is_root())),
        );
    }
    let asked = std::os::unix::net::UnixStream::connect(&socket).map_err(|e| e.to_string()).and_then(|mut s| {
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(3)));
        proto::call(&mut s, &proto::Request { v: proto::VERSION, cmd: proto::Command::Status })
            .map_err(|e| e.to_string())
    });
    match asked {
        Ok(r) => match r.status {
            Some(s) => ok(
                "daemon",
                format!(
                    "mcp-reaperd {} (pid {}), mode {}, events {}, at {}",
                    s.version,
                    s.pid,
                    s.mode,
                    s.event_mode,
                    socket.display()
                ),
            ),
            None => {
                warn("daemon", format!("{} answered without a status", socket.display()), "nothing can be said of it")
            }
        },
        Err(e) => warn(
            "daemon",
            format!("{} does not answer: {e}", socket.display()),
            if here.systemd && crate::paths::is_root() {
                "nothing is reaped until mcp-reaperd runs (`systemctl status mcp-reaper`)"
            } else if here.systemd {
                "nothing is reaped until mcp-reaperd runs (`systemctl --user status mcp-reaper`)"
            } else {
                "nothing is reaped until mcp-reaperd runs (its log says why it stopped)"
            },
        ),
    }
}

/// How the daemon is started where it is not running: systemd's unit where
/// systemd is PID 1 (root's the system unit, a user's the user unit,
/// systemd/user/mcp-reaper.service), else the route docs/install.md gives for
/// the platform.
fn start_hint(here: &Platform, root: bool) -> &'static str {
    match here.kind {
        _ if here.systemd && root => "`systemctl enable --now mcp-reaper`, in dry run first",
        _ if here.systemd => "`systemctl --user enable --now mcp-reaper`, in dry run first",
        Kind::Wsl2 | Kind::Wsl1 => {
            "no systemd here: a `[boot] command=` in /etc/wsl.conf starts it with the distribution, or \
             `systemd=true` there and the unit (docs/install.md, \"WSL2\")"
        }
        Kind::Container | Kind::Toolbox | Kind::Distrobox => {
            "no systemd here: start it in the background from the container's entrypoint, or with the \
             devcontainer Feature (docs/install.md, \"Without systemd\")"
        }
        Kind::Host => {
            "no systemd here: start it in the background from the init's boot scripts \
                       (docs/install.md, \"Without systemd\")"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctl::doctor::fixtures::platform;

    #[test]
    fn where_there_is_no_systemd_the_daemon_check_names_the_route_that_starts_it() {
        assert!(start_hint(&platform(Kind::Wsl2, false, "init"), true).contains("[boot] command="));
        assert!(start_hint(&platform(Kind::Wsl2, true, "systemd"), true).contains("systemctl enable --now mcp-reaper"));
        let user = start_hint(&platform(Kind::Host, true, "systemd"), false);
        assert!(user.contains("systemctl --user enable --now mcp-reaper"), "{user}");
        assert!(start_hint(&platform(Kind::Container, false, "tini"), false).contains("devcontainer Feature"));
    }
}
