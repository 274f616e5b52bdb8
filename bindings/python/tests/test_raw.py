"""The raw layer: the cdef mirrors include/boxlite.h, statuses map to one
exception class each, handles are freed exactly once. No box is booted."""

from __future__ import annotations

import gc
import json
import re

import pytest

import boxlite
from boxlite import _ffi as raw
from boxlite import errors
from conftest import REPO

HEADER = REPO / "include" / "boxlite.h"


def _decls(text: str):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    funcs = set(re.findall(r"\b(boxlite_[a-z_]+)\s*\(", text))
    defines = dict(re.findall(r"#define\s+(BOXLITE_[A-Z_]+)\s+(-?\d+)\b", text))
    structs = {name: " ".join(body.split()) for name, body in
               re.findall(r"typedef\s+struct\s+(boxlite_[a-z_]+)\s*\{(.*?)\}", text, flags=re.S)}
    return funcs, defines, structs


def test_cdef_mirrors_header():
    assert HEADER.exists(), f"{HEADER} is missing: the tests run from the repository"
    h_funcs, h_defines, h_structs = _decls(HEADER.read_text())
    c_funcs, c_defines, c_structs = _decls(raw.CDEF)
    assert h_funcs == c_funcs
    assert h_defines == c_defines
    assert h_structs == c_structs  # field by field: cffi lays the structs out from the cdef
    # and the raw layer has one Python function per C function
    for f in h_funcs:
        assert callable(getattr(raw, f[len("boxlite_"):])), f


def test_version_and_status_names():
    assert raw.version() == "%d.%d.%d" % (raw.lib().BOXLITE_VERSION_MAJOR, raw.lib().BOXLITE_VERSION_MINOR,
                                          raw.lib().BOXLITE_VERSION_PATCH)
    assert boxlite.library_version() == raw.version()
    assert raw.status_name(12345) == "unknown"
    assert raw.status_name(raw.AGAIN) == "again"
    for code in sorted(c.status for c in errors._KIND_CLASSES):
        cls = type(errors.from_status(code, "x"))
        assert issubclass(cls, boxlite.BoxliteError)
        assert cls.status == code
        assert cls.code == raw.status_name(code), cls


def test_exception_classes():
    assert issubclass(boxlite.TimeoutError, TimeoutError)  # builtins
    assert issubclass(boxlite.InvalidArgumentError, ValueError)
    e = boxlite.ExecError("ls /x", 2, "no such file")
    assert (e.command, e.exit_code, e.stderr) == ("ls /x", 2, "no such file")
    assert isinstance(errors.from_status(99, "odd"), boxlite.InternalError)


def test_library_errors_are_typed(tmp_path):
    with pytest.raises(boxlite.InvalidArgumentError, match="JSON"):
        raw.runtime_new("{not json")
    with pytest.raises(boxlite.InvalidArgumentError, match="bogus"):
        raw.runtime_new(json.dumps({"home": str(tmp_path), "bogus": 1}))
    rt = raw.runtime_new(json.dumps({"home": str(tmp_path)}))
    try:
        with pytest.raises(boxlite.NotFoundError):
            raw.box_get(rt, "no-such-box")
        with pytest.raises(boxlite.InvalidArgumentError, match="not json|JSON"):
            raw.box_create(rt, "{not json")
        with pytest.raises(boxlite.InvalidArgumentError, match="memroy_mib"):
            raw.box_create(rt, json.dumps({"image": "alpine:latest", "memroy_mib": 5}))
        with pytest.raises(boxlite.InvalidArgumentError, match="memory"):
            raw.box_create(rt, json.dumps({"image": "alpine:latest", "memory_mib": 1}))
        with pytest.raises(boxlite.InvalidArgumentError):
            raw.box_create(rt, json.dumps({"image": "alpine:latest", "cpus": "two"}))
        # a runtime handle passed as a box (cffi refuses the wrong pointer
        # type; cast past it): the library says so, no crash
        with pytest.raises(TypeError):
            raw.box_info(raw.Handle(rt.ptr, lambda p: None, "box"))
        fake = raw.Handle(raw.ffi.cast("boxlite_box_t *", rt.ptr), lambda p: None, "box")
        with pytest.raises(boxlite.InvalidArgumentError, match="not valid"):
            raw.box_info(fake)
        bogus = raw.Handle(raw.ffi.cast("boxlite_box_t *", 0xDEADBEEF), lambda p: None, "box")
        with pytest.raises(boxlite.InvalidArgumentError, match="not valid"):
            raw.box_start(bogus)
        with pytest.raises(boxlite.InvalidArgumentError, match="NUL"):
            raw.box_get(rt, "a\0b")
        with pytest.raises(TypeError):
            raw.box_get(rt, 42)
        with pytest.raises(TypeError):
            raw.box_info("not a handle")
        assert json.loads(raw.box_list(rt)) in ([], None)
    finally:
        raw.runtime_free(rt)
    # use after free: our handle refuses before the library is called
    with pytest.raises(boxlite.ClosedError):
        raw.box_list(rt)


def test_handles_are_freed_exactly_once(tmp_path):
    freed = []
    rt = raw.runtime_new(json.dumps({"home": str(tmp_path)}))
    h = raw.Handle(rt.ptr, freed.append, "probe")
    h.close()
    h.close()
    assert len(freed) == 1 and not h.alive
    h2 = raw.Handle(rt.ptr, freed.append, "probe")
    del h2
    gc.collect()
    assert len(freed) == 2  # the finalizer is the safety net
    rt.close()
    rt.close()
    with pytest.raises(boxlite.ClosedError):
        _ = rt.ptr


def test_closed_runtime(tmp_path):
    rt = boxlite.Boxlite(boxlite.Options(home_dir=str(tmp_path)))
    rt.close()
    rt.close()
    import asyncio

    with pytest.raises(boxlite.ClosedError):
        asyncio.run(rt.list_info())
    with pytest.raises(boxlite.ClosedError):
        asyncio.run(rt.create(boxlite.BoxOptions(image="alpine:latest")))


def test_sync_runtime_start_stop(tmp_path):
    # BoxLite's explicit form: SyncBoxlite(...).start() ... stop()
    rt = boxlite.SyncBoxlite(boxlite.Options(home_dir=str(tmp_path))).start()
    assert rt.list_info() == []
    rt.stop()
    rt.stop()
    with pytest.raises(boxlite.ClosedError):
        rt.start()
    with pytest.raises(boxlite.ClosedError):
        rt.list_info()
