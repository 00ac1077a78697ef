"""Random Submit batches against the real daemon: every kind of command, with handles,
offsets, sizes, layouts, grids, blocks and kernel arguments drawn at the edges of their
ranges (and wrong on purpose: unknown handles, references to no Allocate, other
sessions' buffers, arguments of the wrong kind or number, kernels told to write far past
their buffers). Whatever a batch holds, the daemon must answer each command exactly once
with a documented code, keep serving, leave another session's bytes untouched, and hold
nothing once the sessions close. The wire protocol is used directly (the generated
stubs), so that requests the Python client would never build are sent too.

Seeds: ``SUBMIT_FUZZ_SEEDS`` (comma-separated) replaces the default ones, e.g.
``bazel test //client/python:test_submit_fuzz --test_env=SUBMIT_FUZZ_SEEDS=7,8,9``.
"""

from __future__ import annotations

import os
import random
from typing import Iterator, List

import grpc
import pytest

from conftest import Daemon, wait_for
from gpucmd.v1 import gpucmd_pb2 as pb
from gpucmd.v1 import gpucmd_pb2_grpc as pb_grpc

BATCHES = 200
MAX_COMMANDS = 12
BUFFER_SIZES = (4096, 65536)
#: Codes a command may be answered with, whatever it held.
DOCUMENTED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
              grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.RESOURCE_EXHAUSTED,
              grpc.StatusCode.FAILED_PRECONDITION}
#: What a Synchronize says (UNAVAILABLE) of a launch whose kernel faulted, or ran past the
#: time limit (a valid grid of 2^31 blocks does): its executor died or was killed, and
#: restarts.
KERNEL_FAILURES = ("the kernel executor died", "time limit")

U64 = 1 << 64
EDGES_64 = (0, 1, 2, 7, 4095, 4096, 4097, 65536, 1 << 20, (1 << 31) - 1, 1 << 32,
            (1 << 63) - 1, 1 << 63, U64 - 1)
EDGES_32 = (0, 1, 2, 32, 1024, 1025, 65535, 65536, (1 << 31) - 1, (1 << 32) - 1)
KERNEL = r"""
extern "C" __global__ void scale(float* out, const float* in, unsigned n, float a) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * a + 1.0f;
}
"""
CODES = {code.value[0]: code for code in grpc.StatusCode}


def seeds() -> List[int]:
    named = os.environ.get("SUBMIT_FUZZ_SEEDS")
    return [int(seed) for seed in named.split(",")] if named else [1, 2]


class BatchDrafter:
    """Draws random commands for `token`'s batches; `buffers` are its own (of BUFFER_SIZES),
    `foreign` other sessions'."""

    def __init__(self, rng: random.Random, token: str, kernel_id: str, buffers: List[int],
                 foreign: List[int]) -> None:
        self.rng = rng
        self.token = token
        self.kernel_id = kernel_id
        self.buffers = buffers
        self.foreign = foreign
        self.allocations: List[int] = []  # sequences of the batch's Allocates so far

    def u64(self) -> int:
        return self.rng.choice(EDGES_64) if self.rng.random() < 0.5 else self.rng.randrange(1 << 16)

    def u32(self) -> int:
        return self.rng.choice(EDGES_32) if self.rng.random() < 0.5 else self.rng.randrange(300)

    def handle(self, own: bool = True) -> dict:
        """A buffer as a command names it: ``{"ref": sequence}`` or ``{"id": buffer}``; one
        of `buffers` only when `own`."""
        draw = self.rng.random() * (0.5 if not own else 1.0)
        if draw < 0.25 and self.allocations:
            return {"ref": self.rng.choice(self.allocations)}
        if draw < 0.35:
            return {"ref": self.u64()}
        if draw < 0.45:
            return {"id": self.u64()}
        if draw < 0.5:
            return {"id": self.rng.choice(self.foreign)}
        return {"id": self.rng.choice(self.buffers)}

    def name_buffer(self, message, field: str, ref_field: str, own: bool = True) -> None:
        handle = self.handle(own)
        if "ref" in handle:
            setattr(message, ref_field, handle["ref"])
        else:
            setattr(message, field, handle["id"])

    def pitched(self, packed_bytes: int) -> pb.PitchedLayout:
        width, height = self.rng.choice([(16, max(1, packed_bytes // 16)), (1, packed_bytes),
                                         (self.u64(), self.u32())])
        stride = self.rng.choice([width, (width + 16) % U64, self.u64()])
        return pb.PitchedLayout(width_bytes=width, height=height, stride_bytes=stride)

    def stream(self) -> int:
        return self.rng.choice([0, 0, 1, 3, self.u64()])

    def command(self, sequence: int) -> pb.Command:
        kind = self.rng.choice(["allocate", "free", "write", "read", "copy", "fill", "launch",
                                "launch", "synchronize"])
        command = pb.Command(sequence=sequence)
        getattr(self, kind)(command)
        if self.rng.random() < 0.05:  # a command naming no session, or an unknown one
            request = getattr(command, command.WhichOneof("command"))
            request = request.header if kind == "write" else request
            request.session = self.rng.choice(["", "no-such-session"])
        return command

    def allocate(self, command: pb.Command) -> None:
        size = self.rng.choice([0, 1, 4096, 65536, 1 << 20, self.u64()])
        command.allocate.CopyFrom(pb.AllocateRequest(session=self.token, size_bytes=size))
        self.allocations.append(command.sequence)

    def free(self, command: pb.Command) -> None:
        command.free.session = self.token
        # Never the session's own buffers: later batches work on them.
        self.name_buffer(command.free, "buffer", "buffer_ref", own=False)

    def write(self, command: pb.Command) -> None:
        if self.rng.random() < 0.3:  # a whole buffer anew: what the faults tainted is valid again
            index = self.rng.randrange(len(self.buffers))
            data = self.rng.randbytes(BUFFER_SIZES[index])
            header = pb.WriteHeader(session=self.token, buffer=self.buffers[index],
                                    inline_size_bytes=len(data))
            command.write.CopyFrom(pb.WriteRequest(header=header, data=data))
            return
        size = self.rng.choice([0, 1, 16, 4096, 5000])
        header = pb.WriteHeader(session=self.token, stream=self.stream(),
                                offset_bytes=self.rng.choice([0, 0, 8, self.u64()]))
        self.name_buffer(header, "buffer", "buffer_ref")
        if self.rng.random() < 0.3:
            header.pitched.CopyFrom(self.pitched(size))
        if self.rng.random() < 0.2:
            header.inline_size_bytes = self.rng.choice([size, size + 1, self.u64()])
        header.answer_when_copied = self.rng.random() < 0.3
        command.write.CopyFrom(pb.WriteRequest(header=header, data=self.rng.randbytes(size)))

    def read(self, command: pb.Command) -> None:
        request = pb.ReadRequest(session=self.token, stream=self.stream(),
                                 offset_bytes=self.rng.choice([0, 8, self.u64()]))
        self.name_buffer(request, "buffer", "buffer_ref")
        if self.rng.random() < 0.3:
            request.pitched.CopyFrom(self.pitched(4096))
        else:
            request.size_bytes = self.rng.choice([0, 1, 16, 4096, self.u64()])
        command.read.CopyFrom(request)

    def copy(self, command: pb.Command) -> None:
        request = pb.CopyRequest(session=self.token, stream=self.stream(),
                                 source_offset_bytes=self.rng.choice([0, 8, self.u64()]),
                                 target_offset_bytes=self.rng.choice([0, 8, self.u64()]),
                                 size_bytes=self.rng.choice([0, 16, 4096, self.u64()]))
        self.name_buffer(request, "source_buffer", "source_buffer_ref")
        self.name_buffer(request, "target_buffer", "target_buffer_ref")
        if self.rng.random() < 0.3:  # rows, and now and then a size besides
            layout = self.pitched(4096)
            request.pitched.CopyFrom(pb.PitchedCopyRows(
                width_bytes=layout.width_bytes, height=layout.height,
                source_stride_bytes=layout.stride_bytes,
                target_stride_bytes=self.rng.choice([layout.stride_bytes, layout.width_bytes,
                                                     self.u64()])))
            if self.rng.random() < 0.7:
                request.ClearField("size_bytes")
        command.copy.CopyFrom(request)

    def fill(self, command: pb.Command) -> None:
        request = pb.FillRequest(session=self.token, stream=self.stream(),
                                 offset_bytes=self.rng.choice([0, 2, 8, self.u64()]),
                                 size_bytes=self.rng.choice([0, 6, 16, 4096, self.u64()]),
                                 value=self.rng.choice([0, 255, 65536, self.u32()]),
                                 element_bytes=self.rng.choice([0, 1, 2, 3, 4, 8]))
        self.name_buffer(request, "buffer", "buffer_ref")
        if self.rng.random() < 0.3:  # rows, and now and then a size besides
            request.pitched.CopyFrom(self.pitched(4096))
            if self.rng.random() < 0.7:
                request.ClearField("size_bytes")
        command.fill.CopyFrom(request)

    def argument(self, kind: str) -> pb.KernelArg:
        argument = pb.KernelArg()
        if kind == "buffer":
            argument.buffer.access = self.rng.choice([pb.ACCESS_READ_WRITE, pb.ACCESS_READ,
                                                      pb.ACCESS_WRITE, pb.ACCESS_UNSPECIFIED])
            argument.buffer.offset_bytes = self.rng.choice([0, 0, 4, self.u64()])
            self.name_buffer(argument.buffer, "buffer", "buffer_ref")
        elif kind == "u32":
            # Up to four times the largest buffer's floats: kernels that write past it.
            argument.scalar.u32 = self.rng.choice([1024, 16384, 65536, self.u32()])
        elif kind == "f32":
            argument.scalar.f32 = self.rng.choice([1.0, float("nan"), float("inf"), -0.0])
        elif kind == "i64":
            argument.scalar.i64 = -1
        else:
            argument.tensor_map.data_type = self.rng.choice([0, 8, 99])
            argument.tensor_map.global_dims.extend(
                self.u32() for _ in range(self.rng.choice([0, 1, 6])))
        return argument

    def launch(self, command: pb.Command) -> None:
        if self.rng.random() < 0.5:
            self.well_formed_launch(command)
            return
        kernel_id = self.rng.choice([self.kernel_id] * 4 + ["", "0" * 8,
                                                             self.kernel_id[:-1] + "x"])
        request = pb.LaunchRequest(
            session=self.token, stream=self.stream(), kernel_id=kernel_id,
            dynamic_shared_memory_bytes=self.rng.choice([0, 0, 48 << 10, self.u32()]),
            grid=pb.Dim3(x=self.rng.choice([1, 16, 256, self.u32()]),
                         y=self.rng.choice([1, 1, self.u32()]),
                         z=self.rng.choice([1, 1, self.u32()])),
            block=pb.Dim3(x=self.rng.choice([1, 64, 256, self.u32()]),
                          y=self.rng.choice([1, 1, self.u32()]),
                          z=self.rng.choice([1, 1, self.u32()])))
        kinds = ["buffer", "buffer", "u32", "f32"][:self.rng.choice([4, 4, 4, 3, 0])]
        if self.rng.random() < 0.1:
            kinds.append("buffer")
        for kind in kinds:
            if self.rng.random() < 0.1:
                kind = self.rng.choice(["buffer", "u32", "f32", "i64", "tensor_map"])
            request.args.append(self.argument(kind))
        command.launch.CopyFrom(request)

    def well_formed_launch(self, command: pb.Command) -> None:
        """A launch the daemon accepts, whose kernel may still write past its buffer (up to
        16384 threads over buffers of 1024 or 16384 floats): such a kernel faults."""
        request = pb.LaunchRequest(
            session=self.token, stream=self.rng.choice([0, 1]), kernel_id=self.kernel_id,
            grid=pb.Dim3(x=self.rng.choice([1, 4, 64]), y=1, z=1),
            block=pb.Dim3(x=self.rng.choice([64, 256]), y=1, z=1))
        for buffer, access in ((self.rng.choice(self.buffers), pb.ACCESS_WRITE),
                               (self.rng.choice(self.buffers), pb.ACCESS_READ)):
            argument = request.args.add()
            argument.buffer.buffer = buffer
            argument.buffer.access = access
        request.args.add().scalar.u32 = self.rng.choice([256, 1024, 16384])
        request.args.add().scalar.f32 = 2.0
        command.launch.CopyFrom(request)

    def synchronize(self, command: pb.Command) -> None:
        request = pb.SynchronizeRequest(session=self.token)
        if self.rng.random() < 0.5:
            request.stream = self.stream()
        command.synchronize.CopyFrom(request)


@pytest.fixture(scope="module")
def fuzz_daemon() -> Iterator[Daemon]:
    """Sessions that outlive a slow run's pauses, and kernels stopped after two seconds."""
    running = Daemon(idle_timeout_seconds=600, cpu="kernel_timeout_seconds: 2")
    yield running
    problem = running.stop()
    assert not problem, problem


def used_bytes(stub) -> int:
    return sum(device.memory_used_bytes for device in stub.GetStats(pb.GetStatsRequest()).devices)


@pytest.mark.parametrize("seed", seeds())
def test_any_batch_is_answered_command_by_command_and_harms_no_one(fuzz_daemon, seed):
    rng = random.Random(seed)
    channel = grpc.insecure_channel(fuzz_daemon.target)
    stub = pb_grpc.GpuCommandStub(channel)

    def open_session(name: str) -> str:
        return stub.OpenSession(pb.OpenSessionRequest(client_name=name)).session

    # A bystander whose bytes nothing of the fuzzed sessions may touch.
    bystander = open_session("bystander")
    kept = stub.Allocate(pb.AllocateRequest(session=bystander, size_bytes=65536)).buffer
    kept_bytes = rng.randbytes(65536)
    stub.Write(iter([pb.WriteRequest(header=pb.WriteHeader(
        session=bystander, buffer=kept, inline_size_bytes=len(kept_bytes)), data=kept_bytes)]))
    used_by_bystander = used_bytes(stub)

    tokens = [open_session(f"fuzz-{seed}-{i}") for i in range(2)]
    kernel_id = stub.Compile(pb.CompileRequest(session=tokens[0], source=KERNEL,
                                               entry_point="scale")).kernel_id
    buffers = {token: [stub.Allocate(pb.AllocateRequest(session=token, size_bytes=size)).buffer
                       for size in BUFFER_SIZES] for token in tokens}
    answered = {code: 0 for code in DOCUMENTED}
    launched = faulted = 0
    for number in range(BATCHES):
        token = rng.choice(tokens)
        others = [buffer for other in tokens if other != token for buffer in buffers[other]]
        drafter = BatchDrafter(rng, token, kernel_id, buffers[token], [kept] + others)
        sequences = rng.sample(range(1000), rng.randrange(1, MAX_COMMANDS + 1))
        commands = [drafter.command(sequence) for sequence in sequences]
        request = pb.SubmitRequest(commands=commands, stream_replies=rng.random() < 0.5)
        responses = list(stub.Submit(iter([request]), timeout=60))
        assert responses and responses[-1].batch_done, f"batch {number}: not ended"
        replies = [reply for response in responses for reply in response.replies]
        assert sorted(reply.sequence for reply in replies) == sorted(sequences), (
            f"batch {number}: one reply per command")
        for reply in replies:
            code = CODES[reply.status.code]
            sent = commands[sequences.index(reply.sequence)]
            kind = sent.WhichOneof("command")
            if code == grpc.StatusCode.OK and kind == "launch":
                launched += 1
            if code == grpc.StatusCode.UNAVAILABLE:
                faulted += 1
                assert sent.WhichOneof("command") == "synchronize", (number, reply)
                assert any(failure in reply.status.message for failure in KERNEL_FAILURES), (
                    number, reply)
                continue
            assert code in DOCUMENTED, (f"batch {number}: {sent} answered {code.name}: "
                                        f"{reply.status.message}")
            answered[code] += 1
    assert launched > 0 and answered[grpc.StatusCode.INVALID_ARGUMENT] > 0, (
        f"the batches reach both kernels and refusals: {launched} launches ran, "
        f"{faulted} kernels faulted, answers {answered}")

    read = b"".join(reply.data for reply in stub.Read(pb.ReadRequest(
        session=bystander, buffer=kept, size_bytes=len(kept_bytes))))
    assert read == kept_bytes, "another session's buffer changed"
    for token in tokens:
        stub.CloseSession(pb.CloseSessionRequest(session=token))
    assert wait_for(lambda: used_bytes(stub) == used_by_bystander), (
        f"{used_bytes(stub)} bytes in use, {used_by_bystander} held by the bystander")
    stub.CloseSession(pb.CloseSessionRequest(session=bystander))
    channel.close()
