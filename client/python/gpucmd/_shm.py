"""Shared-memory regions: a memfd mapped here and registered with the daemon, so that
large transfers move no bytes over gRPC (one copy between the region and the device).

The protocol is the daemon's (``RegisterSharedMemory`` in ``proto/gpucmd/v1/gpucmd.proto``):
a memfd sealed against shrinking is handed over on the descriptor socket next to the
daemon's Unix socket (``PATH.fds``, SOCK_SEQPACKET, SCM_RIGHTS), which answers ``T`` and a
token, or a refusal and why not; ``RegisterSharedMemory`` then names the token.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import socket
from typing import Optional

import numpy

from gpucmd._errors import FailedPrecondition, InvalidArgument, ResourceExhausted, Unavailable


#: The descriptor socket's refusals by their first byte (gpucmd.proto, at
#: RegisterSharedMemory); any other is FailedPrecondition.
_REFUSALS = {b"I": InvalidArgument, b"R": ResourceExhausted}


def hand_over_descriptor(target: str, fd: int) -> str:
    """Hands ``fd`` to the daemon at ``target`` (``unix:PATH``); returns the token."""
    if not target.startswith("unix:"):
        raise FailedPrecondition("shared memory needs a connection over the daemon's Unix socket")
    path = target[len("unix:"):] + ".fds"
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
        try:
            connection.connect(path)
            socket.send_fds(connection, [b"R"], [fd])
            reply = connection.recv(512)
        except OSError as error:
            raise Unavailable(f"cannot reach the descriptor socket {path}: {error}") from None
    if not reply:
        raise Unavailable("the descriptor socket closed without an answer")
    if reply[:1] == b"T":
        return reply[1:].decode()
    refusal = _REFUSALS.get(reply[:1], FailedPrecondition)
    raise refusal(f"the daemon refused the memfd: {reply[1:].decode(errors='replace')}")


class SharedRegion:
    """``size`` bytes of memory shared with the daemon; :meth:`view` exposes them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.region: Optional[int] = None  # the daemon's id, once registered
        self.fd = os.memfd_create("gpucmd-python", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, size)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
            self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError:
            os.close(self.fd)
            raise

    def view(self, nbytes: int) -> numpy.ndarray:
        """The region's first ``nbytes`` as a uint8 array (no copy)."""
        return numpy.frombuffer(self.map, dtype=numpy.uint8, count=nbytes)

    def close(self) -> None:
        """Unmaps the region here (the daemon unmaps its side when it is unregistered)."""
        if self.fd >= 0:
            self.map.close()
            os.close(self.fd)
            self.fd = -1
