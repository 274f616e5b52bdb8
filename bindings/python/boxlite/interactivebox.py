"""InteractiveBox: a box with a live shell session."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import sys
from typing import Any, Dict, List, Optional, TypeVar

from ._aio import blocking
from ._checks import check_argv, check_str, check_timeout
from .errors import BoxliteError, TimeoutError
from ._defaults import DEFAULT_AUTO_REMOVE
from .exec import ExecResult
from .execution import Execution, ExitStatus
from .runtime import Boxlite
from .session import ShellSession, _Sessions
from .simplebox import SimpleBox

__all__ = ["InteractiveBox"]

# The name of exec()'s shell session in the box.
SHELL_SESSION_NAME = "interactive"


_I = TypeVar("_I", bound="InteractiveBox")  # `with` gives back the subclass


class InteractiveBox(SimpleBox):
    """A box with a shell started on entry, which ``exec()`` runs in: the
    working directory, exported and shell variables and functions of one
    ``exec`` are there for the next::

        async with InteractiveBox(image="alpine:latest", tty=False) as box:
            await box.exec("cd", "/tmp")
            await box.exec("export", "A=1")
            r = await box.exec("sh", "-c", "pwd; echo $A")     # "/tmp\\n1\\n"
            await box.exec("eval", "B=2; echo $B")               # shell code

    Each argument is quoted as one word, never joined into a script; stdin is
    /dev/null. ``exec(..., user=..., cwd=...)`` runs outside the shell, as
    SimpleBox does. ``wait()`` lets go of the shell. On a local runtime the
    shell is the box's session named "interactive": it outlives this object,
    and an InteractiveBox on the same box (another process, after a pause, a
    fork) takes it over with its working directory and variables.

    With ``tty=True`` (or ``tty=None`` when stdin is a terminal) the shell
    runs on a terminal in the box, sized like the local one, and ``await
    box.wait()`` hands the local terminal to it until it exits::

        async with InteractiveBox(image="alpine:latest", tty=True) as box:
            await box.wait()   # type at the box's shell; `exit` or ^D ends it

    Local stdin is put in raw mode (restored afterwards) and every key goes to
    the box, ^C and ^D included; the box's output goes to stdout; resizing the
    local terminal resizes the box's. ``exec()`` still works meanwhile, in a
    separate shell."""

    def __init__(
        self,
        image: str,
        shell: str = "/bin/sh",
        tty: Optional[bool] = None,
        memory_mib: Optional[int] = None,
        cpus: Optional[int] = None,
        runtime: Optional[Boxlite] = None,
        name: Optional[str] = None,
        auto_remove: bool = DEFAULT_AUTO_REMOVE,
        **kwargs: Any,
    ):
        if tty is None:
            tty = bool(sys.stdin is not None and sys.stdin.isatty())
        if not isinstance(tty, bool):
            raise TypeError(f"tty must be bool or None, not {type(tty).__name__}")
        if not tty and isinstance(shell, str) and shell.startswith("/"):
            # A box started from a template finds exec()'s shell started.
            kwargs.setdefault("prestart", ["shell" if shell == "/bin/sh" else f"shell:{shell}"])
        super().__init__(image=image, memory_mib=memory_mib, cpus=cpus, runtime=runtime, name=name,
                         auto_remove=auto_remove, **kwargs)
        self._shell = check_str(shell, "shell")
        self._tty = tty
        self._init_sessions()
        self._term: Optional[Execution] = None
        self._term_status: Optional[ExitStatus] = None

    def _init_sessions(self) -> None:
        # exec()'s shell is a named session (on a local runtime): an
        # InteractiveBox on the same box in another process, after a pause or
        # in a fork takes it over with its working directory and variables.
        def name() -> Optional[str]:
            rt = self._runtime
            return None if rt is not None and getattr(rt, "_remote", False) else SHELL_SESSION_NAME
        self._shells = _Sessions(lambda **kw: ShellSession.start(self._require(), shell=self._shell, **kw), name)

    async def __aenter__(self: _I) -> _I:
        if self._started:
            return self
        await super().__aenter__()
        try:
            if self._tty:
                cols, rows = _host_size()
                env = {"TERM": os.environ["TERM"]} if os.environ.get("TERM") else None
                self._term = await self._require().exec(
                    self._shell, env=env, tty=True, rows=rows, cols=cols, stdin=True)
            else:
                await self._shells.default()
        except BaseException:
            await super().stop()
            raise
        return self

    @property
    def tty(self) -> bool:
        return self._tty

    @property
    def exit_status(self) -> Optional[ExitStatus]:
        """How the terminal's shell ended (tty=True), once ``wait()`` returned."""
        return self._term_status

    @property
    def shell_session(self) -> Optional[ShellSession]:
        """The live shell, once started."""
        return self._shells.current  # type: ignore[return-value]

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
        """Runs a command in the box's shell and returns its ExecResult (a
        non-zero exit is a result; a command that does not exist exits 127).
        ``env`` is for this command only; ``timeout`` (seconds) interrupts it
        and returns what it printed with ``timed_out`` True and an
        ``error_message``, as SimpleBox.exec does. With ``user`` or ``cwd`` the
        command runs outside the shell, as a separate process. Output is
        capped per stream as in SimpleBox.exec (``output_limit_bytes``)."""
        if user is not None or cwd is not None:
            return await super().exec(cmd, *args, env=env, user=user, timeout=timeout, cwd=cwd,
                                      output_limit_bytes=output_limit_bytes)
        argv = check_argv(cmd, args)
        t = check_timeout(timeout)
        self._require()
        sh: ShellSession = await self._shells.default()  # type: ignore[assignment]
        try:
            return await sh.exec(argv[0], *argv[1:], env=env, timeout=t, output_limit_bytes=output_limit_bytes)
        except TimeoutError as e:
            # A result, as SimpleBox.exec's (BoxLite 0.10); the shell session
            # itself (shell_session.exec) raises.
            msg = f"Command '{' '.join(argv)}' timed out after {t:g} seconds"
            if "restarted" in str(e):
                msg += "; it ignored the interrupt, so the shell was restarted (its working directory and variables are reset)"
            r = getattr(e, "result", None)
            if r is None:
                raise
            return dataclasses.replace(r, timed_out=True, error_message=msg)

    async def reset(self) -> None:
        """Restarts the shell: working directory and variables back to the start."""
        sh = self._shells.current
        if sh is not None:
            await sh.reset()

    async def wait(self) -> None:
        """With tty=True: connects the local terminal to the box's shell and
        returns when the shell exits (``exit_status`` tells how). Otherwise:
        lets go of the shell (it runs on in the box until the box stops)."""
        term = self._term
        if term is not None:
            try:
                self._term_status = await _forward(term)
            finally:
                self._term = None
                term.close()
        self._shells.close()

    async def stop(self) -> None:
        term, self._term = self._term, None
        if term is not None:
            term.close()  # kills the shell if nobody waited for it
        self._shells.close()
        await super().stop()


def _host_size():
    size = shutil.get_terminal_size()
    return max(1, min(size.columns, 65535)), max(1, min(size.lines, 65535))


async def _forward(ex: Execution) -> ExitStatus:
    """Connects sys.stdin/sys.stdout to a TTY execution until it exits."""
    loop = asyncio.get_running_loop()
    stdin = ex.stdin()
    keys: "asyncio.Queue[Optional[bytes]]" = asyncio.Queue()
    in_fd = _fileno(sys.stdin)
    out = getattr(sys.stdout, "buffer", None)
    out_fd = _fileno(sys.stdout)

    # The end of input types ^D, which a shell only sees as EOF once its line
    # editor reads (typed earlier, the terminal's mode change can drop it):
    # so not before its first output.
    shown = asyncio.Event()
    shown_timer: List[asyncio.TimerHandle] = []

    async def type_keys() -> None:
        while True:
            data = await keys.get()
            try:
                if data is None:
                    await shown.wait()
                    await stdin.close()  # types ^D
                    return
                await stdin.write(data)
            except BoxliteError:  # the shell has exited
                return

    async def show_output() -> None:
        async for chunk in ex.stdout().iter_bytes():
            if not shown_timer:  # once: the prompt is out, the line editor set up
                shown_timer.append(loop.call_later(0.2, shown.set))
            if out is not None:
                out.write(chunk)
                out.flush()
            elif out_fd is not None:
                os.write(out_fd, chunk)
            else:
                sys.stdout.write(chunk.decode("utf-8", "replace"))
                sys.stdout.flush()

    def on_key() -> None:
        try:
            data = os.read(in_fd, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(in_fd)
            keys.put_nowait(None)
        else:
            keys.put_nowait(data)

    async def resize() -> None:
        cols, rows = _host_size()
        try:
            await ex.resize_tty(rows, cols)
        except BoxliteError:  # the shell has exited
            pass

    saved_attrs = None
    reading = False
    old_winch: Any = None
    winch_set = False
    writer = loop.create_task(type_keys())
    shower = loop.create_task(show_output())
    try:
        if in_fd is not None and os.isatty(in_fd):
            import termios
            import tty as ttymod

            saved_attrs = termios.tcgetattr(in_fd)
            ttymod.setraw(in_fd, termios.TCSANOW)
        if in_fd is not None:
            try:
                loop.add_reader(in_fd, on_key)
                reading = True
            except (OSError, ValueError):  # a regular file: read it in a thread
                async def read_file() -> None:
                    while True:
                        data = await blocking(os.read, in_fd, 4096)
                        keys.put_nowait(data or None)
                        if not data:
                            return
                loop.create_task(read_file())
        if hasattr(signal, "SIGWINCH"):
            try:
                old_winch = signal.signal(
                    signal.SIGWINCH, lambda *_: loop.call_soon_threadsafe(lambda: loop.create_task(resize())))
                winch_set = True
            except ValueError:  # not the main thread: no resizing
                pass
        status = await ex.wait()
        await shower  # the rest of the output
        return status
    finally:
        if winch_set:
            signal.signal(signal.SIGWINCH, old_winch)
        if reading:
            loop.remove_reader(in_fd)
        if saved_attrs is not None:
            import termios

            termios.tcsetattr(in_fd, termios.TCSADRAIN, saved_attrs)
        for task in (writer, shower):
            task.cancel()


def _fileno(f: Any) -> Optional[int]:
    try:
        return f.fileno() if f is not None else None
    except (AttributeError, OSError, ValueError):
        return None
