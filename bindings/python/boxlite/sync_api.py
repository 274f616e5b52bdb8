"""Synchronous wrappers for scripts without asyncio.

Every call runs the async API on one private event loop in a background
thread, so these work anywhere, including where another event loop is running
(Jupyter); they must not be called from that private loop itself.

    from boxlite import SyncSimpleBox
    with SyncSimpleBox(image="alpine:latest") as box:
        print(box.exec("echo", "hi").stdout)
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine, Iterator, List, Optional

from .box import Box, BoxInfo, BoxOptions
from .codebox import CodeBox
from .errors import ClosedError, InvalidStateError
from .exec import ExecResult
from .execution import ExecStdin, Execution, ExitStatus, _OutputStream
from .interactivebox import InteractiveBox
from .metrics import BoxMetrics, RuntimeMetrics
from .runtime import Boxlite, ImageInfo, Options
from .session import CellChunk, CellResult
from .simplebox import SimpleBox
from .snapshot import CloneOptions, ExportOptions, SnapshotHandle, SnapshotInfo, SnapshotOptions

__all__ = [
    "SyncBoxlite", "SyncBox", "SyncSnapshotHandle", "SyncExecution", "SyncExecStdout", "SyncExecStderr", "SyncExecStdin",
    "SyncSimpleBox", "SyncCodeBox", "SyncInteractiveBox",
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


class SyncExecStdout:
    """A stream as a plain iterator of str (``iter_bytes()`` for bytes)."""

    def __init__(self, stream: _OutputStream):
        self._stream = stream

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        try:
            return _run(self._stream.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def iter_bytes(self) -> Iterator[bytes]:
        while True:
            data = _run(self._stream._ex._next_bytes(self._stream._st))
            if data is None:
                return
            yield data

    def read(self) -> bytes:
        return _run(self._stream.read())

    def read_text(self) -> str:
        return _run(self._stream.read_text())


class SyncExecStderr(SyncExecStdout):
    pass


class SyncExecStdin:
    def __init__(self, stdin: ExecStdin):
        self._stdin = stdin

    def send_input(self, data) -> None:
        _run(self._stdin.write(data))

    def write(self, data) -> None:
        _run(self._stdin.write(data))

    def close(self) -> None:
        _run(self._stdin.close())

    def is_closed(self) -> bool:
        return self._stdin.is_closed()


class SyncExecution:
    def __init__(self, ex: Execution):
        self._ex = ex

    @property
    def id(self) -> str:
        return self._ex.id

    def stdout(self) -> SyncExecStdout:
        return SyncExecStdout(self._ex.stdout())

    def stderr(self) -> SyncExecStderr:
        return SyncExecStderr(self._ex.stderr())

    def stdin(self) -> SyncExecStdin:
        return SyncExecStdin(self._ex.stdin())

    def wait(self) -> ExitStatus:
        return _run(self._ex.wait())

    def kill(self, signal: int = 9) -> None:
        _run(self._ex.kill(signal))

    def signal(self, sig: int) -> None:
        _run(self._ex.signal(sig))

    def resize_tty(self, rows: int, cols: int) -> None:
        _run(self._ex.resize_tty(rows, cols))

    def close(self) -> None:
        _run(_call(self._ex.close))

    def __enter__(self) -> "SyncExecution":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SyncSnapshotHandle:
    """``SyncBox.snapshot``: the blocking SnapshotHandle."""

    def __init__(self, handle: SnapshotHandle):
        self._h = handle

    def create(self, name: Optional[str] = None, *, options: Optional[SnapshotOptions] = None) -> SnapshotInfo:
        return _run(self._h.create(name, options=options))

    def list(self) -> List[SnapshotInfo]:
        return _run(self._h.list())

    def get(self, name: str) -> Optional[SnapshotInfo]:
        return _run(self._h.get(name))

    def remove(self, name: str) -> None:
        _run(self._h.remove(name))

    def restore(self, name: str) -> None:
        _run(self._h.restore(name))


class SyncBox:
    def __init__(self, box: Box):
        self._box = box

    @property
    def id(self) -> str:
        return self._box.id

    @property
    def name(self) -> Optional[str]:
        return self._box.name

    def info(self) -> BoxInfo:
        return self._box.info()

    def exec(self, cmd: str, *args: Any, **kwargs: Any) -> SyncExecution:
        return SyncExecution(_run(self._box.exec(cmd, *args, **kwargs)))

    def run(self, cmd: str, *args: Any, **kwargs: Any) -> ExecResult:
        return _run(self._box.run(cmd, *args, **kwargs))

    def copy_in(self, host_path: Any, container_dest: str, *args: Any, **kwargs: Any) -> None:
        _run(self._box.copy_in(host_path, container_dest, *args, **kwargs))

    def copy_out(self, container_src: str, host_dest: Any, *args: Any, **kwargs: Any) -> None:
        _run(self._box.copy_out(container_src, host_dest, *args, **kwargs))

    def start(self) -> None:
        _run(self._box.start())

    def stop(self) -> None:
        _run(self._box.stop())

    def remove(self, force: bool = False) -> None:
        _run(self._box.remove(force))

    def metrics(self) -> BoxMetrics:
        return _run(self._box.metrics())
    @property
    def snapshot(self) -> SyncSnapshotHandle:
        return SyncSnapshotHandle(self._box.snapshot)

    def clone_box(self, *, options: Optional[CloneOptions] = None, name: Optional[str] = None) -> "SyncBox":
        return SyncBox(_run(self._box.clone_box(options=options, name=name)))

    def export(self, *, dest: Any, options: Optional[ExportOptions] = None) -> str:
        return _run(self._box.export(dest=dest, options=options))

    def close(self) -> None:
        _run(_call(self._box.close))

    def __enter__(self) -> "SyncBox":
        _run(self._box.__aenter__())
        return self

    def __exit__(self, *exc) -> None:
        _run(self._box.__aexit__(*exc))


class SyncImageHandle:
    def __init__(self, rt: Boxlite):
        self._rt = rt

    def list(self) -> List[ImageInfo]:
        return _run(self._rt.images.list())

    def load(self, path: str) -> List[ImageInfo]:
        return _run(self._rt.images.load(path))


class SyncBoxlite:
    def __init__(self, options: Optional[Options] = None, *, _runtime: Optional[Boxlite] = None):
        self._rt = _runtime if _runtime is not None else Boxlite(options)
        self.images = SyncImageHandle(self._rt)

    @staticmethod
    def default() -> "SyncBoxlite":
        return SyncBoxlite(_runtime=Boxlite.default())

    @property
    def runtime(self) -> Boxlite:
        return self._rt

    def create(self, options: BoxOptions, name: Optional[str] = None) -> SyncBox:
        return SyncBox(_run(self._rt.create(options, name)))

    def get(self, id_or_name: str) -> Optional[SyncBox]:
        box = _run(self._rt.get(id_or_name))
        return None if box is None else SyncBox(box)

    def get_info(self, id_or_name: str) -> Optional[BoxInfo]:
        return _run(self._rt.get_info(id_or_name))

    def list_info(self) -> List[BoxInfo]:
        return _run(self._rt.list_info())

    def remove(self, id_or_name: str, force: bool = False) -> None:
        _run(self._rt.remove(id_or_name, force))

    def metrics(self) -> RuntimeMetrics:
        return _run(self._rt.metrics())

    def start(self) -> "SyncBoxlite":
        """Returns the runtime, ready (BoxLite's explicit start; a
        SyncBoxlite is ready once made, so this only checks it is open)."""
        if self._rt.closed:
            raise ClosedError("runtime is closed")
        return self

    def stop(self) -> None:
        """Closes the runtime (as close())."""
        self.close()

    def shutdown(self, timeout: Optional[int] = None) -> None:
        _run(self._rt.shutdown(timeout))
    def import_box(self, archive_path: Any, name: Optional[str] = None, *, untrusted: bool = False) -> SyncBox:
        return SyncBox(_run(self._rt.import_box(archive_path, name, untrusted=untrusted)))

    def close(self) -> None:
        _run(self._rt.shutdown())

    def __enter__(self) -> "SyncBoxlite":
        return self

    def __exit__(self, *exc) -> None:
        # The default runtime is shared: leaving `with` does not close it.
        if self._rt is not Boxlite._default:
            self.close()


def _async_runtime(runtime: Any) -> Any:
    return runtime.runtime if isinstance(runtime, SyncBoxlite) else runtime


class SyncSimpleBox:
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
        auto_remove: bool = True,
        reuse_existing: bool = False,
        **kwargs: Any,
    ):
        self._sb = SimpleBox(image=image, rootfs_path=rootfs_path, memory_mib=memory_mib, cpus=cpus,
                             runtime=_async_runtime(runtime), name=name, auto_remove=auto_remove,
                             reuse_existing=reuse_existing, **kwargs)

    def start(self) -> "SyncSimpleBox":
        _run(self._sb.start())
        return self

    def stop(self) -> None:
        _run(self._sb.stop())

    shutdown = stop

    def __enter__(self) -> "SyncSimpleBox":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def id(self) -> str:
        return self._sb.id

    def info(self) -> BoxInfo:
        return self._sb.info()

    def exec(self, cmd: str, *args: str, **kwargs: Any) -> ExecResult:
        return _run(self._sb.exec(cmd, *args, **kwargs))

    def metrics(self) -> BoxMetrics:
        return _run(self._sb.metrics())

    def copy_in(self, host_path: Any, container_dest: str, *args: Any, **kwargs: Any) -> None:
        _run(self._sb.copy_in(host_path, container_dest, *args, **kwargs))

    def copy_out(self, container_src: str, host_dest: Any, *args: Any, **kwargs: Any) -> None:
        _run(self._sb.copy_out(container_src, host_dest, *args, **kwargs))


class SyncCodeBox(SyncSimpleBox):
    """CodeBox, synchronously; same parameters."""

    def __init__(
        self,
        image: str = "python:slim",
        memory_mib: Optional[int] = None,
        cpus: Optional[int] = None,
        runtime: Any = None,
        name: Optional[str] = None,
        auto_remove: bool = True,
        reuse_existing: bool = False,
        **kwargs: Any,
    ):
        self._sb = CodeBox(image=image, memory_mib=memory_mib, cpus=cpus, runtime=_async_runtime(runtime),
                           name=name, auto_remove=auto_remove, reuse_existing=reuse_existing, **kwargs)

    def run(self, code: str, timeout: Optional[float] = None, *, output_limit_bytes: Optional[int] = None) -> str:
        return _run(self._sb.run(code, timeout, output_limit_bytes=output_limit_bytes))

    def run_cell(self, code: str, timeout: Optional[float] = None, *,
                 output_limit_bytes: Optional[int] = None) -> CellResult:
        return _run(self._sb.run_cell(code, timeout, output_limit_bytes=output_limit_bytes))

    def stream(self, code: str, timeout: Optional[float] = None) -> Iterator[CellChunk]:
        """The cell's output chunks while it runs (then its end)."""
        cell = self._sb.stream(code, timeout)
        try:
            while True:
                try:
                    yield _run(cell.__anext__())
                except StopAsyncIteration:
                    break
            _run(cell.result())
        finally:
            cell.close()

    def reset(self) -> None:
        _run(self._sb.reset())

    def run_script(self, script_path: str) -> str:
        return _run(self._sb.run_script(script_path))

    def install_package(self, package: str) -> str:
        return _run(self._sb.install_package(package))

    def install_packages(self, *packages: str) -> str:
        return _run(self._sb.install_packages(*packages))


class SyncInteractiveBox(SyncSimpleBox):
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
        auto_remove: bool = True,
        **kwargs: Any,
    ):
        self._sb = InteractiveBox(image=image, shell=shell, tty=tty, memory_mib=memory_mib, cpus=cpus,
                                  runtime=_async_runtime(runtime), name=name, auto_remove=auto_remove, **kwargs)

    def reset(self) -> None:
        _run(self._sb.reset())

    def wait(self) -> None:
        _run(self._sb.wait())
