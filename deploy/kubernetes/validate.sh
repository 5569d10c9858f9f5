#!/usr/bin/env bash
# Checks deploy/kubernetes/ (run by .ci/run):
#  - every manifest against the Kubernetes OpenAPI schemas, strictly (no
#    unknown field), with PyPI's kubernetes-validate (installed into a venv
#    under target/ when missing; without Python or PyPI this says SKIPPED and
#    why, and exits 0);
#  - the PodMonitor (a CRD, no schema there) for the fields it needs and the
#    DaemonSet's port name;
#  - the ConfigMap's config.toml with the real `reaperctl validate`
#    (BINDIR, default target/release; skipped with a reason if not built).
#
#   deploy/kubernetes/validate.sh [BINDIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
bindir=${1:-target/release}
venv=target/kubernetes-validate
kv=$venv/bin/kubernetes-validate
if [[ ! -x $kv ]]; then
    if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q kubernetes-validate; } >/dev/null 2>&1; then
        echo "SKIPPED: deploy/kubernetes not validated: cannot install kubernetes-validate (python3 -m venv, pip install from PyPI)"
        exit 0
    fi
fi
"$kv" --strict --quiet deploy/kubernetes/*.yaml
echo "ok: deploy/kubernetes/*.yaml valid against Kubernetes $("$kv" --version) (strict)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$venv/bin/python" - "$tmp/config.toml" <<'EOF'
import sys, yaml
ds = yaml.safe_load(open("deploy/kubernetes/daemonset.yaml"))
pm = yaml.safe_load(open("deploy/kubernetes/monitoring/podmonitor.yaml"))
cm = yaml.safe_load(open("deploy/kubernetes/configmap.yaml"))
pod = ds["spec"]["template"]
c = pod["spec"]["containers"][0]
sc = c["securityContext"]
problems = []
def need(ok, what):
    if not ok:
        problems.append(what)
need(pm["apiVersion"] == "monitoring.coreos.com/v1" and pm["kind"] == "PodMonitor", "podmonitor: kind/apiVersion")
need(pm["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items(), "podmonitor: selector does not select the DaemonSet's pods")
ports = {p["name"] for p in c["ports"]}
need(all(e["port"] in ports for e in pm["spec"]["podMetricsEndpoints"]), "podmonitor: port is not one of the container's")
need(pod["spec"].get("hostPID") is True, "daemonset: hostPID")
need(not sc.get("privileged") and sc.get("allowPrivilegeEscalation") is False, "daemonset: privileged or escalation")
need(sc["capabilities"]["drop"] == ["ALL"] and sorted(sc["capabilities"]["add"]) == ["DAC_READ_SEARCH", "KILL", "SYS_PTRACE"], "daemonset: capabilities")
need(sc.get("readOnlyRootFilesystem") is True, "daemonset: read-only root")
need({"operator": "Exists"} in pod["spec"]["tolerations"], "daemonset: a toleration for every taint")
mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
need(mounts["/sys/fs/cgroup"].get("readOnly") is True, "daemonset: cgroup tree read-only")
cfg = cm["data"]["config.toml"]
need("reap_other_pid_namespaces = true" in cfg, "configmap: reap_other_pid_namespaces")
need('listen = "0.0.0.0:9464"' in cfg and "9464" in {str(p["containerPort"]) for p in c["ports"]}, "configmap: metrics port")
open(sys.argv[1], "w").write(cfg)
if problems:
    sys.exit("deploy/kubernetes: " + "; ".join(problems))
print("ok: podmonitor and daemonset agree; capabilities, hostPID, read-only mounts as documented")
EOF
if [[ -x $bindir/reaperctl ]]; then
    "$bindir/reaperctl" validate --config "$tmp/config.toml"
    echo "ok: the ConfigMap's config.toml is accepted by $bindir/reaperctl"
else
    echo "SKIPPED: the ConfigMap's config.toml not checked: $bindir/reaperctl is not built"
fi
