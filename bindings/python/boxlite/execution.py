"""A running process in a box: streamed stdout/stderr, stdin, exit status.

Output is pulled from the library without blocking: one reader per execution
on the library's pollable fd (``loop.add_reader``) reads both streams until
BOXLITE_AGAIN into bounded per-stream buffers, and the stream iterators take
from them. A stream whose buffer is full is not read further, so a process whose
output nobody consumes blocks as on a pipe, except while someone awaits
``wait()``, which must not deadlock: then reading goes on, and output nobody
reads is held up to the execution's output limit per stream (default 64 MiB);
past it the rest of that stream is read and dropped, and
``stdout_truncated``/``stderr_truncated`` say so.
"""

from __future__ import annotations

import asyncio
import codecs
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, List, Optional, Sequence, Tuple, TypeVar, Union

from . import _defaults
from . import _ffi as raw
from ._aio import blocking
from .errors import BoxliteError, ClosedError, InternalError, InvalidArgumentError, InvalidStateError

if TYPE_CHECKING:
    from .box import Box

__all__ = ["Execution", "ExecStdout", "ExecStderr", "ExecStdin", "ExitStatus"]

HIGH_WATER = 1 << 20  # bytes buffered per stream before reading pauses
LOW_WATER = 256 << 10  # reading resumes below this
READ_CHUNK = 64 << 10
WRITE_CHUNK = 1 << 20


@dataclass(frozen=True)
class ExitStatus:
    """How a process ended (what ``Execution.wait()`` returns).

    ``exit_code`` is -N when signal N killed the process (as in BoxLite); ``timed_out``
    is True when the command's own timeout killed it."""

    exit_code: int
    signal: int = 0
    timed_out: bool = False
    error_message: Optional[str] = None

    @property
    def success(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class _Stream:
    __slots__ = ("sid", "buf", "eof", "waiters", "decoder", "error", "truncated", "dropped")

    def __init__(self, sid: int):
        self.sid = sid
        self.buf = bytearray()
        self.truncated = False  # output past the limit was dropped (from then on, all of it)
        self.dropped = 0
        self.eof = False
        self.waiters: List[asyncio.Future] = []
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.error: Optional[BaseException] = None

    def wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        for f in waiters:
            if not f.done():
                f.set_result(None)


def _check_int(value, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be int, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise InvalidArgumentError(f"{what} {value} is outside {lo}..{hi}")
    return value


class _CallableId(str):
    """An execution id that is also callable, returning itself as a plain
    str: BoxLite 0.10's ``Execution.id()`` and the earlier property."""

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


_E = TypeVar("_E", bound="Execution")  # `with` gives back the subclass


class Execution:
    """A process started by ``Box.exec()``.

    ``stdout()``/``stderr()`` are async iterators of ``str`` (lines where the
    output comes in lines; joined, they are the exact output), with
    ``iter_bytes()``/``read()`` for raw bytes. ``stdin()`` writes to the
    process, ``wait()`` returns its ``ExitStatus``. ``close()`` (or ``async
    with``) releases the handle and kills the process if it still runs."""

    def __init__(self, box: "Box", handle: raw.Handle, argv: Sequence[str], stdin_open: bool,
                 output_limit_bytes: int = _defaults.DEFAULT_OUTPUT_LIMIT_BYTES):
        self._loop = asyncio.get_running_loop()
        self._limit = output_limit_bytes
        self._thread = threading.get_ident()
        self._box = box  # keeps the box (and its runtime) alive
        self._h = handle
        self._argv = list(argv)
        self._id = raw.execution_id(handle) or ""
        self._fd = raw.execution_fd(handle)
        if self._fd < 0:
            raise InternalError(f"exec {self.command}: the library gave no pollable fd")
        self._rbuf = raw.new_buffer(READ_CHUNK)
        self._streams = (_Stream(raw.STDOUT), _Stream(raw.STDERR))
        self._reading = False
        self._pump_scheduled = False
        self._unbounded = False
        self._closed = False
        self._exit: Optional[ExitStatus] = None
        self._exit_error: Optional[BaseException] = None
        self._exit_waiters: List[asyncio.Future] = []
        self._waiting_exit = False
        self._stdout = ExecStdout(self, self._streams[0])
        self._stderr = ExecStderr(self, self._streams[1])
        self._stdin = ExecStdin(self) if stdin_open else None
        self._stdin_taken = False
        self._pump()

    # ---- public API ------------------------------------------------------------

    @property
    def id(self) -> "_CallableId":
        """The execution's id (12 hex digits). BoxLite 0.10's is a method,
        earlier ones' a property: both read it, ``execution.id()`` and
        ``execution.id`` (a str that returns itself when called)."""
        return _CallableId(self._id)

    @property
    def command(self) -> str:
        return " ".join(self._argv)

    @property
    def exit_status(self) -> Optional[ExitStatus]:
        """The exit status once known, else None."""
        return self._exit

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stdout_truncated(self) -> bool:
        """True once stdout output was dropped: while ``wait()`` was awaited,
        more than ``output_limit_bytes`` of it was left unread."""
        return self._streams[0].truncated

    @property
    def stderr_truncated(self) -> bool:
        """As ``stdout_truncated``, for stderr."""
        return self._streams[1].truncated

    @property
    def output_limit_bytes(self) -> int:
        return self._limit

    def stdout(self) -> "ExecStdout":
        return self._stdout

    def stderr(self) -> "ExecStderr":
        return self._stderr

    def stdin(self) -> "ExecStdin":
        if self._stdin is None:
            raise InvalidStateError(f"exec {self.command}: stdin was not requested (exec with stdin=True)")
        self._stdin_taken = True
        return self._stdin

    async def wait(self) -> ExitStatus:
        """Waits for the process to end. Raises NotFoundError when the command
        does not exist. Output not yet consumed stays readable afterwards."""
        self._check_loop()
        if self._exit is None and self._exit_error is None:
            if self._closed:
                raise ClosedError(f"exec {self.command}: execution is closed")
            self._unbounded = True
            if self._stdin is not None and not self._stdin_taken and not self._stdin._closed:
                # Nobody can write to it any more: give the process its EOF.
                await self._stdin._close_quietly()
            fut = self._loop.create_future()
            self._exit_waiters.append(fut)
            self._pump()
            try:
                await fut
            finally:
                if fut in self._exit_waiters:
                    self._exit_waiters.remove(fut)
        if self._exit_error is not None:
            raise self._exit_error
        assert self._exit is not None
        return self._exit

    async def kill(self, signal: int = 9) -> None:
        """Sends a signal (default SIGKILL) to the process."""
        await self.signal(signal)

    async def signal(self, sig: int) -> None:
        sig = _check_int(sig, "signal", 1, 64)
        h = self._handle()
        if sig == 9:
            raw.execution_kill(h)
        else:
            raw.execution_signal(h, sig)

    async def resize_tty(self, rows: int, cols: int) -> None:
        """Resizes the process's terminal; InvalidStateError without one."""
        _check_int(rows, "rows", 1, 65535)
        _check_int(cols, "cols", 1, 65535)
        raw.execution_resize(self._handle(), rows, cols)

    def close(self) -> None:
        """Releases the handle; a process still running is killed. Idempotent;
        from another thread it is handed to the execution's event loop."""
        if self._closed:
            return
        if threading.get_ident() != self._thread and self._loop.is_running():
            self._loop.call_soon_threadsafe(self.close)
            return
        self._closed = True
        self._stop_reading()
        self._h.close()
        err = ClosedError(f"exec {self.command}: execution is closed")
        for st in self._streams:
            if not st.eof:
                st.eof, st.error = True, err
            st.wake()
        if self._exit is None and self._exit_error is None:
            self._set_exit(None, err)

    async def __aenter__(self: _E) -> _E:
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("exited %d" % self._exit.exit_code if self._exit else "running")
        return f"<Execution {self.command!r} {state}>"

    # ---- internals ------------------------------------------------------------------

    def _handle(self) -> raw.Handle:
        if self._closed:
            raise ClosedError(f"exec {self.command}: execution is closed")
        return self._h

    def _check_loop(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not self._loop:
            raise InvalidStateError("this execution belongs to another event loop")

    def _full(self, st: _Stream) -> bool:
        return not self._unbounded and not st.truncated and len(st.buf) >= HIGH_WATER

    def _keep(self, st: _Stream, n: int) -> None:
        """Takes n bytes just read into st's buffer, or past the limit (while
        wait() reads on for nobody) drops them and all that follows."""
        if not st.truncated and (not self._unbounded or len(st.buf) + n <= self._limit):
            st.buf += raw.buffer_bytes(self._rbuf, n)
            return
        keep = 0 if st.truncated else max(0, self._limit - len(st.buf))
        if keep:
            st.buf += raw.buffer_bytes(self._rbuf, keep)
        st.truncated = True
        st.dropped += n - keep

    def _schedule_pump(self) -> None:
        if not self._pump_scheduled and not self._closed:
            self._pump_scheduled = True
            self._loop.call_soon(self._pump)

    def _pump(self) -> None:
        """Reads what the library has buffered, until AGAIN, EOF or full."""
        self._pump_scheduled = False
        if self._closed:
            return
        h = self._h
        rbuf = self._rbuf
        try:
            while True:
                got_any = False
                for st in self._streams:
                    if st.eof or self._full(st):
                        continue
                    got = False
                    while True:
                        rc, n = raw.execution_read(h, st.sid, rbuf, 0)
                        if rc == raw.OK:
                            self._keep(st, n)
                            got = True
                            if self._full(st):
                                break
                        elif rc == raw.EOF:
                            st.eof = True
                            got = True
                            break
                        else:  # AGAIN
                            break
                    if got:
                        got_any = True
                        st.wake()
                if not got_any:
                    break
        except BoxliteError as e:
            self._fail(e)
            return
        self._update()

    def _update(self) -> None:
        active = any(not st.eof and not self._full(st) for st in self._streams)
        if active and not self._reading:
            self._loop.add_reader(self._fd, self._pump)
            self._reading = True
        elif not active and self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False
        if all(st.eof for st in self._streams):
            self._streams_done()

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            try:
                self._loop.remove_reader(self._fd)
            except (RuntimeError, ValueError, OSError):  # the loop is closed
                pass

    def _streams_done(self) -> None:
        """Both streams ended, so the process did: collect its status."""
        if self._waiting_exit or self._exit is not None or self._exit_error is not None:
            return
        self._waiting_exit = True
        self._stop_reading()
        try:
            # Both streams ended, so the exit is known: wait(0) answers at once.
            rc, st = raw.execution_wait(self._h, 0)
            if rc == raw.OK:
                self._set_exit(self._status(st), None)
                return
        except BoxliteError as e:
            self._set_exit(None, e)
            return
        # The status is posted as the streams end; if not yet, wait in a thread.
        fut = self._loop.create_task(blocking(self._wait_blocking))

        def done(f: asyncio.Future) -> None:
            if f.cancelled():
                return
            e = f.exception()
            if e is not None:
                self._set_exit(None, e)
            else:
                self._set_exit(self._status(f.result()), None)

        fut.add_done_callback(done)

    def _wait_blocking(self):
        while True:
            rc, st = raw.execution_wait(self._h, 1000)
            if rc == raw.OK:
                return st

    def _status(self, st) -> ExitStatus:
        code, sig, timed_out = st
        msg = None
        if timed_out:
            msg = f"exec {self.command}: timed out"
        return ExitStatus(exit_code=code, signal=sig, timed_out=timed_out, error_message=msg)

    def _set_exit(self, status: Optional[ExitStatus], error: Optional[BaseException]) -> None:
        if self._exit is not None or self._exit_error is not None:
            return
        self._exit, self._exit_error = status, error
        waiters, self._exit_waiters = self._exit_waiters, []
        for f in waiters:
            if not f.done():
                f.set_result(None)

    def _fail(self, e: BaseException) -> None:
        self._stop_reading()
        for st in self._streams:
            if not st.eof:
                st.eof, st.error = True, e
            st.wake()
        self._set_exit(None, e)

    async def _wait_data(self, st: _Stream) -> None:
        """Waits until st has data or has ended."""
        self._check_loop()
        while not st.buf and not st.eof:
            fut = self._loop.create_future()
            st.waiters.append(fut)
            self._pump()  # resumes a paused reader and arms the safety poll
            try:
                await fut
            finally:
                if fut in st.waiters:
                    st.waiters.remove(fut)

    def _took(self, st: _Stream, before: int) -> None:
        if before >= HIGH_WATER and len(st.buf) < LOW_WATER:
            self._schedule_pump()

    async def _next_bytes(self, st: _Stream) -> Optional[bytes]:
        await self._wait_data(st)
        if not st.buf:
            if st.error is not None and not isinstance(st.error, ClosedError):
                raise st.error
            return None
        before = len(st.buf)
        data = bytes(st.buf)
        st.buf.clear()
        self._took(st, before)
        return data

    async def _next_text(self, st: _Stream) -> Optional[str]:
        while True:
            await self._wait_data(st)
            if not st.buf:
                if st.error is not None and not isinstance(st.error, ClosedError):
                    raise st.error
                tail = st.decoder.decode(b"", final=True)
                return tail or None
            before = len(st.buf)
            i = st.buf.find(b"\n")
            if i < 0:
                chunk = bytes(st.buf)
                st.buf.clear()
            else:
                chunk = bytes(st.buf[: i + 1])
                del st.buf[: i + 1]
            self._took(st, before)
            text = st.decoder.decode(chunk, final=False)
            if text:
                return text


class _OutputStream:
    """An output stream of an execution: ``async for`` gives ``str`` items
    (a line each where the output has lines; what has no newline yet is given
    when nothing more is buffered, so prompts are not held back)."""

    def __init__(self, ex: Execution, st: _Stream):
        self._ex = ex
        self._st = st

    def __aiter__(self) -> "_OutputStream":
        return self

    async def __anext__(self) -> str:
        item = await self._ex._next_text(self._st)
        if item is None:
            raise StopAsyncIteration
        return item

    async def iter_bytes(self) -> AsyncIterator[bytes]:
        """Raw output, in chunks as they arrive (binary-safe)."""
        while True:
            data = await self._ex._next_bytes(self._st)
            if data is None:
                return
            yield data

    async def read(self) -> bytes:
        """Everything until the stream ends, as bytes."""
        parts = []
        while True:
            data = await self._ex._next_bytes(self._st)
            if data is None:
                return b"".join(parts)
            parts.append(data)

    async def _read_capped(self, limit: int) -> "Tuple[bytearray, int]":
        """Reads to the end keeping the first ``limit`` bytes: (them, how
        many bytes past them were read and dropped)."""
        out = bytearray()
        dropped = 0
        while True:
            data = await self._ex._next_bytes(self._st)
            if data is None:
                return out, dropped + self._st.dropped
            room = limit - len(out)
            if room >= len(data):
                out += data
            else:
                if room > 0:
                    out += data[:room]
                dropped += len(data) - max(room, 0)

    async def read_text(self) -> str:
        """Everything until the stream ends, as str (UTF-8, invalid bytes replaced)."""
        return (await self.read()).decode("utf-8", "replace")


class ExecStdout(_OutputStream):
    """The process's stdout (an async iterator of str)."""

    def __repr__(self) -> str:
        return "ExecStdout(...)"


class ExecStderr(_OutputStream):
    """The process's stderr (an async iterator of str)."""

    def __repr__(self) -> str:
        return "ExecStderr(...)"


BytesLike = Union[bytes, bytearray, memoryview, str]


class ExecStdin:
    """Writes to the process's stdin; ``close()`` sends EOF."""

    def __init__(self, ex: Execution):
        self._ex = ex
        self._lock = asyncio.Lock()
        self._closed = False

    async def send_input(self, data: BytesLike) -> None:
        """Writes all of data (bytes; str is sent as UTF-8). Waits while the
        box's stdin window is full."""
        await self.write(data)

    async def write(self, data: BytesLike) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        elif not isinstance(data, bytes):
            raise TypeError(f"stdin data must be bytes or str, not {type(data).__name__}")
        if self._closed:
            raise ClosedError(f"exec {self._ex.command}: stdin is closed")
        async with self._lock:
            for i in range(0, len(data), WRITE_CHUNK):
                await blocking(raw.execution_write, self._ex._handle(), data[i : i + WRITE_CHUNK])

    async def close(self) -> None:
        """Closes stdin: the process reads EOF. Idempotent."""
        if self._closed:
            return
        async with self._lock:
            if not self._closed:
                raw.execution_close_stdin(self._ex._handle())
                self._closed = True

    def is_closed(self) -> bool:
        return self._closed

    async def _close_quietly(self) -> None:
        try:
            await self.close()
        except BoxliteError:  # the process has exited already
            self._closed = True

    def __repr__(self) -> str:
        return f"ExecStdin({'closed' if self._closed else 'open'})"
