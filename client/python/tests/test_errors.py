"""Errors of each kind through the daemon, each as its gpucmd exception."""

import os

import numpy
import pytest

import gpucmd

ASSERTING = r"""
#include <cassert>
extern "C" __global__ void positive(const int* in, int* out) {
  assert(in[0] > 0);
  out[0] = in[0];
}
"""


def test_a_foreign_or_unknown_buffer_is_not_found(client, session):
    with client.session(name="intruder") as intruder:
        theirs = intruder.zeros(4, numpy.int32)
        stolen = gpucmd.DeviceArray(session, theirs.buffer, (4,), numpy.dtype(numpy.int32))
        with pytest.raises(gpucmd.NotFound):
            stolen.get()
        stolen._freed = True  # not ours to free


def test_out_of_bounds_is_invalid_argument(session):
    array = session.zeros(4, numpy.int32)
    beyond = gpucmd.DeviceArray(session, array.buffer, (8,), numpy.dtype(numpy.int32), base=array)
    with pytest.raises(gpucmd.InvalidArgument, match="bounds|beyond|exceeds|past"):
        beyond.get()
    assert array.get().tolist() == [0] * 4, "nothing was corrupted"


def test_too_much_memory_is_resource_exhausted(session):
    with pytest.raises(gpucmd.ResourceExhausted):
        session.empty(2 << 30, numpy.uint8)


def test_session_arguments_of_the_wrong_kind_are_refused_before_any_call(client):
    open_before = client.stats().sessions_open
    for device in (None, True, 1.0, "0"):
        with pytest.raises(TypeError, match="ordinal"):
            client.session(device=device)
    for device in (-1, 1 << 32):
        with pytest.raises(ValueError, match=r"\[0, 2\*\*32\)"):
            client.session(device=device)
    for name in (None, 5, b"bytes"):
        with pytest.raises(TypeError, match="name is a string"):
            client.session(name=name)
    assert client.stats().sessions_open == open_before, "a refused session was opened"
    with client.session(device=numpy.uint32(0)) as session:
        assert session.device == 0


def test_sizes_and_streams_past_the_protocols_range_are_refused_as_such(session):
    with pytest.raises(ValueError, match="array is too big"):
        session.empty(1 << 62, numpy.float32)
    with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
        session.stream(1 << 64)
    with pytest.raises(TypeError, match=r"\[0, 2\*\*64\)"):
        session.synchronize(1 << 70)
    array = session.zeros(4, numpy.int32)
    with pytest.raises(TypeError, match=r"\[0, 2\*\*64\)"):
        array.get(stream=-1)
    # The largest id and numpy's integers name streams as ints do.
    array.set(numpy.arange(4, dtype=numpy.int32), stream=(1 << 64) - 1)
    assert session.synchronize(numpy.uint64((1 << 64) - 1)) == ""
    assert array.get(stream=numpy.int64(3)).tolist() == [0, 1, 2, 3]


def test_compile_options_are_a_sequence_of_strings(session):
    source = 'extern "C" __global__ void k() {}'
    with pytest.raises(TypeError, match="one string"):
        session.compile(source, "k", "-O3")  # not taken for "-", "O", "3"
    with pytest.raises(TypeError, match="one string"):
        gpucmd.RawKernel(source, "k", "-O3")
    with pytest.raises(TypeError, match="are strings"):
        session.compile(source, "k", ["-O3", 3])
    assert session.compile(source, "k", ("-O3",)).name == "k"


@pytest.mark.parametrize("shared_memory", [False, True], ids=["inline", "shared_memory"])
def test_tainted_data_is_failed_precondition_naming_the_cause(session, shared_memory):
    positive = session.compile(ASSERTING, "positive")
    bad = session.asarray(numpy.array([-3], numpy.int32))
    out = session.zeros(1 << 20, numpy.int32)  # 4 MiB: a shared-memory read when asked
    positive(1, 1, (bad, out))
    with pytest.raises(gpucmd.Aborted, match="in\\[0\\] > 0"):
        session.synchronize()
    with pytest.raises(gpucmd.FailedPrecondition, match="assertion"):
        out.get(shared_memory=shared_memory)


@pytest.mark.parametrize("target", ["", "unix:", "tcp:", "tcp:localhost", "tcp:[::1", "tcp:[::1]:",
                                    "tcp::8080", "tcp:host:0", "tcp:host:65536", "tcp:host:+80",
                                    "tcp:::1:80", "tcp:[a[b]:80"])
def test_a_malformed_target_is_a_value_error_saying_why(target):
    with pytest.raises(ValueError, match="target"):
        gpucmd.connect(target, wait_ready=30)


def test_a_target_that_is_no_string_is_a_type_error():
    with pytest.raises(TypeError, match="target"):
        gpucmd.connect(None, wait_ready=30)


def test_a_missing_daemon_is_unavailable(tmp_path):
    with pytest.raises(gpucmd.Unavailable):
        gpucmd.connect(f"unix:{tmp_path}/nobody.sock", wait_ready=0.5)


def test_calls_on_a_closed_session_are_not_found(client):
    session = client.session(name="closing")
    array = session.zeros(2, numpy.int8)
    assert session.close() >= 2
    assert session.close() == 0
    with pytest.raises(ValueError, match="closed session"):
        array.get()
    with pytest.raises(gpucmd.NotFound):
        session.synchronize()


def test_bad_session_arguments(client):
    with pytest.raises(gpucmd.InvalidArgument):
        client.session(device=7)
    with pytest.raises(gpucmd.InvalidArgument):
        client.session(name="x" * 10_000)
    with pytest.raises(ValueError):
        client.session().empty(-1, numpy.int8)


def test_shared_memory_asked_for_where_none_can_be_had_says_why():
    from conftest import Daemon  # a daemon of its own: no shared-memory regions allowed
    running = Daemon(limits="max_shared_memory_regions: 0")
    try:
        with gpucmd.connect(running.target, timeout=60) as client, client.session() as session:
            data = numpy.arange(1 << 18, dtype=numpy.int32)  # 1 MiB: shared memory by size
            array = session.asarray(data)  # the size's choice falls back to inline
            numpy.testing.assert_array_equal(array.get(), data)
            with pytest.raises(gpucmd.ResourceExhausted, match="max_shared_memory_regions"):
                array.get(shared_memory=True)
            with pytest.raises(gpucmd.ResourceExhausted, match="shared memory was asked for"):
                array.set(data, shared_memory=True)
            numpy.testing.assert_array_equal(array.get(shared_memory=False), data)
            with session.batch() as batch:  # a batch's large transfers go inline
                batch.write(array, data[::-1])
                read = batch.read(array)
            numpy.testing.assert_array_equal(read.get(), data[::-1])
            assert all(command.write.header.inline_size_bytes or command.read.size_bytes
                       for command in batch._commands)
    finally:
        assert not running.stop()


def test_a_descriptor_that_cannot_be_a_region_is_refused_as_invalid(daemon):
    from gpucmd._shm import hand_over_descriptor
    read_end, write_end = os.pipe()
    unsealed = os.memfd_create("unsealed", os.MFD_ALLOW_SEALING)
    try:
        for fd, words in ((read_end, "not one"), (unsealed, "F_SEAL_SHRINK")):
            with pytest.raises(gpucmd.InvalidArgument, match=words):
                hand_over_descriptor(daemon.target, fd)
    finally:
        for fd in (read_end, write_end, unsealed):
            os.close(fd)


def test_a_region_refused_for_a_limit_others_hold_is_asked_for_again(monkeypatch):
    from conftest import Daemon  # a daemon of its own: room for one 1 MiB region in all
    import gpucmd._session
    monkeypatch.setattr(gpucmd._session, "_REGION_RETRY_SECONDS", 0.0)
    running = Daemon(limits=f"max_shared_memory_bytes: {1 << 20}")
    try:
        with gpucmd.connect(running.target, timeout=60) as client:
            data = numpy.arange(1 << 18, dtype=numpy.int32)  # 1 MiB
            holder = client.session()
            holder.asarray(data).get(shared_memory=True)  # its region takes the room
            with client.session() as session:
                array = session.asarray(data)  # refused a region: inline
                with pytest.raises(gpucmd.ResourceExhausted, match="max_shared_memory_bytes"):
                    array.get(shared_memory=True)
                holder.close()  # its region goes with it
                numpy.testing.assert_array_equal(array.get(shared_memory=True), data)
    finally:
        assert not running.stop()
