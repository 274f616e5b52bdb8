"""The runtime: a home directory with its images and boxes."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, TypeVar

from . import _ffi as raw
from ._aio import blocking
from .box import Box, BoxInfo, BoxOptions
from ._checks import DEFAULT_OUTPUT_LIMIT, check_optional_int, check_optional_str, check_output_limit, check_str, check_timeout
from .errors import BoxliteError, ClosedError, InvalidArgumentError, NotFoundError, UnsupportedError
from .metrics import RuntimeMetrics
from .registry import registries_json
from .rest import BoxliteRestOptions

__all__ = ["Boxlite", "Options", "WarmPool", "ImageHandle", "ImageInfo", "ImageDetail", "ImageVersion", "ImagePullResult"]


@dataclass
class Options:
    """Runtime options. ``home_dir`` defaults to $BOXLITE_HOME, else
    ~/.boxlite; ``assets_dir`` (boxlite-shim and guest/) to $BOXLITE_ASSETS,
    else the ones bundled with this package. ``output_limit_bytes`` (default
    64 MiB) caps the output collected per stream of a command run to
    completion (``SimpleBox.exec``, ``Box.run``, ``InteractiveBox.exec``,
    ``CodeBox.run``): what comes past it is read and dropped, and the result
    says so (``stdout_truncated`` / ``stderr_truncated``); each call can set
    its own. ``running_memory_cap_mib`` (default None: no cap) bounds the
    guest memory this runtime's running boxes hold together: a start or a
    resume past it pauses the least recently used idle boxes first, else
    fails with ``LimitExceededError``. ``warm_pools`` keeps boxes started
    and idle (``WarmPool(size, BoxOptions)``): a create of a pool's shape is
    handed one at once (its ``info().runtime["start"]`` is ``"pool"``); boxes
    with volumes, ports, secrets or detach are never pooled.
    ``warm_pool_memory_mib`` (default None: no bound) bounds the guest
    memory of all pools' boxes together. ``image_registries``
    (``ImageRegistry``) say how pulls reach registries: transport,
    credentials, search order, mirrors."""

    home_dir: Optional[str] = None
    image_registries: List[Any] = field(default_factory=list)  # ImageRegistry
    assets_dir: Optional[str] = None
    output_limit_bytes: Optional[int] = None
    running_memory_cap_mib: Optional[int] = None
    warm_pools: List["WarmPool"] = field(default_factory=list)
    warm_pool_memory_mib: Optional[int] = None

    def to_json(self) -> Optional[str]:
        o: Dict[str, Any] = {}
        regs = registries_json(self.image_registries, "Options.image_registries")
        if regs:
            o["image_registries"] = regs
        # $BOXLITE_HOME as this process sees it now: the library reads only
        # the environment the process started with.
        home = self.home_dir if self.home_dir is not None else os.environ.get("BOXLITE_HOME") or None
        if home is not None:
            o["home"] = check_str(home, "Options.home_dir")
        if self.assets_dir is not None:
            o["assets"] = check_str(self.assets_dir, "Options.assets_dir")
        limit = check_output_limit(self.output_limit_bytes, "Options.output_limit_bytes")
        if limit is not None:
            o["output_limit_bytes"] = limit  # absent: the library's default, the same 64 MiB
        cap = check_optional_int(self.running_memory_cap_mib, "Options.running_memory_cap_mib")
        if cap is not None:
            o["running_memory_cap_mib"] = cap  # the library range-checks it
        pools = []
        for i, p in enumerate(self.warm_pools):
            if not isinstance(p, WarmPool):
                raise TypeError(f"Options.warm_pools[{i}] must be a WarmPool, not {type(p).__name__}")
            pools.append(p.to_dict(f"Options.warm_pools[{i}]."))
        if pools:
            o["warm_pools"] = pools
        pool_mem = check_optional_int(self.warm_pool_memory_mib, "Options.warm_pool_memory_mib")
        if pool_mem is not None:
            o["warm_pool_memory_mib"] = pool_mem  # the library range-checks it
        return json.dumps(o) if o else None


@dataclass
class WarmPool:
    """A warm pool (``Options.warm_pools``): ``size`` boxes of the shape
    ``box`` gives (its image, memory, CPUs, disk size, network, kernel
    arguments and prestarted sessions) kept started and idle."""

    size: int
    box: BoxOptions

    def to_dict(self, what: str = "WarmPool.") -> Dict[str, Any]:
        size = check_optional_int(self.size, f"{what}size")
        if size is None:
            raise InvalidArgumentError(f"{what}size is required")
        if not isinstance(self.box, BoxOptions):
            raise TypeError(f"{what}box must be a BoxOptions, not {type(self.box).__name__}")
        return {"boxes": size, "box": json.loads(self.box.to_json(what=f"{what}box."))}


@dataclass(frozen=True)
class ImageInfo:
    """An image in the store (``runtime.images.list()``), in BoxLite 0.10's
    shape (``reference``, ``repository``, ``tag``, ``id``, ``cached_at``,
    ``size_bytes``) and ours (``name``, ``digest``, ``size``). ``id`` is the
    manifest digest: what names an image here."""

    name: str  # canonical, e.g. "docker.io/library/alpine:latest"
    digest: str  # the manifest's, "sha256:..."
    size: int  # bytes of its layers as stored
    cached_at: str = ""  # RFC 3339: when it reached the store
    raw: Dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @property
    def id(self) -> str:
        return self.digest

    @property
    def reference(self) -> str:
        return self.name

    @property
    def repository(self) -> str:
        return _split_ref(self.name)[0]

    @property
    def tag(self) -> str:
        return _split_ref(self.name)[1]

    @property
    def size_bytes(self) -> Optional[int]:
        return self.size


@dataclass(frozen=True)
class ImagePullResult:
    """What ``images.pull`` fetched (BoxLite 0.10's). ``config_digest`` is
    the manifest digest here (the image's id in this store)."""

    reference: str
    config_digest: str
    layer_count: int


@dataclass(frozen=True)
class ImageVersion:
    """One build held under an image name (BoxLite 0.10's)."""

    digest: str
    size_bytes: Optional[int]
    source_ref: str  # the name it was loaded or pulled as
    recorded_at: str  # RFC 3339: when it reached the store


@dataclass(frozen=True)
class ImageDetail:
    """An image name (a repository) and every build held under it
    (``images.get(name)``, BoxLite 0.10's). ``curated`` is always False: the
    local store has no curated catalog."""

    name: str
    tags: List[str]
    curated: bool
    versions: List[ImageVersion]


class ImageHandle:
    """The runtime's image store (``runtime.images``): BoxLite 0.10's
    ``list``, ``get``, ``remove`` and ``pull``, and ``load`` (ours: an OCI
    layout or a docker-archive tar)."""

    def __init__(self, runtime: "Boxlite"):
        self._rt = runtime

    async def list(self) -> List[ImageInfo]:
        data = json.loads(await blocking(raw.image_list, self._rt._handle()) or "[]")
        return [_image_info(d) for d in data or []]

    async def load(self, path: str) -> List[ImageInfo]:
        """Imports an OCI layout directory or a docker-archive tar (docker
        save) and returns the images it held."""
        path = check_str(path, "path")
        data = json.loads(await blocking(raw.image_load, self._rt._handle(), path) or "[]")
        return [_image_info(d) for d in data or []]

    async def pull(self, reference: str) -> ImagePullResult:
        """Pulls ``reference`` from its registry (or a mirror) into the store.
        UnreachableError when no registry answers."""
        reference = check_str(reference, "reference")
        d = json.loads(await blocking(raw.image_pull, self._rt._handle(), reference) or "{}")
        return ImagePullResult(reference=d.get("name") or reference, config_digest=d.get("digest") or "",
                               layer_count=len(d.get("layers") or []))

    async def get(self, name: str) -> ImageDetail:
        """Every build held under the image name ``name`` ("alpine" or
        "docker.io/library/alpine"); NotFoundError when there is none."""
        repo = _split_ref(_canonical(check_str(name, "name")))[0]
        mine = [i for i in await self.list() if i.repository == repo]
        if not mine:
            raise NotFoundError(f"images.get {name!r}: no image named {repo} in the store")
        versions: Dict[str, ImageVersion] = {}
        for i in mine:
            versions.setdefault(i.digest, ImageVersion(digest=i.digest, size_bytes=i.size, source_ref=i.reference,
                                                       recorded_at=i.cached_at))
        return ImageDetail(name=repo, tags=sorted({i.tag for i in mine}), curated=False, versions=list(versions.values()))

    async def remove(self, name: str) -> None:
        """Stops holding an image name: every tag of it, or only the tag
        or digest ``name`` gives ("alpine:3.19", "alpine@sha256:..."); boxes
        that use the image keep working. NotFoundError when there is none."""
        ref = _canonical(check_str(name, "name"))
        repo, tag = _split_ref(ref)
        given = "@" in name or ":" in name.rsplit("/", 1)[-1]
        names = [ref] if given else [i.reference for i in await self.list() if i.repository == repo]
        if not names:
            raise NotFoundError(f"images.remove {name!r}: no image named {repo} in the store")
        for n in names:
            await blocking(raw.image_remove, self._rt._handle(), n)


def _image_info(d: Dict[str, Any]) -> ImageInfo:
    return ImageInfo(name=d.get("name") or "", digest=d.get("digest") or "",
                     size=int(d.get("size_bytes") or 0), cached_at=d.get("cached_at") or "", raw=d)


def _canonical(ref: str) -> str:
    """ref as the store names it: docker.io/library/alpine:latest for
    alpine (a digest or tag kept; none given: latest)."""
    name, sep, digest = ref.partition("@")
    first = name.split("/", 1)[0]
    if "/" not in name:
        name = "docker.io/library/" + name
    elif not ("." in first or ":" in first or first == "localhost"):
        name = "docker.io/" + name
    if sep:
        return name + "@" + digest
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name


def _split_ref(ref: str) -> Tuple[str, str]:
    """(repository, tag or digest) of a canonical reference."""
    name, sep, digest = ref.partition("@")
    if sep:
        return name, digest
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        repo, tag = name.rsplit(":", 1)
        return repo, tag
    return name, ""


_R = TypeVar("_R", bound="Boxlite")  # `with` gives back the subclass


class Boxlite:
    """The BoxLite runtime.

    ``Boxlite.default()`` is the process-wide runtime for $BOXLITE_HOME (or
    ~/.boxlite); ``Boxlite(Options(home_dir=...))`` opens another home.
    ``close()`` (or leaving ``with``/``async with``) releases the boxes it
    opened and stops those this runtime started (not detached ones); so does the end of the
    process."""

    _default: Optional["Boxlite"] = None
    _default_options: Optional[Options] = None
    _default_lock = threading.Lock()

    def __init__(self, options: Optional[Options] = None):
        if options is None:
            options = Options()
        if not isinstance(options, Options):
            raise TypeError(f"options must be boxlite.Options, not {type(options).__name__}")
        self._h = raw.runtime_new(options.to_json())
        self._remote = False
        self._output_limit = options.output_limit_bytes or DEFAULT_OUTPUT_LIMIT
        self._boxes: "weakref.WeakSet[Box]" = weakref.WeakSet()
        self.images = ImageHandle(self)

    @staticmethod
    def rest(options: BoxliteRestOptions) -> "Boxlite":
        """A runtime whose boxes live on a server of BoxLite's REST API
        (``boxlite serve``): ``Boxlite.rest(BoxliteRestOptions.from_env())``.
        Nothing is sent until the first call."""
        if not isinstance(options, BoxliteRestOptions):
            raise TypeError(f"options must be boxlite.BoxliteRestOptions, not {type(options).__name__}")
        rt = Boxlite.__new__(Boxlite)
        rt._h = raw.runtime_new_rest(options.to_json())
        rt._remote = True
        rt._output_limit = options.output_limit_bytes or DEFAULT_OUTPUT_LIMIT
        rt._boxes = weakref.WeakSet()
        rt.images = ImageHandle(rt)
        return rt

    @staticmethod
    def default() -> "Boxlite":
        """The shared default runtime (created on first use)."""
        with Boxlite._default_lock:
            rt = Boxlite._default
            if rt is None or rt.closed:
                rt = Boxlite._default = Boxlite(Boxlite._default_options)
            return rt

    @staticmethod
    def init_default(options: Options) -> None:
        """Sets the options of the default runtime before its first use."""
        with Boxlite._default_lock:
            if Boxlite._default is not None and not Boxlite._default.closed:
                raise BoxliteError("the default runtime is already in use")
            Boxlite._default_options = options

    @property
    def closed(self) -> bool:
        return not self._h.alive

    @property
    def output_limit_bytes(self) -> int:
        """The output collected per stream of a command run to completion
        (``Options.output_limit_bytes``, default 64 MiB)."""
        return self._output_limit

    async def create(self, options: BoxOptions, name: Optional[str] = None) -> Box:
        """Creates a box and returns it configured, not booted (as BoxLite's
        create): ``await box.start()`` boots it, and so does its first exec,
        copy or session. Options are checked and a missing image is pulled
        here (in a worker thread, not the loop)."""
        if not isinstance(options, BoxOptions):
            raise TypeError(f"options must be boxlite.BoxOptions, not {type(options).__name__}")
        opts = options.to_json(name)
        h = await blocking(raw.box_create, self._handle(), opts, on_abandon=_discard_box)
        return self._adopt(h)

    async def get(self, id_or_name: str) -> Optional[Box]:
        """The box with this id, id prefix or name, or None."""
        id_or_name = check_str(id_or_name, "id_or_name")
        try:
            h = await blocking(raw.box_get, self._handle(), id_or_name, on_abandon=raw.Handle.close)
        except NotFoundError:
            return None
        return self._adopt(h)

    async def get_or_create(self, options: BoxOptions, name: Optional[str] = None):
        """(box, created): the named box if it exists, else a new one."""
        name = options.name if name is None else name
        if name is not None:
            box = await self.get(name)
            if box is not None:
                if box.info().status != "running":
                    await box.start()
                return box, False
        return await self.create(options, name), True

    async def get_info(self, id_or_name: str) -> Optional[BoxInfo]:
        box = await self.get(id_or_name)
        if box is None:
            return None
        try:
            return box.info()
        finally:
            box.close()

    async def list_info(self) -> List[BoxInfo]:
        """Infos of every box in this home, newest first (as BoxLite lists them)."""
        data = json.loads(await blocking(raw.box_list, self._handle()) or "[]")
        return [BoxInfo(d) for d in data or []]

    async def list(self) -> List[BoxInfo]:
        return await self.list_info()

    async def remove(self, id_or_name: str, force: bool = False) -> None:
        """Deletes a box and its disk; a running one needs force=True."""
        id_or_name = check_str(id_or_name, "id_or_name")
        if not isinstance(force, bool):
            raise TypeError(f"force must be bool, not {type(force).__name__}")
        await blocking(_remove, self._handle(), id_or_name, force)

    async def metrics(self) -> RuntimeMetrics:
        """This runtime's counters since it opened (see ``RuntimeMetrics``)."""
        return RuntimeMetrics(json.loads(raw.runtime_metrics(self._handle())))

    async def import_box(self, archive_path: Any, name: Optional[str] = None, *, untrusted: bool = False,
                         options: Optional[BoxOptions] = None) -> Box:
        """A new, stopped box from an archive ``Box.export`` wrote, its image
        loaded into this home if missing; ``name`` None leaves it unnamed.
        Every archive is checked as untrusted (``untrusted`` is accepted for
        BoxLite's signature): a bad one raises and leaves no box. Only the
        archive's content is kept (image, env, entrypoint, cmd, user, working
        dir); the rest comes from ``options`` (a BoxOptions without image and
        name), else the defaults."""
        archive_path = check_str(archive_path, "archive_path")
        name = check_optional_str(name, "name")
        if options is not None and not isinstance(options, BoxOptions):
            raise TypeError(f"options must be boxlite.BoxOptions, not {type(options).__name__}")
        opts = None if options is None else options.to_json(what="options.", image_required=False)
        h = await blocking(raw.runtime_import_box, self._handle(), archive_path, name, opts, on_abandon=_discard_box)
        return self._adopt(h)

    def close(self) -> None:
        """Closes the boxes and executions opened through this runtime and
        stops the boxes it started (not detached ones). Idempotent. Blocks until they stopped: in
        async code prefer ``await runtime.shutdown()``."""
        for box in list(self._boxes):
            box.close()
        self._h.close()

    async def shutdown(self, timeout: Optional[float] = None) -> None:
        """close(), in a worker thread. ``timeout`` (seconds, BoxLite's) bounds
        the wait: past it this returns, and boxes still stopping finish
        stopping in the background (the library bounds each stop: a graceful
        part, then the VM is killed). None waits until they stopped."""
        t = check_timeout(timeout, "timeout")
        if t is not None and t < 0:
            raise InvalidArgumentError(f"timeout must be >= 0 seconds, not {timeout!r}")
        job = asyncio.ensure_future(blocking(self.close))
        if t is None:
            await job
            return
        done, _ = await asyncio.wait({job}, timeout=t)
        if job in done:
            job.result()

    def __enter__(self: _R) -> _R:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def __aenter__(self: _R) -> _R:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.shutdown()

    def __repr__(self) -> str:
        return f"Boxlite({'closed' if self.closed else 'open'})"

    # ---- internals ----

    def _handle(self) -> raw.Handle:
        if not self._h.alive:
            raise ClosedError("runtime is closed")
        return self._h

    def _adopt(self, h: raw.Handle) -> Box:
        box = Box(self, h)
        self._boxes.add(box)
        return box


def _remove(rt: raw.Handle, id_or_name: str, force: bool) -> None:
    h = raw.box_get(rt, id_or_name)
    try:
        raw.box_remove(h, force)
    finally:
        h.close()


def _discard_box(h: raw.Handle) -> None:
    """A box created for a caller that went away (cancelled): delete it."""
    try:
        raw.box_remove(h, True)
    finally:
        h.close()

