"""Sessions: the lease that keeps one alive, streams, and the byte transfers arrays use."""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from typing import Iterable, Iterator, Optional, Sequence, Tuple, Union

import grpc
import numpy
import numpy.typing

from gpucmd import _progress
from gpucmd._client import Client
from gpucmd._errors import (FailedPrecondition, GpucmdError, InvalidArgument,
                             ResourceExhausted, Unavailable, call, from_rpc_error)
from gpucmd._shm import SharedRegion, hand_over_descriptor
from gpucmd.v1 import gpucmd_pb2 as pb

#: Transfers of at least this many bytes go through a shared-memory region when the
#: daemon offers one (smaller ones are cheaper inline).
SHARED_MEMORY_THRESHOLD = 1 << 20
#: The largest shared-memory region a session maps; larger transfers go in pieces.
SHARED_MEMORY_REGION_BYTES = 64 << 20
#: Room left in each gRPC message for the fields around an inline chunk.
_MESSAGE_OVERHEAD = 1024
#: Answers of at most this many bytes come in one message whatever the daemon's
#: limits.max_message_bytes (at least 64 KiB; it sends reads in chunks 1 KiB smaller):
#: such reads and batches go as unary calls (Client._single_read, _single_batch).
_ONE_MESSAGE_BYTES = 60 << 10
#: Inline writes up to this size go as one unary call (Client._single_write): 4-5x
#: faster at 4 KiB, a third faster at 256 KiB, alike at 1 MiB; at 8 MiB the stream was
#: the faster (docs/BENCHMARKS.md).
_UNARY_WRITE_BYTES = 1 << 20
#: A refusal of a region that may pass (a limit the daemon's other sessions hold, the
#: daemon out of reach) is asked again after this many seconds; the others stand.
_REGION_RETRY_SECONDS = 5.0

StreamLike = Union[None, int, "Stream"]


class Stream:
    """A logical stream of a session: work on one stream runs in order, streams run
    beside each other. ``session.stream(n)`` names stream ``n`` (0 is the default)."""

    def __init__(self, session: "Session", number: int) -> None:
        if not _is_stream_id(number):
            raise ValueError(f"a stream is an int in [0, 2**64), not {number!r}")
        self.session = session
        self.number = int(number)

    def __repr__(self) -> str:
        return f"<gpucmd.Stream {self.number} of session {self.session.name!r}>"

    def synchronize(self) -> str:
        """Waits for this stream's work; returns what its kernels printed."""
        return self.session.synchronize(self)


def _is_int(value) -> bool:
    """Whether ``value`` is an integer as the protocol's ids take it: a Python or numpy
    int, not a bool."""
    return isinstance(value, (int, numpy.integer)) and not isinstance(value, bool)


def _is_stream_id(number) -> bool:
    """Whether ``number`` can name a stream: an int in the id's uint64 range."""
    return _is_int(number) and 0 <= number < 1 << 64


def stream_number(stream: StreamLike) -> int:
    """The stream id a request names for ``stream`` (None: the default stream 0)."""
    if stream is None:
        return 0
    if isinstance(stream, Stream):
        return stream.number
    if _is_stream_id(stream):
        return int(stream)
    raise TypeError(f"stream must be a gpucmd.Stream, an int in [0, 2**64) or None, "
                    f"not {stream!r}")


class _Lease:
    """Holds the session's KeepAlive stream open on a background thread: when this
    process dies, the stream breaks and the daemon reclaims the session after its grace."""

    def __init__(self, client: Client, token: str) -> None:
        self._done = threading.Event()
        self._call = client._stub.KeepAlive(self._requests(token))
        self._thread = threading.Thread(target=self._drain, name="gpucmd-lease", daemon=True)
        self._thread.start()

    def _requests(self, token: str) -> Iterator[pb.KeepAliveRequest]:
        yield pb.KeepAliveRequest(session=token)
        self._done.wait()

    def _drain(self) -> None:
        try:
            for _ in self._call:
                pass
        except grpc.RpcError:
            pass  # cancelled at close, or the daemon went away

    def end(self) -> None:
        self._done.set()
        self._call.cancel()
        self._thread.join(timeout=5)


# Sessions still open at interpreter exit are closed then (a lease would only end them
# after the daemon's grace).
_open_sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()


@atexit.register
def _close_open_sessions() -> None:
    for session in list(_open_sessions):
        try:
            session.close()
        except GpucmdError:
            pass


def fill_request(token: str, stream: int, buffer: int, offset: int, nbytes: int,
                 pattern: Tuple[int, int], rows: Optional[Tuple[int, int]]) -> pb.FillRequest:
    """The Fill of ``nbytes`` of ``buffer`` from ``offset`` with ``pattern`` (value,
    element_bytes); with ``rows`` = (row_bytes, stride_bytes), those bytes are rows
    ``stride_bytes`` apart (one pitched fill)."""
    value, element_bytes = pattern
    request = pb.FillRequest(session=token, stream=stream, buffer=buffer, offset_bytes=offset,
                             value=value, element_bytes=element_bytes)
    if rows:
        row_bytes, stride = rows
        request.pitched.CopyFrom(pb.PitchedLayout(width_bytes=row_bytes,
                                                  height=nbytes // row_bytes,
                                                  stride_bytes=stride))
    else:
        request.size_bytes = nbytes
    return request


class Session:
    """A session on one device: its buffers, kernels and streams, reclaimed together
    when it closes. Made by :meth:`Client.session`.

    >>> with client.session(device=0, name="trainer") as session:
    ...     x = session.asarray(numpy.ones(1024, dtype=numpy.float32))
    ...     y = session.zeros(1024, numpy.float32)
    ...     axpy = session.compile(SOURCE, "axpy")
    ...     axpy(4, 256, (numpy.int32(1024), numpy.float32(2), x, y))
    ...     print(y.get()[:4])
    """

    def __init__(self, client: Client, device: int, name: str, token: str,
                 idle_timeout_ms: int) -> None:
        self.client = client
        self.device = device
        self.name = name
        self.token = token
        self.idle_timeout_ms = idle_timeout_ms
        self.closed = False
        self._lease: Optional[_Lease] = None
        self._region: Optional[SharedRegion] = None
        # Why this session has no shared-memory region, once it was refused one, and until
        # when that stands (None: for good).
        self._shared_memory_refusal: Optional[GpucmdError] = None
        self._shared_memory_refused_until: Optional[float] = None
        self._lock = threading.Lock()

    @classmethod
    def _open(cls, client: Client, device: int, name: str) -> "Session":
        if not _is_int(device):
            raise TypeError(f"device is a device's ordinal (an int), not {device!r}")
        if not 0 <= device < 1 << 32:
            raise ValueError(f"device is a device's ordinal, in [0, 2**32), not {device}")
        if not isinstance(name, str):
            raise TypeError(f"name is a string, not {name!r}")
        device = int(device)
        response = call(client._stub.OpenSession,
                        pb.OpenSessionRequest(client_name=name, device=device),
                        timeout=client.timeout)
        session = cls(client, device, name, response.session, response.idle_timeout_ms)
        session._lease = _Lease(client, response.session)
        _open_sessions.add(session)
        return session

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<gpucmd.Session {self.name!r} on device {self.device} ({state})>"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing can be raised from a finaliser
            pass

    def close(self) -> int:
        """Closes the session: the daemon frees everything it holds. Returns the bytes
        of device memory given back. Closing twice does nothing the second time."""
        with self._lock:
            if self.closed:
                return 0
            self.closed = True
        _open_sessions.discard(self)
        self.client._forget(self)
        if self._lease is not None:
            self._lease.end()
        try:
            response = call(self.client._stub.CloseSession,
                            pb.CloseSessionRequest(session=self.token), timeout=self.client.timeout)
        finally:
            if self._region is not None:
                self._region.close()
                self._region = None
        return response.reclaimed_bytes

    # Streams, ordering, figures --------------------------------------------------

    def stream(self, number: int) -> Stream:
        """Logical stream ``number`` of this session."""
        return Stream(self, number)

    def synchronize(self, stream: StreamLike = None) -> str:
        """Waits for the work on ``stream`` (every stream when None) and reports its first
        asynchronous error; returns what the session's kernels printed since."""
        request = pb.SynchronizeRequest(session=self.token)
        if stream is not None:
            request.stream = stream_number(stream)
        return call(self.client._stub.Synchronize, request,
                    timeout=self.client.timeout).kernel_output

    def stats(self) -> pb.SessionStats:
        """This session's memory, buffers and queued commands."""
        return call(self.client._stub.GetStats, pb.GetStatsRequest(session=self.token),
                    timeout=self.client.timeout).session

    # Arrays and kernels (defined in their modules) -----------------------------------

    def asarray(self, array: "numpy.typing.ArrayLike",
                dtype: "numpy.typing.DTypeLike" = None) -> "DeviceArray":
        """A device copy of ``array`` (any numpy array or sequence; Fortran-ordered and
        strided inputs are made contiguous)."""
        from gpucmd._array import DeviceArray
        return DeviceArray.from_host(self, array, dtype)

    def empty(self, shape: Union[int, Tuple[int, ...]],
              dtype: "numpy.typing.DTypeLike" = numpy.float32) -> "DeviceArray":
        """An uninitialised device array (its bytes are zero: the daemon never hands out
        another session's data, but do not count on it)."""
        from gpucmd._array import DeviceArray
        return DeviceArray.allocate(self, shape, dtype)

    def zeros(self, shape: Union[int, Tuple[int, ...]],
              dtype: "numpy.typing.DTypeLike" = numpy.float32) -> "DeviceArray":
        """A device array of zeros (filled on the device: no bytes are sent)."""
        from gpucmd._array import DeviceArray
        array = DeviceArray.allocate(self, shape, dtype)
        array.fill(0)
        return array

    def compile(self, source: str, name: str, options: Sequence[str] = ()) -> "Kernel":
        """Compiles entry point ``name`` (``extern "C" __global__``) of CUDA C++ ``source``.
        Raises :class:`CompileError` with the compiler's log when it does not compile."""
        from gpucmd._kernel import Kernel
        return Kernel.compile(self, source, name, options)

    def batch(self, stream: StreamLike = None) -> "Batch":
        """Collects writes, launches and reads into ``Submit`` batches sent when the
        ``with`` block ends; read results are available after it."""
        from gpucmd._batch import Batch
        return Batch(self, stream_number(stream))

    # Buffers and transfers (used by DeviceArray) ------------------------------------

    def _allocate(self, nbytes: int) -> int:
        if nbytes >= 1 << 64:
            raise ValueError(f"array is too big: {nbytes} bytes, more than any device holds")
        return call(self.client._stub.Allocate,
                    pb.AllocateRequest(session=self.token, size_bytes=nbytes),
                    timeout=self.client.timeout).buffer

    def _free(self, buffer: int) -> None:
        call(self.client._stub.Free, pb.FreeRequest(session=self.token, buffer=buffer),
             timeout=self.client.timeout)

    def _copy(self, request: pb.CopyRequest) -> None:
        call(self.client._stub.Copy, request, timeout=self.client.timeout)

    def _fill(self, buffer: int, offset: int, nbytes: int, pattern: Tuple[int, int],
              stream: StreamLike, rows: Optional[Tuple[int, int]] = None) -> None:
        """Sets ``nbytes`` from ``offset`` to ``pattern`` on the device, as
        :func:`fill_request` names them."""
        call(self.client._stub.Fill,
             fill_request(self.token, stream_number(stream), buffer, offset, nbytes, pattern,
                          rows),
             timeout=self.client.timeout)

    def _shared_region(self, nbytes: int) -> Optional[SharedRegion]:
        """A registered region of at least min(nbytes, the region cap) bytes, or None
        when the daemon offers none (not a Unix socket, refused: the reason is kept in
        ``_shared_memory_refusal``): transfers go inline."""
        if not self.client.target.startswith("unix:"):
            self._refuse_regions(FailedPrecondition(
                f"shared memory needs the daemon's Unix socket, not {self.client.target}"),
                transient=False)
        if self._shared_memory_refusal is not None:
            until = self._shared_memory_refused_until
            if until is None or time.monotonic() < until:
                return None
            self._shared_memory_refusal = None
        wanted = min(max(nbytes, SHARED_MEMORY_THRESHOLD), SHARED_MEMORY_REGION_BYTES)
        if self._region is not None and self._region.size >= wanted:
            return self._region
        if self._region is not None:
            self._drop_region()
        try:
            region = SharedRegion(wanted)
        except OSError as error:  # out of memory or descriptors, for now
            self._refuse_regions(FailedPrecondition(f"no memfd for a region: {error}"),
                                 transient=True)
            return None
        try:
            token = hand_over_descriptor(self.client.target, region.fd)
            region.region = call(self.client._stub.RegisterSharedMemory,
                                 pb.RegisterSharedMemoryRequest(session=self.token, handoff=token,
                                                                size_bytes=region.size),
                                 timeout=self.client.timeout).region
        except GpucmdError as error:
            region.close()
            self._refuse_regions(error,
                                 transient=isinstance(error, (ResourceExhausted, Unavailable)))
            return None
        self._region = region
        return region

    def _refuse_regions(self, error: GpucmdError, transient: bool) -> None:
        """Transfers go inline for the reason ``error``: for good, or, when ``transient``,
        until a region is asked for again ``_REGION_RETRY_SECONDS`` later."""
        self._shared_memory_refusal = error
        self._shared_memory_refused_until = (time.monotonic() + _REGION_RETRY_SECONDS
                                             if transient else None)

    def _drop_region(self) -> None:
        """Unregisters and unmaps the region; a copy still reading it keeps the daemon's
        mapping until it completed (Note [Shared-memory regions])."""
        region, self._region = self._region, None
        try:
            call(self.client._stub.UnregisterSharedMemory,
                 pb.UnregisterSharedMemoryRequest(session=self.token, region=region.region),
                 timeout=self.client.timeout)
        finally:
            region.close()

    def _write(self, buffer: int, offset: int, data: numpy.ndarray, stream: StreamLike,
               rows: Optional[Tuple[int, int]] = None, shared_memory: Optional[bool] = None) -> None:
        """Host -> device: ``data`` (C-contiguous) lands at ``offset``; with ``rows`` =
        (row_bytes, stride_bytes) it is packed rows landing ``stride_bytes`` apart."""
        raw = data.reshape(-1).view(numpy.uint8)
        row_bytes, stride = rows if rows else (raw.size, raw.size)
        for piece_start, piece_rows, region in self._pieces(raw.size, row_bytes, shared_memory):
            piece = raw[piece_start * row_bytes:(piece_start + piece_rows) * row_bytes]
            header = pb.WriteHeader(session=self.token, stream=stream_number(stream),
                                    buffer=buffer, offset_bytes=offset + piece_start * stride)
            if rows:
                header.pitched.CopyFrom(pb.PitchedLayout(width_bytes=row_bytes, height=piece_rows,
                                                         stride_bytes=stride))
            if region is not None:
                view = region.view(piece.size)
                view[:] = piece
                del view
                header.shared_memory.CopyFrom(pb.SharedMemorySlice(
                    region=region.region, offset_bytes=0, size_bytes=piece.size))
                # Returns once the bytes left the region: it may be refilled at once.
                call(self.client._stub.WriteShared, header, timeout=self.client.timeout)
            else:
                header.inline_size_bytes = piece.size
                if piece.size <= min(_UNARY_WRITE_BYTES,
                                     self.client.max_message_bytes - _MESSAGE_OVERHEAD):
                    # One message, answered by one: a unary call (Client._single_write).
                    call(self.client._single_write,
                         pb.WriteRequest(header=header, data=piece.tobytes()),
                         timeout=self.client.timeout)
                else:
                    call(self.client._stub.Write, self._inline_chunks(header, piece),
                         timeout=self.client.timeout)

    def _inline_chunks(self, header: pb.WriteHeader,
                       piece: numpy.ndarray) -> Iterator[pb.WriteRequest]:
        chunk = self.client.max_message_bytes - _MESSAGE_OVERHEAD
        progress = _progress.Bar(piece.size, "write")
        yield pb.WriteRequest(header=header, data=piece[:chunk].tobytes())
        progress.advance(min(chunk, piece.size))
        for start in range(chunk, piece.size, chunk):
            yield pb.WriteRequest(data=piece[start:start + chunk].tobytes())
            progress.advance(min(chunk, piece.size - start))
        progress.close()

    def _read(self, buffer: int, offset: int, nbytes: int, stream: StreamLike,
              rows: Optional[Tuple[int, int]] = None,
              shared_memory: Optional[bool] = None) -> numpy.ndarray:
        """Device -> host: ``nbytes`` from ``offset`` as a uint8 array; with ``rows`` =
        (row_bytes, stride_bytes), rows read ``stride_bytes`` apart, packed here."""
        out = numpy.empty(nbytes, dtype=numpy.uint8)
        row_bytes, stride = rows if rows else (nbytes, nbytes)
        for piece_start, piece_rows, region in self._pieces(nbytes, row_bytes, shared_memory):
            size = piece_rows * row_bytes
            request = pb.ReadRequest(session=self.token, stream=stream_number(stream),
                                     buffer=buffer, offset_bytes=offset + piece_start * stride)
            if rows:
                request.pitched.CopyFrom(pb.PitchedLayout(width_bytes=row_bytes, height=piece_rows,
                                                          stride_bytes=stride))
            else:
                request.size_bytes = size
            target = out[piece_start * row_bytes:piece_start * row_bytes + size]
            if region is not None:
                request.shared_memory.CopyFrom(pb.SharedMemorySlice(
                    region=region.region, offset_bytes=0, size_bytes=size))
                call(self.client._stub.ReadShared, request, timeout=self.client.timeout)
                view = region.view(size)
                target[:] = view
                del view
            else:
                self._read_inline(request, target)
        return out

    def _read_inline(self, request: pb.ReadRequest, target: numpy.ndarray) -> None:
        responses: Iterable[pb.ReadResponse]
        if 0 < target.size <= _ONE_MESSAGE_BYTES:
            # Answered by one message: a unary call (Client._single_read).
            responses = [call(self.client._single_read, request, timeout=self.client.timeout)]
        else:
            responses = self._drain_stream(
                self.client._stub.Read(request, timeout=self.client.timeout))
        progress = _progress.Bar(target.size, "read")
        position = 0
        try:
            for response in responses:
                chunk = numpy.frombuffer(response.data, dtype=numpy.uint8)
                target[position:position + chunk.size] = chunk
                position += chunk.size
                progress.advance(chunk.size)
        finally:
            progress.close()
        if position != target.size:
            raise GpucmdError(f"the daemon sent {position} of {target.size} bytes")

    @staticmethod
    def _drain_stream(responses: Iterator) -> Iterator:
        """The messages of a server stream, its failure raised as its GpucmdError (a
        stream fails while it is read, not when it is made)."""
        try:
            yield from responses
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    def _pieces(self, nbytes: int, row_bytes: int,
                shared_memory: Optional[bool]) -> Iterator[Tuple[int, int, Optional[SharedRegion]]]:
        """Splits a transfer of ``nbytes`` (whole rows of ``row_bytes``) into (first row,
        rows, region) pieces: one inline piece, or region-sized pieces through shared
        memory. ``shared_memory``: None decides by size, True/False forces (True raises
        why, when the session can have no region or a row does not fit one)."""
        rows_total = nbytes // row_bytes if row_bytes else 0
        use_region = (nbytes >= SHARED_MEMORY_THRESHOLD if shared_memory is None
                      else shared_memory) and nbytes > 0
        region = self._shared_region(nbytes) if use_region else None
        if shared_memory and nbytes > 0:
            if region is None:
                refusal = self._shared_memory_refusal
                raise type(refusal)(f"shared memory was asked for: {refusal.message}")
            if row_bytes > region.size:
                raise InvalidArgument(f"shared memory was asked for, but a row of {row_bytes} "
                                      f"bytes is larger than a region ({region.size} bytes)")
        if region is None or row_bytes > region.size:
            yield 0, rows_total, None
            return
        rows_per_piece = region.size // row_bytes
        for first in range(0, rows_total, rows_per_piece):
            yield first, min(rows_per_piece, rows_total - first), region
