#!/usr/bin/env bash
# Installs every Debian 12 package gpucmdd needs to build, run and test.
# Idempotent: packages already present are skipped, `apt-get update` runs at most once.
set -euo pipefail

packages=(
  bazel-bootstrap g++ git ca-certificates pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  prometheus-cpp-dev libcivetweb-dev libspdlog-dev libfmt-dev libboost-context-dev
  prometheus systemd curl patchelf xz-utils libamdhip64-dev libseccomp-dev libclang-14-dev
  clang-14 libclang-rt-14-dev
  python3-grpcio python3-protobuf python3-numpy python3-pytest python3-pip python3-venv
  python3-setuptools python3-wheel tmux openssl libsystemd-dev
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
