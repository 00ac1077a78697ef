"""SAXPY on the daemon from Python, checked against numpy.

    bazel run //client/python:saxpy_example -- --target=unix:/tmp/gpucmdd.sock
"""

import argparse
import sys

import numpy

import gpucmd

SAXPY = r"""
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = a * x[i] + y[i];
}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default=gpucmd.DEFAULT_TARGET)
    parser.add_argument("--size", type=int, default=1 << 20)
    options = parser.parse_args()

    x = numpy.random.default_rng(0).standard_normal(options.size, dtype=numpy.float32)
    y = numpy.ones(options.size, dtype=numpy.float32)
    with gpucmd.connect(options.target) as client, client.session(name="saxpy-example") as session:
        saxpy = gpucmd.RawKernel(SAXPY, "saxpy")
        device_x, device_y = session.asarray(x), session.asarray(y)
        saxpy((64,), (256,), (options.size, 2.0, device_x, device_y))
        result = device_y.get()
    expected = 2.0 * x + y
    error = float(numpy.max(numpy.abs(result - expected)))
    print(f"saxpy of {options.size} floats on {client.target}: max error {error:g}")
    return 0 if error < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
