# boxlite session driver, its rich results (see driver.py): MIME bundles of
# values, display(), matplotlib figures, "!cmd" lines and IPython.display for
# boxes without IPython. driver.go joins this into driver.py where its
# "# @rich@" line is; it uses driver.py's imports and constants.


class _Rich:
    """What rich cells share: the running cell's emitter (None outside a rich
    cell: display() then prints), and the stderr note writer."""
    emit = None


def _note(msg):
    try:
        sys.stderr.write("[boxlite: %s]\n" % msg)
    except BaseException:
        pass


def _method(obj, name):
    try:
        f = getattr(obj, name, None)
    except Exception:
        return None
    return f if callable(f) else None


def _mime_value(mime, v):
    """A bundle entry as JSON carries it (images base64), or None to drop it."""
    if isinstance(v, tuple) and len(v) == 2:  # (data, metadata)
        v = v[0]
    if v is None:
        return None
    if mime == "application/json":
        try:
            json.dumps(v)
        except Exception:
            return None
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        if mime in BINARY_MIMES:
            return base64.b64encode(bytes(v)).decode("ascii")
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, str):
        return v
    return None


def _plain(obj):
    r = repr(obj)
    if len(r) > MAX_REPR:
        r = r[:MAX_REPR] + "... [%d characters]" % len(r)
    return r


def _cap(data):
    """Drops the largest entries (never text/plain) of a bundle over MAX_BUNDLE."""
    def size(v):  # as the D frame carries it
        return len(json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    total = sum(size(v) for v in data.values())
    for mime in sorted(data, key=lambda m: -size(data[m])):
        if total <= MAX_BUNDLE:
            break
        if mime == "text/plain":
            continue
        total -= size(data[mime])
        _note("%s output of %d bytes dropped: a result holds at most %d" % (mime, size(data[mime]), MAX_BUNDLE))
        del data[mime]
    return data


def _mime_bundle(obj):
    """obj's MIME bundle, as IPython's display formatter makes it."""
    data = {}
    if not isinstance(obj, type):
        m = _method(obj, "_repr_mimebundle_")
        if m is not None:
            try:
                try:
                    r = m(include=None, exclude=None)
                except TypeError:
                    r = m()
                if isinstance(r, tuple) and len(r) == 2:
                    r = r[0]
                if isinstance(r, dict):
                    for k, v in r.items():
                        v = _mime_value(k, v) if isinstance(k, str) else None
                        if v is not None:
                            data[k] = v
            except Exception as e:
                _note("_repr_mimebundle_ failed: %s: %s" % (type(e).__name__, e))
        for name, mime in REPR_METHODS:
            if mime in data:
                continue
            m = _method(obj, name)
            if m is None:
                continue
            try:
                v = _mime_value(mime, m())
            except Exception as e:
                _note("%s failed: %s: %s" % (name, type(e).__name__, e))
                continue
            if v is not None:
                data[mime] = v
    if not isinstance(data.get("text/plain"), str):
        data["text/plain"] = _plain(obj)
    return _cap(data)


def display(*objs, **kwargs):
    """Shows objects as a notebook would: each is a result of the running
    cell (raw=True: each is a MIME bundle already, a dict)."""
    raw = kwargs.get("raw", False)
    for obj in objs:
        if raw and isinstance(obj, dict):
            data = {}
            for k, v in obj.items():
                v = _mime_value(k, v) if isinstance(k, str) else None
                if v is not None:
                    data[k] = v
            data = _cap(data)
        else:
            data = _mime_bundle(obj)
        emit = _Rich.emit
        if emit is not None:
            emit(data, False)
        elif "text/plain" in data:
            print(data["text/plain"])


def _flush_figures():
    """The open matplotlib figures become PNG results and are closed, as
    Jupyter's inline backend does after each cell."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None or _Rich.emit is None:
        return
    try:
        nums = plt.get_fignums()
        for n in nums:
            fig = plt.figure(n)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
            _Rich.emit({"text/plain": _plain(fig), "image/png": base64.b64encode(buf.getvalue()).decode("ascii")}, False)
        if nums:
            plt.close("all")
    except Exception as e:
        _note("matplotlib figure: %s: %s" % (type(e).__name__, e))


def _patch_pyplot():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None and getattr(plt.show, "__name__", "") != "_flush_figures":
        plt.show = lambda *a, **k: _flush_figures()
        plt.show.__name__ = "_flush_figures"


def _system(cmd):
    """A cell's "!cmd" line: runs cmd with sh, its output the cell's."""
    import subprocess
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:
            pass
    subprocess.run(cmd, shell=True)


def _shell_escapes(code):
    """Turns the lines of a cell that start with "!" into _system calls, as
    IPython does."""
    if "!" not in code:
        return code
    lines = code.split("\n")
    for i, line in enumerate(lines):
        st = line.lstrip()
        if st.startswith("!") and not st.startswith("!="):
            lines[i] = "%s__boxlite_system__(%r)" % (line[:len(line) - len(st)], st[1:])
    return "\n".join(lines)


class _DisplayObject:
    mime = "text/plain"

    def __init__(self, data=None, url=None, filename=None, **kwargs):
        if data is None and filename is not None:
            with open(filename, "rb" if self.mime in BINARY_MIMES else "r") as f:
                data = f.read()
        self.data = data if data is not None else url

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {self.mime: self.data}


def _ipython_display_module(name):
    """IPython.display's everyday part, for boxes without IPython."""
    m = types.ModuleType(name)
    m.display = display
    m.clear_output = lambda *a, **k: None
    m.get_ipython = lambda: None
    for cls, mime in (("HTML", "text/html"), ("Markdown", "text/markdown"), ("SVG", "image/svg+xml"),
                      ("Latex", "text/latex"), ("Math", "text/latex"), ("JSON", "application/json"),
                      ("Javascript", "application/javascript"), ("Pretty", "text/plain")):
        setattr(m, cls, type(cls, (_DisplayObject,), {"mime": mime}))

    class Image(_DisplayObject):
        def __init__(self, data=None, url=None, filename=None, format=None, **kwargs):
            fmt = (format or (filename or url or "").rsplit(".", 1)[-1] or "png").lower()
            self.mime = "image/jpeg" if fmt in ("jpg", "jpeg") else "image/png"
            _DisplayObject.__init__(self, data, url, filename)
    m.Image = Image
    return m


class _IPythonShim:
    """Finds IPython and IPython.display for rich cells in a box without
    IPython: it comes after the real finders, so an installed IPython wins."""

    names = ("IPython", "IPython.display", "IPython.core", "IPython.core.display")

    def find_spec(self, name, path=None, target=None):
        if name not in self.names or _Rich.emit is None:
            return None
        import importlib.util
        return importlib.util.spec_from_loader(name, self, is_package=name in ("IPython", "IPython.core"))

    def create_module(self, spec):
        return _ipython_display_module(spec.name)

    def exec_module(self, module):
        pass
