# boxlite session driver: one long-lived Python interpreter that runs cells
# for the host, keeping their globals. Standard library only, Python 3.6+.
#
# Started by internal/session/python.go (see driver.go) as
#     python3 -u -c 'import sys;exec(compile(sys.argv.pop(1),"<boxlite-session>","exec"))' SOURCE
# The exec's stdin and stdout become the protocol channel; the cells never see
# them. At start the driver moves them to private descriptors (close-on-exec),
# points fd 0 at /dev/null and fds 1 and 2 at pipes of its own, so whatever a
# cell writes, through sys.stdout, os.write(1, ...) or a child process, is
# output and never protocol.
#
# Host -> driver (stdin): frames of a 4-byte big-endian length and a JSON
#   object: {"op": "run", "id": N, "code": "...", "rich": bool, "env": {...}}.
#   {"op": "hello"} asks for MAGIC and the hello again (a session taking over
#   the interpreter: Options.Name).
#   A rich cell (a code context's) also sends its results as D frames: the
#   value of its trailing expression, display() calls and the matplotlib
#   figures open at its end, as MIME bundles; lines starting with "!" run in
#   the shell. "env" is set in os.environ for the cell only.
# Driver -> host (stdout): MAGIC once, then frames of a 1-byte type, a 4-byte
#   big-endian length and the payload:
#     H  hello, JSON {"version", "pid", "python", "executable"}
#     S  cell started, JSON {"id"}: from here until R an interrupt (SIGINT)
#        stops the cell with KeyboardInterrupt
#     O  stdout bytes      E  stderr bytes
#     D  a rich result, JSON {"id", "data": {MIME type: value}, "main"}: main
#        is the trailing expression's; images are base64
#     R  cell result, JSON {"id", "value", "error", "exit_code"}; every O/E the
#        cell wrote before it ended precedes its R
#     X  protocol complaint, JSON {"message"}
# Bytes before MAGIC (a sitecustomize that prints, say) are not protocol.
# The exec's stderr receives only the driver's own failures.
#
# SIGINT is blocked in every thread except the main one while a cell runs, so
# an interrupt can only land inside a cell; one that arrives late stays
# pending and is discarded before the next cell.

import ast
import base64
import builtins
import importlib
import io
import json
import linecache
import os
import select
import signal
import struct
import sys
import threading
import traceback
import types
import warnings

VERSION = 1
MAGIC = b"\x00\x01BOXLITE-SESSION-1\n"
DRIVER_FILE = "<boxlite-session>"
CHUNK = 64 << 10
MAX_REPR = 1 << 20
MAX_REQUEST = 256 << 20
MAX_BUNDLE = 8 << 20  # the bytes of one rich result in its frame; larger entries are dropped

# A MIME bundle's entries from the _repr_*_ methods, as IPython's formatters.
REPR_METHODS = (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"),
                ("_repr_svg_", "image/svg+xml"), ("_repr_png_", "image/png"),
                ("_repr_jpeg_", "image/jpeg"), ("_repr_pdf_", "application/pdf"),
                ("_repr_json_", "application/json"), ("_repr_latex_", "text/latex"),
                ("_repr_javascript_", "application/javascript"))
BINARY_MIMES = ("image/png", "image/jpeg", "application/pdf")


_real_exit = os._exit


class _State:
    running = False
    diag = 2  # where the driver's own failures go: the exec's stderr
    reseeded = False


def _reseed():
    # A driver a template VM started (a prestarted session) is the same in
    # every box restored from it: so would the random module's state be,
    # seeded when the driver's imports loaded it. The box's kernel RNG was
    # reseeded by the host since, so seed from it again.
    r = sys.modules.get("random")
    if r is not None:
        r.seed()
    t = sys.modules.get("tempfile")
    if t is not None:
        t._name_sequence = None


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd, n):
    parts = []
    while n > 0:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


def _strip(te, seen):
    """Drops the driver's own frames (running the cell, the interrupt
    handler) from a TracebackException and the exceptions chained to it."""
    if te is None or id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename != DRIVER_FILE])
    _strip(te.__cause__, seen)
    _strip(te.__context__, seen)
    for sub in getattr(te, "exceptions", None) or ():
        _strip(sub, seen)


# @rich@ (driver_rich.py, joined in here by driver.go: rich results)


def main(state):
    sigint = {signal.SIGINT}
    # Blocked before any thread starts, so every thread inherits the mask.
    signal.pthread_sigmask(signal.SIG_BLOCK, sigint)

    def on_sigint(signum, frame):
        if state.running:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)

    # The protocol channel moves to private, non-inheritable descriptors.
    proto = os.dup(1)
    req = os.dup(0)
    state.diag = os.dup(2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    os.close(out_w)
    os.close(err_w)
    for fd in (out_r, err_r):
        os.set_blocking(fd, False)

    def text(fd):
        return io.TextIOWrapper(io.open(fd, "wb", closefd=False), encoding="utf-8",
                                errors="backslashreplace", line_buffering=True)

    def std_streams():
        # A cell may close them (exit() closes stdin): each cell starts with them open.
        if sys.stdin is None or sys.stdin.closed:
            sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.open(0, "rb", closefd=False), encoding="utf-8")
        if sys.stdout is None or sys.stdout.closed:
            sys.stdout = sys.__stdout__ = text(1)
        if sys.stderr is None or sys.stderr.closed:
            sys.stderr = sys.__stderr__ = text(2)
        return (sys.stdout, sys.stderr)

    sys.stdin = sys.stdout = sys.stderr = None
    std = std_streams()

    lock = threading.Lock()

    def send(kind, payload):
        # callers hold lock
        _write_all(proto, struct.pack(">cI", kind, len(payload)) + payload)

    def send_json(kind, obj):
        send(kind, json.dumps(obj).encode("utf-8", "surrogatepass"))

    kinds = {out_r: b"O", err_r: b"E"}
    live = [out_r, err_r]

    def forward(fd):
        # one read of fd, sent; False when nothing was there. Callers hold lock.
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return False
        if not data:
            if fd in live:  # every writer closed it (a cell closed fd 1)
                live.remove(fd)
            return False
        send(kinds[fd], data)
        return True

    def pump():
        while live:
            try:
                ready, _, _ = select.select(live, [], [])
            except (OSError, ValueError):
                return
            with lock:
                for fd in ready:
                    forward(fd)

    threading.Thread(target=pump, name="boxlite-output", daemon=True).start()

    def drain():
        for s in std + (sys.stdout, sys.stderr):
            try:
                s.flush()
            except BaseException:
                pass
        with lock:
            for fd in (out_r, err_r):
                while forward(fd):
                    pass

    # A cell that ends the interpreter with os._exit gets its output out
    # first (forked children, which share the pipes, just exit).
    me = os.getpid()

    def _exit(code):
        if os.getpid() == me:
            try:
                drain()
            except BaseException:
                pass
        _real_exit(code)

    os._exit = _exit

    # Rich cells: display() (printing outside them), "!cmd" lines, IPython.display
    # where IPython is missing, and matplotlib drawing off-screen (Agg), its
    # figures shown at the end of the cell or by plt.show().
    builtins.display = display
    builtins.__boxlite_system__ = _system
    sys.meta_path.append(_IPythonShim())
    os.environ.setdefault("MPLBACKEND", "agg")
    warnings.filterwarnings("ignore", message=".*(non-GUI backend|is non-interactive, and thus cannot be shown)")

    mod = types.ModuleType("__main__")
    mod.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = mod
    ns = mod.__dict__

    def execute(code, filename, rich):
        if rich:
            code = _shell_escapes(code)
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = compile(code, filename, "exec", ast.PyCF_ONLY_AST, True)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec", 0, True), ns)
        if last is None:
            return None
        value = eval(compile(last, filename, "eval", 0, True), ns)
        if value is None:
            return None
        builtins._ = value
        if rich:
            data = _mime_bundle(value)
            _Rich.emit(data, True)
            return data["text/plain"]
        return _plain(value)

    def describe(e):
        t = type(e)
        mod_name = getattr(t, "__module__", "builtins")
        name = t.__qualname__ if mod_name in ("builtins", "__main__") else "%s.%s" % (mod_name, t.__qualname__)
        try:
            message = str(e)
        except BaseException:
            message = "<unprintable %s>" % name
        try:
            te = traceback.TracebackException(t, e, e.__traceback__)
            _strip(te, set())
            text = "".join(te.format())
        except BaseException:
            text = "%s: %s\n" % (name, message)
        return {"type": name, "message": message, "traceback": text}

    def drain_sigint():
        try:
            while signal.SIGINT in signal.sigpending():
                signal.sigtimedwait(sigint, 0)
        except (AttributeError, OSError):
            pass

    def run(msg):
        cid = msg.get("id", 0)
        code = msg.get("code", "")
        rich = msg.get("rich") is True
        result = {"id": cid, "value": None, "error": None, "exit_code": 0}
        saved_env = {}
        for k, v in (msg.get("env") or {}).items():
            saved_env[k] = os.environ.get(k)
            os.environ[k] = v

        def emit(data, main):
            drain()  # what the cell printed before goes first
            payload = json.dumps({"id": cid, "data": data, "main": main}, ensure_ascii=False)
            with lock:
                send(b"D", payload.encode("utf-8", "surrogatepass"))
        drain_sigint()
        if not state.reseeded:
            state.reseeded = True
            _reseed()
        std = std_streams()
        try:
            importlib.invalidate_caches()  # packages a cell pip-installed
        except Exception:
            pass
        try:
            try:
                with lock:
                    send_json(b"S", {"id": cid})
                state.running = True
                if rich:
                    _Rich.emit = emit
                    _patch_pyplot()
                signal.pthread_sigmask(signal.SIG_UNBLOCK, sigint)
                try:
                    try:
                        result["value"] = execute(code, "<cell-%d>" % cid, rich)
                    finally:
                        if rich:
                            _flush_figures()  # after an exception too, as Jupyter's inline backend
                            _patch_pyplot()
                finally:
                    signal.pthread_sigmask(signal.SIG_BLOCK, sigint)
            finally:
                state.running = False
                _Rich.emit = None
                for k, v in saved_env.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        except SystemExit as e:
            c = e.code
            if c is None or c == 0:
                pass
            elif isinstance(c, int) and not isinstance(c, bool):
                result["exit_code"] = c
                result["error"] = {"type": "SystemExit", "message": str(c), "traceback": ""}
            else:
                result["exit_code"] = 1
                result["error"] = {"type": "SystemExit", "message": str(c), "traceback": "%s\n" % (c,)}
        except KeyboardInterrupt as e:
            result["exit_code"] = 130
            result["error"] = describe(e)
        except BaseException as e:
            result["exit_code"] = 1
            result["error"] = describe(e)
        if os.getpid() != me:
            # a child the cell forked (os.fork) and that did not exit: it ends
            # with the cell, as it would at the end of `python -c`
            for s in (sys.stdout, sys.stderr):
                try:
                    s.flush()
                except BaseException:
                    pass
            _real_exit(result["exit_code"] & 0xFF)
        drain()  # the cell's output goes before its result
        with lock:
            send_json(b"R", result)

    def hello():
        # At the start, and again when a session that takes over this
        # interpreter asks (op "hello").
        with lock:
            _write_all(proto, MAGIC)
            send_json(b"H", {"version": VERSION, "pid": os.getpid(), "python": sys.version.split()[0],
                             "executable": sys.executable})

    hello()
    while True:
        hdr = _read_exact(req, 4)
        if hdr is None:
            return  # the host closed our stdin: done
        n = struct.unpack(">I", hdr)[0]
        if n > MAX_REQUEST:
            with lock:
                send_json(b"X", {"message": "request of %d bytes exceeds %d" % (n, MAX_REQUEST)})
            return
        body = _read_exact(req, n)
        if body is None:
            return
        try:
            msg = json.loads(body.decode("utf-8", "surrogatepass"))
            op = msg.get("op")
        except Exception as e:
            with lock:
                send_json(b"X", {"message": "bad request: %s" % e})
            continue
        if op == "run":
            run(msg)
        elif op == "hello":
            hello()
        else:
            with lock:
                send_json(b"X", {"message": "unknown op %r" % (op,)})


_state = _State()
try:
    main(_state)
except BaseException:
    try:
        _write_all(_state.diag, traceback.format_exc().encode("utf-8", "replace"))
    except BaseException:
        pass
    _real_exit(70)
_real_exit(0)
