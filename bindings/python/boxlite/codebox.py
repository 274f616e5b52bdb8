"""CodeBox: run untrusted Python code in a box, in a persistent session."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from ._checks import check_str
from .code import CodeContext, CodeExecution, normalize_language
from .runtime import Boxlite
from .session import CellResult, CellStream, PythonSession, _Sessions
from .simplebox import SimpleBox

__all__ = ["CodeBox"]

# The name of run()'s session in the box (CodeBox(session_name=...)).
DEFAULT_SESSION_NAME = "codebox"


class CodeBox(SimpleBox):
    """A box for running Python code: ``async with CodeBox() as cb: print(await cb.run(code))``.

    ``run()`` talks to one long-lived interpreter in the box (a session), so
    variables, imports and definitions of one call are there for the next::

        await cb.run("import json\\ndef double(d):\\n    return {k: 2 * v for k, v in d.items()}")
        print(await cb.run("print(json.dumps(double({'a': 1})))"))   # {"a": 2}

    ``run_cell()`` returns the whole CellResult (stdout, stderr, the value of
    a trailing expression, the exception), ``stream()`` the output while the
    cell runs, ``reset()`` starts a fresh interpreter and ``new_session()``
    an independent one. The interpreter is the image's Python 3
    (/usr/local/bin/python3, else python3, else python)."""

    def __init__(
        self,
        image: str = "python:slim",
        memory_mib: Optional[int] = None,
        cpus: Optional[int] = None,
        runtime: Optional[Boxlite] = None,
        session_name: Optional[str] = DEFAULT_SESSION_NAME,
        **kwargs: Any,
    ):
        # A box started from a template finds run()'s interpreter started.
        kwargs.setdefault("prestart", ["python"])
        super().__init__(image=image, memory_mib=memory_mib, cpus=cpus, runtime=runtime, **kwargs)
        self._session_name = None if session_name is None else check_str(session_name, "session_name")
        self._init_sessions()

    def _init_sessions(self) -> None:
        # run()'s interpreter is a named session (on a local runtime): it
        # outlives this object, so a CodeBox on the same box in another
        # process, after a pause or in a fork takes it over with its state.
        self._sessions = _Sessions(lambda **kw: PythonSession.start(self._require(), **kw), self._default_session_name)
        self._contexts: Dict[str, _Sessions] = {}  # language -> its default code context

    def _default_session_name(self) -> Optional[str]:
        rt = self._runtime
        if self._session_name is None or (rt is not None and getattr(rt, "_remote", False)):
            return None
        return self._session_name

    async def run_code(self, code: str, language: Optional[str] = None, *, context: Optional[CodeContext] = None,
                       timeout: Optional[float] = None, envs: Optional[Dict[str, str]] = None) -> CodeExecution:
        """Runs code as E2B's code interpreter does and returns a CodeExecution:
        ``results`` (the value of the last expression, display() calls and the
        matplotlib figures open at the end, each with ``.text``, ``.html``,
        ``.png``..., see CodeResult), ``logs`` (``stdout`` and ``stderr``
        lists), ``error`` (``name``, ``value``, ``traceback``) and
        ``execution_count``. ``language`` is "python" (default),
        "javascript" (Node) or "bash"; each has a default context in the box,
        started on first use, whose state stays between calls (a separate
        interpreter from run()'s). ``context`` (create_code_context) runs it
        there instead. ``timeout`` (seconds) interrupts the cell and raises
        TimeoutError (``e.execution``); ``envs`` are set for this cell only.

            r = await cb.run_code("x = 1")
            r = await cb.run_code("x + 1")        # r.text == "2"
        """
        if context is not None:
            if language is not None:
                raise ValueError("give a language or a context, not both")
            return await context.run_code(code, timeout=timeout, envs=envs)
        lang = normalize_language(language)
        ss = self._contexts.get(lang)
        if ss is None:
            ss = self._contexts[lang] = _Sessions(lambda **kw: CodeContext.start(self._require(), lang, **kw))
        ctx: CodeContext = await ss.default()  # type: ignore[assignment]
        return await ctx.run_code(code, timeout=timeout, envs=envs)

    async def create_code_context(self, language: Optional[str] = None, *, cwd: Optional[str] = None,
                                  env: Optional[Dict[str, str]] = None) -> CodeContext:
        """Starts another code context (python, javascript or bash) in the box,
        independent of the others; closed with the box. Run code in it with
        ``run_code(code, context=ctx)`` or ``ctx.run_code(code)``;
        ``ctx.restart()`` clears its state."""
        lang = normalize_language(language)
        ss = self._contexts.get(lang)
        if ss is None:
            ss = self._contexts[lang] = _Sessions(lambda **kw: CodeContext.start(self._require(), lang, **kw))
        return await ss.new(cwd=cwd, env=env)  # type: ignore[return-value]

    async def session(self) -> PythonSession:
        """The default session that run() uses, started on first use."""
        return await self._sessions.default()  # type: ignore[return-value]

    async def new_session(self, *, env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
                          user: Optional[str] = None, grace: Optional[float] = None) -> PythonSession:
        """Starts another interpreter in the box, independent of run()'s.
        ``grace`` (seconds, default 3) is how long an interrupted cell has to
        stop before the interpreter is killed and restarted. It is closed
        with the box."""
        return await self._sessions.new(env=env, cwd=cwd, user=user, grace=grace)  # type: ignore[return-value]

    async def run(self, code: str, timeout: Optional[float] = None, *,
                  output_limit_bytes: Optional[int] = None) -> str:
        """Runs Python code as a cell of the session and returns its stdout.
        When the code fails (an uncaught exception, sys.exit with a non-zero
        code), its stderr and the traceback follow the stdout, so the reason
        is not lost. ``timeout`` (seconds) interrupts the code and raises
        ``boxlite.TimeoutError``; the session keeps its state, unless the code
        ignored the interrupt: then the interpreter is restarted and the
        error says that the state is gone. Output past ``output_limit_bytes``
        per stream (default: the runtime's, 64 MiB) is read and dropped, and
        a last line says so:
        ``[output truncated: stdout was longer than N bytes; the rest was dropped]``
        (``run_cell()`` gives ``stdout_truncated`` instead)."""
        if not isinstance(code, str):
            raise TypeError(f"code must be str, not {type(code).__name__}")
        return (await self.run_cell(code, timeout, output_limit_bytes=output_limit_bytes)).output

    async def run_cell(self, code: str, timeout: Optional[float] = None, *,
                       output_limit_bytes: Optional[int] = None) -> CellResult:
        """Runs a cell and returns its CellResult: ``stdout``, ``stderr``,
        ``value`` (repr of a trailing expression, as a notebook shows it),
        ``error`` (type, message, traceback), ``exit_code``. A timeout raises
        TimeoutError whose ``result`` is the CellResult so far."""
        if not isinstance(code, str):
            raise TypeError(f"code must be str, not {type(code).__name__}")
        return await (await self.session()).run_cell(code, timeout, output_limit_bytes=output_limit_bytes)

    def stream(self, code: str, timeout: Optional[float] = None, *,
               output_limit_bytes: Optional[int] = None) -> "_LazyCellStream":
        """Runs a cell, giving its output while it runs::

            cell = cb.stream("for i in range(3): print(i); time.sleep(1)")
            async for chunk in cell:          # CellChunk(stream, text)
                print(chunk.text, end="")
            result = await cell.result()
        """
        if not isinstance(code, str):
            raise TypeError(f"code must be str, not {type(code).__name__}")
        return _LazyCellStream(self, code, timeout, output_limit_bytes)

    async def reset(self) -> None:
        """Restarts run()'s interpreter: all its state is gone."""
        await (await self.session()).reset()

    async def stop(self) -> None:
        self._sessions.close()
        for ss in self._contexts.values():
            ss.close()
        await super().stop()

    async def run_script(self, script_path: str) -> str:
        """Runs a Python script file of the host in the session; returns what run() does."""
        path = os.fspath(script_path)
        with open(path, "r", encoding="utf-8") as f:
            code = f.read()
        return await self.run(code)

    async def install_package(self, package: str) -> str:
        """pip-installs a package in the box; returns pip's output. The
        session can import it at once."""
        check_str(package, "package")
        result = await self.exec("pip", "install", package)
        return result.stdout + result.stderr

    async def install_packages(self, *packages: str) -> str:
        """pip-installs packages in the box; returns pip's output."""
        for i, p in enumerate(packages):
            check_str(p, f"packages[{i}]")
        result = await self.exec("pip", "install", *packages)
        return result.stdout + result.stderr


class _LazyCellStream(CellStream):
    """A CellStream of CodeBox's default session, which it starts on first use."""

    def __init__(self, cb: CodeBox, code: str, timeout: Optional[float], output_limit_bytes: Optional[int] = None):
        self._cb = cb
        super().__init__(None, code, timeout, output_limit_bytes)  # type: ignore[arg-type]

    async def _handle(self):
        if self._session is None:
            self._session = await self._cb.session()
        return await super()._handle()
