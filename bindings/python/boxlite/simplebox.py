"""SimpleBox: a box as an async context manager, with exec and file copy."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, Dict, List, Optional, Sequence, TypeVar

from ._copy import CopyOptions
from .box import Box, BoxInfo, BoxOptions
from ._checks import check_argv, check_env_dict, check_optional_str, check_output_limit, check_timeout
from .errors import InvalidArgumentError, InvalidStateError, NotFoundError
from ._defaults import DEFAULT_AUTO_REMOVE
from .exec import ExecResult
from .network import BoxTunnel, NetworkHandle
from .runtime import Boxlite

# A subclass's own type: `async with CodeBox() as cb` gives a CodeBox to type checkers.
_S = TypeVar("_S", bound="SimpleBox")

__all__ = ["SimpleBox"]

# BoxOptions fields SimpleBox passes through from **kwargs.
_BOX_KWARGS = {
    "env", "working_dir", "disk_size_gb", "user", "volumes", "ports", "network", "hostname",
    "detach", "entrypoint", "cmd", "boot_timeout", "prestart", "auto_pause_secs", "auto_delete", "secrets", "advanced",
}

_NOT_STARTED = "box not started: use 'async with SimpleBox(...) as box:' or 'await box.start()' first"


class SimpleBox:
    """A box for running commands: ``async with SimpleBox(image=...) as box``.

    The box is created and booted on entry and stopped on exit (and deleted,
    with ``auto_remove=True``, the default). ``env`` is a list of (key, value)
    tuples; ``exec(..., env=)`` takes a dict."""

    def __init__(
        self,
        image: Optional[str] = None,
        rootfs_path: Optional[str] = None,
        memory_mib: Optional[int] = None,
        cpus: Optional[int] = None,
        runtime: Optional[Boxlite] = None,
        name: Optional[str] = None,
        auto_remove: bool = DEFAULT_AUTO_REMOVE,
        reuse_existing: bool = False,
        **kwargs: Any,
    ):
        if not image and not rootfs_path:
            raise InvalidArgumentError("Either 'image' or 'rootfs_path' must be provided")
        unknown = sorted(set(kwargs) - _BOX_KWARGS)
        if unknown:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {unknown[0]!r}")
        if runtime is not None and not isinstance(runtime, Boxlite):
            raise TypeError(f"runtime must be boxlite.Boxlite, not {type(runtime).__name__}")
        self._box_options = BoxOptions(image=image, rootfs_path=rootfs_path, memory_mib=memory_mib, cpus=cpus,
                                       auto_remove=auto_remove, **kwargs)
        # Check every option now, so a wrong type fails here, not at boot.
        self._box_options.to_json(name, what="")
        self._runtime = runtime
        self._name = name
        self._reuse_existing = reuse_existing
        self._box: Optional[Box] = None
        self._started = False
        self._created: Optional[bool] = None

    # ---- lifecycle ----

    async def __aenter__(self: _S) -> _S:
        if self._started:
            return self
        rt = self._runtime if self._runtime is not None else Boxlite.default()
        self._runtime = rt
        if self._reuse_existing:
            self._box, self._created = await rt.get_or_create(self._box_options, self._name)
        else:
            box = await rt.create(self._box_options, self._name)
            try:
                await box.start()
            except BaseException:
                await _discard(box)
                raise
            self._box, self._created = box, True
        self._started = True
        return self

    async def start(self: _S) -> _S:
        """Creates and boots the box (what ``async with`` does on entry)."""
        return await self.__aenter__()

    async def __aexit__(self, exc_type, exc, tb) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stops the box (deleting it with auto_remove) and releases it.
        Idempotent."""
        box, self._box, self._started = self._box, None, False
        if box is None:
            return
        try:
            if not box.closed:
                await box.stop()
        finally:
            box.close()

    async def shutdown(self) -> None:
        await self.stop()

    @property
    def id(self) -> str:
        return self._require().id

    @property
    def created(self) -> Optional[bool]:
        """True if this box was created, False if an existing one was reused."""
        return self._created

    @property
    def box(self) -> Box:
        """The underlying Box handle."""
        return self._require()

    def info(self) -> BoxInfo:
        return self._require().info()

    async def metrics(self):
        return await self._require().metrics()

    async def pause(self):
        """Saves the box with its memory and ends its processes (``Box.pause``);
        the next call resumes it."""
        return await self._require().pause()

    async def resume(self) -> None:
        """Restores a paused box (``Box.resume``)."""
        await self._require().resume()

    async def fork(self: _S, count: int = 1, names: Optional[Sequence[str]] = None) -> List[_S]:
        """``count`` running copies of this box at one instant (``Box.fork``),
        each wrapped as this class: a CodeBox's fork runs ``run()`` in its
        copy of the interpreter (the same variables), an InteractiveBox's in
        its copy of the shell. Each fork is stopped (and removed, with
        auto_remove) by its own ``stop()`` or ``async with``."""
        boxes = await self._require().fork(count, names)
        forks: List[_S] = []
        for b in boxes:
            f = copy.copy(self)
            f._box, f._name, f._started, f._created = b, b.name, True, True
            f._init_sessions()
            forks.append(f)
        return forks

    def _init_sessions(self) -> None:
        """Fresh session state (a fork's, which owes nothing to the source's
        objects); CodeBox and InteractiveBox keep theirs."""

    @property
    def network(self) -> NetworkHandle:
        """Tunnels to ports in the box (``network.tunnel(port)``); the box must be started."""
        return NetworkHandle(self._require)

    async def tunnel(self, port: int) -> BoxTunnel:
        """Prepare a one-shot tunnel to a TCP port inside this box."""
        return await self.network.tunnel(port)

    def _require(self) -> Box:
        if not self._started or self._box is None:
            raise InvalidStateError(_NOT_STARTED)
        return self._box

    # ---- commands ----

    async def exec(
        self,
        cmd: str,
        *args: str,
        env: Optional[Dict[str, str]] = None,
        user: Optional[str] = None,
        timeout: Optional[float] = None,
        cwd: Optional[str] = None,
        output_limit_bytes: Optional[int] = None,
    ) -> ExecResult:
        """Runs a command to completion and returns its ExecResult.

        A non-zero exit is a result, not an exception; a command that does not
        exist gives exit code 127 with the reason in ``error_message`` and
        stderr. ``timeout`` (seconds) kills the command (SIGTERM, then SIGKILL
        after the grace period) and returns its result, as BoxLite 0.10 does:
        ``timed_out`` True, a non-zero ``exit_code`` (-15 or -9),
        ``error_message`` saying so, and the output so far. At most ``output_limit_bytes`` per stream
        (default: the runtime's, 64 MiB) is collected; the rest is read and
        dropped, so the command never blocks, and ``stdout_truncated`` /
        ``stderr_truncated`` say so (nothing is raised)."""
        box = self._require()
        argv = check_argv(cmd, args)
        envd = check_env_dict(env, "env")
        t = check_timeout(timeout)
        user = check_optional_str(user, "user")
        cwd = check_optional_str(cwd, "cwd")
        limit = check_output_limit(output_limit_bytes) or box._runtime.output_limit_bytes
        display = " ".join(argv)
        try:
            ex = await box.exec(argv[0], *argv[1:], env=envd, user=user, timeout=t, cwd=cwd, stdin=False,
                                output_limit_bytes=limit)
        except NotFoundError as e:
            return ExecResult(exit_code=127, stdout="", stderr=f"{e}\n", error_message=str(e))
        try:
            try:
                # Both streams are read as they come (bounded buffers), keeping
                # the first `limit` bytes of each; the exit is known after.
                (out, out_dropped), (err, err_dropped) = await asyncio.gather(
                    ex.stdout()._read_capped(limit), ex.stderr()._read_capped(limit))
                st = await ex.wait()
            except NotFoundError as e:
                return ExecResult(exit_code=127, stdout="", stderr=f"{e}\n", error_message=str(e))
        finally:
            ex.close()  # kills the process if we were cancelled
        message = st.error_message
        if st.timed_out:
            # As BoxLite 0.10: a result, not an exception (its README's
            # example relies on it); the exit code is the signal's (-15, or
            # -9 past the grace period).
            message = f"Command '{display}' timed out after {t:g} seconds"
        return ExecResult(
            exit_code=st.exit_code,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            timed_out=st.timed_out,
            error_message=message,
            stdout_truncated=out_dropped > 0,
            stderr_truncated=err_dropped > 0,
        )

    # ---- files ----

    async def copy_in(self, host_path: Any, container_dest: str, copy_options: Optional[CopyOptions] = None,
                      **kwargs: Any) -> None:
        """Copies a file or directory from the host into the box (BoxLite's
        layout: a directory lands inside the destination under its own
        name); see ``Box.copy_in``."""
        await self._require().copy_in(host_path, container_dest, copy_options, **kwargs)

    async def copy_out(self, container_src: str, host_dest: Any, copy_options: Optional[CopyOptions] = None,
                       **kwargs: Any) -> None:
        """Copies a file or directory from the box to the host (BoxLite's
        layout), treating what the box sends as hostile; see
        ``Box.copy_out``."""
        await self._require().copy_out(container_src, host_dest, copy_options, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(image={self._box_options.image!r}, {'started' if self._started else 'not started'})"


async def _discard(box: Box) -> None:
    """Removes a box whose first start failed (the error says why), so that a
    failed ``async with`` leaves nothing behind."""
    try:
        await box.remove(force=True)
    except Exception:
        pass
    finally:
        box.close()
