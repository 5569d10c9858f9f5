#!/usr/bin/env bash
# Checks the Prometheus alert rules and the Grafana dashboard:
#   - `promtool check rules` on packaging/prometheus/mcp-reaper.rules.yml;
#   - `promtool test rules` on its unit tests (one firing and one quiet case
#     per alert);
#   - every query of packaging/grafana/mcp-reaper.json parses as PromQL
#     (each is checked as a recording rule by `promtool check rules`).
# That the rules and the dashboard name only metrics the daemon exports is
# a cargo test (report::metrics::tests).
#
# promtool comes from Debian's `prometheus` package. When it is not on PATH,
# the package is downloaded (`apt-get download`, no root needed) and only
# promtool is unpacked into target/ci-tools: installing the package would
# also start a Prometheus server on the machine.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
rules="$repo/packaging/prometheus/mcp-reaper.rules.yml"
tests="$repo/packaging/prometheus/mcp-reaper.rules.test.yml"
dashboard="$repo/packaging/grafana/mcp-reaper.json"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

promtool=$(command -v promtool || true)
if [[ -z "$promtool" ]]; then
    tools="$repo/target/ci-tools"
    promtool="$tools/usr/bin/promtool"
    if [[ ! -x "$promtool" ]]; then
        echo "check-prometheus: promtool not found; unpacking it from Debian's prometheus package into $tools"
        (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1) || {
            [[ $(id -u) -eq 0 ]] && apt-get update -qq && (cd "$work" && apt-get download -qq prometheus)
        }
        mkdir -p "$tools"
        dpkg-deb -x "$work"/prometheus_*.deb "$work/x"
        install -D -m 0755 "$work/x/usr/bin/promtool" "$promtool"
    fi
fi
"$promtool" --version 2>&1 | head -1

"$promtool" check rules "$rules"
(cd "$(dirname "$tests")" && "$promtool" test rules "$(basename "$tests")")

# The dashboard's queries, as recording rules promtool parses.
if ! command -v python3 >/dev/null 2>&1; then
    echo "check-prometheus: python3 not found; the dashboard's queries are NOT checked" >&2
    exit 0
fi
queries="$work/dashboard-queries.yml"
python3 - "$dashboard" >"$queries" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
assert exprs, "the dashboard has no queries"
print("groups:\n  - name: dashboard\n    rules:")
for i, e in enumerate(exprs):
    print(f"      - record: dashboard:query_{i}\n        expr: {json.dumps(e)}")
PY
"$promtool" check rules "$queries" | sed 's/^/dashboard: /'
echo "check-prometheus: rules, their tests and the dashboard's queries are good"
