#!/usr/bin/env bash
# Checks gpucmdd on a machine with an NVIDIA GPU, from the relocatable bundle (no Bazel,
# no Debian libraries, no network needed there):
#
#   bazel build --config=cuda //deploy:bundle                  # on a development machine
#   tests/gpu/device_check.sh [BUNDLE.tar.xz | BUNDLE_DIR]     # on the GPU machine
#
# Default bundle: .bundle/gpucmd-bundle.tar.xz. Runs the NVRTC compile tests and the
# driver conformance suite against the real device, the kernel suite through the CUDA
# daemon (a faulting kernel and the daemon's restart included), starts the daemon, and prints one
# benchmark table: NVRTC compile time, host<->device bandwidth through the daemon against
# a direct cuMemcpy*Async from pinned memory (inline, and from shared-memory regions the
# daemon registered with the device, unary and in Submit batches), a pitched 2D copy, empty-kernel launch rates
# in-process, unary and in Submit batches, the medians of an empty launch, an idle
# Synchronize and a launch with the Synchronize that waits for it against a raw gRPC echo,
# and the daemon's CPU while a session waits for long kernels. Finishes within 8 minutes.
set -uo pipefail

bundle=${1:-.bundle/gpucmd-bundle.tar.xz}
work=$(mktemp -d /tmp/gpucmd-check.XXXXXX)
if [[ -d $bundle ]]; then
  cp -r "$bundle" "$work/gpucmd"
else
  tar -C "$work" -xf "$bundle" || { echo "cannot unpack $bundle"; exit 2; }
fi
bin=$work/gpucmd/bin
# The test binaries write scratch files where Bazel would give them a directory.
export TEST_TMPDIR=$work/tmp
mkdir -p "$TEST_TMPDIR"
status=0

step() { echo; echo "=== $* ==="; }
run() {  # run NAME TIMEOUT COMMAND...
  local name=$1 limit=$2
  shift 2
  step "$name"
  timeout "$limit" "$@"
  local rc=$?
  echo "--- $name: exit $rc"
  ((rc == 0)) || status=1
}

step "machine"
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null ||
  echo "nvidia-smi not available"
"$bin/gpucmdd" --version

run "NVRTC compile tests (kernel suite for sm_90)" 90 "$bin/nvrtc_compiler_test"
run "driver conformance suite on the CUDA device" 60 "$bin/cuda_driver_conformance_test"

# Binaries that start a daemon find it in their runfiles tree: point them at the bundle's.
for binary in kernel_cuda_test cuda_bench; do
  mkdir -p "$bin/$binary.runfiles/gpucmdd/server" "$bin/$binary.runfiles/gpucmdd/tests/bench"
  ln -sf "$bin/gpucmdd" "$bin/$binary.runfiles/gpucmdd/server/gpucmdd"
  ln -sf "$bin/raw_echo_server" "$bin/$binary.runfiles/gpucmdd/tests/bench/raw_echo_server"
done
GPUCMD_EXPECT_DRIVER=cuda run "kernel suite through the CUDA daemon" 120 "$bin/kernel_cuda_test"

step "daemon"
socket=$work/gpucmdd.sock
cat > "$work/config.textproto" <<CONFIG
log_level: "warn"
compile { cache_dir: "$work/cache" }
limits { max_message_bytes: 16777216 }
CONFIG
"$bin/gpucmdd" --config="$work/config.textproto" --listen="unix:$socket" \
  --http_listen=127.0.0.1:0 > "$work/ready" 2> "$work/daemon.log" &
daemon=$!
for _ in $(seq 100); do [[ -s $work/ready ]] && break; sleep 0.1; done
if [[ -s $work/ready ]]; then
  cat "$work/ready"
  "$bin/gpucmdctl" --target="unix:$socket" devices || status=1
  kill -TERM "$daemon"; wait "$daemon"
else
  echo "the daemon did not start:"; cat "$work/daemon.log"; status=1
fi

run "benchmark: NVRTC, bandwidth vs direct cuMemcpy (x_direct), 2D copy, launch rate (x_in_process)" \
  180 "$bin/cuda_bench" --benchmark_min_time=0.1

echo
if ((status == 0)); then echo "DEVICE CHECK: PASSED"; else echo "DEVICE CHECK: FAILED"; fi
rm -rf "$work"
exit "$status"
