"""Raw layer: include/boxlite.h, one to one, over cffi in ABI mode.

Every C function of the header has one Python function here with the same name
minus the ``boxlite_`` prefix. They take and return cffi handles (opaque
pointers), ``str``/``bytes`` and ints; they allocate the out-parameters, convert
the status and error object into an exception through :func:`check`, and free
everything the library allocated (error objects, strings, results) before they
return. Nothing above this module touches ``ffi`` or ``lib``.

The library is ``_lib/libboxlite.so`` inside this package (the wheel carries it
with ``boxlite-shim`` and ``guest/`` beside it, where the library looks for
them); ``$BOXLITE_LIB`` names another one.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Callable, Optional, Tuple, Union

from cffi import FFI

from . import errors

from ._cdef import CDEF  # the header's declarations, generated from it

ffi = FFI()
ffi.cdef(CDEF)

OK = 0
AGAIN = 100
EOF = 101
STDOUT = 1
STDERR = 2

LIB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib")
LIB_NAME = "libboxlite.so"

_lib = None
_lib_lock = threading.Lock()


# Running from the source tree (not installed): the repository's build/.
_DEV_LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "build", LIB_NAME)


def library_path() -> str:
    """Where the library is loaded from: $BOXLITE_LIB, else the bundled one
    (else, in a source checkout, the repository's build/libboxlite.so)."""
    env = os.environ.get("BOXLITE_LIB")
    if env:
        return env
    bundled = os.path.join(LIB_DIR, LIB_NAME)
    if not os.path.exists(bundled) and os.path.exists(_DEV_LIB):
        return os.path.normpath(_DEV_LIB)
    return bundled


def lib():
    """The loaded library (loaded once, on first use)."""
    global _lib
    if _lib is None:
        with _lib_lock:
            if _lib is None:
                path = library_path()
                if not os.path.exists(path):
                    raise errors.NotFoundError(
                        f"libboxlite.so not found at {path}: reinstall the boxlite package "
                        "(it bundles the library), or set BOXLITE_LIB to a libboxlite.so "
                        "built with `make build` and `go build -buildmode=c-shared`"
                    )
                try:
                    _lib = ffi.dlopen(path)
                except OSError as e:
                    raise errors.InternalError(f"cannot load {path}: {e}") from e
    return _lib


# ---- status and errors ------------------------------------------------------


def _new_err():
    return ffi.new("boxlite_error_t **")


def check(rc: int, err, op: str = "") -> int:
    """Turn a status and its error object into a result or an exception.

    Frees ``*err`` whatever the status. Returns ``rc`` for BOXLITE_OK and the
    non-error results (AGAIN, EOF); raises the exception class of the code
    otherwise, with the library's message (which names the operation and the
    state)."""
    message = None
    e = err[0]
    if e != ffi.NULL:
        err[0] = ffi.NULL
        try:
            if e.message != ffi.NULL:
                message = ffi.string(e.message).decode("utf-8", "replace")
        finally:
            lib().boxlite_error_free(e)
    if rc == OK or rc == AGAIN or rc == EOF:
        return rc
    if not message:
        message = f"{op}: {status_name(rc)}" if op else status_name(rc)
    raise errors.from_status(rc, message)


def _take_string(p) -> str:
    """Copy a library-allocated string and free it."""
    if p == ffi.NULL:
        return ""
    try:
        return ffi.string(p).decode("utf-8", "replace")
    finally:
        lib().boxlite_string_free(p)


def _cstr(value, what: str) -> bytes:
    """A str as NUL-terminated UTF-8; TypeError for other types, and
    InvalidArgumentError for an embedded NUL (C would cut the string there)."""
    if isinstance(value, bytes):
        b = value
    elif isinstance(value, str):
        b = value.encode("utf-8", "surrogateescape")
    else:
        raise TypeError(f"{what} must be str, not {type(value).__name__}")
    if b"\0" in b:
        raise errors.InvalidArgumentError(f"{what} contains a NUL character")
    return b


def _ptr(handle: "Handle"):
    if not isinstance(handle, Handle):
        raise TypeError(f"expected a boxlite handle, not {type(handle).__name__}")
    return handle.ptr


# ---- handles ------------------------------------------------------------------


class Handle:
    """An owned library handle: freed exactly once, by close() or, as a safety
    net, when garbage collected (weakref.finalize runs at most once).

    ``free`` names the library function that frees it (or is a function),
    looked up here, once:
    a finalizer can run inside any allocation, even inside cffi's own
    ``ffi.new`` while it holds cffi's lock, so it must not look anything up
    in cffi (that waits on the same lock: the sync API hung so)."""

    __slots__ = ("_ptr", "_finalizer", "kind", "__weakref__")

    def __init__(self, ptr, free: Union[str, Callable], kind: str):
        self._ptr = ptr
        self.kind = kind
        fn = getattr(lib(), free) if isinstance(free, str) else free
        self._finalizer = weakref.finalize(self, fn, ptr)

    @property
    def ptr(self):
        if not self._finalizer.alive:
            raise errors.ClosedError(f"{self.kind} handle is closed")
        return self._ptr

    @property
    def alive(self) -> bool:
        return self._finalizer.alive

    def close(self) -> None:
        self._finalizer()

    def __repr__(self) -> str:
        return f"<{self.kind} handle {'open' if self.alive else 'closed'}>"


# ---- library --------------------------------------------------------------------


def version() -> str:
    return ffi.string(lib().boxlite_version()).decode()


def status_name(code: int) -> str:
    return ffi.string(lib().boxlite_status_name(int(code))).decode()


def error_free(err) -> None:
    lib().boxlite_error_free(err)


def string_free(s) -> None:
    lib().boxlite_string_free(s)


# ---- runtime --------------------------------------------------------------------


def runtime_new(options_json: Optional[str]) -> Handle:
    out = ffi.new("boxlite_runtime_t **")
    err = _new_err()
    opts = ffi.NULL if options_json is None else _cstr(options_json, "runtime options")
    check(lib().boxlite_runtime_new(opts, out, err), err, "runtime_new")
    return Handle(out[0], "boxlite_runtime_free", "runtime")


def runtime_new_rest(options_json: str) -> Handle:
    out = ffi.new("boxlite_runtime_t **")
    err = _new_err()
    check(lib().boxlite_runtime_new_rest(_cstr(options_json, "REST runtime options"), out, err), err, "runtime_new_rest")
    return Handle(out[0], "boxlite_runtime_free", "runtime")


def runtime_free(rt: Handle) -> None:
    rt.close()


def image_load(rt: Handle, path: str) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_image_load(_ptr(rt), _cstr(path, "image path"), out, err), err, "image_load")
    return _take_string(out[0])


def image_list(rt: Handle) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_image_list(_ptr(rt), out, err), err, "image_list")
    return _take_string(out[0])


def box_list(rt: Handle) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_box_list(_ptr(rt), out, err), err, "box_list")
    return _take_string(out[0])


# ---- boxes ------------------------------------------------------------------------


def box_create(rt: Handle, options_json: str) -> Handle:
    out = ffi.new("boxlite_box_t **")
    err = _new_err()
    check(lib().boxlite_box_create(_ptr(rt), _cstr(options_json, "box options"), out, err), err, "box_create")
    return Handle(out[0], "boxlite_box_free", "box")


def box_get(rt: Handle, id_or_name: str) -> Handle:
    out = ffi.new("boxlite_box_t **")
    err = _new_err()
    check(lib().boxlite_box_get(_ptr(rt), _cstr(id_or_name, "box id or name"), out, err), err, "box_get")
    return Handle(out[0], "boxlite_box_free", "box")


def box_id(box: Handle) -> Optional[str]:
    p = lib().boxlite_box_id(_ptr(box))
    return None if p == ffi.NULL else ffi.string(p).decode()


def box_info(box: Handle) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_box_info(_ptr(box), out, err), err, "box_info")
    return _take_string(out[0])


def box_metrics(box: Handle) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_box_metrics(_ptr(box), out, err), err, "box_metrics")
    return _take_string(out[0])


def runtime_metrics(rt: Handle) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_runtime_metrics(_ptr(rt), out, err), err, "runtime_metrics")
    return _take_string(out[0])


def box_start(box: Handle) -> None:
    err = _new_err()
    check(lib().boxlite_box_start(_ptr(box), err), err, "box_start")


def box_stop(box: Handle) -> None:
    err = _new_err()
    check(lib().boxlite_box_stop(_ptr(box), err), err, "box_stop")


def box_pause(box: Handle) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_box_pause(_ptr(box), out, err), err, "box_pause")
    return _take_string(out[0])


def box_resume(box: Handle) -> None:
    err = _new_err()
    check(lib().boxlite_box_resume(_ptr(box), err), err, "box_resume")


def box_remove(box: Handle, force: bool) -> None:
    err = _new_err()
    check(lib().boxlite_box_remove(_ptr(box), 1 if force else 0, err), err, "box_remove")


def box_free(box: Handle) -> None:
    box.close()


# ---- executions ---------------------------------------------------------------------


def box_exec(box: Handle, command_json: str) -> Handle:
    out = ffi.new("boxlite_execution_t **")
    err = _new_err()
    check(lib().boxlite_box_exec(_ptr(box), _cstr(command_json, "command"), out, err), err, "box_exec")
    return Handle(out[0], "boxlite_execution_free", "execution")


ExitTuple = Tuple[int, int, bool]  # exit_code, signal, timed_out


def _exit_code(e) -> int:
    """BoxLite's exit code: -N for a process a signal N killed (the C ABI,
    like a shell, says 128+N)."""
    return -e.signal if e.signal else e.exit_code
# (exit, stdout, stderr, (stdout_truncated, stderr_truncated))
RunTuple = Tuple[ExitTuple, bytes, bytes, Tuple[bool, bool]]


def _take_result(r) -> RunTuple:
    """Copies a boxlite_result_t and frees it."""
    try:
        return ((_exit_code(r.exit), r.exit.signal, bool(r.exit.timed_out)),
                bytes(ffi.buffer(r.stdout_data, r.stdout_len)) if r.stdout_len else b"",
                bytes(ffi.buffer(r.stderr_data, r.stderr_len)) if r.stderr_len else b"",
                (bool(r.stdout_truncated), bool(r.stderr_truncated)))
    finally:
        lib().boxlite_result_free(r)


def box_run(box: Handle, command_json: str) -> RunTuple:
    """Returns ((exit_code, signal, timed_out), stdout, stderr,
    (stdout_truncated, stderr_truncated))."""
    out = ffi.new("boxlite_result_t **")
    err = _new_err()
    check(lib().boxlite_box_run(_ptr(box), _cstr(command_json, "command"), out, err), err, "box_run")
    return _take_result(out[0])


def box_copy_in(box: Handle, host_src: str, box_dst: str, options_json: str) -> None:
    err = _new_err()
    check(lib().boxlite_box_copy_in(_ptr(box), _cstr(host_src, "host_path"), _cstr(box_dst, "container_dest"),
                                    _cstr(options_json, "copy options"), err), err, "box_copy_in")


def box_copy_out(box: Handle, box_src: str, host_dst: str, options_json: str) -> None:
    err = _new_err()
    check(lib().boxlite_box_copy_out(_ptr(box), _cstr(box_src, "container_src"), _cstr(host_dst, "host_dest"),
                                     _cstr(options_json, "copy options"), err), err, "box_copy_out")


def result_free(res) -> None:
    lib().boxlite_result_free(res)


# ---- snapshots, clones, archives -------------------------------------------------


def _nullable(value, what: str):
    return ffi.NULL if value is None else _cstr(value, what)


def box_snapshot_create(box: Handle, name: Optional[str]) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_box_snapshot_create(_ptr(box), _nullable(name, "name"), out, err), err, "box_snapshot_create")
    return _take_string(out[0])


def box_snapshot_list(box: Handle) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_box_snapshot_list(_ptr(box), out, err), err, "box_snapshot_list")
    return _take_string(out[0])


def box_snapshot_get(box: Handle, name: str) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_box_snapshot_get(_ptr(box), _cstr(name, "name"), out, err), err, "box_snapshot_get")
    return _take_string(out[0])


def box_snapshot_remove(box: Handle, name: str) -> None:
    err = _new_err()
    check(lib().boxlite_box_snapshot_remove(_ptr(box), _cstr(name, "name"), err), err, "box_snapshot_remove")


def box_snapshot_restore(box: Handle, name: str) -> None:
    err = _new_err()
    check(lib().boxlite_box_snapshot_restore(_ptr(box), _cstr(name, "name"), err), err, "box_snapshot_restore")


def box_clone(box: Handle, options_json: Optional[str]) -> Handle:
    out = ffi.new("boxlite_box_t **")
    err = _new_err()
    check(lib().boxlite_box_clone(_ptr(box), _nullable(options_json, "clone options"), out, err), err, "box_clone")
    return Handle(out[0], "boxlite_box_free", "box")


def box_fork(box: Handle, options_json: Optional[str]) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_box_fork(_ptr(box), _nullable(options_json, "fork options"), out, err), err, "box_fork")
    return _take_string(out[0])


def box_export(box: Handle, dest: str) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_box_export(_ptr(box), _cstr(dest, "dest"), out, err), err, "box_export")
    return _take_string(out[0])


def runtime_import_box(rt: Handle, archive_path: str, name: Optional[str], options_json: Optional[str] = None) -> Handle:
    out = ffi.new("boxlite_box_t **")
    err = _new_err()
    check(lib().boxlite_runtime_import_box(_ptr(rt), _cstr(archive_path, "archive_path"), _nullable(name, "name"),
                                           _nullable(options_json, "options_json"), out, err),
          err, "runtime_import_box")
    return Handle(out[0], "boxlite_box_free", "box")


def new_buffer(size: int):
    """A read buffer for execution_read (a cffi uint8_t[size])."""
    return ffi.new("uint8_t[]", size)


def buffer_bytes(buf, n: int) -> bytes:
    return ffi.buffer(buf, n)[:]


def execution_read(ex: Handle, stream: int, buf, timeout_ms: int) -> Tuple[int, int]:
    """Reads into buf (from new_buffer): (OK, n), (AGAIN, 0) or (EOF, 0)."""
    n = ffi.new("size_t *")
    err = _new_err()
    rc = check(lib().boxlite_execution_read(_ptr(ex), stream, buf, len(buf), timeout_ms, n, err), err, "execution_read")
    return rc, int(n[0])


def execution_fd(ex: Handle) -> int:
    return lib().boxlite_execution_fd(_ptr(ex))


def execution_write(ex: Handle, data: bytes) -> None:
    err = _new_err()
    check(lib().boxlite_execution_write(_ptr(ex), data, len(data), err), err, "execution_write")


def execution_close_stdin(ex: Handle) -> None:
    err = _new_err()
    check(lib().boxlite_execution_close_stdin(_ptr(ex), err), err, "execution_close_stdin")


def execution_wait(ex: Handle, timeout_ms: int) -> Tuple[int, Optional[ExitTuple]]:
    """(OK, (exit_code, signal, timed_out)) or (AGAIN, None)."""
    out = ffi.new("boxlite_exit_t *")
    err = _new_err()
    rc = check(lib().boxlite_execution_wait(_ptr(ex), timeout_ms, out, err), err, "execution_wait")
    if rc == AGAIN:
        return rc, None
    return rc, (_exit_code(out), out.signal, bool(out.timed_out))


def execution_signal(ex: Handle, sig: int) -> None:
    err = _new_err()
    check(lib().boxlite_execution_signal(_ptr(ex), sig, err), err, "execution_signal")


def execution_kill(ex: Handle) -> None:
    err = _new_err()
    check(lib().boxlite_execution_kill(_ptr(ex), err), err, "execution_kill")


def execution_id(ex: Handle) -> Optional[str]:
    p = lib().boxlite_execution_id(_ptr(ex))
    return None if p == ffi.NULL else ffi.string(p).decode()


def execution_resize(ex: Handle, rows: int, cols: int) -> None:
    err = _new_err()
    check(lib().boxlite_execution_resize(_ptr(ex), rows, cols, err), err, "execution_resize")


def execution_free(ex: Handle) -> None:
    ex.close()


# ---- sessions ------------------------------------------------------------------------
#
# boxlite_session_run, boxlite_cell_result and boxlite_session_exec hand out
# their result with BOXLITE_ERR_TIMEOUT too: the TimeoutError raised here
# carries it as ``result_json`` (run, cell result) or ``result`` (exec, the
# tuple box_run returns).

TIMEOUT = 5


def session_new(box: Handle, kind: str, options_json: Optional[str]) -> Handle:
    out = ffi.new("boxlite_session_t **")
    err = _new_err()
    opts = ffi.NULL if options_json is None else _cstr(options_json, "session options")
    check(lib().boxlite_session_new(_ptr(box), _cstr(kind, "session kind"), opts, out, err), err, "session_new")
    return Handle(out[0], "boxlite_session_free", "session")


def _json_result(rc: int, out, err, op: str) -> str:
    """The result JSON of a call that sets it with OK and TIMEOUT alike."""
    text = _take_string(out[0]) if out[0] != ffi.NULL else None
    try:
        check(rc, err, op)
    except errors.TimeoutError as e:
        e.result_json = text
        raise
    return text or ""


def session_run(s: Handle, code: str, options_json: Optional[str] = None) -> str:
    out = ffi.new("char **")
    err = _new_err()
    rc = lib().boxlite_session_run(_ptr(s), _cstr(code, "code"), _nullable(options_json, "cell options"), out, err)
    return _json_result(rc, out, err, "session_run")


def session_run_start(s: Handle, code: str, options_json: Optional[str] = None) -> Handle:
    out = ffi.new("boxlite_cell_t **")
    err = _new_err()
    check(lib().boxlite_session_run_start(_ptr(s), _cstr(code, "code"), _nullable(options_json, "cell options"), out, err), err,
          "session_run_start")
    return Handle(out[0], "boxlite_cell_free", "cell")


def cell_read(c: Handle, buf, timeout_ms: int) -> Tuple[int, int, int]:
    """Reads into buf (from new_buffer): (OK, stream, n), (AGAIN, 0, 0) or (EOF, 0, 0)."""
    stream = ffi.new("int *")
    n = ffi.new("size_t *")
    err = _new_err()
    rc = check(lib().boxlite_cell_read(_ptr(c), buf, len(buf), timeout_ms, stream, n, err), err, "cell_read")
    return rc, int(stream[0]), int(n[0])


def cell_fd(c: Handle) -> int:
    return lib().boxlite_cell_fd(_ptr(c))


def cell_result(c: Handle, timeout_ms: int) -> Tuple[int, Optional[str]]:
    """(OK, result JSON) or (AGAIN, None)."""
    out = ffi.new("char **")
    err = _new_err()
    rc = lib().boxlite_cell_result(_ptr(c), timeout_ms, out, err)
    if rc == AGAIN:
        check(rc, err, "cell_result")
        return rc, None
    return rc, _json_result(rc, out, err, "cell_result")


def cell_interrupt(c: Handle) -> None:
    err = _new_err()
    check(lib().boxlite_cell_interrupt(_ptr(c), err), err, "cell_interrupt")


def cell_free(c: Handle) -> None:
    c.close()


def session_exec(s: Handle, command_json: str) -> RunTuple:
    """As box_run; a timeout raises TimeoutError whose ``result`` is that tuple."""
    out = ffi.new("boxlite_result_t **")
    err = _new_err()
    rc = lib().boxlite_session_exec(_ptr(s), _cstr(command_json, "command"), out, err)
    result = None
    if out[0] != ffi.NULL:
        result = _take_result(out[0])
    try:
        check(rc, err, "session_exec")
    except errors.TimeoutError as e:
        e.result = result
        raise
    return result


def session_interrupt(s: Handle) -> None:
    err = _new_err()
    check(lib().boxlite_session_interrupt(_ptr(s), err), err, "session_interrupt")


def session_reset(s: Handle) -> None:
    err = _new_err()
    check(lib().boxlite_session_reset(_ptr(s), err), err, "session_reset")


def session_info(s: Handle) -> str:
    out = ffi.new("char **")
    err = _new_err()
    check(lib().boxlite_session_info(_ptr(s), out, err), err, "session_info")
    return _take_string(out[0])


def session_free(s: Handle) -> None:
    s.close()
