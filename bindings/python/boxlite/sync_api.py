"""Synchronous wrappers for scripts without asyncio.

Every call runs the async API on one private event loop in a background
thread, so these work anywhere, including where another event loop is running
(Jupyter); they must not be called from that private loop itself.

    from boxlite import SyncSimpleBox
    with SyncSimpleBox(image="alpine:latest") as box:
        print(box.exec("echo", "hi").stdout)

The wrappers are built by delegation, not copied method by method: a sync
class names the async class it wraps, and every public method and property
of that class is available on it, blocking (``_Sync``). What it returns is
wrapped in turn (a Box in a SyncBox, an Execution in a SyncExecution, ...).
A sync class writes down only what differs: its constructor, iteration, and
``with``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from typing import TYPE_CHECKING, Any, Coroutine, Dict, Iterator, Optional, TypeVar

from ._defaults import DEFAULT_AUTO_REMOVE
from .box import Box
from .code import CodeContext
from .codebox import CodeBox
from .errors import ClosedError, InvalidStateError
from .exec import ExecResult
from .execution import ExecStderr, ExecStdin, ExecStdout, Execution
from .interactivebox import InteractiveBox
from .runtime import Boxlite, ImageHandle, Options
from .session import CellChunk, CellResult, CellStream, PythonSession, ShellSession
from .simplebox import SimpleBox
from .network import BoxConnection, BoxTunnel, NetworkHandle, TunnelForwarder
from .snapshot import SnapshotHandle

__all__ = [
    "SyncBoxlite", "SyncBox", "SyncSnapshotHandle", "SyncExecution", "SyncExecStdout", "SyncExecStderr", "SyncExecStdin",
    "SyncSimpleBox", "SyncCodeBox", "SyncInteractiveBox", "SyncPythonSession", "SyncShellSession", "SyncCodeContext",
]


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="boxlite-sync", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine) -> Any:
        if threading.get_ident() == self.thread.ident:
            coro.close()
            raise InvalidStateError("boxlite's sync API was called from its own event loop; use the async API there")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result()
        except BaseException:
            fut.cancel()  # e.g. KeyboardInterrupt: stop the operation too
            raise


_loop: Optional[_LoopThread] = None
_loop_lock = threading.Lock()


def _run(coro: Coroutine) -> Any:
    global _loop
    if _loop is None:
        with _loop_lock:
            if _loop is None:
                _loop = _LoopThread()
    return _loop.run(coro)


async def _call(fn, *args, **kwargs):
    return fn(*args, **kwargs)


# ---- delegation ------------------------------------------------------------------------------------

# The sync class of each async class, filled in as the sync classes are defined.
_SYNC: Dict[type, type] = {}


def _wrap(value: Any) -> Any:
    """value with every async SDK object in it replaced by its sync view."""
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    for cls in type(value).__mro__:
        sync_cls = _SYNC.get(cls)
        if sync_cls is not None:
            return sync_cls._of(value)
    return value


class _DelegatedProperty(property):
    """A property _Sync generated (see _written)."""


def _delegate(name: str, attr: Any) -> Any:
    """The blocking form of the async class's attribute name."""
    if isinstance(attr, property):
        return _DelegatedProperty(lambda self: _wrap(getattr(self._async, name)), doc=attr.__doc__)
    if inspect.iscoroutinefunction(attr):
        def call(self, *args, **kwargs):
            return _run(getattr(self._async, name)(*args, **kwargs))
    else:  # a plain method runs on the loop's thread too, where the SDK's objects live
        def call(self, *args, **kwargs):
            return _run(_call(getattr(self._async, name), *args, **kwargs))

    @functools.wraps(attr)
    def method(self, *args, **kwargs):
        result = call(self, *args, **kwargs)
        return self if result is self._async else _wrap(result)

    method._boxlite_delegated = True  # type: ignore[attr-defined]
    return method


def _written(cls: type, name: str) -> bool:
    """Whether a sync class (cls or a base) defines name itself: what _Sync
    generated is generated again for a subclass's own async class."""
    for c in cls.__mro__:
        if c is _Sync or c is object:
            return False
        attr = vars(c).get(name)
        if attr is not None:
            return not (isinstance(attr, _DelegatedProperty) or getattr(attr, "_boxlite_delegated", False))
    return False


_S = TypeVar("_S", bound="_Sync")  # `with SyncCodeBox() as cb` gives a SyncCodeBox


class _Sync:
    """A blocking view of an async SDK object. ``class SyncX(_Sync, of=X)``
    delegates every public method and property of X that the sync class does
    not define itself: coroutines run to completion on the private loop,
    results are wrapped (_wrap). Async generators, static and class methods
    are left to the sync class."""

    _async: Any

    def __init_subclass__(cls, of: Optional[type] = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if of is None:
            return
        _SYNC[of] = cls
        for name in dir(of):
            if name.startswith("_") or _written(cls, name):
                continue
            attr = inspect.getattr_static(of, name)
            if isinstance(attr, (staticmethod, classmethod)) or inspect.isasyncgenfunction(attr):
                continue
            if isinstance(attr, property) or inspect.isfunction(attr):
                setattr(cls, name, _delegate(name, attr))

    def __init__(self, obj: Any):
        self._async = obj

    @classmethod
    def _of(cls, obj: Any) -> Any:
        view = cls.__new__(cls)
        view._async = obj
        return view

    def __enter__(self: _S) -> _S:
        _run(self._async.__aenter__())
        return self

    if TYPE_CHECKING:
        # For type checkers: what _Sync delegates is there, typed Any where a
        # class below does not declare it (tests/install/sync_types.py checks
        # that each declaration matches the async method it stands for).
        def __getattr__(self, name: str) -> Any: ...

    def __exit__(self, *exc) -> None:
        _run(self._async.__aexit__(*exc))


def _stream(self, code: str, timeout: Optional[float] = None, *,
            output_limit_bytes: Optional[int] = None) -> Iterator[CellChunk]:
    """The cell's output chunks while it runs (then its end)."""
    cell: CellStream = self._async.stream(code, timeout, output_limit_bytes=output_limit_bytes)
    try:
        while True:
            try:
                yield _run(cell.__anext__())
            except StopAsyncIteration:
                break
        _run(cell.result())
    finally:
        cell.close()


# ---- the sync classes ------------------------------------------------------------------------------

class SyncExecStdout(_Sync, of=ExecStdout):
    """A stream as a plain iterator of str (``iter_bytes()`` for bytes);
    ``read()`` and ``read_text()`` as the async stream's."""

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        try:
            return _run(self._async.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def iter_bytes(self) -> Iterator[bytes]:
        while True:
            data = _run(self._async._ex._next_bytes(self._async._st))
            if data is None:
                return
            yield data


class SyncExecStderr(SyncExecStdout, of=ExecStderr):
    pass


class SyncExecStdin(_Sync, of=ExecStdin):
    """``write()``, ``send_input()``, ``close()``, ``is_closed()``."""


class SyncExecution(_Sync, of=Execution):
    """Execution, blocking: ``stdout()``, ``wait()``, ``kill()``, ..."""


class SyncSnapshotHandle(_Sync, of=SnapshotHandle):
    """``SyncBox.snapshot``: the blocking SnapshotHandle."""


class SyncBoxConnection(_Sync, of=BoxConnection):
    """``SyncBoxTunnel.connect()``: read, write, shutdown_write, close, blocking."""


class SyncTunnelForwarder(_Sync, of=TunnelForwarder):
    """``SyncBoxTunnel.forward()``: local_addr, wait, close."""


class SyncBoxTunnel(_Sync, of=BoxTunnel):
    """``SyncNetworkHandle.tunnel()``: connect, forward, uri."""


class SyncNetworkHandle(_Sync, of=NetworkHandle):
    """``SyncBox.network`` and ``SyncSimpleBox.network``: tunnel, revoke_tunnel."""


class SyncBox(_Sync, of=Box):
    """Box, blocking: ``exec()`` gives a SyncExecution, ``snapshot`` a
    SyncSnapshotHandle, ``clone_box()`` a SyncBox."""


class SyncImageHandle(_Sync, of=ImageHandle):
    """``SyncBoxlite.images``."""


class SyncPythonSession(_Sync, of=PythonSession):
    """PythonSession, blocking (``SyncCodeBox.session()``, ``new_session()``)."""

    stream = _stream


class SyncCodeContext(_Sync, of=CodeContext):
    """CodeContext, synchronously (SyncCodeBox.create_code_context)."""


class SyncShellSession(_Sync, of=ShellSession):
    """ShellSession, blocking (``SyncInteractiveBox.shell_session``)."""


class SyncBoxlite(_Sync, of=Boxlite):
    def __init__(self, options: Optional[Options] = None, *, _runtime: Optional[Boxlite] = None):
        super().__init__(_runtime if _runtime is not None else Boxlite(options))
        self.images = SyncImageHandle(self._async.images)

    @classmethod
    def _of(cls, obj: Any) -> Any:
        return cls(_runtime=obj)

    @staticmethod
    def default() -> "SyncBoxlite":
        return SyncBoxlite(_runtime=Boxlite.default())

    @property
    def runtime(self) -> Boxlite:
        return self._async

    def start(self) -> "SyncBoxlite":
        """Returns the runtime, ready (BoxLite's explicit start; a
        SyncBoxlite is ready once made, so this only checks it is open)."""
        if self._async.closed:
            raise ClosedError("runtime is closed")
        return self

    def stop(self) -> None:
        """Closes the runtime (as close())."""
        self.close()

    def close(self) -> None:
        _run(self._async.shutdown())

    def __enter__(self) -> "SyncBoxlite":
        return self

    def __exit__(self, *exc) -> None:
        # The default runtime is shared: leaving `with` does not close it.
        if self._async is not Boxlite._default:
            self.close()


def _async_runtime(runtime: Any) -> Any:
    return runtime.runtime if isinstance(runtime, SyncBoxlite) else runtime


class SyncSimpleBox(_Sync, of=SimpleBox):
    """SimpleBox, synchronously; same parameters (BoxLite's programs look
    for them, ``reuse_existing`` included, in this signature)."""

    def __init__(
        self,
        image: Optional[str] = None,
        rootfs_path: Optional[str] = None,
        memory_mib: Optional[int] = None,
        cpus: Optional[int] = None,
        runtime: Any = None,
        name: Optional[str] = None,
        auto_remove: bool = DEFAULT_AUTO_REMOVE,
        reuse_existing: bool = False,
        **kwargs: Any,
    ):
        super().__init__(SimpleBox(image=image, rootfs_path=rootfs_path, memory_mib=memory_mib, cpus=cpus,
                                   runtime=_async_runtime(runtime), name=name, auto_remove=auto_remove,
                                   reuse_existing=reuse_existing, **kwargs))

    if TYPE_CHECKING:
        def exec(self, cmd: str, *args: str, env: Optional[Dict[str, str]] = None, user: Optional[str] = None,
                 timeout: Optional[float] = None, cwd: Optional[str] = None,
                 output_limit_bytes: Optional[int] = None) -> ExecResult: ...


class SyncCodeBox(SyncSimpleBox, of=CodeBox):
    """CodeBox, synchronously; same parameters."""

    def __init__(
        self,
        image: str = "python:slim",
        memory_mib: Optional[int] = None,
        cpus: Optional[int] = None,
        runtime: Any = None,
        name: Optional[str] = None,
        auto_remove: bool = DEFAULT_AUTO_REMOVE,
        reuse_existing: bool = False,
        **kwargs: Any,
    ):
        _Sync.__init__(self, CodeBox(image=image, memory_mib=memory_mib, cpus=cpus, runtime=_async_runtime(runtime),
                                     name=name, auto_remove=auto_remove, reuse_existing=reuse_existing, **kwargs))

    stream = _stream

    if TYPE_CHECKING:
        def run(self, code: str, timeout: Optional[float] = None, *,
                output_limit_bytes: Optional[int] = None) -> str: ...

        def run_cell(self, code: str, timeout: Optional[float] = None, *,
                     output_limit_bytes: Optional[int] = None) -> CellResult: ...


class SyncInteractiveBox(SyncSimpleBox, of=InteractiveBox):
    """InteractiveBox, synchronously; same parameters."""

    def __init__(
        self,
        image: str,
        shell: str = "/bin/sh",
        tty: Optional[bool] = None,
        memory_mib: Optional[int] = None,
        cpus: Optional[int] = None,
        runtime: Any = None,
        name: Optional[str] = None,
        auto_remove: bool = DEFAULT_AUTO_REMOVE,
        **kwargs: Any,
    ):
        _Sync.__init__(self, InteractiveBox(image=image, shell=shell, tty=tty, memory_mib=memory_mib, cpus=cpus,
                                            runtime=_async_runtime(runtime), name=name, auto_remove=auto_remove,
                                            **kwargs))
