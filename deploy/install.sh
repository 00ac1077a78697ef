#!/usr/bin/env bash
# Installs gpucmdd: binaries, the systemd units (the service, and the socket for socket
# activation) and sysusers file, and an example config (never overwriting an existing
# one).
#
#   deploy/install.sh [--destdir=DIR] [--prefix=/usr/local] [--bin-dir=DIR]
#
# --destdir stages the install under DIR (packaging, tests); --bin-dir installs already
# built binaries from DIR (server/gpucmdd, client/gpucmdctl,
# driver/cpu/gpucmd-kernel-executor, driver/front_end/gpucmd-kernel-front-end) instead of
# building. Run as root for a real install, then:
#   systemd-sysusers && systemctl daemon-reload && systemctl enable --now gpucmdd
# or, with socket activation (clients may connect while the daemon starts):
#   systemd-sysusers && systemctl daemon-reload && systemctl enable --now gpucmdd.socket
set -euo pipefail

destdir=""
prefix=/usr/local
bin=""
for arg in "$@"; do
  case "$arg" in
    --destdir=*) destdir=${arg#--destdir=} ;;
    --prefix=*) prefix=${arg#--prefix=} ;;
    --bin-dir=*) bin=${arg#--bin-dir=} ;;
    *) echo "install.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
if [[ -z $bin ]]; then
  bash tools/setup.sh
  bazel build -c opt //server:gpucmdd //client:gpucmdctl //driver/cpu:gpucmd-kernel-executor \
    //driver/front_end:gpucmd-kernel-front-end
  bin=$(bazel info -c opt bazel-bin)
fi

install -D -m 0755 "$bin/server/gpucmdd" "$destdir$prefix/bin/gpucmdd"
install -D -m 0755 "$bin/client/gpucmdctl" "$destdir$prefix/bin/gpucmdctl"
# Client kernels are parsed and run in these processes; gpucmdd finds them next to itself.
install -D -m 0755 "$bin/driver/cpu/gpucmd-kernel-executor" \
  "$destdir$prefix/bin/gpucmd-kernel-executor"
install -D -m 0755 "$bin/driver/front_end/gpucmd-kernel-front-end" \
  "$destdir$prefix/bin/gpucmd-kernel-front-end"
sed "s|/usr/local/bin/|$prefix/bin/|" deploy/systemd/gpucmdd.service \
  | install -D -m 0644 /dev/stdin "$destdir/etc/systemd/system/gpucmdd.service"
install -D -m 0644 deploy/systemd/gpucmdd.socket "$destdir/etc/systemd/system/gpucmdd.socket"
install -D -m 0644 deploy/systemd/gpucmdd.sysusers "$destdir/usr/lib/sysusers.d/gpucmdd.conf"
if [[ ! -e $destdir/etc/gpucmdd/gpucmdd.textproto ]]; then
  install -D -m 0644 deploy/config/gpucmdd.textproto "$destdir/etc/gpucmdd/gpucmdd.textproto"
fi
install -D -m 0644 README.md "$destdir$prefix/share/doc/gpucmdd/README.md"
echo "installed gpucmdd under ${destdir:-/}$prefix"
