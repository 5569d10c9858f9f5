#!/usr/bin/env bash
# Assembles the image's root filesystem for `Containerfile`: both binaries,
# the shared libraries they load (glibc's and libgcc_s, from the build
# machine, with the dynamic loader) and the empty directories the daemon
# writes to or has mounted over; nothing else: no shell, no package manager.
# Every file gets one mtime (SOURCE_DATE_EPOCH, else 0), so the same
# binaries give the same layer.
#
#   deploy/container/rootfs.sh BINDIR OUTDIR      (BINDIR: target/release)
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 BINDIR OUTDIR" >&2; exit 64; }
bin=$1 out=$2
for b in mcp-reaperd reaperctl; do
    [[ -x $bin/$b ]] || { echo "$0: $bin/$b is missing (cargo build --release)" >&2; exit 66; }
done
rm -rf "$out"
# /run/mcp-reaper (control socket) and /var/lib/mcp-reaper (grace state)
# are mount points: the root file system is read-only.
mkdir -p "$out"/usr/bin "$out"/etc/mcp-reaper "$out"/run/mcp-reaper "$out"/var/lib/mcp-reaper "$out"/tmp "$out"/proc "$out"/sys
chmod 1777 "$out"/tmp
for b in mcp-reaperd reaperctl; do
    install -m 0755 "$bin/$b" "$out/usr/bin/$b"
    # Debug info is for a debugger on the build machine, not the image
    # (a debug build's 100 MB become 10).
    if command -v strip >/dev/null 2>&1; then strip --strip-debug "$out/usr/bin/$b"; fi
done
# What the binaries load, at the paths they load it from (ldd: "name =>
# /path (addr)", and the loader as "/lib64/ld-linux… (addr)").
ldd "$out"/usr/bin/mcp-reaperd "$out"/usr/bin/reaperctl \
    | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $1 !~ /:$/ { print $1 }' | sort -u \
    | while read -r lib; do
        mkdir -p "$out$(dirname "$lib")"
        cp -L "$lib" "$out$lib"
    done
# Names for uid 0 (`reaperctl status` shows owners by name).
printf 'root:x:0:0:root:/:/nonexistent\n' >"$out"/etc/passwd
printf 'root:x:0:\n' >"$out"/etc/group
find "$out" -exec touch -h -d "@${SOURCE_DATE_EPOCH:-0}" {} +
