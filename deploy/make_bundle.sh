#!/usr/bin/env bash
# Makes a relocatable gpucmdd bundle: the given binaries in bin/, every shared library
# they need that is not part of glibc (nor the NVIDIA driver/toolkit, which GPU hosts
# provide) in lib/, found through an $ORIGIN run path. Runs on x86-64 Linux with
# glibc 2.36 or newer.
#
#   deploy/make_bundle.sh OUT.tar.xz BINARY...
set -euo pipefail

out=$1
shift
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/gpucmd/bin" "$stage/gpucmd/lib"

# glibc's own libraries and the loader come from the host; so do the NVIDIA driver and
# NVRTC (the CUDA toolkit of the GPU host, matching its driver).
system='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libcuda|libnvrtc)[.-]'

for binary in "$@"; do
  name=$(basename "$binary")
  cp -L "$binary" "$stage/gpucmd/bin/$name"
  chmod u+w "$stage/gpucmd/bin/$name"
  patchelf --set-rpath '$ORIGIN/../lib' "$stage/gpucmd/bin/$name"
  if ldd "$binary" | grep -q "not found"; then
    echo "make_bundle: $binary needs libraries that cannot be found:" >&2
    ldd "$binary" | grep "not found" >&2
    exit 1
  fi
  ldd "$binary" | awk '/=> \// {print $1, $3}' | while read -r soname path; do
    if [[ $soname =~ $system ]] || [[ -e $stage/gpucmd/lib/$soname ]]; then continue; fi
    cp -L "$path" "$stage/gpucmd/lib/$soname"
    chmod u+w "$stage/gpucmd/lib/$soname"
    patchelf --set-rpath '$ORIGIN' "$stage/gpucmd/lib/$soname"
  done
done
# The kernel front end's libclang finds its own headers (stddef.h, ...) in lib/clang.
if compgen -G "$stage/gpucmd/lib/libclang-*" > /dev/null; then
  mkdir -p "$stage/gpucmd/lib/clang"
  cp -r /usr/lib/llvm-14/lib/clang/14.0.6/include "$stage/gpucmd/lib/clang/include"
fi
# xz: the archive travels to GPU hosts, and the front end's LLVM compresses well.
tar -C "$stage" -cf - gpucmd | xz -T2 -9 > "$out"
