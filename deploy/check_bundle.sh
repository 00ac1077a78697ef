#!/usr/bin/env bash
# Checks a bundle made by make_bundle.sh: an archive under 60 MiB (what can be carried to
# a GPU host), whose binaries run from anywhere with every library outside glibc and the
# NVIDIA toolkit taken from the bundle itself.
#
#   deploy/check_bundle.sh BUNDLE.tar.xz
set -euo pipefail

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xf "$1"
size=$(stat -c %s "$1")
if ((size >= 60 * 1024 * 1024)); then
  echo "FAIL: the bundle is $size bytes (limit 60 MiB)"
  exit 1
fi
# deploy/Containerfile unpacks the bundle in /opt: every /opt/gpucmd path it names is in it.
containerfile="$(dirname "$0")/Containerfile"
for path in $(grep -o '/opt/gpucmd/[A-Za-z0-9_./-]*' "$containerfile" | sort -u); do
  if [[ ! -e $work/${path#/opt/} ]]; then
    echo "FAIL: $containerfile names $path, which the bundle does not have"
    exit 1
  fi
done
for binary in "$work"/gpucmd/bin/*; do
  if ldd "$binary" | grep -q "not found"; then
    echo "FAIL: $(basename "$binary") misses libraries:"
    ldd "$binary" | grep "not found"
    exit 1
  fi
  outside=$(ldd "$binary" | awk '/=> \// {print $3}' |
            grep -v "^$work/" | grep -Ev '/(libc|libm|libdl|libpthread|librt|libnvrtc)[.-]' || true)
  if [[ -n $outside ]]; then
    echo "FAIL: $(basename "$binary") loads libraries from outside the bundle:"
    echo "$outside"
    exit 1
  fi
done
env -i "$work/gpucmd/bin/gpucmdd" --version | grep -q '^gpucmdd '
echo "bundle OK: $((size / 1024 / 1024)) MiB, $(du -sm "$work/gpucmd" | cut -f1) MiB unpacked"
