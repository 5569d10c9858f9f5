#!/usr/bin/env bash
# Builds the Debian package with cargo-deb and checks it:
#   - the expected files are in it, the config files are conffiles;
#   - the maintainer scripts enable/start mcp-reaper.service only (not the
#     conflicting one-shot timer);
#   - the units in it are the ones in systemd/;
#   - unpacked into a temporary root, its binaries run and its config
#     validates.
#
# Usage: packaging/check-deb.sh [--no-build]
#   --no-build  package target/release as it is (cargo deb --no-build);
#               by default cargo deb builds it first (a no-op when fresh)
# Installs cargo-deb (`cargo install cargo-deb --locked`) when missing.
# Prints the path of the .deb on its last line.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
deb_flags=()
case "${1:-}" in
    --no-build) deb_flags+=(--no-build) ;;
    "") ;;
    *) echo "usage: $0 [--no-build]" >&2; exit 2 ;;
esac

if ! cargo deb --version >/dev/null 2>&1; then
    echo "check-deb: installing cargo-deb"
    cargo install cargo-deb --locked
fi
command -v dpkg-deb >/dev/null || { echo "check-deb: dpkg-deb not found (Debian/Ubuntu only)" >&2; exit 2; }

# Builds target/release first when needed (a no-op after `cargo build --release`).
if ! out=$(cargo deb "${deb_flags[@]}" 2>&1); then
    echo "$out" >&2
    echo "check-deb: cargo deb failed" >&2
    exit 1
fi
deb=$(tail -n 1 <<<"$out")
[[ -f "$deb" ]] || { echo "$out" >&2; echo "check-deb: cargo deb did not name a package" >&2; exit 1; }
echo "check-deb: built $deb"

status=0
fail() { echo "FAIL $*"; status=1; }

# ---- file list -------------------------------------------------------------------
listing=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')
expected=(
    /usr/bin/mcp-reaperd
    /usr/bin/reaperctl
    /etc/mcp-reaper/config.toml
    /etc/mcp-reaper/config.d/
    /etc/mcp-reaper/config.d/README
    /usr/lib/systemd/system/mcp-reaper.service
    /usr/lib/systemd/system/mcp-reaper-once.service
    /usr/lib/systemd/system/mcp-reaper-once.timer
    /usr/lib/systemd/system/mcp-reaper-metrics.socket
    /usr/lib/systemd/user/mcp-reaper.service
    /usr/share/doc/mcp-reaper/README.md
    /usr/share/doc/mcp-reaper/packaging/README.md
    /usr/share/doc/mcp-reaper/docs/design.md
    /usr/share/doc/mcp-reaper/docs/evidence.md
    /usr/share/doc/mcp-reaper/default.toml
    /usr/share/doc/mcp-reaper/copyright
    /usr/share/doc/mcp-reaper/changelog.Debian.gz
    /usr/share/doc/mcp-reaper/README.Debian
    /usr/share/doc/mcp-reaper/examples/notify-reload.conf
    /usr/share/doc/mcp-reaper/examples/proc-connector.conf
)
for p in "${expected[@]}"; do
    grep -qxF "$p" <<<"$listing" || fail "missing from package: $p"
done
# The packaging tool falls back to the package's name for a unit type a
# unit lacks: a copy of the daemon's unit under the socket's name.
grep -qxF /usr/lib/systemd/system/mcp-reaper-metrics.service <<<"$listing" &&
    fail "a mcp-reaper-metrics.service is in the package"
# Man pages and shell completions (generated into man/ and completions/ by
# `UPDATE_DOCS=1 cargo test --test docs`): warn, not fail, when one is not in
# the package (its line missing from [package.metadata.deb] assets in Cargo.toml).
for f in man/* completions/*; do
    [[ -e "$f" ]] || continue
    name=$(basename "$f")
    case "$f" in
        man/*) re="/usr/share/man/man[0-9]/$name(\.gz)?" ;;
        *.bash) re="/usr/share/bash-completion/completions/${name%.bash}" ;;
        *) re="/usr/share/(zsh|fish)/[^/]+/$name" ;;
    esac
    grep -qxE "$re" <<<"$listing" || echo "WARN $f exists but is not in the package (add it to [package.metadata.deb] assets)"
done
echo "check-deb: file list:"
sed 's/^/    /' <<<"$listing"

# ---- control files ---------------------------------------------------------------
ctl=$(mktemp -d)
root=$(mktemp -d)
trap 'rm -rf "$ctl" "$root"' EXIT
dpkg-deb -e "$deb" "$ctl"
for c in /etc/mcp-reaper/config.toml /etc/mcp-reaper/config.d/README; do
    grep -qxF "$c" "$ctl/conffiles" || fail "$c is not a conffile"
done
grep -q 'deb-systemd-helper enable mcp-reaper.service' "$ctl/postinst" || fail "postinst does not enable mcp-reaper.service"
grep -q 'deb-systemd-invoke $_dh_action mcp-reaper.service' "$ctl/postinst" || fail "postinst does not start mcp-reaper.service"
# The one-shot timer conflicts with the daemon: never started by postinst, and
# enabled only again on upgrade when the admin had enabled it (cargo-deb's
# "dont-enable" fragment, guarded by `debian-installed`).
if grep -E 'deb-systemd-invoke (start|\$_dh_action) .*mcp-reaper-once' "$ctl/postinst"; then
    fail "postinst starts the one-shot service or timer"
fi
if grep -q 'deb-systemd-helper enable mcp-reaper-once.timer' "$ctl/postinst" &&
    ! grep -q 'deb-systemd-helper debian-installed mcp-reaper-once.timer' "$ctl/postinst"; then
    fail "postinst enables the one-shot timer on a fresh install"
fi
grep -q 'stop mcp-reaper.service' "$ctl/prerm" || fail "prerm does not stop mcp-reaper.service"
# The metrics socket is opt-in: never enabled on a fresh install nor started,
# and never restarted on upgrade (systemd refuses to start a socket whose
# service is running); stopped on removal.
if grep -E 'deb-systemd-invoke (start|restart|try-restart|\$_dh_action) .*mcp-reaper-metrics' "$ctl/postinst"; then
    fail "postinst starts or restarts the metrics socket"
fi
if grep -q 'deb-systemd-helper enable mcp-reaper-metrics.socket' "$ctl/postinst" &&
    ! grep -q 'deb-systemd-helper debian-installed mcp-reaper-metrics.socket' "$ctl/postinst"; then
    fail "postinst enables the metrics socket on a fresh install"
fi
grep -q 'stop mcp-reaper-metrics.socket' "$ctl/prerm" || fail "prerm does not stop mcp-reaper-metrics.socket on removal"
grep -q 'rm -rf /var/lib/mcp-reaper' "$ctl/postrm" || fail "postrm does not purge /var/lib/mcp-reaper"
[[ $(grep -c '# Automatically added by cargo-deb' "$ctl/postrm") -ge 1 ]] || fail "postrm lacks the systemd fragments"
echo "check-deb: control: $(grep -E '^(Package|Version|Architecture|Depends):' "$ctl/control" | tr '\n' ' ')"

# ---- unpacked tree ---------------------------------------------------------------
dpkg-deb -x "$deb" "$root"

# ---- one maintainer, everywhere --------------------------------------------------
# Cargo.toml's [package.metadata.deb] maintainer is the one place; the
# control file, the Debian changelog, README.Debian, the DEP-5 copyright's
# Upstream-Contact and the RPM spec's changelog must say the same.
maintainer=$(sed -n 's/^maintainer = "\(.*\)"$/\1/p' Cargo.toml)
[[ -n $maintainer ]] || fail "no maintainer in Cargo.toml"
doc=$root/usr/share/doc/mcp-reaper
grep -qxF "Maintainer: $maintainer" "$ctl/control" || fail "control's Maintainer is not '$maintainer'"
trailer=$(zcat "$doc/changelog.Debian.gz" | sed -n 's/^ -- \(.*>\)  .*/\1/p' | sed -n 1p)
[[ $trailer == "$maintainer" ]] || fail "changelog signed by '$trailer', not '$maintainer'"
version=$(sed -n 's/^Version: //p' "$ctl/control")
zcat "$doc/changelog.Debian.gz" | sed -n 1p | grep -F "mcp-reaper ($version)" >/dev/null ||
    fail "changelog's first entry is not version $version"
grep -qxF " -- $maintainer" "$doc/README.Debian" || fail "README.Debian is not signed by '$maintainer'"
grep -qxF "Upstream-Contact: $maintainer" "$doc/copyright" || fail "copyright's Upstream-Contact is not '$maintainer'"
grep -qF "$maintainer" packaging/rpm/mcp-reaper.spec || fail "the RPM spec's changelog is not by '$maintainer'"
# DEP-5, with both licenses of "MIT OR Apache-2.0".
head -n 1 "$doc/copyright" | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
    fail "copyright is not DEP-5"
for l in MIT Apache-2.0; do
    grep -qx "License: $l" "$doc/copyright" || fail "copyright lacks the $l license text"
done
grep -q 'mode = "dry-run"' "$doc/README.Debian" || fail "README.Debian lacks the dry-run-first recipe"

# ---- lintian: no error, no warning ----------------------------------------------
if ! command -v lintian >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "check-deb: installing lintian"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lintian >/dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lintian >/dev/null; } ||
        true
fi
if command -v lintian >/dev/null 2>&1; then
    # Errors and warnings fail; info and pedantic tags are printed only.
    if lint=$(lintian --fail-on error,warning --display-info "$deb" 2>&1); then
        echo "check-deb: lintian: no errors or warnings"
    else
        fail "lintian found errors or warnings"
    fi
    [[ -z $lint ]] || sed 's/^/    /' <<<"$lint"
else
    fail "lintian is not installed (apt-get install lintian)"
fi
for u in mcp-reaper.service mcp-reaper-once.service mcp-reaper-once.timer mcp-reaper-metrics.socket; do
    cmp -s "$root/usr/lib/systemd/system/$u" "systemd/$u" || fail "packaged $u differs from systemd/$u"
done
cmp -s "$root/usr/lib/systemd/user/mcp-reaper.service" systemd/user/mcp-reaper.service || fail "packaged user unit differs"
run() {
    local out
    if out=$("$@" 2>&1); then
        echo "ok   $* -> $(head -n 1 <<<"$out")"
    else
        fail "$* -> $out"
    fi
}
run "$root/usr/bin/reaperctl" --version
run "$root/usr/bin/mcp-reaperd" --version
run "$root/usr/bin/reaperctl" validate --config "$root/etc/mcp-reaper/config.toml"
# The release build's own feature set (tests build with dev-dependencies'
# features unified in): the embedded config must load, a read-only audit run.
run "$root/usr/bin/reaperctl" validate --config -
run "$root/usr/bin/mcp-reaperd" --once --dry-run --config - --log-target stderr --state-file "$ctl/once.state"

if [[ $status -eq 0 ]]; then
    echo "check-deb: ok"
else
    echo "check-deb: FAILED" >&2
fi
echo "$deb"
exit $status
