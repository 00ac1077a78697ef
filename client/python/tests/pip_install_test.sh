#!/usr/bin/env bash
# The README's offline install: a virtual environment over Debian's packages, then
# `pip install --no-build-isolation` of client/python (its stubs generated from proto/),
# then the installed package imports, has its stubs and type marker, and checks a
# kernel argument without a daemon.
set -euo pipefail
source_root=$PWD
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/pip-install.XXXXXX")
mkdir -p "$work/client"
cp -rL "$source_root/client/python" "$work/client/python"
cp -rL "$source_root/proto" "$work/proto"
rm -rf "$work/client/python/gpucmd/v1"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --no-build-isolation --no-index --no-deps -q "$work/client/python"
cd "$work"  # away from the sources: the installed copy is imported
"$work/venv/bin/python" - <<'PY'
import os
import gpucmd
from gpucmd.v1 import gpucmd_pb2, gpucmd_pb2_grpc
package = os.path.dirname(gpucmd.__file__)
assert "site-packages" in package, package
assert os.path.exists(os.path.join(package, "py.typed"))
assert os.path.exists(os.path.join(package, "v1", "gpucmd_pb2.pyi"))
assert gpucmd_pb2_grpc.GpuCommandStub
param = gpucmd_pb2.KernelParam(kind=gpucmd_pb2.ARG_KIND_SCALAR,
                               scalar_type=gpucmd_pb2.SCALAR_TYPE_I32, declared_type="int n")
try:
    gpucmd._kernel.kernel_args([param], [1 << 40], session=None)
except ValueError as error:
    assert "range" in str(error)
else:
    raise AssertionError("an out-of-range int was accepted")
print("installed", gpucmd.__version__, "at", package)
PY
