#!/usr/bin/env bash
# Builds the fuzz harnesses of tests/fuzz with clang and libFuzzer under AddressSanitizer
# and UndefinedBehaviorSanitizer, and runs each for SECONDS from its seed corpus (Note
# [Fuzzing] in tests/fuzz/fuzz_input.h). Inputs that crash are kept in the work
# directory and the script fails naming them.
#
#   tools/fuzz.sh [--seconds=60] [HARNESS...]      (default: every harness)
#
# HARNESS is config, compile_options, kernel_parser or request_validation.
set -euo pipefail

seconds=60
harnesses=()
for arg in "$@"; do
  case "$arg" in
    --seconds=*) seconds=${arg#--seconds=} ;;
    *) harnesses+=("$arg") ;;
  esac
done
((${#harnesses[@]})) || harnesses=(config compile_options kernel_parser request_validation)

repo=$(cd "$(dirname "$0")/.." && pwd)
work=${FUZZ_WORK:-$(mktemp -d /tmp/gpucmd-fuzz.XXXXXX)}
mkdir -p "$work/gen"
protoc -I"$repo/proto" --cpp_out="$work/gen" gpucmd/v1/config.proto gpucmd/v1/gpucmd.proto

# What each harness compiles besides itself (sources are built with coverage, so the
# fuzzer sees into them), and what it links.
declare -A sources=(
  [config]="server/config.cc server/listen_address.cc base/file.cc $work/gen/gpucmd/v1/config.pb.cc"
  [compile_options]="driver/compile_options.cc"
  [kernel_parser]="driver/front_end/kernel_parser.cc driver/kernel_signature.cc
                   driver/compile_options.cc driver/cpu/cpu_prelude.cc driver/cpu/cpu_headers.cc
                   driver/cooperative_groups_headers.cc driver/cub_headers.cc driver/bfloat16_header.cc
                   driver/half_min_max.cc driver/portable_intrinsics.cc driver/simd_intrinsics.cc
                   driver/cpu/cuda_std_headers.cc driver/math_constants_header.cc
                   driver/half_math_functions.cc"
  [request_validation]="server/rpc/request_validation.cc $work/gen/gpucmd/v1/gpucmd.pb.cc"
)
declare -A libraries=(
  [config]="-lprotobuf"
  [compile_options]=""
  [kernel_parser]="-l:libclang-14.so.1"
  [request_validation]="-lprotobuf"
)
absl=$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format \
       absl_flat_hash_map absl_flat_hash_set absl_synchronization)
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -w -I"$repo" -I"$work/gen" -I/usr/lib/llvm-14/include)

failed=()
for harness in "${harnesses[@]}"; do
  [[ -n ${sources[$harness]+x} ]] || { echo "fuzz.sh: unknown harness $harness" >&2; exit 2; }
  echo "=== fuzz: $harness (${seconds} s) ===" >&2
  binary="$work/${harness}_fuzzer"
  # shellcheck disable=SC2086
  (cd "$repo" && clang++ "${flags[@]}" "tests/fuzz/${harness}_fuzzer.cc" ${sources[$harness]} \
     -o "$binary" $absl ${libraries[$harness]} -lpthread)
  corpus="$work/corpus/$harness"
  mkdir -p "$corpus" "$work/crashes/$harness"
  cp "$repo/tests/fuzz/corpus/$harness/"* "$corpus/"
  if ! (cd "$work/crashes/$harness" &&
        ASAN_OPTIONS=detect_leaks=0 "$binary" -max_total_time="$seconds" -timeout=20 \
          -rss_limit_mb=4096 -print_final_stats=1 "$corpus" >&2); then
    failed+=("$harness: see $work/crashes/$harness")
  fi
done
if ((${#failed[@]})); then
  printf 'fuzz.sh: FAILED %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz.sh: every harness ran ${seconds} s without a finding" >&2
