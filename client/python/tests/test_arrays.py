"""Device arrays through the daemon: every dtype, odd sizes, layouts, views, transfers."""

import numpy
import pytest

import gpucmd

DTYPES = [numpy.bool_, numpy.int8, numpy.uint8, numpy.int16, numpy.uint16, numpy.int32,
          numpy.uint32, numpy.int64, numpy.uint64, numpy.float16, numpy.float32, numpy.float64,
          numpy.complex64, numpy.complex128]


def random_array(shape, dtype, seed=0):
    generator = numpy.random.default_rng(seed)
    values = generator.integers(-1000, 1000, size=shape)
    if numpy.dtype(dtype).kind == "c":
        return (values + 1j * generator.integers(-9, 9, size=shape)).astype(dtype)
    if numpy.dtype(dtype).kind == "b":
        return values > 0
    if numpy.dtype(dtype).kind == "u":
        return numpy.abs(values).astype(dtype)
    if numpy.dtype(dtype).kind == "f":
        return (values / 3).astype(dtype)
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: numpy.dtype(d).name)
@pytest.mark.parametrize("shape", [(1,), (7,), (1023,), (3, 5), (2, 3, 4)])
def test_arrays_round_trip_for_every_dtype(session, dtype, shape):
    host = random_array(shape, dtype)
    device = session.asarray(host)
    assert device.shape == shape and device.dtype == numpy.dtype(dtype)
    assert device.nbytes == host.nbytes and device.strides == host.strides
    back = device.get()
    assert back.dtype == host.dtype and back.shape == host.shape
    numpy.testing.assert_array_equal(back, host)


def test_empty_and_zero_dimensional_arrays(session):
    empty = session.empty((0, 4), numpy.float32)
    assert empty.get().shape == (0, 4)
    scalar = session.asarray(numpy.float64(2.5))
    assert scalar.shape == () and scalar.get() == 2.5


def test_fortran_ordered_and_strided_inputs_are_made_contiguous(session):
    fortran = numpy.asfortranarray(numpy.arange(12, dtype=numpy.int32).reshape(3, 4))
    numpy.testing.assert_array_equal(session.asarray(fortran).get(), fortran)
    strided = numpy.arange(40, dtype=numpy.float64)[::3]
    numpy.testing.assert_array_equal(session.asarray(strided).get(), strided)
    transposed = numpy.arange(6, dtype=numpy.int16).reshape(2, 3).T
    numpy.testing.assert_array_equal(session.asarray(transposed).get(), transposed)


def test_zeros_empty_set_and_broadcast(session):
    zeros = session.zeros((5, 3), numpy.int64)
    numpy.testing.assert_array_equal(zeros.get(), numpy.zeros((5, 3), numpy.int64))
    zeros.set(7)
    numpy.testing.assert_array_equal(zeros.get(), numpy.full((5, 3), 7, numpy.int64))
    zeros.set(numpy.arange(3))
    numpy.testing.assert_array_equal(zeros.get(), numpy.tile(numpy.arange(3), (5, 1)))
    with pytest.raises(ValueError, match="shape"):
        zeros.set(numpy.arange(4))
    assert numpy.asarray(zeros).sum() == 15


FILL_VALUES = [0, 1, -3, 2.5, 1 + 2j, True]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: numpy.dtype(d).name)
def test_fill_sets_every_element_of_every_dtype(session, dtype):
    array = session.asarray(random_array((3, 7), dtype))
    for value in FILL_VALUES:
        if numpy.dtype(dtype).kind != "c" and isinstance(value, complex):
            continue
        array.fill(value)
        numpy.testing.assert_array_equal(array.get(), numpy.full((3, 7), value, dtype))


def test_fill_sends_no_bytes_when_the_value_repeats_a_word(session, monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("a fill sent the values")
    monkeypatch.setattr(session, "_write", refused)
    for dtype, value in [(numpy.uint8, 200), (numpy.float16, -1.5), (numpy.float32, 3.25),
                         (numpy.int32, -7), (numpy.float64, 0.0), (numpy.complex128, 0)]:
        array = session.empty(1000, dtype)
        array.fill(value)
        numpy.testing.assert_array_equal(array.get(), numpy.full(1000, value, dtype))
    zeros = session.zeros((4, 5), numpy.float64)
    numpy.testing.assert_array_equal(zeros.get(), numpy.zeros((4, 5)))
    with pytest.raises(AssertionError, match="sent the values"):
        session.empty(8, numpy.float64).fill(1.0)  # its eight bytes repeat no word


def test_fill_of_a_view_touches_only_its_rows(session, monkeypatch):
    host = numpy.arange(48, dtype=numpy.int32).reshape(6, 8)
    array = session.asarray(host)
    fills = []
    real_fill = session._fill
    monkeypatch.setattr(session, "_fill", lambda *args: fills.append(args) or real_fill(*args))
    array[1:5, 2:6].fill(-1)
    assert len(fills) == 1, "a view's rows are one pitched fill"
    host[1:5, 2:6] = -1
    numpy.testing.assert_array_equal(array.get(), host)
    array[::3, 1:7].fill(5)  # rows three apart
    host[::3, 1:7] = 5
    numpy.testing.assert_array_equal(array.get(), host)
    array[2:4, :].fill(9)
    host[2:4] = 9
    numpy.testing.assert_array_equal(array.get(), host)
    array.free()
    with pytest.raises(ValueError):
        array.fill(0)


def test_two_dimensional_views_transfer_pitched(session):
    host = numpy.arange(8 * 10, dtype=numpy.float32).reshape(8, 10)
    device = session.asarray(host)
    view = device[1:7:2, 3:8]
    assert view.shape == (3, 5) and not view.contiguous
    assert view.strides == (2 * 10 * 4, 4)
    numpy.testing.assert_array_equal(view.get(), host[1:7:2, 3:8])
    view.set(-numpy.ones((3, 5), numpy.float32))
    expected = host.copy()
    expected[1:7:2, 3:8] = -1
    numpy.testing.assert_array_equal(device.get(), expected)
    numpy.testing.assert_array_equal(device[4, :].get(), expected[4:5, :])
    with pytest.raises(IndexError):
        device[:, ::2]


def test_one_dimensional_slices_and_device_copies(session):
    source = session.asarray(numpy.arange(100, dtype=numpy.int32))
    target = session.zeros(100, numpy.int32)
    source.copy_to(target)
    numpy.testing.assert_array_equal(target.get(), numpy.arange(100))
    source[10:20].copy_to(target[0:10])
    numpy.testing.assert_array_equal(target.get()[:10], numpy.arange(10, 20))
    with pytest.raises(ValueError, match="bytes"):
        source.copy_to(target[0:5])


def test_views_copy_in_one_pitched_copy(session, monkeypatch):
    host = numpy.arange(36, dtype=numpy.uint8).reshape(6, 6)
    source = session.asarray(host)
    target = session.zeros((6, 6), numpy.uint8)
    copies = []
    real_copy = session._copy
    monkeypatch.setattr(session, "_copy",
                        lambda request: copies.append(request) or real_copy(request))
    source[0:2, 0:3].copy_to(target[3:5, 2:5])
    assert len(copies) == 1 and copies[0].pitched.height == 2, "a view's rows are one copy"
    expected = numpy.zeros((6, 6), numpy.uint8)
    expected[3:5, 2:5] = host[0:2, 0:3]
    numpy.testing.assert_array_equal(target.get(), expected)
    # Rows two apart into a packed array of their shape, and back into other columns.
    packed = session.zeros((3, 4), numpy.uint8)
    source[::2, 1:5].copy_to(packed)
    numpy.testing.assert_array_equal(packed.get(), host[::2, 1:5])
    packed.copy_to(target[0:3, 2:6])
    expected[0:3, 2:6] = host[::2, 1:5]
    numpy.testing.assert_array_equal(target.get(), expected)
    # Columns of one array onto other columns of the same rows.
    source[:, 0:3].copy_to(source[:, 3:6])
    host[:, 3:6] = host[:, 0:3]
    numpy.testing.assert_array_equal(source.get(), host)
    with pytest.raises(gpucmd.InvalidArgument, match="overlaps"):
        source[:, 0:3].copy_to(source[:, 2:5])
    with pytest.raises(ValueError, match="same shape"):
        source[0:2, 0:3].copy_to(target[0:3, 0:2])
    source[0:2, 0:0].copy_to(target[0:2, 0:0])  # nothing to copy
    numpy.testing.assert_array_equal(source.get(), host)


@pytest.mark.parametrize("shared_memory", [False, True], ids=["inline", "shared_memory"])
def test_large_transfers_inline_and_through_shared_memory(session, shared_memory):
    # 40 MiB: several inline messages, or one piece of a shared region.
    host = numpy.random.default_rng(1).integers(0, 255, size=40 << 20, dtype=numpy.uint8)
    device = session.empty(host.shape, numpy.uint8)
    device.set(host, shared_memory=shared_memory)
    numpy.testing.assert_array_equal(device.get(shared_memory=shared_memory), host)
    assert (session.stats().shared_memory_regions == 1) == shared_memory


@pytest.mark.parametrize("size", [1, 60 << 10, (60 << 10) + 1, (1 << 20) - 1])
def test_inline_transfers_either_side_of_one_message(session, size):
    # Up to 60 KiB a read is one message each way (a unary call); past it, a stream.
    host = numpy.random.default_rng(size).integers(0, 255, size=size, dtype=numpy.uint8)
    device = session.empty(host.shape, numpy.uint8)
    device.set(host, shared_memory=False)
    numpy.testing.assert_array_equal(device.get(shared_memory=False), host)


def test_small_transfers_take_no_stream(session, monkeypatch):
    # grpcio's streaming calls cost some 500 us more than unary ones: a transfer of one
    # message each way must not open one.
    def refused(*args, **kwargs):
        raise AssertionError("a small transfer opened a stream")
    for method in ("Write", "Read", "Submit"):
        monkeypatch.setattr(session.client._stub, method, refused)
    device = session.empty(4096, numpy.uint8)
    device.set(numpy.full(4096, 7, numpy.uint8), shared_memory=False)
    assert device.get(shared_memory=False).tolist() == [7] * 4096
    with session.batch() as batch:
        batch.write(device, numpy.full(4096, 9, numpy.uint8))
        read = batch.read(device)
    assert read.get().tolist() == [9] * 4096


def test_writes_through_one_region_keep_their_own_bytes(session):
    # Each write returns once queued and is copied out of the region later: the region is
    # not refilled for the next write before that copy ran.
    hosts = [numpy.full(2 << 20, value, numpy.float32) for value in range(1, 6)]
    devices = [session.empty(host.shape, host.dtype) for host in hosts]
    for device, host in zip(devices, hosts):
        device.set(host, shared_memory=True, stream=session.stream(device.buffer % 3))
    for device, host in zip(devices, hosts):
        numpy.testing.assert_array_equal(device.get(), host)


def test_transfers_larger_than_a_shared_region_go_in_pieces(session):
    rows = numpy.random.default_rng(2).integers(0, 1 << 30, size=(3000, 6000), dtype=numpy.int32)
    device = session.asarray(rows)  # 72 MiB: two pieces of a 64 MiB region
    assert session.stats().shared_memory_regions == 1
    numpy.testing.assert_array_equal(device.get(), rows)
    numpy.testing.assert_array_equal(device[1000:2999:3, 17:5017].get(shared_memory=True),
                                     rows[1000:2999:3, 17:5017])


def test_freed_arrays_and_memory(session):
    before = session.stats().memory_used_bytes
    array = session.empty(1 << 20, numpy.uint8)
    assert session.stats().memory_used_bytes >= before + (1 << 20)
    array.free()
    array.free()  # a second free does nothing
    assert session.stats().memory_used_bytes == before
    with pytest.raises(ValueError, match="freed"):
        array.get()
    collected = session.empty(1 << 20, numpy.uint8)
    del collected  # freed when collected
    assert session.stats().memory_used_bytes == before


def test_reprs_say_what_an_object_is(client, session):
    array = session.zeros((2, 3), numpy.float32)
    text = repr(array)
    assert "shape=(2, 3)" in text and "float32" in text and "device=0" in text
    assert repr(session.name) in text
    assert "view" in repr(array[0:1, 0:2])
    assert session.name in repr(session) and "open" in repr(session)
    assert "stream 3" in repr(session.stream(3)).lower()
    assert client.target in repr(client)


def test_devices_health_and_stats(client, session):
    devices = client.devices()
    assert len(devices) == 1 and devices[0].driver == "cpu" and devices[0].ready
    assert devices[0].memory_capacity_bytes == 1 << 30
    health = client.health()
    assert health.serving and health and health.devices_ready == 1
    assert client.stats().sessions_open >= 1
    with pytest.raises(TypeError):
        session.asarray(numpy.array([object()]))


def test_writes_queued_behind_a_kernel_hold_bounded_memory(session):
    # The stream is busy for 3 s; writes queued behind it keep their bytes until their
    # copies ran. The daemon holds at most four times its drop-queue threshold (256 MiB)
    # for them, then makes further writes wait, however the writes are spaced.
    spin = session.compile(r"""
        extern "C" __global__ void spin(long long ticks) {
          long long start = clock64();
          while (clock64() - start < ticks) {}
        }""", "spin")
    array = session.empty(48 << 20, numpy.uint8)
    data = numpy.ones(array.shape, numpy.uint8)
    spin(1, 1, (3_000_000_000,))
    for _ in range(30):  # 1.4 GiB of writes
        array.set(data, shared_memory=True)
    held = session.client.stats().devices[0].drop_queue_bytes
    assert held <= (1 << 30) + array.nbytes, f"{held} bytes held for queued writes"
    session.synchronize()
    numpy.testing.assert_array_equal(array.get(), data)
