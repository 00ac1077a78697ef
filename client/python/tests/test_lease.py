"""Sessions end with their process: a killed client's session is reclaimed after the
lease grace, a client that exits without closing closes at interpreter exit."""

import os
import signal
import subprocess
import sys
import time

import pytest

import gpucmd
from gpucmd.v1 import gpucmd_pb2 as pb
from conftest import IDLE_TIMEOUT_SECONDS, LEASE_GRACE_SECONDS, wait_for

HOLDER = """
import sys, numpy, gpucmd
client = gpucmd.connect(sys.argv[1])
session = client.session(name="holder")
array = session.zeros(1 << 20, numpy.uint8)
print("holding", flush=True)
if sys.argv[2] == "wait":
    sys.stdin.read()
"""


def start_holder(target, mode):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, target, mode],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert holder.stdout.readline() == b"holding\n"
    return holder


def test_a_killed_clients_session_is_reclaimed_within_the_grace(daemon, client):
    before = client.stats().sessions_open
    holder = start_holder(daemon.target, "wait")
    assert client.stats().sessions_open == before + 1
    assert client.stats().devices[0].memory_used_bytes >= 1 << 20
    # Opened by this user from another process: listed with its owner and memory.
    listed = client.sessions()
    assert listed.caller == f"uid:{os.geteuid()}"
    held = [s for s in listed.sessions if s.client_name == "holder"]
    assert len(held) == 1 and held[0].owner == listed.caller, listed
    assert held[0].memory_used_bytes >= 1 << 20
    killed_at = time.monotonic()
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert wait_for(lambda: client.stats().sessions_open == before)
    assert not [s for s in client.sessions().sessions if s.client_name == "holder"]
    reclaimed_after = time.monotonic() - killed_at
    assert reclaimed_after < LEASE_GRACE_SECONDS + 5, reclaimed_after
    assert client.stats().devices[0].memory_used_bytes < 1 << 20


def test_a_session_left_open_closes_at_interpreter_exit(daemon, client):
    before = client.stats().sessions_open
    holder = start_holder(daemon.target, "exit")
    assert holder.wait(timeout=30) == 0
    # Closed by the exiting interpreter, not by the lease grace.
    assert client.stats().sessions_open == before


def test_the_lease_keeps_an_idle_session_open(daemon, client):
    # A session opened without a lease, for comparison: it ends at the idle timeout.
    unleased = client._stub.OpenSession(pb.OpenSessionRequest(client_name="unleased")).session
    with client.session(name="idle") as session:
        array = session.asarray([1, 2, 3])
        time.sleep(IDLE_TIMEOUT_SECONDS + 1.5)  # past the idle timeout, with no request
        assert array.get().tolist() == [1, 2, 3]
    with pytest.raises(gpucmd.NotFound):
        gpucmd._errors.call(client._stub.Synchronize, pb.SynchronizeRequest(session=unleased))
