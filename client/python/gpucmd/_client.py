"""Connecting to a daemon: :func:`connect` and :class:`Client`."""

from __future__ import annotations

import dataclasses
import re
from typing import List, Optional, Union

import grpc

from gpucmd._errors import Unavailable, call
from gpucmd.v1 import gpucmd_pb2 as pb
from gpucmd.v1 import gpucmd_pb2_grpc as pb_grpc

#: Where ``gpucmdd`` listens unless configured otherwise.
DEFAULT_TARGET = "unix:/tmp/gpucmdd.sock"
#: The daemon's default gRPC message limit (``limits.max_message_bytes``).
DEFAULT_MAX_MESSAGE_BYTES = 16 << 20

_DRIVERS = {pb.DRIVER_KIND_CPU: "cpu", pb.DRIVER_KIND_CUDA: "cuda", pb.DRIVER_KIND_HIP: "hip"}


@dataclasses.dataclass(frozen=True)
class Device:
    """One device of the daemon (``ListDevices``)."""

    ordinal: int
    name: str
    driver: str  # "cpu", "cuda" or "hip"
    architecture: str
    memory_capacity_bytes: int
    memory_used_bytes: int
    max_threads_per_block: int
    max_shared_memory_per_block_bytes: int
    ready: bool


@dataclasses.dataclass(frozen=True)
class Health:
    """The daemon's answer to ``grpc.health.v1.Health/Check`` and its devices' readiness."""

    serving: bool
    devices_ready: int
    devices: int

    def __bool__(self) -> bool:
        return self.serving and self.devices_ready == self.devices


_TCP_TARGET = re.compile(r"(\[[^\[\]]+\]|[^\[\]:]+):([0-9]{1,5})")


def _channel_target(target: str) -> str:
    """gRPC's spelling of a daemon address: "unix:PATH" stays, "tcp:HOST:PORT" drops
    its scheme. A ValueError, saying why, for an empty target, "unix:" without a path or
    "tcp:" followed by anything but HOST:PORT (a TypeError for anything but a string);
    other targets are gRPC's to judge."""
    if not isinstance(target, str):
        raise TypeError(f"the target is a string, unix:PATH or tcp:HOST:PORT, not {target!r}")
    if not target:
        raise ValueError("the target is empty: name unix:PATH or tcp:HOST:PORT")
    if target == "unix:":
        raise ValueError("the target unix: names no socket path")
    if target.startswith("tcp:"):
        address = _TCP_TARGET.fullmatch(target[len("tcp:"):])
        if address is None or not 1 <= int(address.group(2)) <= 65535:
            raise ValueError(f"the target {target} is not tcp:HOST:PORT (a port in 1..65535, "
                             f"an IPv6 host in brackets)")
        return target[len("tcp:"):]
    return target


def _encode_health_request(service: str) -> bytes:
    """A ``grpc.health.v1.HealthCheckRequest`` (field 1, the service name)."""
    name = service.encode()
    if len(name) >= 128:
        raise ValueError("service name too long")
    return (b"\x0a" + bytes([len(name)]) + name) if name else b""


def _decode_health_response(data: bytes) -> int:
    """The ``status`` of a ``grpc.health.v1.HealthCheckResponse`` (field 1, a varint)."""
    if len(data) >= 2 and data[0] == 0x08:
        return data[1]
    return 0


class Client:
    """A connection to a daemon. Use :func:`connect` to make one.

    >>> with gpucmd.connect("unix:/tmp/gpucmdd.sock") as client:
    ...     print(client.devices()[0].name)
    ...     with client.session(device=0, name="example") as session:
    ...         x = session.asarray(numpy.arange(4, dtype=numpy.float32))
    """

    def __init__(self, target: str, channel: grpc.Channel, timeout: Optional[float],
                 max_message_bytes: int) -> None:
        self.target = target
        self.timeout = timeout
        self.max_message_bytes = max_message_bytes
        self._channel = channel
        self._stub = pb_grpc.GpuCommandStub(channel)
        # The streaming methods called as unary calls, for exchanges of one message each
        # way (_ONE_MESSAGE_BYTES and _UNARY_WRITE_BYTES in _session.py): the same messages
        # on the wire, while grpcio's streaming calls cost some 500 us more each (a thread
        # that feeds the request iterator, and the response iterator's hand-offs).
        self._single_write = channel.unary_unary(
            "/gpucmd.v1.GpuCommand/Write", request_serializer=pb.WriteRequest.SerializeToString,
            response_deserializer=pb.WriteResponse.FromString)
        self._single_read = channel.unary_unary(
            "/gpucmd.v1.GpuCommand/Read", request_serializer=pb.ReadRequest.SerializeToString,
            response_deserializer=pb.ReadResponse.FromString)
        self._single_batch = channel.unary_unary(
            "/gpucmd.v1.GpuCommand/Submit", request_serializer=pb.SubmitRequest.SerializeToString,
            response_deserializer=pb.SubmitResponse.FromString)
        self._health_check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=_encode_health_request,
            response_deserializer=_decode_health_response)
        self._sessions: "set" = set()

    def __repr__(self) -> str:
        return f"<gpucmd.Client target={self.target!r}>"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Closes every session of this client, then the connection."""
        for session in list(self._sessions):
            session.close()
        self._channel.close()

    def devices(self) -> List[Device]:
        """The daemon's devices, with their memory in use and readiness."""
        response = call(self._stub.ListDevices, pb.ListDevicesRequest(), timeout=self.timeout)
        return [Device(ordinal=d.ordinal, name=d.name, driver=_DRIVERS.get(d.driver, "unknown"),
                       architecture=d.architecture, memory_capacity_bytes=d.memory_capacity_bytes,
                       memory_used_bytes=d.memory_used_bytes,
                       max_threads_per_block=d.max_threads_per_block,
                       max_shared_memory_per_block_bytes=d.max_shared_memory_per_block_bytes,
                       ready=d.ready) for d in response.devices]

    def stats(self) -> pb.GetStatsResponse:
        """The daemon's figures: per-device queue depth, memory, drop queue, sessions."""
        return call(self._stub.GetStats, pb.GetStatsRequest(), timeout=self.timeout)

    def sessions(self) -> pb.ListSessionsResponse:
        """The open sessions this client may see: every client's for an administrator
        (uid 0, the daemon's user or the admin group on the Unix socket, a configured certificate subject
        on TLS), its own otherwise. ``all_clients`` says which; ``caller`` is who the
        daemon took this client for."""
        return call(self._stub.ListSessions, pb.ListSessionsRequest(), timeout=self.timeout)

    def health(self) -> Health:
        """Whether the daemon serves (gRPC health checking) and how many devices are
        ready. Truthy when it serves with every device ready."""
        status = call(self._health_check, "gpucmd.v1.GpuCommand", timeout=self.timeout)
        devices = self.devices()
        return Health(serving=status == 1, devices_ready=sum(d.ready for d in devices),
                      devices=len(devices))

    def session(self, device: int = 0, name: str = "python") -> "Session":
        """Opens a session on ``device``; ``name`` labels it in the daemon's logs and
        metrics. Use it as a context manager; it is also closed when garbage-collected
        and at interpreter exit."""
        from gpucmd._session import Session  # the session module imports this one
        session = Session._open(self, device, name)
        self._sessions.add(session)
        return session

    def _forget(self, session: "Session") -> None:
        self._sessions.discard(session)


def connect(target: str = DEFAULT_TARGET, *,
            tls: Union[None, bool, grpc.ChannelCredentials] = None,
            timeout: Optional[float] = None,
            max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
            wait_ready: float = 10.0) -> Client:
    """Connects to the daemon at ``target``: ``"unix:PATH"`` or ``"tcp:HOST:PORT"``.

    ``tls``: ``True`` for TLS with the system's roots, or ``grpc.ssl_channel_credentials(...)``
    (client certificates included) for a daemon that asks for them. ``timeout``: the
    deadline in seconds of each call (``None``: none). ``wait_ready``: how long to wait
    for the connection before raising :class:`Unavailable`.

    >>> client = gpucmd.connect("unix:/tmp/gpucmdd.sock")
    """
    options = [("grpc.max_receive_message_length", max_message_bytes),
               ("grpc.max_send_message_length", max_message_bytes)]
    channel_target = _channel_target(target)
    if tls:
        credentials = (grpc.ssl_channel_credentials() if tls is True else tls)
        channel = grpc.secure_channel(channel_target, credentials, options=options)
    else:
        channel = grpc.insecure_channel(channel_target, options=options)
    try:
        grpc.channel_ready_future(channel).result(timeout=wait_ready)
    except grpc.FutureTimeoutError:
        channel.close()
        raise Unavailable(f"cannot reach gpucmdd at {target} within {wait_ready} s") from None
    return Client(target, channel, timeout, max_message_bytes)
