#!/usr/bin/env bash
# The monitoring files against a running daemon: the alerting rules pass `promtool check
# rules` and their unit tests (`promtool test rules`); every gpucmd_ metric that the
# Grafana dashboard or the rules name is in the daemon's /metrics once it served a client.
set -euo pipefail

runfiles=${TEST_SRCDIR:?}/gpucmdd
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/monitoring.XXXXXX")
cp "$runfiles/deploy/prometheus/gpucmdd-rules.yml" "$runfiles/deploy/prometheus/gpucmdd-rules_test.yml" "$work/"
(cd "$work" && promtool check rules gpucmdd-rules.yml && promtool test rules gpucmdd-rules_test.yml)

socket_dir=$(mktemp -d /tmp/gpucmd-monitoring.XXXXXX)
"$runfiles/server/gpucmdd" --listen="unix:$socket_dir/gpucmdd.sock" --http_listen=127.0.0.1:0 \
  > "$work/ready" 2> "$work/stderr" &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$socket_dir"' EXIT
for _ in $(seq 100); do grep -q "gpucmdd ready" "$work/ready" && break; sleep 0.1; done
http=$(grep -o 'http=[0-9.:]*' "$work/ready" | cut -d= -f2)
[[ -n $http ]] || { echo "FAIL: gpucmdd did not start"; cat "$work/stderr"; exit 1; }
# Some activity, so that the families of requests and clients have series.
"$runfiles/client/gpucmdctl" --target="unix:$socket_dir/gpucmdd.sock" bench \
  --bench_seconds=0.05 --bench_bytes=1048576 > /dev/null
curl -sf "http://$http/metrics" > "$work/metrics"

# A histogram's series are NAME_bucket, NAME_count and NAME_sum.
exposed=$(grep -v '^#' "$work/metrics" | grep -o '^gpucmd_[a-z_]*' | sort -u)
missing=0
for name in $(cat "$runfiles/deploy/grafana/gpucmdd.json" "$work/gpucmdd-rules.yml" |
              grep -o 'gpucmd_[a-z_]*' | sort -u); do
  if ! grep -qx "$name" <<<"$exposed"; then
    echo "FAIL: $name is referenced but not in /metrics"
    missing=1
  fi
done
# The dashboard is JSON Grafana can load: every panel has a query or is a row.
/usr/bin/python3 - "$runfiles/deploy/grafana/gpucmdd.json" <<'PY'
import json, sys
dashboard = json.load(open(sys.argv[1]))
for panel in dashboard["panels"]:
    assert panel["type"] == "row" or panel["targets"], panel["title"]
print(len(dashboard["panels"]), "panels")
PY
exit $missing
