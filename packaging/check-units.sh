#!/usr/bin/env bash
# Checks the systemd units in systemd/:
#   - `systemd-analyze verify` passes for every unit, with no warning about
#     them (a warning such as "Failed to parse service type" means the unit
#     would silently behave differently on this systemd);
#   - the shipped drop-in example proc-connector.conf verifies on top of the
#     system unit;
#   - `systemd-analyze security --offline=true` rates the system service and
#     the one-shot service at an exposure of 1.6 or lower.
#
# Usage: packaging/check-units.sh [BIN_DIR]     (default: target/release)
# BIN_DIR must hold the built mcp-reaperd (run `cargo build --release` first).
#
# `verify` insists that ExecStart= points at an executable. The binary is put
# at /usr/bin/mcp-reaperd only inside a private mount namespace (an overlay
# on /usr/bin), so nothing on the machine changes; where that is impossible
# (not root, no overlayfs) it is copied there for the check and removed
# afterwards. Installs systemd (and procps for /bin/kill) with apt-get when
# missing, as on a fresh Debian 12 machine.
set -euo pipefail

MAX_EXPOSURE=16 # tenths: 1.6

repo=$(cd "$(dirname "$0")/.." && pwd)
units=(mcp-reaper.service mcp-reaper-once.service mcp-reaper-once.timer mcp-reaper-metrics.socket)
user_units=(mcp-reaper.service)

# ---- inner mode: runs inside `unshare -m` with the binary already in place ----
if [[ "${1:-}" == "--inner-verify" ]]; then
    shift
    status=0
    xdg=$(mktemp -d)
    chmod 700 "$xdg"
    check() { # label, then the systemd-analyze arguments
        local label=$1 out rc
        shift
        set +e
        out=$("$@" 2>&1)
        rc=$?
        set -e
        # Our units' own warnings name them; other units' noise does not count.
        if [[ $rc -ne 0 ]] || grep -q 'mcp-reaper' <<<"$out"; then
            echo "FAIL verify $label (exit $rc)"
            sed 's/^/    /' <<<"$out"
            status=1
        else
            echo "ok   verify $label"
        fi
    }
    for u in "${units[@]}"; do
        check "$u" systemd-analyze verify --man=no "$repo/systemd/$u"
    done
    for u in "${user_units[@]}"; do
        check "user/$u" env XDG_RUNTIME_DIR="$xdg" systemd-analyze verify --user --man=no "$repo/systemd/user/$u"
    done
    # The drop-in example, applied the way systemd would: <unit>.d/ next to it.
    tmp=$(mktemp -d)
    cp "$repo/systemd/mcp-reaper.service" "$tmp/"
    mkdir "$tmp/mcp-reaper.service.d"
    cp "$repo/systemd/examples/proc-connector.conf" "$tmp/mcp-reaper.service.d/"
    check "mcp-reaper.service + examples/proc-connector.conf" systemd-analyze verify --man=no "$tmp/mcp-reaper.service"
    # notify-reload.conf needs systemd >= 253.
    sd_version=$(systemd-analyze --version | awk 'NR==1 {print $2}')
    if [[ "$sd_version" =~ ^[0-9]+$ ]] && ((sd_version >= 253)); then
        rm "$tmp/mcp-reaper.service.d/proc-connector.conf"
        cp "$repo/systemd/examples/notify-reload.conf" "$tmp/mcp-reaper.service.d/"
        check "mcp-reaper.service + examples/notify-reload.conf" systemd-analyze verify --man=no "$tmp/mcp-reaper.service"
    else
        echo "skip verify examples/notify-reload.conf (systemd $sd_version < 253 has no Type=notify-reload)"
    fi
    rm -rf "$tmp" "$xdg"
    exit $status
fi

# ---- outer mode ----------------------------------------------------------------
bin_dir=${1:-target/release}
[[ "$bin_dir" = /* ]] || bin_dir="$repo/$bin_dir"
if [[ ! -x "$bin_dir/mcp-reaperd" ]]; then
    echo "check-units: $bin_dir/mcp-reaperd not found; run \`cargo build --release\` first" >&2
    exit 2
fi

need_pkgs=()
command -v systemd-analyze >/dev/null 2>&1 || need_pkgs+=(systemd)
[[ -x /bin/kill ]] || need_pkgs+=(procps) # ExecReload=/bin/kill
if ((${#need_pkgs[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "check-units: missing ${need_pkgs[*]}; run as root or install them" >&2
        exit 2
    fi
    echo "check-units: installing ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
echo "check-units: $(systemd-analyze --version | head -1)"

status=0
if [[ -x /usr/bin/mcp-reaperd ]]; then
    # Already installed (e.g. the package): verify only needs an executable there.
    "$0" --inner-verify || status=1
else
    overlay_ok=0
    if [[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null 2>&1; then
        ovl=$(mktemp -d)
        mkdir "$ovl/upper" "$ovl/work"
        cp "$bin_dir/mcp-reaperd" "$ovl/upper/"
        # Exit 97 = the overlay could not be set up: fall back below.
        set +e
        unshare -m --propagation private bash -c '
            mount -t overlay overlay -o "lowerdir=/usr/bin,upperdir=$1/upper,workdir=$1/work" /usr/bin 2>/dev/null || exit 97
            exec "$2" --inner-verify' _ "$ovl" "$0"
        rc=$?
        set -e
        rm -rf "$ovl"
        if [[ $rc -ne 97 ]]; then
            overlay_ok=1
            [[ $rc -eq 0 ]] || status=1
        fi
    fi
    if [[ $overlay_ok -eq 0 ]]; then
        echo "check-units: no private overlay possible; placing /usr/bin/mcp-reaperd temporarily"
        install -m 755 "$bin_dir/mcp-reaperd" /usr/bin/mcp-reaperd
        trap 'rm -f /usr/bin/mcp-reaperd' EXIT
        "$0" --inner-verify || status=1
        rm -f /usr/bin/mcp-reaperd
        trap - EXIT
    fi
fi

# ---- security exposure -------------------------------------------------------
for u in mcp-reaper.service mcp-reaper-once.service; do
    out=$(systemd-analyze security --offline=true "$repo/systemd/$u" 2>&1) || true
    line=$(grep 'Overall exposure level' <<<"$out" || true)
    score=$(sed -n 's/.*: \([0-9]*\)\.\([0-9]\) .*/\1\2/p' <<<"$line")
    if [[ -z "$score" ]]; then
        echo "FAIL security $u: no exposure level in the output"
        sed 's/^/    /' <<<"$out"
        status=1
    elif ((10#$score > MAX_EXPOSURE)); then
        echo "FAIL security $u: exposure $((10#$score / 10)).$((10#$score % 10)) > 1.6"
        grep '✗' <<<"$out" | sed 's/^/    /'
        status=1
    else
        echo "ok   security $u: exposure $((10#$score / 10)).$((10#$score % 10)) (limit 1.6)"
    fi
done

if [[ $status -eq 0 ]]; then
    echo "check-units: all units ok"
else
    echo "check-units: FAILED" >&2
fi
exit $status
