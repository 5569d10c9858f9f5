#!/usr/bin/env bash
# Builds the RPM from already-built release binaries, in a temporary rpmbuild
# tree, and lists what is in it.
#
# Usage: packaging/build-rpm.sh [BIN_DIR] [OUT_DIR]
#   BIN_DIR  holds mcp-reaperd and reaperctl (default: target/release;
#            run `cargo build --release` first)
#   OUT_DIR  where the .rpm is copied (default: target/rpm)
# Needs rpmbuild: on Debian/Ubuntu `apt-get install rpm` (done here, and said
# so on stderr, when running as root), on Fedora/RHEL `dnf install rpm-build`.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=${1:-target/release}
out_dir=${2:-target/rpm}
[[ "$bin_dir" = /* ]] || bin_dir="$repo/$bin_dir"
[[ "$out_dir" = /* ]] || out_dir="$repo/$out_dir"

for b in mcp-reaperd reaperctl; do
    [[ -x "$bin_dir/$b" ]] || { echo "build-rpm: $bin_dir/$b not found; run \`cargo build --release\` first" >&2; exit 2; }
done
if ! command -v rpmbuild >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "build-rpm: rpmbuild not found; installing Debian's rpm package on this machine (apt-get update; apt-get install rpm)" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends rpm >/dev/null
        echo "build-rpm: installed rpm $(dpkg-query -W -f '${Version}' rpm) ($(command -v rpmbuild))" >&2
    else
        echo "build-rpm: rpmbuild not found (Debian: apt-get install rpm; Fedora: dnf install rpm-build)" >&2
        exit 2
    fi
fi

version=$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$repo/Cargo.toml" | head -n 1)
[[ -n "$version" ]] || { echo "build-rpm: no version in Cargo.toml" >&2; exit 2; }

top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
mkdir -p "$top"/{BUILD,RPMS,SOURCES,SPECS,SRPMS}

# Source0: the binaries plus the files the spec installs, laid out as in the repo.
stage="$top/stage/mcp-reaper-$version"
mkdir -p "$stage/bin" "$stage/packaging" "$stage/config" "$stage/systemd/user" "$stage/systemd/examples"
cp "$bin_dir/mcp-reaperd" "$bin_dir/reaperctl" "$stage/bin/"
cp "$repo/packaging/config.toml" "$repo/packaging/config.d-README" "$repo/packaging/README.md" "$stage/packaging/"
cp "$repo/config/default.toml" "$stage/config/"
cp "$repo/README.md" "$repo/LICENSE-MIT" "$repo/LICENSE-APACHE" "$stage/"
cp -r "$repo/docs" "$stage/"
cp "$repo/systemd/mcp-reaper.service" "$repo/systemd/mcp-reaper-once.service" \
    "$repo/systemd/mcp-reaper-once.timer" "$repo/systemd/mcp-reaper-metrics.socket" "$stage/systemd/"
cp "$repo/systemd/user/mcp-reaper.service" "$stage/systemd/user/"
cp "$repo/systemd/examples/"*.conf "$stage/systemd/examples/"
for d in man completions; do
    if [[ -d "$repo/$d" ]]; then cp -r "$repo/$d" "$stage/"; fi
done
tar -C "$top/stage" -czf "$top/SOURCES/mcp-reaper-$version-staged.tar.gz" "mcp-reaper-$version"
cp "$repo/packaging/rpm/mcp-reaper.spec" "$top/SPECS/"

rpmbuild -bb \
    --define "_topdir $top" \
    --define "pkg_version $version" \
    "$top/SPECS/mcp-reaper.spec" >"$top/build.log" 2>&1 || {
    cat "$top/build.log" >&2
    echo "build-rpm: rpmbuild failed" >&2
    exit 1
}

rpm_file=$(find "$top/RPMS" -name '*.rpm' | head -n 1)
[[ -n "$rpm_file" ]] || { cat "$top/build.log" >&2; echo "build-rpm: no rpm produced" >&2; exit 1; }
mkdir -p "$out_dir"
cp "$rpm_file" "$out_dir/"
out="$out_dir/$(basename "$rpm_file")"

echo "build-rpm: $out"
listing=$(rpm -qlp "$out")
missing=0
for p in /usr/bin/mcp-reaperd /usr/bin/reaperctl /etc/mcp-reaper/config.toml \
    /etc/mcp-reaper/config.d /etc/mcp-reaper/config.d/README \
    /usr/lib/systemd/system/mcp-reaper.service /usr/lib/systemd/system/mcp-reaper-once.service \
    /usr/lib/systemd/system/mcp-reaper-once.timer /usr/lib/systemd/system/mcp-reaper-metrics.socket \
    /usr/lib/systemd/user/mcp-reaper.service \
    /usr/share/doc/mcp-reaper/README.md /usr/share/doc/mcp-reaper/packaging/README.md /usr/share/doc/mcp-reaper/default.toml \
    /usr/share/doc/mcp-reaper/docs/design.md /usr/share/doc/mcp-reaper/docs/evidence.md \
    /usr/share/doc/mcp-reaper/examples/notify-reload.conf /usr/share/doc/mcp-reaper/examples/proc-connector.conf; do
    grep -qxF "$p" <<<"$listing" || { echo "FAIL missing from rpm: $p" >&2; missing=1; }
done
rpm -qip "$out" 2>/dev/null | grep -E '^(Name|Version|Release|Architecture|License|Summary) ' || true
echo "build-rpm: contents (rpm -qlp):"
rpm -qlp "$out" | sed 's/^/    /'
echo "build-rpm: config files:"
rpm -qcp "$out" | sed 's/^/    /'
echo "build-rpm: requires:"
rpm -qRp "$out" | sed 's/^/    /'
echo "build-rpm: scriptlets:"
rpm -qp --scripts "$out" | sed 's/^/    /'
[[ $missing -eq 0 ]] || { echo "build-rpm: FAILED" >&2; exit 1; }
echo "$out"
