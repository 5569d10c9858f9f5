# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_reaperctl_global_optspecs
    string join \n config= socket= h/help V/version
end

function __fish_reaperctl_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_reaperctl_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_reaperctl_using_subcommand
    set -l cmd (__fish_reaperctl_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c reaperctl -n "__fish_reaperctl_needs_command" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_needs_command" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -s V -l version -d 'Print version'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "scan" -d 'Read-only audit of the machine now: every MCP server tree and its verdict'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "hosts" -d 'The MCP servers the hosts\' own config files name, per user and host, with the files (read now, like `scan`; see `[hosts]` in mcp-reaper.toml(5))'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "generations" -d 'Each live host\'s server copies by command and generation (copies started together), with memory, CPU time, I/O, whether the host still holds each copy\'s transport and, when the daemon answers, how long each was idle (read now, like `scan`; nothing is signalled unless `--end HOST_PID` asks to end that host\'s old idle copies)'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "validate" -d 'Check a config file; print "ok" or every problem found'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "config" -d 'Print the effective configuration (the embedded default, the main file and its drop-ins merged), each value with the file and line it comes from'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "doctor" -d 'Check what the reaper needs from this machine (the platform and who adopts orphans there, privileges, pidfds, process events, hidepid, cgroups, journald, memory pressure, engine sockets, the daemon) and what each missing part costs'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "status" -d 'What the running daemon sees and has done'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "reload" -d 'Ask the daemon to reload its configuration'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "reap-now" -d 'Ask the daemon to run a cycle now and print what it did'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "metrics" -d 'Print the daemon\'s counters in Prometheus text format'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "history" -d 'What was reaped, when, and what it returned: the ledger beside the state file, with the totals since it began'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "run" -d 'Run a host in a session nothing it starts can leave; end what it leaves behind when it exits. E.g. `alias claude=\'reaperctl run -- claude\'`'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "session-end" -d 'From a host\'s session-end hook (JSON on stdin): tell the daemon the host is ending on purpose, so its trees are reaped as soon as it exits, without grace'
complete -c reaperctl -n "__fish_reaperctl_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand scan" -l scope -d 'Judge only descendants of PID, treating PID as an adopter' -r
complete -c reaperctl -n "__fish_reaperctl_using_subcommand scan" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand scan" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand scan" -l json -d 'Print the stable JSON form (see docs/json.md) instead of the human view'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand scan" -l exit-code -d 'Exit 1 when a tree would be reaped now, 0 when none would (as `git diff --exit-code`)'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand scan" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand hosts" -l scope -d 'Judge only descendants of PID, treating PID as an adopter' -r
complete -c reaperctl -n "__fish_reaperctl_using_subcommand hosts" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand hosts" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand hosts" -l json -d 'Print the stable JSON form (see docs/json.md) instead of the human view'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand hosts" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand generations" -l scope -d 'Judge only descendants of PID, treating PID as an adopter' -r
complete -c reaperctl -n "__fish_reaperctl_using_subcommand generations" -l end -d 'End this host\'s old idle copies, as the user running reaperctl: the newest `[generations] keep_newest` per command, the only copy, a copy that did I/O or used CPU, or with a request waiting in its stdin, are kept. Idle by the daemon\'s samples when it answers, else by two looks `--sample-secs` apart' -r
complete -c reaperctl -n "__fish_reaperctl_using_subcommand generations" -l sample-secs -d 'With `--end` and no daemon\'s samples: seconds between the two looks at each copy\'s counters (a copy whose counters moved is busy)' -r
complete -c reaperctl -n "__fish_reaperctl_using_subcommand generations" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand generations" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand generations" -l json -d 'Print the stable JSON form (see docs/json.md) instead of the human view'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand generations" -l dry-run -d 'With `--end`: print exactly what would end, and signal nothing'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand generations" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand validate" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand validate" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand validate" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand config" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand config" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand config" -l json -d 'Print every key as JSON: section, key, value, from (file), line'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand config" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand doctor" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand doctor" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand doctor" -l json -d 'Print the checks as JSON'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand status" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand status" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand status" -l json -d 'Print the daemon\'s JSON status'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand status" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand reload" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand reload" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand reload" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand reap-now" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand reap-now" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand reap-now" -l dry-run -d 'Decide and report, but signal nothing'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand reap-now" -l json -d 'Print the outcomes as JSON'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand reap-now" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand metrics" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand metrics" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand metrics" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand history" -l since -d 'Only what was reaped in the last DURATION: a number and a unit, s, m, h, d or w (`30d`, `12h`)' -r
complete -c reaperctl -n "__fish_reaperctl_using_subcommand history" -l state-file -d 'Read the ledger beside this state file (`history.json` in its directory), as a daemon started with `mcp-reaperd --state-file PATH` writes it; the daemon is not asked' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand history" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand history" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand history" -l json -d 'Print the ledger as JSON (entries, their totals, the lifetime totals)'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand history" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand run" -l grace -d 'Seconds the session\'s leftovers get after the host exits, before they are sent SIGTERM (then SIGKILL after the configured `term_timeout_secs`). The wrapper returns as soon as nothing is left' -r
complete -c reaperctl -n "__fish_reaperctl_using_subcommand run" -l memory-max -d 'Limit the session\'s memory (cgroup memory.max), e.g. 4G, 512M, 1073741824. Needs the memory controller: in the cgroup v2 hierarchy, or (a hybrid system) in the v1 one, where a v1 memory cgroup of the session\'s own is limited instead (swap is not limited, as with memory.max). `run` refuses to start rather than run without the limit' -r
complete -c reaperctl -n "__fish_reaperctl_using_subcommand run" -l cgroup-parent -d 'Make the session\'s cgroup below this cgroup v2 directory (one delegated to you) instead of below your own cgroup' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand run" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand run" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand run" -l no-cgroup -d 'Use no cgroup: the session is the wrapper\'s descendants only (a child subreaper)'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand run" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand session-end" -l host -d 'The host is this process instead of the nearest host ancestor' -r
complete -c reaperctl -n "__fish_reaperctl_using_subcommand session-end" -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand session-end" -l socket -d 'Control socket of the daemon (default: from the config, else /run/mcp-reaper/control.sock for root, $XDG_RUNTIME_DIR/mcp-reaper/control.sock otherwise)' -r -F
complete -c reaperctl -n "__fish_reaperctl_using_subcommand session-end" -s h -l help -d 'Print help'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "scan" -d 'Read-only audit of the machine now: every MCP server tree and its verdict'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "hosts" -d 'The MCP servers the hosts\' own config files name, per user and host, with the files (read now, like `scan`; see `[hosts]` in mcp-reaper.toml(5))'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "generations" -d 'Each live host\'s server copies by command and generation (copies started together), with memory, CPU time, I/O, whether the host still holds each copy\'s transport and, when the daemon answers, how long each was idle (read now, like `scan`; nothing is signalled unless `--end HOST_PID` asks to end that host\'s old idle copies)'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "validate" -d 'Check a config file; print "ok" or every problem found'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "config" -d 'Print the effective configuration (the embedded default, the main file and its drop-ins merged), each value with the file and line it comes from'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "doctor" -d 'Check what the reaper needs from this machine (the platform and who adopts orphans there, privileges, pidfds, process events, hidepid, cgroups, journald, memory pressure, engine sockets, the daemon) and what each missing part costs'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "status" -d 'What the running daemon sees and has done'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "reload" -d 'Ask the daemon to reload its configuration'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "reap-now" -d 'Ask the daemon to run a cycle now and print what it did'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "metrics" -d 'Print the daemon\'s counters in Prometheus text format'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "history" -d 'What was reaped, when, and what it returned: the ledger beside the state file, with the totals since it began'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "run" -d 'Run a host in a session nothing it starts can leave; end what it leaves behind when it exits. E.g. `alias claude=\'reaperctl run -- claude\'`'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "session-end" -d 'From a host\'s session-end hook (JSON on stdin): tell the daemon the host is ending on purpose, so its trees are reaped as soon as it exits, without grace'
complete -c reaperctl -n "__fish_reaperctl_using_subcommand help; and not __fish_seen_subcommand_from scan hosts generations validate config doctor status reload reap-now metrics history run session-end help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
