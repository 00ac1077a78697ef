#!/usr/bin/env bash
# deploy/kubernetes/ offline: every manifest is valid against the Kubernetes API schemas
# (tools/kubernetes/validate.mjs, its npm packages installed by tools/setup.sh); the
# ConfigMap's config passes `gpucmdd --check_config`; and the manifests agree with that
# config and with each other (ports, probe paths, the socket directory, the grace period
# against the drain time, non-root containers).
set -euo pipefail

runfiles=${TEST_SRCDIR:?}/gpucmdd
validator_dir=/var/tmp/gpucmdd-kubernetes-validate  # tools/setup.sh installs it
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/kubernetes.XXXXXX")

[[ -d $validator_dir/node_modules ]] ||
  { echo "FAIL: $validator_dir/node_modules is missing: run tools/setup.sh"; exit 1; }
cp "$runfiles/tools/kubernetes/validate.mjs" "$work/"
ln -s "$validator_dir/node_modules" "$work/node_modules"
node "$work/validate.mjs" "$runfiles"/deploy/kubernetes/*.yaml

/usr/bin/python3 - "$runfiles/deploy/kubernetes" "$work/gpucmdd.textproto" <<'PY'
import glob, os, re, sys
import yaml

directory, config_out = sys.argv[1], sys.argv[2]
objects = {}
for path in glob.glob(os.path.join(directory, "*.yaml")):
    for document in yaml.safe_load_all(open(path)):
        objects[(document["kind"], document["metadata"]["name"])] = document

config = objects[("ConfigMap", "gpucmdd-config")]["data"]["gpucmdd.textproto"]
open(config_out, "w").write(config)
field = lambda name: re.findall(rf'^\s*{name}:\s*"?([^"\n]+)"?', config, re.M)
http_port = int(field("http_listen")[0].rsplit(":", 1)[1])
tcp_port = int(next(l for l in field("listen") if l.startswith("tcp:")).rsplit(":", 1)[1])
socket_dir = os.path.dirname(next(l for l in field("listen") if l.startswith("unix:"))[5:])
drain = int(field("drain_timeout_seconds")[0])
problems = []
def check(condition, what):
    if not condition:
        problems.append(what)

daemonset = objects[("DaemonSet", "gpucmdd")]["spec"]["template"]["spec"]
container = daemonset["containers"][0]
ports = {p["name"]: p["containerPort"] for p in container["ports"]}
check(ports.get("http") == http_port, f"port http is not http_listen's {http_port}")
check(ports.get("grpc-tls") == tcp_port, f"port grpc-tls is not the tcp listener's {tcp_port}")
for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"),
                    ("readinessProbe", "/readyz")):
    get = container.get(probe, {}).get("httpGet", {})
    check(get.get("path") == path and get.get("port") == "http", f"{probe} is not {path} on http")
check(daemonset["terminationGracePeriodSeconds"] > drain + 1,
      f"terminationGracePeriodSeconds is not above the drain time ({drain} s) and its second")
check(daemonset["securityContext"].get("runAsNonRoot") is True, "the daemon may run as root")
check(container["securityContext"].get("allowPrivilegeEscalation") is False,
      "the daemon may gain privileges")
volumes = {v["name"]: v for v in daemonset["volumes"]}
mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
check(volumes[mounts[socket_dir]].get("hostPath", {}).get("path") == socket_dir,
      f"the socket directory {socket_dir} is not the node's hostPath")
check(container["args"] == ["--config=/etc/gpucmdd/gpucmdd.textproto"]
      and mounts.get("/etc/gpucmdd/gpucmdd.textproto") == "config", "the config is not mounted")

service = objects[("Service", "gpucmdd")]["spec"]
check(service.get("internalTrafficPolicy") == "Local", "the Service is not node-local")
check(service["ports"][0]["targetPort"] == "grpc-tls", "the Service does not target grpc-tls")
monitor = objects[("PodMonitor", "gpucmdd")]["spec"]
check(monitor["podMetricsEndpoints"][0] == {**monitor["podMetricsEndpoints"][0],
                                            "port": "http", "path": "/metrics"},
      "the PodMonitor does not scrape /metrics on http")

client = objects[("Deployment", "gpucmd-example-client")]["spec"]["template"]["spec"]
client_mounts = {m["name"]: m["mountPath"] for m in client["containers"][0]["volumeMounts"]}
client_volumes = {v["name"]: v for v in client["volumes"]}
check(any(client_volumes[n].get("hostPath", {}).get("path") == socket_dir
          and client_mounts[n] == socket_dir for n in client_mounts),
      "the example client does not mount the socket directory")
check(daemonset["securityContext"]["runAsGroup"] in client["securityContext"].get(
      "supplementalGroups", []), "the example client is not in the daemon's group")
for problem in problems:
    print("FAIL:", problem)
sys.exit(1 if problems else 0)
PY

"$runfiles/server/gpucmdd" --config="$work/gpucmdd.textproto" --check_config
echo PASS
