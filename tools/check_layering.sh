#!/usr/bin/env bash
# Checks with `bazel query` that the layers of server/ depend only downwards:
#   - the core (server/core) and the command layer (server/command) never reach gRPC;
#   - the command layer never reaches the core;
#   - the RPC layer (server/rpc) and the core never reach Command<D> or a concrete
#     driver: only the composition root (//server) names one.
# Test-only targets are left out. Prints each offending path; exits non-zero on any.
set -uo pipefail
cd "$(dirname "$0")/.."

# libraries PACKAGE: the package's non-test cc_library targets, as a query expression.
libraries() {
  echo "(kind(cc_library, $1:*) except attr(testonly, 1, $1:*))"
}

drivers='(//driver/cpu/... + //driver/cuda/... + //driver/hip/...)'
checks=(
  "$(libraries //server/core)|@system//:grpc"
  "$(libraries //server/command)|@system//:grpc"
  "$(libraries //server/command)|//server/core/..."
  "$(libraries //server/core)|//server/command:command + $drivers"
  "$(libraries //server/rpc)|//server/command:command + $drivers"
)

failed=0
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
for check in "${checks[@]}"; do
  from=${check%%|*}
  to=${check#*|}
  if ! path=$(bazel query --noshow_progress "somepath($from, $to)" 2>"$errors"); then
    echo "layering: the query failed:" >&2
    cat "$errors" >&2
    failed=1
  elif [[ -n $path ]]; then
    echo "layering: $from reaches $to:" >&2
    echo "$path" >&2
    failed=1
  fi
done
((failed == 0)) && echo "layering: server/ depends only downwards" >&2
exit $failed
