"""Raw layer: include/boxlite.h, one to one, over cffi in ABI mode.

Every C function of the header has one Python function here with the same name
minus the ``boxlite_`` prefix. They take and return cffi handles (opaque
pointers), ``str``/``bytes`` and ints; they allocate the out-parameters, convert
the status and error object into an exception through :func:`check`, and free
everything the library allocated (error objects, strings, results) before they
return. Nothing above this module touches ``ffi`` or ``lib``.

Most are built by :func:`_build` from their row in ``_calls.py``, which
internal/abigen writes from the header (its parameters' types and names);
the ones written out below are those with logic of their own (buffers, exit
and result structs, results handed out with a timeout). Importing the module
fails when the header has a function that neither covers.

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
from ._calls import CALLS  # a row per header function, generated from it
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


def _nullable(value, what: str):
    return ffi.NULL if value is None else _cstr(value, what)


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


# ---- written out: results, reads and waits (structs and buffers) ---------------


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


def execution_wait(ex: Handle, timeout_ms: int) -> Tuple[int, Optional[ExitTuple]]:
    """(OK, (exit_code, signal, timed_out)) or (AGAIN, None)."""
    out = ffi.new("boxlite_exit_t *")
    err = _new_err()
    rc = check(lib().boxlite_execution_wait(_ptr(ex), timeout_ms, out, err), err, "execution_wait")
    if rc == AGAIN:
        return rc, None
    return rc, (_exit_code(out), out.signal, bool(out.timed_out))


# ---- sessions ------------------------------------------------------------------------
#
# boxlite_session_run, boxlite_cell_result and boxlite_session_exec hand out
# their result with BOXLITE_ERR_TIMEOUT too: the TimeoutError raised here
# carries it as ``result_json`` (run, cell result) or ``result`` (exec, the
# tuple box_run returns).

TIMEOUT = 5


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


def session_run_code(s: Handle, code: str, options_json: Optional[str] = None) -> str:
    out = ffi.new("char **")
    err = _new_err()
    rc = lib().boxlite_session_run_code(_ptr(s), _cstr(code, "code"), _nullable(options_json, "code options"), out, err)
    return _json_result(rc, out, err, "session_run_code")


def cell_read(c: Handle, buf, timeout_ms: int) -> Tuple[int, int, int]:
    """Reads into buf (from new_buffer): (OK, stream, n), (AGAIN, 0, 0) or (EOF, 0, 0)."""
    stream = ffi.new("int *")
    n = ffi.new("size_t *")
    err = _new_err()
    rc = check(lib().boxlite_cell_read(_ptr(c), buf, len(buf), timeout_ms, stream, n, err), err, "cell_read")
    return rc, int(stream[0]), int(n[0])


def cell_result(c: Handle, timeout_ms: int) -> Tuple[int, Optional[str]]:
    """(OK, result JSON) or (AGAIN, None)."""
    out = ffi.new("char **")
    err = _new_err()
    rc = lib().boxlite_cell_result(_ptr(c), timeout_ms, out, err)
    if rc == AGAIN:
        check(rc, err, "cell_result")
        return rc, None
    return rc, _json_result(rc, out, err, "cell_result")


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


def forwarder_wait(f: Handle, timeout_ms: int) -> bool:
    """True once the forwarder has stopped (its error raised), False while it serves (AGAIN)."""
    err = _new_err()
    return check(lib().boxlite_forwarder_wait(_ptr(f), timeout_ms, err), err, "forwarder_wait") != AGAIN


# ---- the rest, built from the header's rows (_calls.py) ---------------------------

_IN_KINDS = ("handle", "str", "str_or_null", "int", "bytes", "pointer")


def _build(name: str, result: str, params) -> Callable:
    """The Python function of boxlite_<name> from its row: arguments in the
    header's order (out-parameters and err left out; trailing nullable
    strings may be omitted), out-parameters allocated and returned (one:
    itself; several: a tuple), the status raised through check."""
    fn = "boxlite_" + name
    ins = [(p, kind) for p, kind, _ in params if kind in _IN_KINDS]
    outs = [(kind, handle) for _, kind, handle in params if kind not in _IN_KINDS]
    required = len(ins)
    while required and ins[required - 1][1] == "str_or_null":
        required -= 1
    if result == "void" and [k for _, k in ins] == ["handle"] and not outs:
        def free(h: Handle) -> None:
            if not isinstance(h, Handle):
                raise TypeError(f"expected a boxlite handle, not {type(h).__name__}")
            h.close()  # once: a closed handle stays closed
        free.__name__ = name
        return free

    def arg(kind: str, what: str, value):
        if kind == "handle":
            return _ptr(value)
        if kind == "str":
            return _cstr(value, what)
        if kind == "str_or_null":
            return _nullable(value, what)
        return value

    def call(*args):
        if not required <= len(args) <= len(ins):
            raise TypeError(f"{name}() takes {', '.join(p for p, _ in ins) or 'no arguments'}; {len(args)} given")
        cargs = []
        for (what, kind), value in zip(ins, args + (None,) * (len(ins) - len(args))):
            if kind == "bytes":
                cargs += [value, len(value)]
            else:
                cargs.append(arg(kind, what, value))
        ptrs = [ffi.new("char **" if kind == "out_string" else "int *" if kind == "out_int" else f"boxlite_{handle}_t **")
                for kind, handle in outs]
        if result != "status":
            r = getattr(lib(), fn)(*cargs)
            if result == "string":
                return None if r == ffi.NULL else ffi.string(r).decode()
            return r if result == "int" else None
        err = _new_err()
        check(getattr(lib(), fn)(*cargs, *ptrs, err), err, name)
        values = [_take_string(p[0]) if kind == "out_string" else int(p[0]) if kind == "out_int"
                  else Handle(p[0], f"boxlite_{handle}_free", handle) for (kind, handle), p in zip(outs, ptrs)]
        return None if not values else values[0] if len(values) == 1 else tuple(values)

    call.__name__ = name
    call.__doc__ = f"{fn}({', '.join(p for p, _ in ins)}) of include/boxlite.h."
    return call


def _build_all() -> None:
    mod = globals()
    for name, row in CALLS.items():
        if name in mod:
            continue  # written out above
        if row is None:
            raise ImportError(f"boxlite_{name} needs a function written out in {__name__} (its row is CUSTOM)")
        mod[name] = _build(name, *row)


_build_all()
