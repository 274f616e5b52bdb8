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


class InvalidArgumentError(BoxliteError, ValueError):
    """A bad argument: malformed options, an unknown option, a value out of range. Also a
    ``ValueError``."""

    code, status = "invalid_argument", 1


class NotFoundError(BoxliteError):
    """No such box, image, snapshot, file or command."""

    code, status = "not_found", 2


class AlreadyExistsError(BoxliteError):
    """The name is taken: a box, a snapshot, a copy's destination, a host port."""

    code, status = "already_exists", 3


class InvalidStateError(BoxliteError):
    """The box or execution is in the wrong state, e.g. exec on a stopped box."""

    code, status = "invalid_state", 4


class TimeoutError(_OneMessage, BoxliteError, builtins.TimeoutError):
    """An operation's or a command's timeout expired. Also a ``TimeoutError``."""

    code, status = "timeout", 5


class UnsupportedError(BoxliteError):
    """Not supported by this host, box or agent."""

    code, status = "unsupported", 6


class BootFailedError(BoxliteError):
    """The box did not boot; the message has the tail of its console."""

    code, status = "boot_failed", 7


class ClosedError(BoxliteError):
    """The runtime, box or execution handle was closed."""

    code, status = "closed", 8


class LimitError(BoxliteError):
    """A size or count limit was exceeded (an argument list, a copy's max_bytes)."""

    code, status = "limit", 9


class InternalError(BoxliteError):
    """A bug or an unexpected failure inside boxlite."""

    code, status = "internal", 10


class UnreachableError(_OneMessage, BoxliteError, ConnectionError):
    """A registry or another remote did not answer: no route, no name, refused. Also a
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
