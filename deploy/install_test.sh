#!/usr/bin/env bash
# Stages deploy/install.sh into a temporary root and checks what it installed: the units
# pass `systemd-analyze verify` (pointed at the staged binary), the example config
# is valid for the installed daemon, and the binaries run.
set -euo pipefail

runfiles=${TEST_SRCDIR:?}/gpucmdd
root=$(mktemp -d "${TEST_TMPDIR:-/tmp}/root.XXXXXX")

bash "$runfiles/deploy/install.sh" --destdir="$root" --bin-dir="$runfiles"

for f in usr/local/bin/gpucmdd usr/local/bin/gpucmdctl usr/local/bin/gpucmd-kernel-executor \
         usr/local/bin/gpucmd-kernel-front-end \
         etc/systemd/system/gpucmdd.service etc/systemd/system/gpucmdd.socket \
         usr/lib/sysusers.d/gpucmdd.conf etc/gpucmdd/gpucmdd.textproto; do
  [[ -e $root/$f ]] || { echo "FAIL: $f was not installed"; exit 1; }
done

# systemd-analyze checks that ExecStart's binary exists: point it at the staged one.
unit=$root/gpucmdd.service
sed "s|ExecStart=/usr/local/bin/|ExecStart=$root/usr/local/bin/|" \
  "$root/etc/systemd/system/gpucmdd.service" > "$unit"
cp "$root/etc/systemd/system/gpucmdd.socket" "$root/gpucmdd.socket"
# It must print nothing: every remark is a defect of a unit.
remarks=$(systemd-analyze verify "$unit" "$root/gpucmdd.socket" 2>&1)
[[ -z $remarks ]] || { echo "FAIL: systemd-analyze verify: $remarks"; exit 1; }

"$root/usr/local/bin/gpucmdd" --config="$root/etc/gpucmdd/gpucmdd.textproto" --check_config
"$root/usr/local/bin/gpucmdd" --version | grep -q "^gpucmdd "

# An existing config is never overwritten by a reinstall.
echo 'log_level: "debug"' > "$root/etc/gpucmdd/gpucmdd.textproto"
bash "$runfiles/deploy/install.sh" --destdir="$root" --bin-dir="$runfiles"
grep -q debug "$root/etc/gpucmdd/gpucmdd.textproto" || { echo "FAIL: config overwritten"; exit 1; }
echo PASS
