"""Kernels: compiling, and launching with arguments checked against the signature the
daemon's kernel front end reported."""

from __future__ import annotations

import math
import weakref
from typing import Any, List, Optional, Sequence, Tuple, Union

import grpc
import numpy

from gpucmd._array import DeviceArray
from gpucmd._errors import CompileError, call, from_rpc_error
from gpucmd._session import Session, StreamLike, stream_number
from gpucmd.v1 import gpucmd_pb2 as pb

DimLike = Union[int, Tuple[int, ...]]

# Per scalar type: its name in messages, the numpy dtype it is, and for integers the
# range it holds.
_SCALARS = {
    pb.SCALAR_TYPE_I32: ("int32", numpy.int32, "i32"),
    pb.SCALAR_TYPE_U32: ("uint32", numpy.uint32, "u32"),
    pb.SCALAR_TYPE_I64: ("int64", numpy.int64, "i64"),
    pb.SCALAR_TYPE_U64: ("uint64", numpy.uint64, "u64"),
    pb.SCALAR_TYPE_F32: ("float32", numpy.float32, "f32"),
    pb.SCALAR_TYPE_F64: ("float64", numpy.float64, "f64"),
}
_MAX_DIM = (1 << 32) - 1


class Access:
    """A device array passed with an explicit access mode: :func:`In`, :func:`Out`,
    :func:`InOut`. Without one, a buffer parameter whose pointee is ``const`` is read
    (``In``) and any other is read and written (``InOut``)."""

    def __init__(self, array: DeviceArray, mode: int) -> None:
        if not isinstance(array, DeviceArray):
            raise TypeError(f"an access mode wraps a gpucmd.DeviceArray, not {type(array).__name__}")
        self.array = array
        self.mode = mode

    def __repr__(self) -> str:
        return f"{pb.Access.Name(self.mode)}({self.array!r})"


def In(array: DeviceArray) -> Access:  # noqa: N802 - named like an annotation
    """``array`` is only read by the kernel."""
    return Access(array, pb.ACCESS_READ)


def Out(array: DeviceArray) -> Access:  # noqa: N802
    """``array`` is only written by the kernel (its old bytes need not be kept)."""
    return Access(array, pb.ACCESS_WRITE)


def InOut(array: DeviceArray) -> Access:  # noqa: N802
    """``array`` is read and written by the kernel."""
    return Access(array, pb.ACCESS_READ_WRITE)


def _dim3(value: DimLike, what: str) -> pb.Dim3:
    """A grid or block: an int or a tuple of 1 to 3 ints (CUDA's dim3)."""
    dims = (value,) if isinstance(value, (int, numpy.integer)) else value
    if not isinstance(dims, (tuple, list)) or not 1 <= len(dims) <= 3:
        raise TypeError(f"{what} is an int or a tuple of 1 to 3 ints, not {value!r}")
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, (int, numpy.integer)):
            raise TypeError(f"{what} is an int or a tuple of 1 to 3 ints, not {value!r}")
        if not 0 <= dim <= _MAX_DIM:
            raise ValueError(f"{what} {value!r}: each dimension is between 0 and {_MAX_DIM}")
    padded = [int(dim) for dim in dims] + [1] * (3 - len(dims))
    return pb.Dim3(x=padded[0], y=padded[1], z=padded[2])


def _scalar_arg(value: Any, param: pb.KernelParam, index: int) -> pb.ScalarArg:
    """``value`` as the scalar ``param`` declares; TypeError for the wrong kind of value,
    ValueError for one out of the type's range."""
    name, dtype, field = _SCALARS[param.scalar_type]
    where = f"argument {index} ({param.declared_type}, {name})"
    if isinstance(value, numpy.generic):
        if not numpy.can_cast(value.dtype, dtype, "safe"):
            raise TypeError(f"{where}: a numpy {value.dtype} does not convert safely to {name}")
        value = value.item()
    is_float_param = param.scalar_type in (pb.SCALAR_TYPE_F32, pb.SCALAR_TYPE_F64)
    if is_float_param:
        if not isinstance(value, (int, float)):
            raise TypeError(f"{where} takes a float, not {type(value).__name__}")
        value = float(value)
        if (param.scalar_type == pb.SCALAR_TYPE_F32 and math.isfinite(value)
                and abs(value) > float(numpy.finfo(numpy.float32).max)):
            raise ValueError(f"{where}: {value} is out of float32's range")
    else:
        if not isinstance(value, int):
            raise TypeError(f"{where} takes an int, not {type(value).__name__}")
        info = numpy.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise ValueError(f"{where}: {value} is out of {name}'s range [{info.min}, {info.max}]")
        value = int(value)
    return pb.ScalarArg(**{field: value})


def _buffer_arg(value: Any, param: pb.KernelParam, index: int,
                session: Session) -> pb.BufferArg:
    where = f"argument {index} ({param.declared_type})"
    if isinstance(value, Access):
        array, mode = value.array, value.mode
    elif isinstance(value, DeviceArray):
        array = value
        mode = pb.ACCESS_READ if param.read_only else pb.ACCESS_READ_WRITE
    elif isinstance(value, numpy.ndarray):
        raise TypeError(f"{where} is a device pointer: pass session.asarray(...) of this array")
    else:
        raise TypeError(f"{where} is a device pointer: pass a gpucmd.DeviceArray, "
                        f"not {type(value).__name__}")
    if array.session is not session:
        raise ValueError(f"{where}: the array belongs to another session")
    if not array.contiguous:
        raise ValueError(f"{where}: a 2D view with rows apart cannot be passed as a pointer")
    array._check_live()
    return pb.BufferArg(buffer=array.buffer, access=mode, offset_bytes=array.offset)


def kernel_args(params: Sequence[pb.KernelParam], args: Sequence[Any],
                session: Session) -> list:
    """The launch arguments for ``args``, checked against ``params`` before anything is sent."""
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"kernel arguments are a tuple or list, not {type(args).__name__}")
    if len(args) != len(params):
        raise TypeError(f"the kernel takes {len(params)} arguments "
                        f"({', '.join(p.declared_type for p in params)}), not {len(args)}")
    converted = []
    for index, (value, param) in enumerate(zip(args, params)):
        if param.kind == pb.ARG_KIND_BUFFER:
            converted.append(pb.KernelArg(buffer=_buffer_arg(value, param, index, session)))
        elif param.kind == pb.ARG_KIND_SCALAR:
            converted.append(pb.KernelArg(scalar=_scalar_arg(value, param, index)))
        elif param.kind == pb.ARG_KIND_TENSOR_MAP:
            if not isinstance(value, pb.TensorMapArg):
                raise TypeError(f"argument {index} ({param.declared_type}) takes a "
                                "gpucmd.v1.gpucmd_pb2.TensorMapArg")
            converted.append(pb.KernelArg(tensor_map=value))
        else:
            raise TypeError(f"argument {index} ({param.declared_type}): unknown parameter kind")
    return converted


class Kernel:
    """A compiled kernel of one session, launched CuPy's way:
    ``kernel(grid, block, args, shared_mem=0, stream=None)``.

    >>> add = session.compile(r'''
    ... extern "C" __global__ void add(const float* a, float* b, int n) {
    ...   int i = blockIdx.x * blockDim.x + threadIdx.x;
    ...   if (i < n) b[i] += a[i];
    ... }''', "add")
    >>> add((4,), (256,), (a, b, 1024))
    """

    def __init__(self, session: Session, name: str, response: pb.CompileResponse) -> None:
        self.session = session
        self.name = name
        self.id = response.kernel_id
        self.params = list(response.params)
        self.log = response.log  # warnings
        self.cache_hit = response.cache_hit

    @classmethod
    def compile(cls, session: Session, source: str, name: str,
                options: Sequence[str]) -> "Kernel":
        if not isinstance(source, str) or not isinstance(name, str):
            raise TypeError("source and name are strings")
        request = pb.CompileRequest(session=session.token, source=source, entry_point=name,
                                    options=compile_options(options))
        try:
            response = session.client._stub.Compile(request, timeout=session.client.timeout)
        except grpc.RpcError as error:
            raise _compile_error(session, error) from None
        return cls(session, name, response)

    def __repr__(self) -> str:
        signature = ", ".join(p.declared_type for p in self.params)
        return f"<gpucmd.Kernel {self.name}({signature}) session={self.session.name!r}>"

    def launch_request(self, grid: DimLike, block: DimLike, args: Sequence[Any],
                       shared_mem: int = 0, stream: StreamLike = None) -> pb.LaunchRequest:
        """The ``LaunchRequest`` a call sends; raises TypeError/ValueError for arguments
        that do not fit the kernel."""
        if isinstance(shared_mem, bool) or not isinstance(shared_mem, int) or not 0 <= shared_mem <= _MAX_DIM:
            raise ValueError(f"shared_mem is a byte count, not {shared_mem!r}")
        return pb.LaunchRequest(session=self.session.token, stream=stream_number(stream),
                                kernel_id=self.id, grid=_dim3(grid, "grid"),
                                block=_dim3(block, "block"),
                                dynamic_shared_memory_bytes=shared_mem,
                                args=kernel_args(self.params, args, self.session))

    def __call__(self, grid: DimLike, block: DimLike, args: Sequence[Any], shared_mem: int = 0,
                 stream: StreamLike = None) -> None:
        """Queues a launch on ``stream``; returns once it is queued (errors of the run
        surface at the next synchronize or read of what it wrote)."""
        request = self.launch_request(grid, block, args, shared_mem, stream)
        call(self.session.client._stub.Launch, request, timeout=self.session.client.timeout)


def compile_options(options: Sequence[str]) -> List[str]:
    """``options`` as a list of strings; a TypeError for a lone string (whose characters
    would otherwise pass for options) or anything but strings in it."""
    if isinstance(options, (str, bytes)):
        raise TypeError(f"options is a sequence of strings, e.g. [{options!r}], not one string")
    options = list(options)
    for option in options:
        if not isinstance(option, str):
            raise TypeError(f"compile options are strings, not {option!r}")
    return options


def _compile_error(session: Session, error: grpc.RpcError) -> Exception:
    """A failed Compile as its exception: a CompileError with the whole log when the
    source did not compile, the code's error otherwise."""
    if error.code() != grpc.StatusCode.INVALID_ARGUMENT:
        return from_rpc_error(error)
    kernel_id = dict(error.trailing_metadata() or ()).get("gpucmd-kernel-id", "")
    log = error.details() or ""
    if kernel_id:
        try:
            log = call(session.client._stub.GetCompileLog,
                       pb.GetCompileLogRequest(session=session.token, kernel_id=kernel_id),
                       timeout=session.client.timeout).log
        except Exception:  # noqa: BLE001 - the cut message is still worth reporting
            pass
    return CompileError(error.details() or "", log, kernel_id)


class RawKernel:
    """A kernel from CUDA C++ source, compiled on its first launch in each session (like
    ``cupy.RawKernel``). The session is ``session`` when given, else that of the first
    device array among the arguments.

    >>> square = gpucmd.RawKernel(r'''
    ... extern "C" __global__ void square(float* x, int n) {
    ...   int i = blockIdx.x * blockDim.x + threadIdx.x;
    ...   if (i < n) x[i] *= x[i];
    ... }''', "square")
    >>> square((1,), (64,), (x, 64))
    """

    def __init__(self, source: str, name: str, options: Sequence[str] = (), *,
                 session: Optional[Session] = None) -> None:
        self.source = source
        self.name = name
        self.options = tuple(compile_options(options))
        self.session = session
        self._compiled: "weakref.WeakKeyDictionary[Session, Kernel]" = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"<gpucmd.RawKernel {self.name} options={self.options!r}>"

    def compile(self, session: Session) -> Kernel:
        """The kernel compiled for ``session`` (compiled once per session)."""
        kernel = self._compiled.get(session)
        if kernel is None:
            kernel = session.compile(self.source, self.name, self.options)
            self._compiled[session] = kernel
        return kernel

    def _session_of(self, args: Sequence[Any]) -> Session:
        if self.session is not None:
            return self.session
        for value in args if isinstance(args, (tuple, list)) else ():
            array = value.array if isinstance(value, Access) else value
            if isinstance(array, DeviceArray):
                return array.session
        raise ValueError(f"{self.name}: no session given and no device array among the arguments")

    def __call__(self, grid: DimLike, block: DimLike, args: Sequence[Any], shared_mem: int = 0,
                 stream: StreamLike = None) -> None:
        self.compile(self._session_of(args))(grid, block, args, shared_mem, stream)
