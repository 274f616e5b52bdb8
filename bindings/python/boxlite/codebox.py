"""CodeBox: run untrusted Python code in a box."""

from __future__ import annotations

import asyncio
import os
from typing import Any, Optional

from .box import check_str, check_timeout
from .errors import NotFoundError, TimeoutError
from .exec import ExecResult
from .runtime import Boxlite
from .simplebox import SimpleBox

__all__ = ["CodeBox"]

PYTHON = "python3"
# Code up to this size travels as `python3 -c CODE`; longer code through stdin
# (Linux caps one argument at 128 KiB).
MAX_INLINE_CODE = 64 << 10


class CodeBox(SimpleBox):
    """A box for running Python code: ``async with CodeBox() as cb: print(await cb.run(code))``.

    Each ``run()`` is a fresh interpreter for now (``python3 -c``); a
    persistent session keeping variables between runs will replace
    ``_run_cell`` without changing ``run()``."""

    def __init__(
        self,
        image: str = "python:slim",
        memory_mib: Optional[int] = None,
        cpus: Optional[int] = None,
        runtime: Optional[Boxlite] = None,
        **kwargs: Any,
    ):
        super().__init__(image=image, memory_mib=memory_mib, cpus=cpus, runtime=runtime, **kwargs)

    async def run(self, code: str, timeout: Optional[float] = None) -> str:
        """Runs Python code and returns its stdout. When the code fails (an
        uncaught exception, a non-zero exit), its stderr (the traceback)
        follows the stdout, so the reason is not lost. ``timeout`` (seconds)
        stops the code and raises ``boxlite.TimeoutError``."""
        if not isinstance(code, str):
            raise TypeError(f"code must be str, not {type(code).__name__}")
        result = await self._run_cell(code, check_timeout(timeout))
        if result.exit_code != 0:
            return result.stdout + result.stderr
        return result.stdout

    async def _run_cell(self, code: str, timeout: Optional[float]) -> ExecResult:
        """Runs one piece of code: the one place that knows how (today a fresh
        ``python3 -c`` per cell)."""
        if len(code.encode("utf-8", "surrogatepass")) <= MAX_INLINE_CODE and "\x00" not in code:
            return await self.exec(PYTHON, "-c", code, timeout=timeout)
        return await self._run_via_stdin(code, timeout)

    async def _run_via_stdin(self, code: str, timeout: Optional[float]) -> ExecResult:
        box = self._require()
        try:
            ex = await box.exec(PYTHON, "-", timeout=timeout, stdin=True)
        except NotFoundError as e:
            return ExecResult(127, "", f"{e}\n", error_message=str(e))
        try:
            stdin = ex.stdin()

            async def feed() -> None:
                await stdin.write(code.encode("utf-8", "surrogatepass"))
                await stdin.close()

            _, out, err = await asyncio.gather(feed(), ex.stdout().read(), ex.stderr().read())
            st = await ex.wait()
        finally:
            ex.close()
        if st.timed_out:
            raise TimeoutError(f"Command '{PYTHON} -' timed out after {timeout:g} seconds")
        return ExecResult(st.exit_code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                          error_message=st.error_message)

    async def run_script(self, script_path: str) -> str:
        """Runs a Python script file from the host; returns what run() does."""
        path = os.fspath(script_path)
        with open(path, "r", encoding="utf-8") as f:
            code = f.read()
        return await self.run(code)

    async def install_package(self, package: str) -> str:
        """pip-installs a package in the box; returns pip's output."""
        check_str(package, "package")
        result = await self.exec("pip", "install", package)
        return result.stdout + result.stderr

    async def install_packages(self, *packages: str) -> str:
        """pip-installs packages in the box; returns pip's output."""
        for i, p in enumerate(packages):
            check_str(p, f"packages[{i}]")
        result = await self.exec("pip", "install", *packages)
        return result.stdout + result.stderr
