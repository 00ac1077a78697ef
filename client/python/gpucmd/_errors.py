"""One exception per gRPC status code the daemon answers with.

Every error the daemon reports reaches Python as a subclass of :class:`GpucmdError`
carrying the daemon's message; a failed compile is a :class:`CompileError` (an
:class:`InvalidArgument`) with the compiler's whole log in ``.log``.

>>> try:
...     session.compile("not C++", "k")
... except gpucmd.CompileError as error:
...     print(error.log)
"""

from __future__ import annotations

from typing import Callable, Optional, TypeVar

import grpc

_T = TypeVar("_T")


class GpucmdError(Exception):
    """An error the daemon (or the connection to it) reported."""

    #: The gRPC status code this class stands for.
    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class Cancelled(GpucmdError):
    code = grpc.StatusCode.CANCELLED


class Unknown(GpucmdError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(GpucmdError):
    """Bad layout, out of bounds, an argument that does not match the kernel."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(GpucmdError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(GpucmdError):
    """An unknown or foreign handle (buffer, stream, region), or an unknown session."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(GpucmdError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(GpucmdError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(GpucmdError):
    """Device memory, a session quota or limit, a full queue."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(GpucmdError):
    """Tainted data (the message names the failed command at its root), or a kernel
    that did not compile."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(GpucmdError):
    code = grpc.StatusCode.ABORTED


class OutOfRange(GpucmdError):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(GpucmdError):
    """A capability this build of the daemon does not have."""

    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(GpucmdError):
    code = grpc.StatusCode.INTERNAL


class Unavailable(GpucmdError):
    """The daemon cannot be reached, is draining, or the device was lost or reset."""

    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(GpucmdError):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(GpucmdError):
    code = grpc.StatusCode.UNAUTHENTICATED


class CompileError(InvalidArgument):
    """A kernel that did not compile.

    ``log`` holds the compiler's whole output (the status message alone is cut to fit a
    header); ``kernel_id`` names the failed compile (launching it is refused).
    """

    def __init__(self, message: str, log: str, kernel_id: str) -> None:
        super().__init__(message)
        self.log = log
        self.kernel_id = kernel_id


_BY_CODE = {cls.code: cls for cls in (
    Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
    PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange,
    Unimplemented, Internal, Unavailable, DataLoss, Unauthenticated)}
_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def error_for(code: grpc.StatusCode, message: str) -> GpucmdError:
    """The exception for a status ``code`` with the daemon's ``message``."""
    return _BY_CODE.get(code, Unknown)(message)


def error_for_number(number: int, message: str) -> GpucmdError:
    """The exception for a numeric status code (a Submit reply's ``CommandStatus``)."""
    return error_for(_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN), message)


def from_rpc_error(error: grpc.RpcError) -> GpucmdError:
    """Converts a failed call's ``grpc.RpcError`` into its :class:`GpucmdError`."""
    code: Optional[grpc.StatusCode] = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else str(error)
    return error_for(code or grpc.StatusCode.UNKNOWN, details or "")


def call(method: Callable[..., _T], *args, **kwargs) -> _T:
    """Runs a stub call, raising its :class:`GpucmdError` instead of ``grpc.RpcError``."""
    try:
        return method(*args, **kwargs)
    except grpc.RpcError as error:
        raise from_rpc_error(error) from None
