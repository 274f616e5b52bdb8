"""InteractiveBox: a box with a shell session."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Optional

from .box import check_str
from .errors import BoxliteError, UnsupportedError
from .execution import Execution
from .runtime import Boxlite
from .simplebox import SimpleBox

__all__ = ["InteractiveBox"]


class InteractiveBox(SimpleBox):
    """A box with a shell started on entry.

    ``tty=False`` drives the box from the program (``exec()``, ``copy_in`` ...)
    while the shell waits; ``wait()`` ends the shell's input and waits for it.
    Forwarding the local terminal (``tty=True``, or ``tty=None`` when stdin is
    a terminal) needs PTY support, which boxlite does not have yet: it raises
    UnsupportedError."""

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
        self._shell_ex: Optional[Execution] = None
        self._error_message: Optional[str] = None

    async def __aenter__(self) -> "InteractiveBox":
        if self._started:
            return self
        await super().__aenter__()
        try:
            self._shell_ex = await self._require().exec(self._shell, stdin=True)
        except BaseException:
            await super().stop()
            raise
        return self

    async def wait(self) -> None:
        """Ends the shell's input and waits for the shell to exit."""
        ex = self._shell_ex
        if ex is None:
            return
        st = await ex.wait()
        if st.error_message:
            self._error_message = st.error_message

    async def stop(self) -> None:
        ex, self._shell_ex = self._shell_ex, None
        if ex is not None:
            try:
                await asyncio.wait_for(ex.wait(), timeout=3)
            except (asyncio.TimeoutError, BoxliteError):
                pass
            finally:
                ex.close()
        await super().stop()
