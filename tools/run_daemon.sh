#!/usr/bin/env bash
# Command 1: install what gpucmdd needs, build it, and run it in the foreground on the
# CPU driver. Extra arguments go to gpucmdd (e.g. --config=FILE, --listen=...).
# Defaults: gRPC on unix:/tmp/gpucmdd.sock, health and metrics on http://127.0.0.1:9464.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel build -c opt //server:gpucmdd //client:gpucmdctl //driver/cpu:gpucmd-kernel-executor \
  //driver/front_end:gpucmd-kernel-front-end
bin=$(bazel info -c opt bazel-bin)
echo "gpucmdctl: $bin/client/gpucmdctl --target=unix:/tmp/gpucmdd.sock health" >&2
exec "$bin/server/gpucmdd" --listen=unix:/tmp/gpucmdd.sock --http_listen=127.0.0.1:9464 "$@"
