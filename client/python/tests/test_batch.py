"""Batches through the daemon: one Submit stream for writes, launches, copies and reads."""

import numpy
import pytest

import gpucmd

SCALE = r"""
extern "C" __global__ void scale(float* x, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}
"""

CHECKED = r"""
#include <cassert>
extern "C" __global__ void checked(const int* in, int* out) {
  assert(in[0] >= 0);
  out[0] = in[0];
}
"""


def test_writes_launches_and_reads_run_in_order(session):
    n = 1000
    x = session.empty(n, numpy.float32)
    y = session.empty(n, numpy.float32)
    scale = session.compile(SCALE, "scale")
    with session.batch() as batch:
        batch.write(x, numpy.arange(n, dtype=numpy.float32))
        before = batch.read(x)
        batch.launch(scale, (n + 255) // 256, 256, (x, 2.0, n))
        batch.copy(x, y)
        batch.launch(scale, (n + 255) // 256, 256, (y, numpy.float32(0.5), n))
        batch.synchronize()
        after = batch.read(x)
        copied = batch.read(y)
        with pytest.raises(RuntimeError, match="block ended"):
            after.get()
    numpy.testing.assert_array_equal(before.get(), numpy.arange(n))
    numpy.testing.assert_array_equal(after.get(), 2 * numpy.arange(n))
    numpy.testing.assert_array_equal(copied.get(), numpy.arange(n))
    with pytest.raises(RuntimeError, match="sent already"):
        batch.read(x)


def test_a_batch_fills_on_the_device_or_writes_the_values(session):
    x = session.asarray(numpy.arange(100, dtype=numpy.float64))
    y = session.empty(100, numpy.int16)
    with session.batch() as batch:
        batch.fill(x, 0.0)
        zeros = batch.read(x)
        batch.fill(x, 1.25)  # no repeated word: written
        batch.fill(y, -2)
        ones = batch.read(x)
        twos = batch.read(y)
    numpy.testing.assert_array_equal(zeros.get(), numpy.zeros(100))
    numpy.testing.assert_array_equal(ones.get(), numpy.full(100, 1.25))
    numpy.testing.assert_array_equal(twos.get(), numpy.full(100, -2, numpy.int16))
    assert [command.WhichOneof("command") for command in batch._commands] == [
        "fill", "read", "write", "fill", "read", "read"]


def test_a_batch_fills_a_view_in_one_pitched_fill(session):
    host = numpy.arange(60, dtype=numpy.int32).reshape(6, 10)
    array = session.asarray(host)
    with session.batch() as batch:
        batch.fill(array[1:5, 3:7], 7)
        result = batch.read(array)
    host[1:5, 3:7] = 7
    numpy.testing.assert_array_equal(result.get(), host)
    fills = [command.fill for command in batch._commands if command.HasField("fill")]
    assert len(fills) == 1 and fills[0].pitched.height == 4
    with session.batch() as batch:
        batch.fill(array[1:5, 3:3], 1)  # no columns: nothing to send
    assert not batch._commands
    wide = session.zeros((4, 4), numpy.float64)
    with session.batch() as batch:
        batch.fill(wide[1:3, 1:3], 1.25)  # no repeated word: written, in one pitched write
    assert [command.WhichOneof("command") for command in batch._commands] == ["write"]
    expected = numpy.zeros((4, 4))
    expected[1:3, 1:3] = 1.25
    numpy.testing.assert_array_equal(wide.get(), expected)


def test_a_batch_writes_and_reads_views_in_pitched_pieces(session, monkeypatch):
    host = numpy.arange(40 * 300, dtype=numpy.int32).reshape(40, 300)
    array = session.asarray(host)
    values = -numpy.arange(40 * 200, dtype=numpy.int32).reshape(40, 200)
    with session.batch() as batch:
        batch.write(array[:, 50:250], values)
        rows = batch.read(array[::3, 10:20])
        whole = batch.read(array)
    host[:, 50:250] = values
    numpy.testing.assert_array_equal(whole.get(), host)
    numpy.testing.assert_array_equal(rows.get(), host[::3, 10:20])
    writes = [command.write.header for command in batch._commands if command.HasField("write")]
    assert [(header.pitched.height, header.pitched.stride_bytes) for header in writes] == [
        (40, 1200)]

    # Pieces of at most 4 KiB: 800-byte rows go five to a pitched piece, and a row of
    # 4.8 KB in two contiguous parts.
    monkeypatch.setattr(gpucmd.Batch, "_chunk_bytes", lambda self: 4096)
    host[:, 50:250] = 7
    wide_host = numpy.arange(3 * 1500, dtype=numpy.int32).reshape(3, 1500)
    wide = session.asarray(wide_host)
    with session.batch() as batch:
        batch.write(array[:, 50:250], 7 * numpy.ones((40, 200), numpy.int32))
        rows = batch.read(array[1::2, 50:250])
        wide_rows = batch.read(wide[0:2, 100:1300])
    assert [command.write.header.pitched.height for command in batch._commands
            if command.HasField("write")] == [5] * 8
    reads = [command.read for command in batch._commands if command.HasField("read")]
    assert [read.pitched.height for read in reads[:4]] == [5, 5, 5, 5]
    assert [(read.HasField("pitched"), read.size_bytes) for read in reads[4:]] == [
        (False, 4096), (False, 704), (False, 4096), (False, 704)]
    numpy.testing.assert_array_equal(rows.get(), host[1::2, 50:250])
    numpy.testing.assert_array_equal(wide_rows.get(), wide_host[0:2, 100:1300])


def test_a_batchs_large_transfers_go_through_shared_memory(session):
    rng = numpy.random.default_rng(5)
    host = rng.integers(0, 1 << 30, size=(1024, 1024), dtype=numpy.int32)  # 4 MiB
    matrix = session.empty(host.shape, host.dtype)
    vector = session.empty(1 << 19, numpy.float32)  # 2 MiB
    values = rng.random(1 << 19, dtype=numpy.float32)
    written = values.copy()
    view_values = rng.integers(0, 9, size=(512, 512), dtype=numpy.int32)  # 1 MiB of rows
    with session.batch() as batch:
        batch.write(matrix, host)
        batch.write(matrix[256:768, 100:612], view_values)
        batch.write(vector, values)
        whole = batch.read(matrix)
        view = batch.read(matrix[::2, 1:1000])
        small = batch.read(matrix[0:2, 0:2])  # a few bytes: inline
        values[:] = 0  # a batch's write took its values when it was asked for
    host[256:768, 100:612] = view_values
    numpy.testing.assert_array_equal(whole.get(), host)
    numpy.testing.assert_array_equal(view.get(), host[::2, 1:1000])
    numpy.testing.assert_array_equal(small.get(), host[0:2, 0:2])
    assert session.stats().shared_memory_regions == 1
    # One command each, the views' pitched; the writes answered once copied out of the
    # region, whose slices the next transfers may reuse at once.
    shared = [command.write.header if command.HasField("write") else command.read
              for command in batch._commands
              if command.write.header.HasField("shared_memory")
              or command.read.HasField("shared_memory")]
    assert len(shared) == len(batch._commands) - 1 == 5
    assert [item.pitched.height for item in shared] == [0, 512, 0, 0, 512]
    assert all(header.answer_when_copied for header in shared[:3])
    assert len({item.shared_memory.offset_bytes for item in shared}) == 5
    numpy.testing.assert_array_equal(vector.get(), written)
    zeros = numpy.zeros(1 << 19, numpy.float32)
    with session.batch() as batch:
        batch.write(vector, zeros)
        again = batch.read(vector)
    numpy.testing.assert_array_equal(again.get(), zeros)

    # 80 MiB in all: the 40 MiB write fills most of the 64 MiB region, so the read after
    # it goes once the write was answered, in the same slice. A 72 MiB array goes in a
    # piece of the whole region and one of 8 MiB, and a view of it in whole rows (8196 of
    # 8188 bytes, then the last 1020), each piece once the one before it was answered.
    large_host = rng.integers(0, 255, size=40 << 20, dtype=numpy.uint8)
    large = session.empty(large_host.shape, numpy.uint8)
    larger_host = rng.integers(0, 255, size=(9 << 10, 2 << 10), dtype=numpy.int32)
    larger = session.empty(larger_host.shape, numpy.int32)
    with session.batch() as batch:
        batch.write(large, large_host)
        back = batch.read(large)
        batch.write(larger, larger_host)
        larger_back = batch.read(larger[:, 1:])
    numpy.testing.assert_array_equal(back.get(), large_host)
    numpy.testing.assert_array_equal(larger_back.get(), larger_host[:, 1:])
    slices = [(command.write.header.shared_memory if command.HasField("write")
               else command.read.shared_memory) for command in batch._commands]
    assert [(where.offset_bytes, where.size_bytes >> 20) for where in slices] == [
        (0, 40), (0, 40), (0, 64), (0, 8), (0, 63), (0, 7)]
    assert session.stats().shared_memory_regions == 1


def test_a_batch_copies_a_view_in_one_pitched_copy(session):
    host = numpy.arange(60, dtype=numpy.int32).reshape(6, 10)
    array = session.asarray(host)
    packed = session.zeros((3, 4), numpy.int32)
    with session.batch() as batch:
        batch.copy(array[::2, 5:9], packed)
        batch.copy(packed, array[3:6, 0:4])
        result = batch.read(array)
    host[3:6, 0:4] = host[::2, 5:9]
    numpy.testing.assert_array_equal(result.get(), host)
    copies = [command.copy for command in batch._commands if command.HasField("copy")]
    assert [copy.pitched.height for copy in copies] == [3, 3]
    with session.batch() as batch:
        batch.copy(array[1:5, 3:3], packed[0:4, 0:0])  # no columns: nothing to send
    assert not batch._commands


def test_batches_larger_than_a_message_are_split(session):
    data = numpy.random.default_rng(0).integers(0, 1 << 62, size=5 << 20, dtype=numpy.int64)
    device = session.empty(data.shape, numpy.int64)  # 40 MiB: several commands and requests
    with session.batch(stream=session.stream(2)) as batch:
        batch.write(device, data)
        result = batch.read(device)
    numpy.testing.assert_array_equal(result.get(), data)


def test_batches_of_more_commands_than_the_daemon_takes_are_split(session):
    x = session.empty(1, numpy.float32)
    scale = session.compile(SCALE, "scale")
    with session.batch() as batch:
        batch.write(x, numpy.ones(1, dtype=numpy.float32))
        for _ in range(20000):  # past the 16384 commands of one Submit batch
            batch.launch(scale, 1, 1, (x, 1.0, 1))
        batch.synchronize()
        result = batch.read(x)
    numpy.testing.assert_array_equal(result.get(), numpy.ones(1))


@pytest.mark.parametrize("elements", [1, 1 << 18], ids=["inline", "shared_memory"])
def test_a_failed_command_fails_what_depends_on_it(session, elements):
    checked = session.compile(CHECKED, "checked")
    bad = session.asarray(numpy.array([-1], numpy.int32))
    out = session.zeros(elements, numpy.int32)
    untouched = session.asarray(numpy.full(elements, 5, numpy.int32))
    with pytest.raises(gpucmd.GpucmdError) as raised:
        with session.batch() as batch:
            batch.launch(checked, 1, 1, (bad, out))
            tainted = batch.read(out)
            independent = batch.read(untouched)
    assert "assert" in str(raised.value)
    with pytest.raises(gpucmd.FailedPrecondition, match="assert"):
        tainted.get()
    assert independent.get().tolist() == [5] * elements
    assert batch._commands[2].read.HasField("shared_memory") == (elements > 1)


@pytest.mark.parametrize("launches", [2, 40], ids=["one_response", "maybe_several"])
def test_failures_are_reported_whatever_the_answers_size(session, launches):
    # A batch of three commands is answered in one message (a unary call); one of
    # forty-one might take several (each failure's message may be long), so it goes on a
    # stream. Either way the read that depends on the failed launches fails with them.
    checked = session.compile(CHECKED, "checked")
    bad = session.asarray(numpy.array([-1], numpy.int32))
    out = session.zeros(1, numpy.int32)
    with pytest.raises(gpucmd.FailedPrecondition, match="assert"):
        with session.batch() as batch:
            for _ in range(launches):
                batch.launch(checked, 1, 1, (bad, out))
            tainted = batch.read(out)
    with pytest.raises(gpucmd.FailedPrecondition, match="assert"):
        tainted.get()


def test_batches_check_their_arguments_before_sending(session):
    scale = session.compile(SCALE, "scale")
    x = session.zeros(4, numpy.float32)
    with session.batch() as batch:
        with pytest.raises(TypeError, match="takes an int"):
            batch.launch(scale, 1, 4, (x, 2.0, 4.5))
        with pytest.raises(ValueError, match="own session"):
            with session.client.session(name="other") as other:
                batch.read(other.zeros(1, numpy.float32))
        read = batch.read(x)
    assert read.get().tolist() == [0.0] * 4
