#!/usr/bin/env bash
# Which capabilities does the system daemon need? Runs probe.c as root with
# only the listed capabilities in its bounding set (what systemd's
# CapabilityBoundingSet= does for a root service) against a process of
# another uid, plus the namespace cases that rule out PrivateNetwork= with
# the proc connector and PrivateUsers=. Needs root and a C compiler.
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "run as root" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'kill "$target" 2>/dev/null || true; rm -rf "$tmp"' EXIT
cc -O1 -o "$tmp/probe" "$here/probe.c"
chmod 755 "$tmp" "$tmp/probe"
setpriv --reuid 1001 --regid 1001 --clear-groups sleep 300 </dev/null >/dev/null 2>&1 &
target=$!
sleep 0.3
echo "target: pid $target, uid 1001 ($(readlink /proc/$target/exe 2>/dev/null || echo '?'))"
for caps in -all -all,+kill -all,+sys_ptrace -all,+dac_read_search \
    -all,+sys_ptrace,+dac_read_search -all,+kill,+sys_ptrace,+dac_read_search \
    -all,+net_admin; do
    echo "== root, bounding set ${caps}"
    setpriv --bounding-set "$caps" --inh-caps=-all "$tmp/probe" "$target" net | sed 's/^/   /'
done
echo "== root, full capabilities, private network namespace (PrivateNetwork=yes)"
unshare -n "$tmp/probe" "$target" net | sed 's/^/   /'
echo "== root in a new user namespace (PrivateUsers=yes)"
unshare -U -r "$tmp/probe" "$target" | sed 's/^/   /'
echo "== uid 1001 (a user daemon), same-uid target"
setpriv --reuid 1001 --regid 1001 --clear-groups "$tmp/probe" "$target" net | sed 's/^/   /'
echo "== uid 1001 in a new user namespace (what mount sandboxing implies in a user unit)"
setpriv --reuid 1001 --regid 1001 --clear-groups unshare -U "$tmp/probe" "$target" | sed 's/^/   /'
