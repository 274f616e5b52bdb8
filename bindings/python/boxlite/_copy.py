"""copy_in / copy_out options, checked once here and passed to the library.

The copy itself is native (``boxlite_box_copy_in`` / ``_out``): the box's
agent reads and writes the files, so the image needs no tar or shell, and
what the box sends is extracted by the library with its own checks (nothing
outside the destination or through a symlink, no device nodes, no set-id
bits, caps on bytes and entries)."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

from ._checks import check_timeout
from .errors import InvalidArgumentError

__all__ = ["CopyOptions"]

COPY_OUT_MAX_BYTES = 1 << 30  # the library's default cap on the file data of one copy_out
COPY_OUT_MAX_ENTRIES = 100_000  # ... and on its entries


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()


class CopyOptions:
    """How ``copy_in`` / ``copy_out`` copy (BoxLite's CopyOptions).

    ``recursive`` (True; False refuses a directory), ``overwrite`` (True;
    False raises AlreadyExistsError when the destination exists),
    ``follow_symlinks`` (False; True copies what a symlink named as the
    source points to), ``include_parent`` (True; False copies a directory's
    contents, as a source ending in ``/.`` does). ``max_bytes`` /
    ``max_entries`` cap the file data and entries of one copy (LimitError
    past them): by default 1 GiB and 100,000 for copy_out and none for
    copy_in; None means no cap. ``timeout`` (seconds, None: none) raises
    TimeoutError.

    ``layout`` (ours) is where a directory lands: ``"boxlite"`` (the
    default, BoxLite 0.10's: always inside the destination under its own
    name, the destination made if missing, so ``copy_in(dir, "/app")`` gives
    ``/app/<dir name>/...`` and ``copy_out("/app", out)`` gives
    ``out/app/...``) or ``"docker"`` (docker cp's: a destination that does
    not exist becomes the copy). A directory's contents (``include_parent``
    False, or a source ending in ``/.``) go into the destination either way;
    a file lands inside an existing directory (or a destination ending in
    ``/``) under its own name, else as the destination."""

    __slots__ = ("recursive", "overwrite", "follow_symlinks", "include_parent", "max_bytes", "max_entries", "timeout",
                 "layout")

    def __init__(self, recursive: bool = True, overwrite: bool = True, follow_symlinks: bool = False,
                 include_parent: bool = True, max_bytes: Optional[int] = DEFAULT,
                 max_entries: Optional[int] = DEFAULT, timeout: Optional[float] = None, layout: str = "boxlite"):
        self.layout = layout
        self.recursive = recursive
        self.overwrite = overwrite
        self.follow_symlinks = follow_symlinks
        self.include_parent = include_parent
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.timeout = timeout

    def __repr__(self) -> str:
        return "CopyOptions(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"

    def to_json(self) -> str:
        o: Dict[str, Any] = {}
        for key in ("recursive", "overwrite", "follow_symlinks", "include_parent"):
            v = getattr(self, key)
            if not isinstance(v, bool):
                raise TypeError(f"CopyOptions.{key} must be bool, not {type(v).__name__}")
            o[key] = v
        for key in ("max_bytes", "max_entries"):
            v = getattr(self, key)
            if v is DEFAULT:
                continue
            if v is None:
                o[key] = -1
                continue
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"CopyOptions.{key} must be int or None, not {type(v).__name__}")
            if v <= 0:
                raise InvalidArgumentError(f"CopyOptions.{key} must be > 0 (None for no cap), not {v}")
            o[key] = v
        if self.layout not in ("boxlite", "docker"):
            raise InvalidArgumentError(f"CopyOptions.layout must be 'boxlite' or 'docker', not {self.layout!r}")
        o["layout"] = self.layout
        if self.timeout is not None:
            o["timeout_secs"] = check_timeout(self.timeout, "CopyOptions.timeout")  # the library refuses <= 0
        return json.dumps(o)


def options(copy_options: Optional[CopyOptions], kwargs: Dict[str, Any]) -> CopyOptions:
    """copy_options, or one made of keyword arguments (overwrite=...,
    include_parent=..., as the earlier API took them)."""
    if copy_options is not None:
        if not isinstance(copy_options, CopyOptions):
            raise TypeError(f"copy_options must be CopyOptions, not {type(copy_options).__name__}")
        if kwargs:
            raise TypeError(f"pass either copy_options or keyword options, not both ({', '.join(kwargs)})")
        return copy_options
    return CopyOptions(**kwargs)


def host_path(p: Any, what: str) -> str:
    s = os.fspath(p) if isinstance(p, os.PathLike) else p
    if not isinstance(s, str):
        raise TypeError(f"{what} must be str or os.PathLike, not {type(p).__name__}")
    if not s:
        raise InvalidArgumentError(f"{what} is empty")
    return s


def box_path(p: Any, what: str) -> str:
    if not isinstance(p, str):
        raise TypeError(f"{what} must be str, not {type(p).__name__}")
    if not p:
        raise InvalidArgumentError(f"{what} is empty")
    return p
