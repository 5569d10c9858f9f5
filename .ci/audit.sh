#!/usr/bin/env bash
# Dependency audit (issue 6): `cargo audit` of Cargo.lock against the RustSec
# advisory database. Run by .ci/run; runs the same by hand: `bash .ci/audit.sh`.
#
# Which database: the live one (a git repository upstream) when it can be
# fetched; otherwise a local copy named by MCP_REAPER_ADVISORY_DB (a directory
# of `crates/<name>/RUSTSEC-*.md`, with an optional CHECKED list of the crates
# it was assembled for). With neither, the audit cannot run: it says so in a
# banner and exits 0 — a network without GitHub must not fail every build, and
# the log must not pretend an audit happened. None is vendored here.
#
# Policy (what fails the run):
#   vulnerability            fails. Fix: `cargo update -p <crate>` to a patched
#                            version, or a justified `ignore` in .cargo/audit.toml.
#   informational "unsound"  fails (-D unsound): a memory-safety bug reachable
#                            from safe code, in a daemon that runs as root and
#                            sends signals; the fix is almost always a
#                            semver-compatible update.
#   yanked                   fails (-D yanked): the publisher withdrew that
#                            version; `cargo update -p <crate>`. Checked against
#                            cargo's local crates.io index cache, refreshed by
#                            the cargo build/test steps that run first.
#   "unmaintained", "notice" printed, does not fail: not a defect in the code we
#                            run and no update fixes it; replacing a dependency
#                            is a decision for an issue, not a red CI.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
deny=(--deny unsound --deny yanked)

upstream=https://github.com/rustsec/advisory-db
online_db="${CARGO_HOME:-$HOME/.cargo}/advisory-db"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

install_audit() {
    # Installed from crates.io when missing; later runs on the same machine reuse
    # ~/.cargo/bin. --debug: about 4 minutes of compiling on 2 cores instead of
    # about 13 for a release build, and auditing one Cargo.lock takes under a second
    # either way.
    if ! cargo audit --version >/dev/null 2>&1; then
        echo "audit: installing cargo-audit from crates.io"
        cargo install cargo-audit --locked --debug
    fi
    echo "audit: $(cargo audit --version)"
}

# 1. The live database, if its repository answers within a short time.
if command -v git >/dev/null 2>&1 && timeout 15 git ls-remote "$upstream" HEAD >/dev/null 2>&1; then
    install_audit
    echo "audit: trying the live advisory DB: $upstream"
    set +e
    timeout 300 cargo audit --db "$online_db" "${deny[@]}" 2>&1 | tee "$work/online.log"
    rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" -ne 124 ] && ! grep -q "couldn't fetch advisory database" "$work/online.log"; then
        echo "audit: advisory DB used: live upstream, commit" \
            "$(git -C "$online_db" log -1 --format='%H of %cs' 2>/dev/null || echo '?')"
        echo "audit: exit $rc after $((SECONDS - start)) s"
        exit "$rc"
    fi
    echo "audit: the live DB could not be fetched; falling back to a local copy"
else
    echo "audit: $upstream is unreachable from here (no network beyond package registries)"
fi

# 2. A local copy, copied out so the audit writes nothing into it.
snapshot=${MCP_REAPER_ADVISORY_DB:-}
if [ -z "$snapshot" ] || [ ! -d "$snapshot/crates" ]; then
    echo "audit: ================================================================"
    echo "audit: NOT AUDITED: no advisory database is reachable (the live one is on"
    echo "audit: GitHub) and MCP_REAPER_ADVISORY_DB names no local copy."
    echo "audit: ================================================================"
    exit 0
fi
install_audit
cp -r "$snapshot" "$work/advisory-db"
newest=$(grep -rh '^date = ' "$snapshot/crates" | sort | tail -n 1 | cut -d'"' -f2)
count=$(find "$snapshot/crates" -name 'RUSTSEC-*.md' | wc -l)
echo "audit: ================================================================"
echo "audit: advisory DB used: LOCAL COPY $snapshot ($count advisories,"
echo "audit: newest dated $newest). Advisories published after that date, or for"
echo "audit: crates it lacks, are NOT checked."
echo "audit: ================================================================"

# Crates from crates.io in Cargo.lock that the snapshot was not assembled for.
uncovered=$(
    awk '/^\[\[package\]\]/ { name = "" }
         /^name = /         { name = $3 }
         /^source = "registry\+/ { gsub(/"/, "", name); print name }' Cargo.lock |
        sort -u | comm -23 - <(grep -sv '^#' "$snapshot/CHECKED" | sort -u)
)
if [ -n "$uncovered" ]; then
    echo "audit: WARNING: the snapshot has no data for these Cargo.lock crates" \
        "(NOT checked): $(tr '\n' ' ' <<<"$uncovered")"
fi

set +e
cargo audit --db "$work/advisory-db" --no-fetch "${deny[@]}"
rc=$?
set -e
echo "audit: exit $rc after $((SECONDS - start)) s"
exit "$rc"
