"""BoxLite's one error vocabulary, as Python exceptions.

Every C status code (include/boxlite.h) has one class; the library's message
names the operation and the state. ``BoxliteError.code`` is the stable kind
name ("not_found", ...), the same as the C ``boxlite_status_name`` and the JS
``error.code``.
"""

from __future__ import annotations

import builtins
from typing import Optional

__all__ = [
    "BoxliteError",
    # BEGIN GENERATED: errors all (go generate ./errdefs; do not edit)
    "InvalidArgumentError",
    "NotFoundError",
    "AlreadyExistsError",
    "InvalidStateError",
    "TimeoutError",
    "UnsupportedError",
    "BootFailedError",
    "ClosedError",
    "LimitError",
    "InternalError",
    "UnreachableError",
    "SessionReapedError",
    "StoppedError",
    "ImageError",
    "ExecutionError",
    "ResourceExhaustedError",
    "NetworkError",
    "UpstreamUnavailableError",
    "EngineError",
    "StorageError",
    "DatabaseError",
    "MetadataError",
    "ConfigError",
    # END GENERATED: errors all
    "ExecError",
    "ParseError",
]


class BoxliteError(RuntimeError):
    """Base class of every boxlite error. A ``RuntimeError``, as BoxLite's
    errors are, so programs written for it (``except RuntimeError``) catch
    ours."""

    code: str = "internal"
    status: int = 10

    def __init__(self, message: str = "", *args):
        super().__init__(message, *args)
        self.message = message

    def __str__(self) -> str:
        return self.message


class _OneMessage:
    """A kind that is also an ``OSError`` (``TimeoutError``, ``ConnectionError``),
    whose constructor would read two or more arguments as (errno, strerror):
    it takes one message."""

    def __init__(self, message: str = ""):
        OSError.__init__(self, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


# BEGIN GENERATED: error classes (go generate ./errdefs; do not edit)


class SessionReapedError(BoxliteError):
    """BoxLite's class for a reaped session; nothing here raises it. (BoxLite 0.10's class.)"""

    code, status = "session_reaped", 0


class StoppedError(BoxliteError):
    """The box has stopped, or the handle was closed (InvalidStateError and ClosedError are
    StoppedErrors). (BoxLite 0.10's class.)"""

    code, status = "stopped", 0


class ImageError(BoxliteError):
    """An image could not be pulled (UnreachableError is one). (BoxLite 0.10's class.)"""

    code, status = "image_pull_failed", 0


class ExecutionError(BoxliteError):
    """BoxLite's class for a process that could not be run; here a missing command is
    NotFoundError, which is not an ExecutionError. (BoxLite 0.10's class.)"""

    code, status = "execution_failed", 0


class ResourceExhaustedError(BoxliteError):
    """A limit was reached (LimitError is one). (BoxLite 0.10's class.)"""

    code, status = "resource_exhausted", 0


class NetworkError(BoxliteError):
    """The network was unavailable (UnreachableError is one). (BoxLite 0.10's class.)"""

    code, status = "network_unavailable", 0


class UpstreamUnavailableError(BoxliteError):
    """A remote the runtime depends on did not answer (UnreachableError is one). (BoxLite 0.10's
    class.)"""

    code, status = "upstream_unavailable", 0


class EngineError(BoxliteError):
    """The virtualization engine failed (BootFailedError is one). (BoxLite 0.10's class.)"""

    code, status = "engine_unavailable", 0


class StorageError(BoxliteError):
    """BoxLite's class for a storage failure; here those are InternalError (with the errno in the
    message). (BoxLite 0.10's class.)"""

    code, status = "storage_error", 0


class DatabaseError(BoxliteError):
    """BoxLite's class for a database failure; this runtime has no database, nothing raises it.
    (BoxLite 0.10's class.)"""

    code, status = "database_error", 0


class MetadataError(BoxliteError):
    """BoxLite's class for unreadable metadata; here a damaged box record is InternalError.
    (BoxLite 0.10's class.)"""

    code, status = "metadata_error", 0


class ConfigError(BoxliteError):
    """The configuration is refused (InvalidArgumentError is one). (BoxLite 0.10's class.)"""

    code, status = "config_error", 0


class InvalidArgumentError(ConfigError, ValueError):
    """A bad argument: malformed options, an unknown option, a value out of range. Also a
    ``ConfigError``. Also a ``ValueError``."""

    code, status = "invalid_argument", 1


class NotFoundError(BoxliteError):
    """No such box, image, snapshot, file or command."""

    code, status = "not_found", 2


class AlreadyExistsError(BoxliteError):
    """The name is taken: a box, a snapshot, a copy's destination, a host port."""

    code, status = "already_exists", 3


class InvalidStateError(StoppedError):
    """The box or execution is in the wrong state, e.g. exec on a stopped box. Also a
    ``StoppedError``."""

    code, status = "invalid_state", 4


class TimeoutError(_OneMessage, BoxliteError, builtins.TimeoutError):
    """An operation's or a command's timeout expired. Also a ``TimeoutError``."""

    code, status = "timeout", 5


class UnsupportedError(BoxliteError):
    """Not supported by this host, box or agent."""

    code, status = "unsupported", 6


class BootFailedError(EngineError):
    """The box did not boot; the message has the tail of its console. Also a ``EngineError``."""

    code, status = "boot_failed", 7


class ClosedError(StoppedError):
    """The runtime, box or execution handle was closed. Also a ``StoppedError``."""

    code, status = "closed", 8


class LimitError(ResourceExhaustedError):
    """A size or count limit was exceeded (an argument list, a copy's max_bytes). Also a
    ``ResourceExhaustedError``."""

    code, status = "limit", 9


class InternalError(BoxliteError):
    """A bug or an unexpected failure inside boxlite."""

    code, status = "internal", 10


class UnreachableError(_OneMessage, ImageError, NetworkError, UpstreamUnavailableError, ConnectionError):
    """A registry or another remote did not answer: no route, no name, refused. Also a
    ``ImageError``. Also a ``NetworkError``. Also a ``UpstreamUnavailableError``. Also a
    ``ConnectionError``."""

    code, status = "unreachable", 11


_KIND_CLASSES = (
    InvalidArgumentError,
    NotFoundError,
    AlreadyExistsError,
    InvalidStateError,
    TimeoutError,
    UnsupportedError,
    BootFailedError,
    ClosedError,
    LimitError,
    InternalError,
    UnreachableError,
)
# END GENERATED: error classes


class ExecError(BoxliteError):
    """A command failed (non-zero exit code).

    Attributes: ``command``, ``exit_code``, ``stderr``."""

    code, status = "exec", 0

    def __init__(self, command: str, exit_code: int, stderr: str):
        self.command = command
        self.exit_code = exit_code
        self.stderr = stderr
        super().__init__(f"Command '{command}' failed with exit code {exit_code}: {stderr}")


class ParseError(BoxliteError):
    """Output could not be parsed."""

    code, status = "parse", 0


_BY_STATUS = {cls.status: cls for cls in _KIND_CLASSES}


def from_status(status: int, message: str) -> BoxliteError:
    """The exception for a C status code (unknown codes are InternalError)."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        return InternalError(f"{message} (unknown status {status})")
    return cls(message)


def class_for(code: str) -> Optional[type]:
    """The exception class of a kind name ("not_found", ...)."""
    for cls in _BY_STATUS.values():
        if cls.code == code:
            return cls
    return None
