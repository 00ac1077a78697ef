#!/usr/bin/env bash
# Installs every Debian 12 package gpucmdd needs to build, run and test.
# Idempotent: packages already present are skipped, `apt-get update` runs at most once.
set -euo pipefail

packages=(
  bazel-bootstrap g++ git ca-certificates pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  prometheus-cpp-dev libspdlog-dev libfmt-dev libboost-dev libboost-context-dev
  prometheus systemd curl patchelf xz-utils libamdhip64-dev libseccomp-dev libclang-14-dev
  libgoogle-perftools-dev
  clang-14 libclang-rt-14-dev
  python3-grpcio python3-protobuf python3-numpy python3-pytest python3-pip python3-venv
  python3-setuptools python3-wheel python3-yaml tmux openssl libsystemd-dev nodejs
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  echo "setup: installing ${missing[*]}" >&2
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm: Debian's package, unless the installed Node.js brings its own.
if ! command -v npm >/dev/null; then
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends npm >/dev/null
fi

# The Kubernetes schema validator's npm packages (tools/kubernetes, pinned by its
# lockfile), where deploy/kubernetes_test.sh finds them; reinstalled when the lockfile
# changes.
validator_dir=/var/tmp/gpucmdd-kubernetes-validate
lockfile="$(dirname "$0")/kubernetes/package-lock.json"
if ! cmp -s "$lockfile" "$validator_dir/package-lock.json" ||
   [[ ! -d $validator_dir/node_modules ]]; then
  echo "setup: installing the Kubernetes schema validator in $validator_dir" >&2
  rm -rf "$validator_dir"
  mkdir -p "$validator_dir"
  cp "$(dirname "$0")/kubernetes/package.json" "$lockfile" "$validator_dir/"
  (cd "$validator_dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
