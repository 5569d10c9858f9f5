#!/bin/sh
# The mcp-reaper devcontainer Feature's entrypoint: starts mcp-reaperd in the
# background and returns at once. The dev container's own entrypoint runs
# each Feature's entrypoint as one line of its script before it execs the
# container's command, so this must never wait for the daemon; its output
# goes to a log file for the same reason (and since there is no journald).
#
# Run it again (a postStartCommand, by hand): a daemon that already answers
# is left alone.
set -u

config=/etc/mcp-reaper/config.toml
if [ "$(id -u)" = 0 ]; then
    log=/var/log/mcp-reaper.log
else
    # A container that runs as a user: a user daemon (it reaps only that
    # user's trees), its log beside its state.
    dir=${XDG_STATE_HOME:-${HOME:-/tmp}/.local/state}/mcp-reaper
    mkdir -p "$dir"
    log=$dir/mcp-reaperd.log
fi
mkdir -p "$(dirname "$log")"

if /usr/local/bin/reaperctl --config "$config" status >/dev/null 2>&1; then
    exit 0
fi
/usr/local/bin/mcp-reaperd --config "$config" --log-target stderr </dev/null >>"$log" 2>&1 &
exit 0
