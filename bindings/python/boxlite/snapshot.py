"""Disk snapshots of a box (``box.snapshot``), and the options of
``Box.clone_box`` and ``Box.export``, as BoxLite's SDK names them.

Every operation needs the box not running (stopped, or never started):
a running box raises InvalidStateError (stop it first). Disk copies are
copy-on-write where the host file system allows, else sparse."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from . import _ffi as raw
from ._aio import blocking
from ._checks import check_str
from .errors import NotFoundError

if TYPE_CHECKING:
    from .box import Box

__all__ = ["SnapshotInfo", "SnapshotHandle", "SnapshotOptions", "CloneOptions", "ExportOptions"]


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot: ``created_at`` in unix seconds, ``size_bytes`` what it
    takes on the host, ``container_disk_bytes`` the disk's size (0 when the
    box had no disk yet), ``memory`` whether it keeps the box's memory
    (``memory_bytes`` of it on the host)."""

    id: str
    box_id: str
    name: str
    created_at: int
    size_bytes: int
    container_disk_bytes: int
    memory: bool = False
    memory_bytes: int = 0

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "SnapshotInfo":
        return cls(id=d["id"], box_id=d["box_id"], name=d["name"], created_at=int(d["created_at"]),
                   size_bytes=int(d.get("size_bytes", 0)), container_disk_bytes=int(d.get("container_disk_bytes", 0)),
                   memory=bool(d.get("memory", False)), memory_bytes=int(d.get("memory_bytes", 0)))


@dataclass(frozen=True)
class SnapshotOptions:
    """Options of ``snapshot.create``: ``memory`` keeps the running or paused
    box's memory and devices too (see ``SnapshotHandle.create``)."""

    memory: bool = False


@dataclass(frozen=True)
class CloneOptions:
    """Options of ``clone_box``: ``snapshot`` clones that snapshot of the box
    instead of its disk as it is."""

    snapshot: Optional[str] = None


@dataclass(frozen=True)
class ExportOptions:
    """Options of ``export`` (none yet, as in BoxLite)."""


def _check_name(name: Any, what: str = "name") -> str:
    from ._checks import check_str

    return check_str(name, what)


class SnapshotHandle:
    """``box.snapshot``: create, list, get, remove and restore snapshots of
    the box's disk. Snapshots live with the box and go when it is removed."""

    def __init__(self, box: "Box"):
        self._box = box

    async def create(self, name: Optional[str] = None, *, options: Optional[SnapshotOptions] = None,
                     memory: Optional[bool] = None) -> SnapshotInfo:
        """Saves the box's disk as snapshot ``name`` (None: named by its id).
        A running box is saved at one instant (it stops only for the save;
        ``sync`` runs in the box first, where the image has it). ``memory=True`` (or
        ``SnapshotOptions(memory=True)``) keeps its memory too: the box must
        be running or paused, and ``restore`` then brings it back paused at
        that instant, its processes and sessions as they were."""
        if name is not None:
            name = _check_name(name)
        if options is not None and not isinstance(options, SnapshotOptions):
            raise TypeError(f"options must be boxlite.SnapshotOptions, not {type(options).__name__}")
        if memory is not None and not isinstance(memory, bool):
            raise TypeError(f"memory must be bool, not {type(memory).__name__}")
        if memory is not None and options is not None:
            raise ValueError("give memory or options, not both")
        mem = memory if memory is not None else (options.memory if options is not None else False)
        if not isinstance(mem, bool):
            raise TypeError(f"options.memory must be bool, not {type(mem).__name__}")
        opts = json.dumps({"memory": True} if mem else {})
        return SnapshotInfo.from_json(json.loads(await blocking(raw.box_snapshot_create_with, self._box._handle(), name, opts)))

    async def list(self) -> List[SnapshotInfo]:
        """The box's snapshots, newest first."""
        return [SnapshotInfo.from_json(d) for d in json.loads(await blocking(raw.box_snapshot_list, self._box._handle()))]

    async def get(self, name: str) -> Optional[SnapshotInfo]:
        """The snapshot named ``name``, or None."""
        name = _check_name(name)
        try:
            return SnapshotInfo.from_json(json.loads(await blocking(raw.box_snapshot_get, self._box._handle(), name)))
        except NotFoundError:
            return None

    async def remove(self, name: str) -> None:
        """Deletes the snapshot (NotFoundError if there is none)."""
        await blocking(raw.box_snapshot_remove, self._box._handle(), _check_name(name))

    async def restore(self, name: str) -> None:
        """Replaces the box's disk with the snapshot's; the box must not be
        running. A snapshot with memory leaves the box paused at its instant
        (the next call resumes it); a paused box takes only such a one."""
        await blocking(raw.box_snapshot_restore, self._box._handle(), _check_name(name))

    def __repr__(self) -> str:
        return f"SnapshotHandle(box_id={self._box.id!r})"


def clone_options_json(options: Optional[CloneOptions], name: Optional[str]) -> str:
    if options is not None and not isinstance(options, CloneOptions):
        raise TypeError(f"options must be boxlite.CloneOptions, not {type(options).__name__}")
    d: Dict[str, Any] = {}
    if name is not None:
        d["name"] = _check_name(name)
    if options is not None and options.snapshot is not None:
        d["snapshot"] = _check_name(options.snapshot, "options.snapshot")
    return json.dumps(d)



async def fork_box(box: "Box", count: int = 1, names: Optional[Sequence[str]] = None) -> List["Box"]:
    """``box.fork()``: ``count`` running boxes made from the running box at one
    instant, as E2B's fork: its memory, processes and disk; the box is
    stopped only for the save, then runs on. Each fork is a machine of its
    own (clock, entropy, hostname, boot id, machine id, network, host ports);
    the box's open streams end in it (a detachable exec runs on there).
    ``names`` name the first forks. A paused box is resumed first; volumes
    raise UnsupportedError."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"count must be int, not {type(count).__name__}")
    if names is None:
        names = []
    if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple)):
        raise TypeError(f"names must be a list of str, not {type(names).__name__}")
    opts = json.dumps({"count": count, "names": [check_str(n, f"names[{i}]") for i, n in enumerate(names)]})
    ids = json.loads(await blocking(raw.box_fork, box._handle(), opts))
    forks = []
    for i in ids:
        b = await box._runtime.get(i)
        if b is None:
            raise NotFoundError(f"fork {i} of box {box.id} is gone")
        forks.append(b)
    return forks
