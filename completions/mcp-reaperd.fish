complete -c mcp-reaperd -l config -d 'Config file (default: /etc/mcp-reaper/config.toml for root, ~/.config/mcp-reaper/config.toml otherwise; drop-ins in config.d/ beside it). `-` means the embedded default alone' -r -F
complete -c mcp-reaperd -l scope -d 'Only consider descendants of PID, treating PID as an adopter' -r
complete -c mcp-reaperd -l socket -d 'Control socket path (overrides `daemon.socket`)' -r -F
complete -c mcp-reaperd -l state-file -d 'Grace state file (overrides `daemon.state_file`)' -r -F
complete -c mcp-reaperd -l log-level -d 'Log level: error, warn, info, debug, trace' -r
complete -c mcp-reaperd -l log-target -d 'Where logs go' -r -f -a "auto\t'journald when started by systemd with its output on the journal (`JOURNAL_STREAM` set), stderr otherwise'
journald\t''
stderr\t''"
complete -c mcp-reaperd -l color -d 'Colours in log lines on stderr: auto (a terminal, and `NO_COLOR` unset or empty), always, never' -r -f -a "auto\t'When stderr is a terminal and `NO_COLOR` is unset or empty (<https://no-color.org>)'
always\t''
never\t''"
complete -c mcp-reaperd -l once -d 'Run one cycle (scan, judge, terminate, report) and exit: what a systemd timer runs'
complete -c mcp-reaperd -l dry-run -d 'Walk the whole decision path but send no signal (overrides `mode`)'
complete -c mcp-reaperd -l no-events -d 'Don\'t subscribe to kernel process events: watch hosts with pidfds and scan every interval (what a non-root daemon does anyway)'
complete -c mcp-reaperd -l json -d 'With --once: print the outcomes as JSON on stdout'
complete -c mcp-reaperd -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcp-reaperd -s V -l version -d 'Print version'
