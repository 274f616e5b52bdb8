"""InteractiveBox: a box with a live shell session."""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional

from .box import check_argv, check_str, check_timeout
from .errors import TimeoutError, UnsupportedError
from .exec import ExecResult
from .runtime import Boxlite
from .session import ShellSession
from .simplebox import SimpleBox

__all__ = ["InteractiveBox"]


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
    SimpleBox does. ``wait()`` ends the shell. Forwarding the local terminal
    (``tty=True``, or ``tty=None`` when stdin is a terminal) is not supported
    yet: it raises UnsupportedError."""

    def __init__(
        self,
        image: str,
        shell: str = "/bin/sh",
        tty: Optional[bool] = None,
        memory_mib: Optional[int] = None,
        cpus: Optional[int] = None,
        runtime: Optional[Boxlite] = None,
        name: Optional[str] = None,
        auto_remove: bool = True,
        **kwargs: Any,
    ):
        if tty is None:
            tty = bool(sys.stdin is not None and sys.stdin.isatty())
        if not isinstance(tty, bool):
            raise TypeError(f"tty must be bool or None, not {type(tty).__name__}")
        if tty:
            raise UnsupportedError(
                "InteractiveBox(tty=True): forwarding a terminal needs PTY support, which boxlite "
                "does not have yet; pass tty=False to drive the box with exec()"
            )
        super().__init__(image=image, memory_mib=memory_mib, cpus=cpus, runtime=runtime, name=name,
                         auto_remove=auto_remove, **kwargs)
        self._shell = check_str(shell, "shell")
        self._tty = tty
        self._sh: Optional[ShellSession] = None

    async def __aenter__(self) -> "InteractiveBox":
        if self._started:
            return self
        await super().__aenter__()
        try:
            self._sh = await ShellSession.start(self._require(), shell=self._shell)
        except BaseException:
            await super().stop()
            raise
        return self

    @property
    def shell_session(self) -> Optional[ShellSession]:
        """The live shell, once started."""
        return self._sh

    async def exec(
        self,
        cmd: str,
        *args: str,
        env: Optional[Dict[str, str]] = None,
        user: Optional[str] = None,
        timeout: Optional[float] = None,
        cwd: Optional[str] = None,
    ) -> ExecResult:
        """Runs a command in the box's shell and returns its ExecResult (a
        non-zero exit is a result; a command that does not exist exits 127).
        ``env`` is for this command only; ``timeout`` (seconds) interrupts it
        and raises ``boxlite.TimeoutError``. With ``user`` or ``cwd`` the
        command runs outside the shell, as a separate process."""
        if user is not None or cwd is not None:
            return await super().exec(cmd, *args, env=env, user=user, timeout=timeout, cwd=cwd)
        argv = check_argv(cmd, args)
        t = check_timeout(timeout)
        self._require()
        if self._sh is None or self._sh.closed:
            self._sh = await ShellSession.start(self._require(), shell=self._shell)
        try:
            return await self._sh.exec(argv[0], *argv[1:], env=env, timeout=t)
        except TimeoutError as e:
            msg = f"Command '{' '.join(argv)}' timed out after {t:g} seconds"
            if "restarted" in str(e):
                msg += "; it ignored the interrupt, so the shell was restarted (its working directory and variables are reset)"
            err = TimeoutError(msg)
            for k in ("result", "stdout", "stderr"):
                if hasattr(e, k):
                    setattr(err, k, getattr(e, k))
            raise err from e

    async def reset(self) -> None:
        """Restarts the shell: working directory and variables back to the start."""
        if self._sh is not None and not self._sh.closed:
            await self._sh.reset()

    async def wait(self) -> None:
        """Ends the shell."""
        sh, self._sh = self._sh, None
        if sh is not None:
            sh.close()

    async def stop(self) -> None:
        await self.wait()
        await super().stop()
