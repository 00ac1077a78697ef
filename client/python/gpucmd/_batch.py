"""Batches: writes, launches, copies and reads collected in a ``with`` block and sent as
``Submit`` batches when it ends, a round trip for all of them instead of one each."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

import grpc
import numpy
import numpy.typing

from gpucmd._array import DeviceArray, fill_pattern
from gpucmd._errors import GpucmdError, call, error_for_number, from_rpc_error
from gpucmd._kernel import DimLike, Kernel, RawKernel
from gpucmd._session import (_MESSAGE_OVERHEAD, _ONE_MESSAGE_BYTES, SHARED_MEMORY_REGION_BYTES,
                             SHARED_MEMORY_THRESHOLD, Session, fill_request)
from gpucmd._shm import SharedRegion
from gpucmd.v1 import gpucmd_pb2 as pb

# The most commands the daemon takes in one Submit batch.
_MAX_BATCH_COMMANDS = 16384
# The most bytes a reply other than a read's bytes takes: a status message is cut at
# 2 KiB, and its code, the command's sequence and its result take a few bytes more.
_MAX_REPLY_BYTES = 2304
# A part of an array's bytes sent in one command (Batch._pieces).
_Piece = Tuple[int, int, int, Optional[pb.PitchedLayout]]


class BatchRead:
    """The result of a read in a batch: :meth:`get` returns it once the batch ran."""

    def __init__(self, array: DeviceArray) -> None:
        self._array = array
        self._bytes = numpy.empty(array.nbytes, dtype=numpy.uint8)
        self._error: Optional[GpucmdError] = None
        self._done = False

    def __repr__(self) -> str:
        state = "done" if self._done else "pending"
        return f"<gpucmd.BatchRead of {self._array!r} ({state})>"

    def get(self) -> numpy.ndarray:
        """The bytes read, as an array of the device array's shape and dtype. Raises
        RuntimeError before the batch ran, and the read's error if it failed."""
        if not self._done:
            raise RuntimeError("a batch's reads have results once its `with` block ended")
        if self._error is not None:
            raise self._error
        return self._bytes.view(self._array.dtype).reshape(self._array.shape)


@dataclasses.dataclass
class _Transfer:
    """A batch's write (``host``: its packed bytes) or read (``result``) of a whole array
    or view, laid out when the batch is sent: through a slice of the session's
    shared-memory region when it is large and the batch's transfers fit one, else inline."""
    array: DeviceArray
    host: Optional[numpy.ndarray] = None
    result: Optional[BatchRead] = None


@dataclasses.dataclass
class _Phase:
    """Commands ``[start, end)`` of a batch, sent once the region's slices they name are
    free: ``fills`` (region offset, bytes) are put in the region before they are sent, and
    ``takes`` (sequence, result, start in it, region offset, size) taken out after their
    answers arrived."""
    start: int
    end: int = 0
    fills: List[Tuple[int, numpy.ndarray]] = dataclasses.field(default_factory=list)
    takes: List[Tuple[int, BatchRead, int, int, int]] = dataclasses.field(default_factory=list)


class Batch:
    """Commands of one session and stream, sent when the ``with`` block ends. Commands
    run in order; one that fails fails those that depend on it (FAILED_PRECONDITION
    naming it), and the first failure is raised after every reply arrived. Writes and
    reads of 1 MiB and more go through the session's shared-memory region when the daemon
    allows one (inline otherwise): one command each while the region (up to 64 MiB) has
    room; past that, the commands after them go once the earlier ones are answered and
    their slices are free again, as a transfer larger than the region goes in pieces.

    >>> with session.batch() as batch:
    ...     batch.write(x, numpy.arange(1024, dtype=numpy.float32))
    ...     batch.launch(scale, 4, 256, (x, numpy.float32(2), 1024))
    ...     doubled = batch.read(x)
    >>> doubled.get()[:3]
    array([0., 2., 4.], dtype=float32)
    """

    def __init__(self, session: Session, stream: int) -> None:
        self.session = session
        self.stream = stream
        # What was asked for, in order: commands as they are sent (and the bytes each
        # carries or brings back), and transfers laid out when the batch is sent.
        self._planned: List[Union[Tuple[pb.Command, int], _Transfer]] = []
        self._commands: List[pb.Command] = []  # as sent, numbered by their place
        self._payload_bytes: List[int] = []
        self._reads: dict = {}  # sequence -> (BatchRead, offset into its result): inline
        self._shared_reads: dict = {}  # sequence -> BatchRead: through the region
        self._region: Optional[SharedRegion] = None
        self._sent = False

    def __repr__(self) -> str:
        return f"<gpucmd.Batch of {len(self._planned)} commands, session {self.session.name!r}>"

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None:
            self.submit()

    def _chunk_bytes(self) -> int:
        return self.session.client.max_message_bytes - _MESSAGE_OVERHEAD

    def _add(self, payload_bytes: int, **command: Any) -> None:
        self._check_unsent()
        self._planned.append((pb.Command(**command), payload_bytes))

    def _check_unsent(self) -> None:
        if self._sent:
            raise RuntimeError("this batch was sent already")

    def _check_array(self, array: DeviceArray) -> None:
        if not isinstance(array, DeviceArray) or array.session is not self.session:
            raise ValueError("a batch takes device arrays of its own session")
        array._check_live()

    @staticmethod
    def _pieces(array: DeviceArray, chunk: int) -> Iterator[_Piece]:
        """``array``'s bytes in pieces of at most ``chunk`` bytes: (offset in its buffer,
        start in its packed bytes, size, rows or None when the piece is contiguous). A 2D
        view's piece is whole rows in one pitched layout, or part of one row when a row
        alone is over ``chunk``."""
        rows = array._rows()
        if rows is None:
            for start in range(0, array.nbytes, chunk):
                yield array.offset + start, start, min(chunk, array.nbytes - start), None
            return
        row_bytes, stride = rows
        height = array.shape[0]
        if row_bytes > chunk:
            for row in range(height):
                for start in range(0, row_bytes, chunk):
                    yield (array.offset + row * stride + start, row * row_bytes + start,
                           min(chunk, row_bytes - start), None)
            return
        rows_per_piece = chunk // row_bytes
        for row in range(0, height, rows_per_piece):
            count = min(rows_per_piece, height - row)
            yield (array.offset + row * stride, row * row_bytes, count * row_bytes,
                   pb.PitchedLayout(width_bytes=row_bytes, height=count, stride_bytes=stride))

    def write(self, array: DeviceArray, values: numpy.typing.ArrayLike) -> None:
        """Copies ``values`` (broadcast and converted to the array's dtype; taken now) into
        ``array`` (a 2D view's rows too, in pitched writes; the padding between them is
        left as it is)."""
        self._check_unsent()
        self._check_array(array)
        host = numpy.array(numpy.broadcast_to(numpy.asarray(values), array.shape),
                           dtype=array.dtype, order="C", copy=True)
        if array.nbytes:
            self._planned.append(_Transfer(array, host=host.reshape(-1).view(numpy.uint8)))

    def fill(self, array: DeviceArray, value: Any) -> None:
        """Sets every element of ``array`` (a 2D view too: one pitched fill) to ``value``,
        as :meth:`DeviceArray.fill`; a value whose bytes repeat no word is written (a
        view's rows in pitched writes)."""
        self._check_array(array)
        element = numpy.asarray(value, dtype=array.dtype)
        pattern = fill_pattern(element)
        if pattern is None:
            self.write(array, element)
            return
        if array.nbytes == 0:
            return
        self._add(0, fill=fill_request(self.session.token, self.stream, array.buffer,
                                       array.offset, array.nbytes, pattern, array._rows()))

    def read(self, array: DeviceArray) -> BatchRead:
        """Reads ``array`` (a 2D view's rows too, in pitched reads) after the commands
        before it; the result is there after the batch."""
        self._check_unsent()
        self._check_array(array)
        result = BatchRead(array)
        if array.nbytes == 0:
            result._done = True
        else:
            self._planned.append(_Transfer(array, result=result))
        return result

    def copy(self, source: DeviceArray, target: DeviceArray) -> None:
        """Device-to-device copy of ``source`` into ``target``, as
        :meth:`DeviceArray.copy_to` (2D views too: one pitched copy)."""
        self._check_array(source)
        self._check_array(target)
        request = source._copy_request(target, self.stream)
        if request is not None:
            self._add(0, copy=request)

    def launch(self, kernel: Union[Kernel, RawKernel], grid: DimLike, block: DimLike,
               args: Sequence[Any], shared_mem: int = 0) -> None:
        """Launches ``kernel`` (arguments checked now, as a direct call checks them)."""
        if isinstance(kernel, RawKernel):
            kernel = kernel.compile(self.session)
        if not isinstance(kernel, Kernel) or kernel.session is not self.session:
            raise ValueError("a batch launches kernels compiled for its own session")
        request = kernel.launch_request(grid, block, args, shared_mem, self.stream)
        self._add(0, launch=request)

    def synchronize(self) -> None:
        """Waits, inside the batch, for the stream's work before the commands after it."""
        self._add(0, synchronize=pb.SynchronizeRequest(session=self.session.token,
                                                       stream=self.stream))

    def _lay_out(self) -> List[_Phase]:
        """Numbers the planned commands and lays out the transfers in phases: those of
        SHARED_MEMORY_THRESHOLD bytes and more through slices of the session's region
        (SHARED_MEMORY_REGION_BYTES at most), a new phase starting where the region has
        no room left; the others in inline pieces of a message each."""
        large = [entry.array.nbytes for entry in self._planned
                 if isinstance(entry, _Transfer) and entry.array.nbytes >= SHARED_MEMORY_THRESHOLD]
        if large:
            wanted = min(sum(large), SHARED_MEMORY_REGION_BYTES)
            self._region = self.session._shared_region(wanted)  # None: all inline
        phases = [_Phase(start=0)]
        used = 0  # of the region, by the current phase
        for entry in self._planned:
            if not isinstance(entry, _Transfer):
                self._append(*entry)
                continue
            if self._region is None or entry.array.nbytes < SHARED_MEMORY_THRESHOLD:
                self._transfer_inline(entry)
                continue
            for piece in self._pieces(entry.array, self._region.size):
                if used + piece[2] > self._region.size:
                    phases[-1].end = len(self._commands)
                    phases.append(_Phase(start=len(self._commands)))
                    used = 0
                self._transfer_through_region(entry, piece, used, phases[-1])
                used += piece[2]
        phases[-1].end = len(self._commands)
        return phases

    def _append(self, command: pb.Command, payload_bytes: int) -> int:
        command.sequence = len(self._commands)
        self._commands.append(command)
        self._payload_bytes.append(payload_bytes)
        return command.sequence

    def _piece_command(self, transfer: _Transfer, piece: _Piece,
                       where: Optional[pb.SharedMemorySlice] = None) -> pb.Command:
        """The write or read of ``piece`` of the transfer: its bytes inline, or in the
        region's slice ``where`` (a write then answered once they were copied out, so that
        the slice is free once it is answered)."""
        offset, start, size, rows = piece
        if transfer.host is not None:
            header = pb.WriteHeader(session=self.session.token, stream=self.stream,
                                    buffer=transfer.array.buffer, offset_bytes=offset,
                                    pitched=rows)
            if where is None:
                header.inline_size_bytes = size
                data = transfer.host[start:start + size].tobytes()
                return pb.Command(write=pb.WriteRequest(header=header, data=data))
            header.shared_memory.CopyFrom(where)
            header.answer_when_copied = True
            return pb.Command(write=pb.WriteRequest(header=header))
        request = pb.ReadRequest(session=self.session.token, stream=self.stream,
                                 buffer=transfer.array.buffer, offset_bytes=offset,
                                 pitched=rows, shared_memory=where)
        if rows is None:
            request.size_bytes = size
        return pb.Command(read=request)

    def _transfer_inline(self, transfer: _Transfer) -> None:
        for piece in self._pieces(transfer.array, self._chunk_bytes()):
            sequence = self._append(self._piece_command(transfer, piece), piece[2])
            if transfer.result is not None:
                self._reads[sequence] = (transfer.result, piece[1])

    def _transfer_through_region(self, transfer: _Transfer, piece: _Piece, region_offset: int,
                                 phase: _Phase) -> None:
        """One command for ``piece`` of the transfer whose bytes are the region's from
        ``region_offset``: a write's are put there before ``phase`` is sent, a read's taken
        out once it was answered."""
        _, start, size, _ = piece
        where = pb.SharedMemorySlice(region=self._region.region, offset_bytes=region_offset,
                                     size_bytes=size)
        sequence = self._append(self._piece_command(transfer, piece, where), 0)
        if transfer.host is not None:
            phase.fills.append((region_offset, transfer.host[start:start + size]))
        else:
            self._shared_reads[sequence] = transfer.result
            phase.takes.append((sequence, transfer.result, start, region_offset, size))

    def _requests(self, phase: _Phase) -> List[pb.SubmitRequest]:
        """The phase's commands in SubmitRequests whose payloads each fit a message, of at
        most _MAX_BATCH_COMMANDS commands each."""
        requests: List[pb.SubmitRequest] = []
        limit = self._chunk_bytes()
        current, current_bytes = pb.SubmitRequest(), 0
        for command, payload in zip(self._commands[phase.start:phase.end],
                                    self._payload_bytes[phase.start:phase.end]):
            if current.commands and (current_bytes + payload > limit
                                     or len(current.commands) == _MAX_BATCH_COMMANDS):
                requests.append(current)
                current, current_bytes = pb.SubmitRequest(), 0
            current.commands.append(command)
            current_bytes += payload
        if current.commands:
            requests.append(current)
        return requests

    def submit(self) -> None:
        """Sends the batch and waits for every reply (the ``with`` block does this)."""
        self._check_unsent()
        self._sent = True
        failures: List[GpucmdError] = []
        for phase in self._lay_out():
            failures += self._send(phase)
        for result, _ in self._reads.values():
            result._done = True
        for result in self._shared_reads.values():
            result._done = True
        if failures:
            raise failures[0]

    def _send(self, phase: _Phase) -> List[GpucmdError]:
        """Sends ``phase`` with its writes' bytes in the region, and takes its reads'
        bytes out once every reply arrived; returns the failed commands' errors."""
        requests = self._requests(phase)
        if not requests:
            return []
        region = self._region.view(self._region.size) if self._region is not None else None
        try:
            for region_offset, data in phase.fills:
                region[region_offset:region_offset + data.size] = data
            failures = []
            for response in self._responses(requests, phase):
                for reply in response.replies:
                    failure = self._take_reply(reply)
                    if failure is not None:
                        failures.append(failure)
            for _, result, start, region_offset, size in phase.takes:
                if result._error is None:
                    result._bytes[start:start + size] = region[region_offset:region_offset + size]
            return failures
        finally:
            del region  # the region's mapping may be closed later

    def _responses(self, requests: List[pb.SubmitRequest],
                   phase: _Phase) -> List[pb.SubmitResponse]:
        """The daemon's answers to `requests` (the phase's commands), sent as batches on
        one Submit call."""
        answer_bytes = (phase.end - phase.start) * _MAX_REPLY_BYTES + sum(
            payload for command, payload in zip(self._commands[phase.start:phase.end],
                                                self._payload_bytes[phase.start:phase.end])
            if command.HasField("read"))
        if len(requests) == 1 and answer_bytes <= _ONE_MESSAGE_BYTES:
            # Answered by one response: a unary call (Client._single_batch).
            return [call(self.session.client._single_batch, requests[0],
                         timeout=self.session.client.timeout)]
        answers: List[pb.SubmitResponse] = []
        batches_done = 0
        responses = call(self.session.client._stub.Submit, iter(requests),
                         timeout=self.session.client.timeout)
        try:
            for response in responses:
                answers.append(response)
                if response.batch_done:
                    batches_done += 1
                    if batches_done == len(requests):
                        break
        except grpc.RpcError as error:  # the stream broke
            raise from_rpc_error(error) from None
        finally:
            responses.cancel()
        return answers

    def _take_reply(self, reply: pb.CommandReply) -> Optional[GpucmdError]:
        command = self._commands[reply.sequence]
        kind = command.WhichOneof("command")
        inline = self._reads.get(reply.sequence)
        result = inline[0] if inline is not None else self._shared_reads.get(reply.sequence)
        if reply.status.code != 0:
            error = error_for_number(
                reply.status.code, f"batch command {reply.sequence} ({kind}): {reply.status.message}")
            if result is not None and result._error is None:
                result._error = error
            return error
        if inline is not None:
            start = inline[1]
            data = numpy.frombuffer(reply.read.data, dtype=numpy.uint8)
            result._bytes[start:start + data.size] = data
        return None
