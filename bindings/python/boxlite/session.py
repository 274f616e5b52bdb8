"""Persistent sessions: a live Python interpreter or shell in a box.

``PythonSession`` keeps one interpreter running: each cell sees the globals,
imports and definitions of the cells before it (``CodeBox.run`` uses one).
``ShellSession`` keeps one ``sh``: ``cd``, ``export`` and shell variables of
one ``exec`` are there for the next (``InteractiveBox.exec`` uses one).
"""

from __future__ import annotations

import asyncio
import codecs
import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Optional, Tuple, TypeVar

from . import _ffi as raw
from ._aio import blocking
from ._checks import check_argv, check_env_dict, check_optional_str, check_output_limit, check_str, check_timeout, command_json
from .errors import BoxliteError, ClosedError, TimeoutError
from .exec import ExecResult

if TYPE_CHECKING:
    from .box import Box

__all__ = ["CellError", "CellResult", "CellChunk", "CellStream", "Session", "PythonSession", "ShellSession"]

READ_CHUNK = 64 << 10


@dataclass(frozen=True)
class CellError:
    """The exception a cell ended with."""

    type: str  # "ValueError", "mymodule.MyError", "SystemExit", "InterpreterExited"
    message: str
    traceback: str  # as Python prints it


@dataclass(frozen=True)
class CellResult:
    """What a cell did (``CodeBox.run_cell``).

    ``value`` is the repr() of the cell's trailing expression (None when it
    has none, or it is None), as a notebook shows it. ``error`` is the
    exception the cell raised, or None. ``exit_code`` is what ``python -c``
    would have exited with. ``restarted``: the interpreter ended under the
    cell (killed after ignoring a timeout, or os._exit, a crash) and a new
    one was started, so the session's state is gone. ``stdout_truncated`` /
    ``stderr_truncated``: that stream was longer than the runtime's output
    limit (``Options.output_limit_bytes``, default 64 MiB) and holds only its
    first bytes; the rest was dropped."""

    stdout: str
    stderr: str
    value: Optional[str] = None
    error: Optional[CellError] = None
    exit_code: int = 0
    timed_out: bool = False
    restarted: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    output_limit_bytes: Optional[int] = field(default=None, compare=False, repr=False)

    @property
    def success(self) -> bool:
        return self.error is None and not self.timed_out

    @property
    def output(self) -> str:
        """What ``CodeBox.run`` returns: stdout, then (when the cell failed)
        its stderr and the traceback, as ``python -c`` would have printed;
        then, when output was dropped, a last line saying so, e.g.
        ``[output truncated: stdout was longer than 67108864 bytes; the rest was dropped]``."""
        out = self.stdout if self.error is None else self.stdout + self.stderr + self.error.traceback
        return out + truncation_marker(self.stdout_truncated, self.stderr_truncated and self.error is not None,
                                       self.output_limit_bytes)

    @staticmethod
    def from_json(text: Optional[str], output_limit_bytes: Optional[int] = None) -> "CellResult":
        d: Dict[str, Any] = json.loads(text) if text else {}
        e = d.get("error")
        return CellResult(
            stdout=d.get("stdout", ""),
            stderr=d.get("stderr", ""),
            value=d.get("value"),
            error=CellError(e.get("type", ""), e.get("message", ""), e.get("traceback", "")) if e else None,
            exit_code=d.get("exit_code", 0),
            timed_out=bool(d.get("timed_out")),
            restarted=bool(d.get("restarted")),
            stdout_truncated=bool(d.get("stdout_truncated")),
            stderr_truncated=bool(d.get("stderr_truncated")),
            output_limit_bytes=output_limit_bytes,
        )


def truncation_marker(stdout: bool, stderr: bool, limit: Optional[int]) -> str:
    """The line CodeBox.run appends when output was dropped ("" if none was)."""
    streams = " and ".join(n for n, cut in (("stdout", stdout), ("stderr", stderr)) if cut)
    if not streams:
        return ""
    size = f"{limit} bytes" if limit else "the output limit"
    return f"\n[output truncated: {streams} was longer than {size}; the rest was dropped]\n"


def _cell_options(timeout: Optional[float]) -> Optional[str]:
    """A cell's options for the C ABI; the library converts and bounds the timeout."""
    t = check_timeout(timeout)
    return json.dumps({"timeout_secs": t}) if t else None


def _with_result(e: TimeoutError, limit: Optional[int] = None) -> TimeoutError:
    """Attaches the partial CellResult to a cell's TimeoutError."""
    r = CellResult.from_json(getattr(e, "result_json", None), limit)
    e.result = r
    e.stdout, e.stderr, e.restarted = r.stdout, r.stderr, r.restarted
    return e


@dataclass(frozen=True)
class CellChunk:
    """Output of a running cell: ``stream`` is "stdout" or "stderr"."""

    stream: str
    text: str


class CellStream:
    """A cell whose output is read while it runs (``CodeBox.stream``)::

        cell = codebox.stream(code)
        async for chunk in cell:
            print(chunk.text, end="")
        result = await cell.result()

    The cell starts on first use. Output not read holds the cell back once
    1 MiB is buffered, as a pipe would; ``result()`` collects the rest, at
    most ``output_limit_bytes`` per stream (default: the runtime's, 64 MiB),
    reading and dropping what comes past it.
    ``close()`` (or leaving ``async with``) interrupts a cell still running."""

    def __init__(self, session: "PythonSession", code: str, timeout: Optional[float],
                 output_limit_bytes: Optional[int] = None):
        if not isinstance(code, str):
            raise TypeError(f"code must be str, not {type(code).__name__}")
        self._session = session
        self._code = code
        self._options = _cell_options(timeout)
        self._limit = check_output_limit(output_limit_bytes)
        self._h: Optional[raw.Handle] = None
        self._starting: Optional[asyncio.Future] = None
        self._buf = raw.new_buffer(READ_CHUNK)
        self._decoders = {raw.STDOUT: codecs.getincrementaldecoder("utf-8")("replace"),
                          raw.STDERR: codecs.getincrementaldecoder("utf-8")("replace")}
        self._eof = False
        self._result: Optional[CellResult] = None
        self._closed = False

    async def _handle(self) -> raw.Handle:
        if self._closed:
            raise ClosedError("cell stream is closed")
        if self._h is None:
            if self._starting is None:
                self._starting = asyncio.ensure_future(
                    blocking(raw.session_run_start, self._session._handle(), self._code, self._options,
                             on_abandon=lambda h: h.close()))
            h = await asyncio.shield(self._starting)
            if self._closed:
                h.close()
                raise ClosedError("cell stream is closed")
            self._h = h
        return self._h

    def __aiter__(self) -> "CellStream":
        return self

    async def _next_raw(self, h: raw.Handle) -> Optional[Tuple[int, bytes]]:
        """The next output of the cell, (stream, bytes), or None at its end."""
        loop = asyncio.get_running_loop()
        while not self._eof:
            rc, stream, n = raw.cell_read(h, self._buf, 0)
            if rc == raw.OK:
                return stream, raw.buffer_bytes(self._buf, n)
            if rc == raw.EOF:
                self._eof = True
                break
            fd = raw.cell_fd(h)
            fut = loop.create_future()
            loop.add_reader(fd, lambda: fut.done() or fut.set_result(None))
            try:
                await fut
            finally:
                loop.remove_reader(fd)
        return None

    async def __anext__(self) -> CellChunk:
        h = await self._handle()
        while True:
            got = await self._next_raw(h)
            if got is None:
                break
            stream, data = got
            text = self._decoders[stream].decode(data)
            if text:
                return CellChunk("stdout" if stream == raw.STDOUT else "stderr", text)
        for sid, d in self._decoders.items():
            tail = d.decode(b"", final=True)
            if tail:
                return CellChunk("stdout" if sid == raw.STDOUT else "stderr", tail)
        raise StopAsyncIteration

    async def result(self) -> CellResult:
        """Waits for the cell's end: its CellResult, whose stdout/stderr hold
        what iteration did not return, at most ``output_limit_bytes`` each
        (``stdout_truncated`` / ``stderr_truncated`` when more was dropped).
        A timeout raises TimeoutError (its ``result`` is the CellResult)."""
        if self._result is not None:
            return self._result
        h = await self._handle()
        limit = self._limit or self._session._box._runtime.output_limit_bytes
        kept = {raw.STDOUT: bytearray(), raw.STDERR: bytearray()}
        cut = {raw.STDOUT: False, raw.STDERR: False}
        # Read here (bounded, as it comes), so that the library holds nothing.
        while True:
            got = await self._next_raw(h)
            if got is None:
                break
            stream, data = got
            room = limit - len(kept[stream])
            if len(data) > room:
                cut[stream] = True
                data = data[: max(room, 0)]
            kept[stream] += data

        def merged(r: CellResult) -> CellResult:
            out, err = bytes(kept[raw.STDOUT]), bytes(kept[raw.STDERR])
            # what the library still held (normally nothing) comes after
            o2, e2 = r.stdout.encode("utf-8", "surrogatepass"), r.stderr.encode("utf-8", "surrogatepass")
            out_cut = cut[raw.STDOUT] or r.stdout_truncated or len(out) + len(o2) > limit
            err_cut = cut[raw.STDERR] or r.stderr_truncated or len(err) + len(e2) > limit
            return replace(r, stdout=(out + o2)[:limit].decode("utf-8", "replace"),
                           stderr=(err + e2)[:limit].decode("utf-8", "replace"),
                           stdout_truncated=out_cut, stderr_truncated=err_cut, output_limit_bytes=limit)

        try:
            rc, text = raw.cell_result(h, 0)  # the output has ended, so the cell has
            if rc == raw.AGAIN:
                _, text = await blocking(raw.cell_result, h, -1)
        except TimeoutError as e:
            e = _with_result(e, limit)
            e.result = merged(e.result)
            e.stdout, e.stderr = e.result.stdout, e.result.stderr
            raise e from None
        self._result = merged(CellResult.from_json(text, limit))
        return self._result

    async def interrupt(self) -> None:
        """Interrupts the cell now (KeyboardInterrupt), as a timeout would."""
        raw.cell_interrupt(await self._handle())

    def close(self) -> None:
        """Releases the cell; one still running is interrupted."""
        self._closed = True
        if self._h is not None:
            self._h.close()

    async def __aenter__(self) -> "CellStream":
        await self._handle()
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()


_S = TypeVar("_S", bound="Session")  # `with` gives back the subclass


class Session:
    """A live interpreter or shell in a box, of a kind: ``"python"``
    (PythonSession: cells) or ``"shell"`` (ShellSession: commands). What
    every kind shares is here: starting, ``reset()``, ``info()``,
    ``close()``, ``closed`` and ``async with``. Cells or commands take turns;
    several sessions in one box are independent."""

    kind = ""  # "python" or "shell": the C ABI's kind, and the option naming the program

    def __init__(self, box: "Box", handle: raw.Handle):
        self._box = box  # keeps the box handle alive
        self._h = handle

    @classmethod
    async def _start(cls, box: "Box", program: Optional[str], *, env: Optional[Dict[str, str]],
                     cwd: Optional[str], user: Optional[str], grace: Optional[float], name: Optional[str] = None):
        opts = _session_options(env=env, cwd=cwd, user=user, grace=grace)
        if name is not None:
            opts["name"] = check_str(name, "name")
        if program is not None:
            opts[cls.kind] = check_optional_str(program, cls.kind)
        h = await blocking(raw.session_new, box._handle(), cls.kind, json.dumps(opts),
                           on_abandon=lambda h: h.close())
        return cls(box, h)

    @property
    def closed(self) -> bool:
        return not self._h.alive

    def _handle(self) -> raw.Handle:
        if not self._h.alive:
            raise ClosedError(f"{self.kind} session is closed")
        return self._h

    async def reset(self) -> None:
        """Starts a fresh interpreter or shell: the session's state (globals,
        imports and definitions; working directory and variables) is gone."""
        await blocking(raw.session_reset, self._handle())

    def info(self) -> Dict[str, Any]:
        """{"kind", "pid", "restarts"} (and "python": the version)."""
        return json.loads(raw.session_info(self._handle()))

    def close(self) -> None:
        """Stops the interpreter or shell. Idempotent."""
        self._h.close()

    async def __aenter__(self: _S) -> _S:
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()


class PythonSession(Session):
    """A live Python interpreter in a box (``CodeBox.new_session()``)."""

    kind = "python"

    @classmethod
    async def start(cls, box: "Box", *, python: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                    cwd: Optional[str] = None, user: Optional[str] = None,
                    grace: Optional[float] = None, name: Optional[str] = None) -> "PythonSession":
        """Starts an interpreter in ``box`` (NotFoundError if it has no Python 3).
        With ``name`` (1-48 of ``[A-Za-z0-9_-]``, local runtimes only) the
        interpreter outlives this session: ``close()`` leaves it running, and
        a later session of that name in the box (another process, after a
        pause, in a fork) takes it over with its variables; while one holds
        it, another gets AlreadyExistsError."""
        return await cls._start(box, python, env=env, cwd=cwd, user=user, grace=grace, name=name)

    async def run(self, code: str, timeout: Optional[float] = None, *,
                  output_limit_bytes: Optional[int] = None) -> str:
        """Runs a cell and returns its stdout; when the cell fails, its stderr
        and traceback follow (as ``python -c`` would print them); when output
        was dropped, a last line says so."""
        return (await self.run_cell(code, timeout, output_limit_bytes=output_limit_bytes)).output

    async def run_cell(self, code: str, timeout: Optional[float] = None, *,
                       output_limit_bytes: Optional[int] = None) -> CellResult:
        """Runs a cell and returns its CellResult. An exception in the cell is
        a result (``error``). ``timeout`` (seconds) interrupts the cell and
        raises TimeoutError (``e.result``: the CellResult so far); the session
        keeps its state unless the cell ignored the interrupt, in which case
        the interpreter is restarted and the error says so. Cancelling the
        awaiting task interrupts the cell too. At most ``output_limit_bytes``
        per stream (default: the runtime's, 64 MiB) is collected."""
        cell = CellStream(self, code, timeout, output_limit_bytes)
        try:
            return await cell.result()
        finally:
            cell.close()

    def stream(self, code: str, timeout: Optional[float] = None, *,
               output_limit_bytes: Optional[int] = None) -> CellStream:
        """A cell whose output can be iterated while it runs."""
        return CellStream(self, code, timeout, output_limit_bytes)


class ShellSession(Session):
    """A live shell in a box (``InteractiveBox`` uses one for ``exec``)."""

    kind = "shell"
    _lock: Optional[asyncio.Lock] = None

    @classmethod
    async def start(cls, box: "Box", *, shell: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                    cwd: Optional[str] = None, user: Optional[str] = None,
                    grace: Optional[float] = None, name: Optional[str] = None) -> "ShellSession":
        """Starts a shell in ``box`` (default /bin/sh). ``name``: as
        PythonSession.start's (the shell, its working directory and variables
        outlive the session)."""
        return await cls._start(box, shell, env=env, cwd=cwd, user=user, grace=grace, name=name)

    async def exec(self, cmd: str, *args: str, env: Optional[Dict[str, str]] = None,
                   timeout: Optional[float] = None, output_limit_bytes: Optional[int] = None) -> ExecResult:
        """Runs ``cmd args...`` in the shell, each argument quoted as one word
        (``exec("eval", "B=2")`` runs shell code). ``env`` is for this command
        only. A timeout (seconds) interrupts the command and raises
        TimeoutError (``e.result``: the ExecResult so far). Cancelling the
        awaiting task interrupts the command. At most ``output_limit_bytes``
        per stream (default: the runtime's, 64 MiB) is collected, the rest
        dropped (``stdout_truncated`` / ``stderr_truncated``)."""
        argv = check_argv(cmd, args)
        t = check_timeout(timeout)
        cmd_json = command_json(argv, env=check_env_dict(env, "env"), timeout=t,
                                output_limit_bytes=check_output_limit(output_limit_bytes))
        if self._lock is None:
            self._lock = asyncio.Lock()
        try:
            async with self._lock:  # so that a cancelled call interrupts its own command
                h = self._handle()
                try:
                    (code, _sig, timed_out), out, err, (out_cut, err_cut) = await blocking(raw.session_exec, h, cmd_json)
                except asyncio.CancelledError:
                    try:
                        raw.session_interrupt(h)
                    except BoxliteError:
                        pass
                    raise
        except TimeoutError as e:
            r = getattr(e, "result", None)
            if r is not None:
                (code, _sig, _), out, err, (out_cut, err_cut) = r
                e.result = ExecResult(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                                      timed_out=True, error_message=str(e),
                                      stdout_truncated=out_cut, stderr_truncated=err_cut)
                e.stdout, e.stderr = e.result.stdout, e.result.stderr
            raise
        stderr = err.decode("utf-8", "replace")
        message = None
        if code == 127 and "not found" in stderr:  # as SimpleBox.exec reports a missing command
            message = stderr.strip()
        return ExecResult(exit_code=code, stdout=out.decode("utf-8", "replace"), stderr=stderr,
                          timed_out=timed_out, error_message=message,
                          stdout_truncated=out_cut, stderr_truncated=err_cut)


class _Sessions:
    """The sessions a box helper (CodeBox, InteractiveBox) keeps: a default
    one, started on first use (again after it was closed), and others; all
    are closed with the helper."""

    def __init__(self, start: Callable[..., Awaitable[Session]],
                 default_name: Optional[Callable[[], Optional[str]]] = None):
        self._start = start
        self._default_name = default_name  # the default session's name, asked at its start
        self._default: Optional[Session] = None
        self._lock: Optional[asyncio.Lock] = None
        self._others: List[Session] = []

    @property
    def current(self) -> Optional[Session]:
        """The default session, if started and open."""
        s = self._default
        return s if s is not None and not s.closed else None

    async def default(self) -> Session:
        """The default session, started if there is none."""
        if self.current is not None:
            return self.current
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.current is None:
                name = self._default_name() if self._default_name is not None else None
                self._default = await (self._start(name=name) if name is not None else self._start())
        return self._default  # type: ignore[return-value]

    async def new(self, **kwargs: Any) -> Session:
        """Another session, closed with the others."""
        s = await self._start(**kwargs)
        self._others = [x for x in self._others if not x.closed] + [s]
        return s

    def close(self) -> None:
        """Closes every session; the next default() starts a new one."""
        sessions = [s for s in (self._default, *self._others) if s is not None]
        self._default, self._others = None, []
        for s in sessions:
            s.close()


def _session_options(*, env, cwd, user, grace) -> Dict[str, Any]:
    o: Dict[str, Any] = {}
    envd = check_env_dict(env, "env")
    if envd:
        o["env"] = envd
    if cwd is not None:
        o["cwd"] = check_optional_str(cwd, "cwd")
    if user is not None:
        o["user"] = check_optional_str(user, "user")
    g = check_timeout(grace, "grace")
    if g:
        o["grace_secs"] = g
    return o
