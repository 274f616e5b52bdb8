"""The result of a command run to completion."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["ExecResult"]


@dataclass
class ExecResult:
    """A finished command (``SimpleBox.exec``, ``Box.run``).

    Attributes:
        exit_code: the exit code (-N when signal N killed it, as in BoxLite; 127 when
            the command does not exist).
        stdout, stderr: the output, as str (UTF-8, invalid bytes replaced).
        timed_out: True if the command's timeout killed it.
        error_message: why the command could not run or ended abnormally,
            else None.
        stdout_truncated, stderr_truncated: True when that stream was longer
            than the output limit (``output_limit_bytes``, default 64 MiB):
            ``stdout``/``stderr`` then hold its first bytes only; the rest
            was read (the command was never blocked) and dropped. Truncation
            is not an error: nothing is raised.
    """

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    error_message: Optional[str] = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
