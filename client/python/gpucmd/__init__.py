"""gpucmd: the Python client of the gpucmdd GPU command daemon.

Arrays live in a session's device memory, kernels are CUDA C++ compiled by the daemon,
and everything a session holds is reclaimed when it closes or its process dies.

>>> import numpy, gpucmd
>>> with gpucmd.connect("unix:/tmp/gpucmdd.sock") as client, client.session() as session:
...     x = session.asarray(numpy.arange(1024, dtype=numpy.float32))
...     double = session.compile(r'''
...         extern "C" __global__ void double_it(float* x, int n) {
...           int i = blockIdx.x * blockDim.x + threadIdx.x;
...           if (i < n) x[i] *= 2;
...         }''', "double_it")
...     double((4,), (256,), (x, 1024))
...     x.get()[:3]
array([0., 2., 4.], dtype=float32)
"""

from gpucmd._array import DeviceArray
from gpucmd._batch import Batch, BatchRead
from gpucmd._client import DEFAULT_TARGET, Client, Device, Health, connect
from gpucmd._errors import (Aborted, AlreadyExists, Cancelled, CompileError, DataLoss,
                            DeadlineExceeded, FailedPrecondition, GpucmdError, Internal,
                            InvalidArgument, NotFound, OutOfRange, PermissionDenied,
                            ResourceExhausted, Unauthenticated, Unavailable, Unimplemented,
                            Unknown)
from gpucmd._kernel import Access, In, InOut, Kernel, Out, RawKernel
from gpucmd._session import Session, Stream

__version__ = "0.1.0"

__all__ = [
    "Aborted", "Access", "AlreadyExists", "Batch", "BatchRead", "Cancelled", "Client",
    "CompileError", "DEFAULT_TARGET", "DataLoss", "DeadlineExceeded", "Device",
    "DeviceArray", "FailedPrecondition", "GpucmdError", "Health", "In", "InOut", "Internal",
    "InvalidArgument", "Kernel", "NotFound", "Out", "OutOfRange", "PermissionDenied",
    "RawKernel", "ResourceExhausted", "Session", "Stream", "Unauthenticated", "Unavailable",
    "Unimplemented", "Unknown", "connect",
]
