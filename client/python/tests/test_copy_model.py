"""The daemon's copies checked against a model of device memory kept here: random writes,
reads and device copies, inline and through a shared-memory region, contiguous and
pitched (device copies too), unary and in Submit batches, with offsets, sizes and
layouts drawn near the buffers' and the region's edges and at the ends of the 64-bit
range. A copy the daemon accepts must move exactly the bytes it names; one it refuses
must change nothing and say why, with a documented code. The wire protocol is used
directly (the generated stubs), so that requests the Python client would never build
are sent too.

Seeds: ``COPY_MODEL_SEEDS`` (comma-separated) replaces the default ones, e.g.
``bazel test //client/python:test_copy_model --test_env=COPY_MODEL_SEEDS=7,8,9``.
"""

from __future__ import annotations

import dataclasses
import os
import random
from typing import Any, Callable, Dict, List, Optional

import grpc
import numpy
import pytest

from gpucmd._shm import SharedRegion, hand_over_descriptor
from gpucmd.v1 import gpucmd_pb2 as pb

REGION_BYTES = 1 << 16
BUFFER_SIZES = (4096, 10000, 1)
STEPS = 300
CHECK_EVERY = 25
#: What a refused copy may be answered; anything else (INTERNAL, UNKNOWN, ...) is a bug.
DOCUMENTED_REFUSALS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                       grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.RESOURCE_EXHAUSTED,
                       grpc.StatusCode.FAILED_PRECONDITION}
U64 = 1 << 64
EDGES = (0, 1, 2, 7, 4095, 4096, 4097, 9999, 10000, 10001, REGION_BYTES - 1, REGION_BYTES,
         REGION_BYTES + 1, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, U64 - 4096, U64 - 1)


def seeds() -> List[int]:
    named = os.environ.get("COPY_MODEL_SEEDS")
    return [int(seed) for seed in named.split(",")] if named else [1, 2, 3]


@dataclasses.dataclass
class Placement:
    """Where a copy's bytes are in a buffer: `offset`, then one contiguous run of
    `size` bytes, or `pitched` rows. The host side is packed."""
    offset: int
    size: int
    pitched: Optional[pb.PitchedLayout]

    def host_bytes(self) -> int:
        if self.pitched is None:
            return self.size
        return self.pitched.width_bytes * self.pitched.height

    def end(self) -> int:
        """One past the last buffer byte the copy covers (its offset when it covers none)."""
        if self.pitched is None:
            return self.offset + self.size
        if self.host_bytes() == 0:
            return self.offset
        return self.offset + (self.pitched.height - 1) * self.pitched.stride_bytes + \
            self.pitched.width_bytes

    def indices(self, buffer_bytes: int) -> numpy.ndarray:
        """The byte indices the copy covers in a buffer of `buffer_bytes`, in host order;
        only for a copy the daemon accepted, which must lie inside its buffer."""
        assert self.end() <= buffer_bytes, f"accepted past the buffer's end: {self}"
        if self.pitched is None:
            return numpy.arange(self.offset, self.end())
        if self.host_bytes() == 0:
            return numpy.arange(0)
        # Python integers first: one row may name any stride, past numpy's int64.
        starts = numpy.array([self.offset + row * self.pitched.stride_bytes
                              for row in range(self.pitched.height)], dtype=numpy.int64)
        return (starts[:, None] + numpy.arange(self.pitched.width_bytes)[None, :]).ravel()


@dataclasses.dataclass
class Draft:
    """A drawn copy: `call` sends it as a unary call and returns the answer; `command` is
    the same copy as a batch command; `accepted` takes the answer (a read's bytes) once
    the daemon accepted it, checks it and updates the model."""
    call: Callable[[], Any]
    command: pb.Command
    accepted: Callable[[Any], None]


class Model:
    """One session's buffers and region on the daemon, and what their bytes should be."""

    def __init__(self, stub, target: str, token: str, rng: random.Random) -> None:
        self.stub = stub
        self.token = token
        self.rng = rng
        self.region = SharedRegion(REGION_BYTES)
        handoff = hand_over_descriptor(target, self.region.fd)
        self.region_id = stub.RegisterSharedMemory(pb.RegisterSharedMemoryRequest(
            session=token, handoff=handoff, size_bytes=REGION_BYTES)).region
        self.shared = self.region.view(REGION_BYTES)
        self.buffers: Dict[int, numpy.ndarray] = {}
        for size in BUFFER_SIZES:
            buffer = stub.Allocate(pb.AllocateRequest(session=token, size_bytes=size)).buffer
            self.buffers[buffer] = numpy.zeros(size, numpy.uint8)
            header = pb.WriteHeader(session=token, buffer=buffer, inline_size_bytes=size)
            stub.Write(iter([pb.WriteRequest(header=header, data=bytes(size))]))
        self.unknown_buffer = max(self.buffers) + 1000

    def close(self) -> None:
        self.shared = None  # the region unmaps once no view of it is left
        self.region.close()

    # Drawing requests --------------------------------------------------------------

    def number(self, typical: int) -> int:
        return self.rng.choice(EDGES) if self.rng.random() < 0.3 else self.rng.randrange(typical + 1)

    def buffer(self) -> int:
        return self.unknown_buffer if self.rng.random() < 0.05 else self.rng.choice(list(self.buffers))

    def placement(self, buffer: int) -> Placement:
        size = self.buffers.get(buffer, numpy.zeros(16)).size
        offset = self.number(size)
        if self.rng.random() < 0.5:
            return Placement(offset, self.number(size), None)
        width, height = self.number(64), self.number(64)
        stride = (width + self.number(64)) % U64 if self.rng.random() < 0.9 else self.number(64)
        return Placement(offset, 0, pb.PitchedLayout(width_bytes=width, height=height,
                                                     stride_bytes=stride))

    def slice(self, size: int) -> pb.SharedMemorySlice:
        region = self.region_id if self.rng.random() < 0.95 else self.rng.choice(
            [self.region_id + 1, 0, U64 - 1])
        size = size % U64 if self.rng.random() < 0.85 else self.number(REGION_BYTES)
        return pb.SharedMemorySlice(region=region, offset_bytes=self.number(REGION_BYTES),
                                    size_bytes=size)

    def fresh_region_bytes(self) -> None:
        self.shared[:] = numpy.frombuffer(self.rng.randbytes(REGION_BYTES), numpy.uint8)

    # Requests ----------------------------------------------------------------------

    def header(self, buffer: int, placement: Placement) -> pb.WriteHeader:
        header = pb.WriteHeader(session=self.token, buffer=buffer,
                                offset_bytes=placement.offset)
        if placement.pitched is not None:
            header.pitched.CopyFrom(placement.pitched)
        return header

    def read_request(self, buffer: int, placement: Placement) -> pb.ReadRequest:
        request = pb.ReadRequest(session=self.token, buffer=buffer, offset_bytes=placement.offset)
        if placement.pitched is not None:
            request.pitched.CopyFrom(placement.pitched)
        else:
            request.size_bytes = placement.size
        return request

    # Drafts: a drawn copy as a unary call and as a batch command, and what the model
    # does once the daemon accepted it ----------------------------------------------

    def inline_write(self) -> Draft:
        buffer = self.buffer()
        placement = self.placement(buffer)
        if placement.pitched is None:
            placement.size = min(placement.size, 1 << 16)  # the payload is the copy
        host = placement.host_bytes()
        # A payload of another size than a pitched layout's must be refused; so must a
        # layout past any buffer's end, whose payload is not worth sending.
        size = host if self.rng.random() < 0.9 and host <= 1 << 16 else self.rng.randrange(65)
        if placement.pitched is None:
            placement.size = host = size
        data = self.rng.randbytes(size)
        header = self.header(buffer, placement)
        header.inline_size_bytes = size
        request = pb.WriteRequest(header=header, data=data)

        def accepted(_) -> None:
            assert size == host, f"accepted a payload of {size} bytes for {placement}"
            self.place(buffer, placement, numpy.frombuffer(data, numpy.uint8))
        return Draft(lambda: self.stub.Write(iter([request])), pb.Command(write=request),
                     accepted)

    def shared_write(self) -> Draft:
        buffer = self.buffer()
        placement = self.placement(buffer)
        source = self.slice(placement.host_bytes())
        header = self.header(buffer, placement)
        header.shared_memory.CopyFrom(source)

        def accepted(_) -> None:
            if placement.pitched is None:
                placement.size = source.size_bytes  # a contiguous write copies the slice
            self.place(buffer, placement, self.in_region(source, placement.host_bytes()))
        return Draft(lambda: self.stub.WriteShared(header),
                     pb.Command(write=pb.WriteRequest(header=header)), accepted)

    def inline_read(self) -> Draft:
        buffer = self.buffer()
        placement = self.placement(buffer)
        request = self.read_request(buffer, placement)

        def accepted(data: bytes) -> None:
            numpy.testing.assert_array_equal(numpy.frombuffer(data, numpy.uint8),
                                             self.bytes_of(buffer, placement))
        return Draft(lambda: b"".join(reply.data for reply in self.stub.Read(request)),
                     pb.Command(read=request), accepted)

    def shared_read(self) -> Draft:
        buffer = self.buffer()
        placement = self.placement(buffer)
        target = self.slice(placement.host_bytes())
        request = self.read_request(buffer, placement)
        request.shared_memory.CopyFrom(target)

        def accepted(answer: pb.ReadResponse) -> None:
            expected = self.bytes_of(buffer, placement)
            assert answer.total_bytes == expected.size
            numpy.testing.assert_array_equal(self.in_region(target, expected.size), expected)
        return Draft(lambda: self.stub.ReadShared(request), pb.Command(read=request), accepted)

    def device_copy(self) -> Draft:
        source, target = self.buffer(), self.buffer()
        read = self.placement(source)
        request = pb.CopyRequest(
            session=self.token, source_buffer=source, source_offset_bytes=read.offset,
            target_buffer=target,
            target_offset_bytes=self.number(self.buffers.get(target, numpy.zeros(16)).size))
        if read.pitched is None:
            request.size_bytes = read.size
            written = Placement(request.target_offset_bytes, read.size, None)
        else:  # the same rows, at a stride of their own
            rows = read.pitched
            stride = (rows.width_bytes + self.number(64)) % U64 if self.rng.random() < 0.9 \
                else self.number(64)
            request.pitched.CopyFrom(pb.PitchedCopyRows(
                width_bytes=rows.width_bytes, height=rows.height,
                source_stride_bytes=rows.stride_bytes, target_stride_bytes=stride))
            written = Placement(request.target_offset_bytes, 0, pb.PitchedLayout(
                width_bytes=rows.width_bytes, height=rows.height, stride_bytes=stride))

        def accepted(_) -> None:
            if source == target:
                size = self.buffers[source].size
                shared = numpy.intersect1d(read.indices(size), written.indices(size))
                assert shared.size == 0, f"accepted a copy reading bytes it writes: {request}"
            self.place(target, written, self.bytes_of(source, read).copy())
        return Draft(lambda: self.stub.Copy(request), pb.Command(copy=request), accepted)

    # Running drafts: each returns the outcomes, once the model holds what the daemon
    # should --------------------------------------------------------------------------

    def unary(self, draft: Draft) -> List[str]:
        try:
            answer = draft.call()
        except grpc.RpcError as error:
            assert error.code() in DOCUMENTED_REFUSALS, error
            assert error.details(), error
            return [error.code().name]
        draft.accepted(answer)
        return ["OK"]

    def batch(self, drafts: List[Draft]) -> List[str]:
        """The drafts' commands in one Submit batch, then a synchronize. Shared reads stay
        out: a batch may not read into a slice that its own writes copy from before its
        stream got that far (WriteHeader in the proto)."""
        commands = [draft.command for draft in drafts]
        commands.append(pb.Command(synchronize=pb.SynchronizeRequest(session=self.token)))
        for sequence, command in enumerate(commands):
            command.sequence = sequence
        replies = [reply for response in self.stub.Submit(
            iter([pb.SubmitRequest(commands=commands)])) for reply in response.replies]
        assert [reply.sequence for reply in replies] == list(range(len(commands))), replies
        outcomes = []
        for draft, reply in zip(drafts, replies):
            code = next(code for code in grpc.StatusCode if code.value[0] == reply.status.code)
            if code == grpc.StatusCode.OK:
                draft.accepted(reply.read.data if reply.HasField("read") else reply)
            else:
                assert code in DOCUMENTED_REFUSALS, reply
                assert reply.status.message, reply
            outcomes.append(code.name)
        return outcomes

    def step(self) -> List[str]:
        self.fresh_region_bytes()
        unary = [self.inline_write, self.shared_write, self.inline_read, self.shared_read,
                 self.device_copy]
        if self.rng.random() < 0.7:
            return self.unary(self.rng.choice(unary)())
        batched = [self.inline_write, self.shared_write, self.inline_read, self.device_copy]
        return self.batch([self.rng.choice(batched)() for _ in range(self.rng.randrange(1, 6))])

    def in_region(self, where: pb.SharedMemorySlice, size: int) -> numpy.ndarray:
        """The first `size` bytes of a slice a copy the daemon accepted named, which must
        lie inside the region and hold them."""
        assert where.region == self.region_id, f"accepted a foreign region: {where}"
        assert size <= where.size_bytes, f"accepted {size} bytes for {where}"
        assert where.offset_bytes + where.size_bytes <= REGION_BYTES, f"accepted {where}"
        return self.shared[where.offset_bytes:where.offset_bytes + size]

    def bytes_of(self, buffer: int, placement: Placement) -> numpy.ndarray:
        """What the model holds where an accepted copy reads."""
        assert buffer in self.buffers, f"accepted an unknown buffer {buffer}"
        model = self.buffers[buffer]
        return model[placement.indices(model.size)]

    def place(self, buffer: int, placement: Placement, data: numpy.ndarray) -> None:
        """Records an accepted copy of `data` to `placement`."""
        assert buffer in self.buffers, f"accepted an unknown buffer {buffer}"
        model = self.buffers[buffer]
        model[placement.indices(model.size)] = data

    def check_every_buffer(self) -> None:
        self.stub.Synchronize(pb.SynchronizeRequest(session=self.token))
        for buffer, expected in self.buffers.items():
            request = pb.ReadRequest(session=self.token, buffer=buffer, size_bytes=expected.size)
            data = b"".join(reply.data for reply in self.stub.Read(request))
            numpy.testing.assert_array_equal(numpy.frombuffer(data, numpy.uint8), expected,
                                             err_msg=f"buffer {buffer}")


@pytest.mark.parametrize("seed", seeds())
def test_accepted_copies_move_exactly_their_bytes_and_refused_ones_nothing(client, session,
                                                                          daemon, seed):
    model = Model(client._stub, daemon.target, session.token, random.Random(seed))
    outcomes: Dict[str, int] = {}
    try:
        for step in range(STEPS):
            for outcome in model.step():
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if step % CHECK_EVERY == 0:
                model.check_every_buffer()
        model.check_every_buffer()
    finally:
        model.close()
    # The draws reach both sides of the checks.
    assert outcomes.get("OK", 0) >= STEPS // 10, outcomes
    assert outcomes.get("INVALID_ARGUMENT", 0) >= STEPS // 10, outcomes
    assert outcomes.get("NOT_FOUND", 0) > 0, outcomes
