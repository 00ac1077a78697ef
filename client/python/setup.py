"""Builds the package with its gRPC stubs generated from ../../proto by protoc and
grpc_python_plugin (Debian: protobuf-compiler, protobuf-compiler-grpc). Offline:

    pip install --no-build-isolation client/python
"""

import os
import shutil
import subprocess

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.join(HERE, "..", "..", "proto")


def generate_stubs() -> None:
    """Writes gpucmd/v1/*_pb2*.py (before setuptools looks for the package's files)."""
    plugin = shutil.which("grpc_python_plugin")
    if shutil.which("protoc") is None or plugin is None:
        raise RuntimeError("generating the stubs needs protoc and grpc_python_plugin "
                           "(apt-get install protobuf-compiler protobuf-compiler-grpc)")
    os.makedirs(os.path.join(HERE, "gpucmd", "v1"), exist_ok=True)
    subprocess.check_call([
        "protoc", f"-I{PROTO_ROOT}", f"--python_out={HERE}", f"--pyi_out={HERE}",
        f"--plugin=protoc-gen-grpc_python={plugin}", f"--grpc_python_out={HERE}",
        os.path.join(PROTO_ROOT, "gpucmd", "v1", "gpucmd.proto")])
    with open(os.path.join(HERE, "gpucmd", "v1", "__init__.py"), "w") as init:
        init.write('"""Generated from proto/gpucmd/v1."""\n')


generate_stubs()
setup()
