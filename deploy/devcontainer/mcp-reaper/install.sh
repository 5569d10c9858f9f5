#!/bin/sh
# The mcp-reaper devcontainer Feature's install step: runs as root while the
# image is built, with the options as environment variables (VERSION, URL,
# CARGOINSTALL, MODE, MINUID). It installs mcp-reaperd and reaperctl in
# /usr/local/bin, a config whose drop-in holds the mode and min_uid, and the
# entrypoint (start.sh) that starts the daemon each time the container starts.
#
# Where the binaries come from, the first that is set: URL (a release
# tarball, URL or path), CARGOINSTALL (`cargo install` arguments), else
# bin/ beside this script (copy target/release/{mcp-reaperd,reaperctl} there
# for a local Feature).
#
# DESTDIR, when set, is prepended to every path written (the tests install
# into a temporary root that way); nothing is started here.
#
# POSIX sh and the tools of busybox: it must run on any base image.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
dest=${DESTDIR:-}
version=${VERSION:-0.1.0}
url=${URL:-}
cargo_args=${CARGOINSTALL:-}
mode=${MODE:-dry-run}
min_uid=${MINUID:-1000}

die() {
    echo "mcp-reaper feature: $*" >&2
    exit 1
}

case $mode in
    dry-run | enforce) ;;
    *) die "mode must be dry-run or enforce, not '$mode'" ;;
esac
case $min_uid in
    '' | *[!0-9]*) die "minUid must be a number, not '$min_uid'" ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Fetches $1 to $2 with whichever client the image has.
fetch() {
    if command -v curl >/dev/null 2>&1; then
        curl --fail --silent --show-error --location --output "$2" "$1"
    elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$2" "$1"
    else
        die "neither curl nor wget is installed to fetch $1 (add the common-utils Feature, or give url a path)"
    fi
}

# The directory holding both binaries below $1 (a tarball's top, or one
# directory in it such as mcp-reaper-0.1.0/ or bin/).
bin_dir_in() {
    for d in "$1" "$1"/* "$1"/*/*; do
        if [ -f "$d/mcp-reaperd" ] && [ -f "$d/reaperctl" ]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

if [ -n "$url" ]; then
    url=$(printf '%s' "$url" | sed "s/{version}/$version/g")
    case $url in
        *://*) fetch "$url" "$work/release.tar.gz" ;;
        *) [ -f "$url" ] || die "url names no file: $url"; cp "$url" "$work/release.tar.gz" ;;
    esac
    mkdir "$work/release"
    tar -xzf "$work/release.tar.gz" -C "$work/release" || die "cannot unpack $url as a .tar.gz"
    from=$(bin_dir_in "$work/release") || die "$url holds no mcp-reaperd and reaperctl"
elif [ -n "$cargo_args" ]; then
    # The rust Feature puts cargo in /usr/local/cargo/bin, rustup in ~/.cargo/bin:
    # neither need be on the PATH of this step.
    cargo=$(command -v cargo || true)
    for c in /usr/local/cargo/bin/cargo "${_REMOTE_USER_HOME:-/nonexistent}/.cargo/bin/cargo" /root/.cargo/bin/cargo; do
        if [ -z "$cargo" ] && [ -x "$c" ]; then cargo=$c; fi
    done
    [ -n "$cargo" ] || die "cargoInstall needs cargo in the image (add the rust Feature before this one)"
    # shellcheck disable=SC2086 # the option is a list of arguments
    "$cargo" install --locked --root "$work/cargo" $cargo_args || die "cargo install $cargo_args failed"
    from=$work/cargo/bin
elif from=$(bin_dir_in "$here/bin"); then
    :
else
    die "no binaries: set url (a release tarball) or cargoInstall, or put mcp-reaperd and reaperctl in $here/bin/"
fi

mkdir -p "$dest/usr/local/bin" "$dest/usr/local/share/mcp-reaper" "$dest/etc/mcp-reaper/config.d"
for b in mcp-reaperd reaperctl; do
    cp "$from/$b" "$dest/usr/local/bin/$b.new"
    chmod 0755 "$dest/usr/local/bin/$b.new"
    mv -f "$dest/usr/local/bin/$b.new" "$dest/usr/local/bin/$b"
done
cp "$here/start.sh" "$dest/usr/local/share/mcp-reaper/start.sh"
chmod 0755 "$dest/usr/local/share/mcp-reaper/start.sh"

# The main file stays the user's (kept when it exists); the Feature's
# options live in a drop-in of their own, rewritten on each build.
if [ ! -e "$dest/etc/mcp-reaper/config.toml" ]; then
    cat >"$dest/etc/mcp-reaper/config.toml" <<'EOF'
# mcp-reaper's configuration in this dev container: every key has a built-in
# default (`reaperctl config` shows them with where each comes from), so
# this file may stay all comments. The devcontainer Feature's options are in
# config.d/50-devcontainer-feature.toml, applied after this file.
EOF
fi
cat >"$dest/etc/mcp-reaper/config.d/50-devcontainer-feature.toml" <<EOF
# Written by the mcp-reaper devcontainer Feature (its mode and minUid options).
[reaper]
mode = "$mode"
min_uid = $min_uid
EOF

# Binaries that do not run here (another architecture, a libc the image
# lacks) fail the build now rather than the container later.
"$dest/usr/local/bin/mcp-reaperd" --version >/dev/null || die "mcp-reaperd does not run in this image"
"$dest/usr/local/bin/reaperctl" validate --config "$dest/etc/mcp-reaper/config.toml" >/dev/null ||
    die "the config does not validate: reaperctl validate --config $dest/etc/mcp-reaper/config.toml"
echo "mcp-reaper feature: installed $("$dest/usr/local/bin/mcp-reaperd" --version) (mode $mode, min_uid $min_uid)"
