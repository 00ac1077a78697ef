"""Device arrays: a buffer of a session with a numpy shape and dtype."""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple, Union

import numpy
import numpy.typing

from gpucmd._errors import GpucmdError
from gpucmd._session import Session, StreamLike, stream_number
from gpucmd.v1 import gpucmd_pb2 as pb

ShapeLike = Union[int, Tuple[int, ...]]


def _normalize_shape(shape: ShapeLike) -> Tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, numpy.integer)) else tuple(shape)
    for dim in dims:
        if not isinstance(dim, (int, numpy.integer)) or isinstance(dim, bool) or dim < 0:
            raise ValueError(f"a shape holds non-negative ints, not {shape!r}")
    return tuple(int(dim) for dim in dims)


def fill_pattern(element: numpy.ndarray) -> Optional[Tuple[int, int]]:
    """``(value, element_bytes)`` of the daemon's Fill that writes ``element`` (one value
    of an array's dtype) over and over: its bytes as a repeated 1-, 2- or 4-byte word,
    little-endian; None when they are not one (a float64 of 1.0)."""
    raw = element.tobytes()
    for width in (1, 2, 4):
        if len(raw) % width == 0 and raw == raw[:width] * (len(raw) // width):
            return int.from_bytes(raw[:width], "little"), width
    return None


def _host_dtype(dtype) -> numpy.dtype:
    dtype = numpy.dtype(dtype)
    if dtype.hasobject or dtype.itemsize == 0:
        raise TypeError(f"device arrays hold plain data, not {dtype}")
    return dtype


class DeviceArray:
    """A C-contiguous array in device memory, or a 2D view into one.

    ``shape``, ``dtype``, ``strides``, ``nbytes``, ``size`` and ``ndim`` mean what they do
    in numpy; ``buffer`` is the daemon's buffer id. :meth:`get` copies to a numpy array,
    :meth:`set` from one; ``numpy.asarray(device_array)`` works too. Slicing a 2D array
    (``a[1:3, 2:5]``, rows with any step) gives a view whose transfers are pitched.

    >>> x = session.asarray(numpy.arange(12, dtype=numpy.int32).reshape(3, 4))
    >>> x[1:, 1:3].get()
    array([[ 5,  6],
           [ 9, 10]], dtype=int32)
    """

    def __init__(self, session: Session, buffer: int, shape: Tuple[int, ...], dtype: numpy.dtype,
                 offset: int = 0, row_stride: Optional[int] = None,
                 base: Optional["DeviceArray"] = None) -> None:
        self.session = session
        self.buffer = buffer
        self.shape = shape
        self.dtype = dtype
        self.offset = offset  # bytes into the buffer
        self._row_stride = row_stride  # bytes between rows of a 2D view; None: contiguous
        self.base = base  # the array owning the buffer, for views
        self._freed = False

    # Construction -------------------------------------------------------------------

    @classmethod
    def allocate(cls, session: Session, shape: ShapeLike,
                 dtype: numpy.typing.DTypeLike) -> "DeviceArray":
        shape = _normalize_shape(shape)
        dtype = _host_dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        # An empty array still gets a buffer (of one byte): it has an id like any other.
        return cls(session, session._allocate(max(nbytes, 1)), shape, dtype)

    @classmethod
    def from_host(cls, session: Session, array: numpy.typing.ArrayLike,
                  dtype: numpy.typing.DTypeLike = None) -> "DeviceArray":
        host = numpy.require(numpy.asarray(array, dtype=dtype), requirements=["C_CONTIGUOUS"])
        device = cls.allocate(session, host.shape, host.dtype)
        try:
            device.set(host)
        except BaseException:
            device.free()
            raise
        return device

    # Properties ---------------------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def contiguous(self) -> bool:
        """True unless this is a 2D view with rows apart."""
        return self._row_stride is None

    @property
    def strides(self) -> Tuple[int, ...]:
        if self._row_stride is not None:
            return (self._row_stride, self.dtype.itemsize)
        strides, step = [], self.dtype.itemsize
        for dim in reversed(self.shape):
            strides.append(step)
            step *= dim
        return tuple(reversed(strides))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d device array")
        return self.shape[0]

    def __repr__(self) -> str:
        view = "" if self.base is None else " view"
        return (f"<gpucmd.DeviceArray{view} shape={self.shape} dtype={self.dtype} "
                f"device={self.session.device} session={self.session.name!r} buffer={self.buffer}>")

    # Transfers ----------------------------------------------------------------------

    def _rows(self) -> Optional[Tuple[int, int]]:
        if self._row_stride is None:
            return None
        return self.shape[1] * self.dtype.itemsize, self._row_stride

    def get(self, stream: StreamLike = None, *, shared_memory: Optional[bool] = None) -> numpy.ndarray:
        """Copies the array to a new numpy array, after the work queued before it on
        ``stream``. ``shared_memory``: None lets the size decide, True/False forces it."""
        self._check_live()
        if self.nbytes == 0:
            return numpy.empty(self.shape, self.dtype)
        raw = self.session._read(self.buffer, self.offset, self.nbytes, stream, self._rows(),
                                 shared_memory)
        return raw.view(self.dtype).reshape(self.shape)

    def set(self, values: numpy.typing.ArrayLike, stream: StreamLike = None, *,
            shared_memory: Optional[bool] = None) -> None:
        """Copies ``values`` (an array of this shape, or anything that broadcasts to it,
        converted to this dtype) into the array."""
        self._check_live()
        host = numpy.asarray(values)
        if host.dtype.hasobject:
            raise TypeError("device arrays hold plain data, not Python objects")
        if host.shape != self.shape:
            try:
                host = numpy.broadcast_to(host, self.shape)
            except ValueError:
                raise ValueError(f"cannot set an array of shape {self.shape} from one of "
                                 f"shape {host.shape}") from None
        host = numpy.ascontiguousarray(host, dtype=self.dtype)
        if self.nbytes == 0:
            return
        self.session._write(self.buffer, self.offset, host, stream, self._rows(), shared_memory)

    def fill(self, value: Any, stream: StreamLike = None) -> None:
        """Sets every element to ``value`` (converted to this dtype), as
        ``cupy.ndarray.fill`` does: on the device, sending no bytes, when the value's bytes
        repeat a 1-, 2- or 4-byte word (any 1-, 2- or 4-byte dtype, and zero of any);
        else by a write of the values."""
        self._check_live()
        element = numpy.asarray(value, dtype=self.dtype)
        pattern = fill_pattern(element)
        if pattern is None:
            self.set(element, stream)
            return
        if self.nbytes == 0:
            return
        # A 2D view's rows in one pitched fill.
        self.session._fill(self.buffer, self.offset, self.nbytes, pattern, stream, self._rows())

    def copy_to(self, other: "DeviceArray", stream: StreamLike = None) -> None:
        """Device-to-device copy into ``other`` (same session, same number of bytes; a
        2D view and the array it is copied with have the same shape, and its rows go in
        one pitched copy). Within one buffer, no byte read may be written."""
        if not isinstance(other, DeviceArray) or other.session is not self.session:
            raise ValueError("copy_to needs a device array of the same session")
        request = self._copy_request(other, stream_number(stream))
        if request is not None:
            self.session._copy(request)

    def _copy_request(self, other: "DeviceArray", stream: int) -> Optional[pb.CopyRequest]:
        """The Copy of this array's bytes into ``other``'s, as :meth:`copy_to` takes
        them; None when there are none."""
        self._check_live()
        other._check_live()
        if other.nbytes != self.nbytes:
            raise ValueError(f"cannot copy {self.nbytes} bytes into {other.nbytes}")
        if self.nbytes == 0:
            return None
        request = pb.CopyRequest(session=self.session.token, stream=stream,
                                 source_buffer=self.buffer, source_offset_bytes=self.offset,
                                 target_buffer=other.buffer, target_offset_bytes=other.offset)
        if self.contiguous and other.contiguous:
            request.size_bytes = self.nbytes
            return request
        if self.shape != other.shape:
            raise ValueError("views are copied between arrays of the same shape")
        request.pitched.CopyFrom(pb.PitchedCopyRows(
            width_bytes=self.shape[1] * self.dtype.itemsize, height=self.shape[0],
            source_stride_bytes=self.strides[0], target_stride_bytes=other.strides[0]))
        return request

    def __array__(self, dtype=None) -> numpy.ndarray:
        host = self.get()
        return host if dtype is None else host.astype(dtype)

    # Views --------------------------------------------------------------------------

    def __getitem__(self, key) -> "DeviceArray":
        """1D arrays: ``a[start:stop]``. 2D arrays: ``a[rows, start:stop]`` with ``rows`` a
        slice with positive step (or an int). Anything else raises IndexError."""
        self._check_live()
        owner = self.base if self.base is not None else self
        if self.ndim == 1 and isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step != 1:
                raise IndexError("1D device views take a step of 1")
            count = max(stop - start, 0)
            return DeviceArray(self.session, self.buffer, (count,), self.dtype,
                               self.offset + start * self.dtype.itemsize, None, owner)
        if self.ndim == 2 and isinstance(key, tuple) and len(key) == 2:
            rows, columns = key
            if isinstance(rows, (int, numpy.integer)):
                index = int(rows) + (self.shape[0] if rows < 0 else 0)
                if not 0 <= index < self.shape[0]:
                    raise IndexError(f"row {rows} out of range for {self.shape[0]} rows")
                rows = slice(index, index + 1)
            if not isinstance(rows, slice) or not isinstance(columns, slice):
                raise IndexError("2D device views take slices (or a row index)")
            row_start, row_stop, row_step = rows.indices(self.shape[0])
            column_start, column_stop, column_step = columns.indices(self.shape[1])
            if row_step < 1 or column_step != 1:
                raise IndexError("2D device views take a positive row step and a column step of 1")
            row_stride = self.strides[0]
            row_count = len(range(row_start, row_stop, row_step))
            return DeviceArray(self.session, self.buffer,
                               (row_count, max(column_stop - column_start, 0)), self.dtype,
                               self.offset + row_start * row_stride + column_start * self.dtype.itemsize,
                               row_stride * row_step, owner)
        raise IndexError(f"device arrays support 1D slices and 2D slices, not {key!r} on "
                         f"{self.ndim} dimensions")

    # Lifetime -----------------------------------------------------------------------

    def _check_live(self) -> None:
        owner = self.base if self.base is not None else self
        if owner._freed:
            raise ValueError(f"{self!r} was freed")
        if self.session.closed:
            raise ValueError(f"{self!r} belongs to a closed session")

    def free(self) -> None:
        """Frees the buffer now (views of it become unusable). Freeing twice does nothing."""
        if self.base is not None:
            raise ValueError("free the array a view was made from, not the view")
        if self._freed:
            return
        self._freed = True
        if not self.session.closed:
            self.session._free(self.buffer)

    def __del__(self) -> None:
        if self.base is None and not getattr(self, "_freed", True):
            try:
                self.free()
            except (GpucmdError, ValueError):
                pass
