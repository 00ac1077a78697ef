#!/usr/bin/env bash
# Command 2: install what the build needs, then run every test: the whole tree in the
# default configuration and under AddressSanitizer+UBSan, the concurrency tests under
# ThreadSanitizer, and the fuzz harnesses with libFuzzer for 30 s each. Ends with one summary line; exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh || exit 1

passed=0
failed=0
failures=()
failure_details=$(mktemp)  # what each failed test said, printed before the summary

# note_failure_details NAME TARGET: keeps the lines of TARGET's log that say why it failed.
note_failure_details() {
  local name=$1 target=$2
  local log="bazel-testlogs/${target#//}"
  log="${log/://}/test.log"
  {
    echo "--- $name: $target ---"
    grep -a -A4 -E 'Failure|FAILED|Check failed|ERROR: AddressSanitizer|runtime error|WARNING: ThreadSanitizer|TIMEOUT' \
      "$log" 2>/dev/null | head -60
  } >>"$failure_details"
}

# run_config NAME BAZEL_ARGS...: runs `bazel test`, counts its per-target results.
run_config() {
  local name=$1
  shift
  echo "=== tests: $name ===" >&2
  local log
  log=$(mktemp)
  bazel test "$@" 2>&1 | tee "$log" >&2
  local rc=${PIPESTATUS[0]}
  local p f
  p=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
  f=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)' "$log")
  if ((rc != 0 && f == 0)); then
    f=1  # the build itself failed
    failures+=("$name: build failed")
  fi
  while read -r target; do
    failures+=("$name: $target")
    note_failure_details "$name" "$target"
  done < <(
    grep -E '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)' "$log" |
      awk '{print $1}')
  passed=$((passed + p))
  failed=$((failed + f))
  rm -f "$log"
}

run_config default --nocache_test_results //...
echo "=== layering ===" >&2
if bash tools/check_layering.sh; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); failures+=("layering: server/ depends upwards (tools/check_layering.sh)")
fi
run_config asan --config=asan --nocache_test_results //...
run_config tsan --config=tsan --nocache_test_results --test_tag_filters=-no_tsan //...
# The fuzz harnesses with libFuzzer, a bounded time each (Note [Fuzzing] in
# tests/fuzz/fuzz_input.h).
echo "=== fuzz ===" >&2
if bash tools/fuzz.sh --seconds=30 >&2; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); failures+=("fuzz: tools/fuzz.sh found a crash (see its output)")
fi
# run_double_tests DRIVER: the tests over DRIVER's test double (tag DRIVER_double) under
# both sanitizers; the doubles make the GPU drivers' threads run on this machine.
run_double_tests() {
  local driver=$1 tests
  mapfile -t tests < <(bazel query --noshow_progress "attr(tags, \"\\b${driver}_double\\b\", tests(//...))" 2>/dev/null)
  run_config "$driver-asan" "--config=$driver" --config=asan --nocache_test_results "${tests[@]}"
  run_config "$driver-tsan" "--config=$driver" --config=tsan --test_tag_filters=-no_tsan \
    --nocache_test_results "${tests[@]}"
}

# check_gpu_daemon NAME PATTERN: builds the daemon with --config=NAME; it must serve
# until stopped (a machine with that GPU) or exit with a message matching PATTERN.
check_gpu_daemon() {
  local name=$1 pattern=$2
  echo "=== $name daemon ===" >&2
  if bazel build "--config=$name" //server:gpucmdd >&2 &&
     bazel-bin/server/gpucmdd --version | grep -q "driver: $name"; then
    local output rc
    output=$(timeout 10 bazel-bin/server/gpucmdd --listen="unix:/tmp/gpucmdd-$name-check.sock" \
               --http_listen=127.0.0.1:0 2>&1)
    rc=$?
    if ((rc == 124)) || grep -q "$pattern" <<<"$output"; then
      passed=$((passed + 1))
    else
      echo "$output" >&2
      failed=$((failed + 1)); failures+=("$name: daemon start-up")
    fi
  else
    failed=$((failed + 1)); failures+=("$name: daemon build")
  fi
}

# GPU-driver targets are `manual` (no wildcard builds them): build and test them where
# their toolkit is installed, and say so where it is not.
if [[ -f /usr/local/cuda/include/cuda.h ]]; then
  mapfile -t cuda_tests < <(bazel query --noshow_progress 'attr(tags, "\bcuda\b", tests(//...))' 2>/dev/null)
  run_config cuda --config=cuda --nocache_test_results "${cuda_tests[@]}"
  run_double_tests cuda
  check_gpu_daemon cuda "no CUDA driver\|no CUDA device"
  # The relocatable bundle for GPU hosts (tests/gpu/device_check.sh runs from it).
  echo "=== bundle ===" >&2
  if bazel build --config=cuda //deploy:bundle >&2 &&
     bash deploy/check_bundle.sh bazel-bin/deploy/gpucmd-bundle.tar.xz >&2; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); failures+=("cuda: bundle")
  fi
else
  echo "=== tests: cuda skipped: no CUDA toolkit in /usr/local/cuda ===" >&2
fi
mapfile -t hip_tests < <(bazel query --noshow_progress 'attr(tags, "\bhip\b", tests(//...))' 2>/dev/null)
run_config hip --config=hip --nocache_test_results "${hip_tests[@]}"
run_double_tests hip
check_gpu_daemon hip "no HIP device"
bazel build //server:gpucmdd >&2  # leave the default daemon in bazel-bin

cat "$failure_details"
rm -f "$failure_details"
for failure in "${failures[@]}"; do echo "FAILED $failure"; done
echo "SUMMARY: $passed passed, $failed failed (configs: default, asan, tsan, cuda, cuda-asan, cuda-tsan, hip, hip-asan, hip-tsan)"
((failed == 0))
