"""Errors of each kind through the daemon, each as its gpucmd exception."""

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
