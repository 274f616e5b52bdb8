"""Bad input through the friendly API: typed exceptions, never a crash.
No box boots here (one fails to, on purpose)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil

import pytest

import boxlite


def test_constructor_types():
    with pytest.raises(TypeError, match=r"env must be a list of \(key, value\) tuples.*dict"):
        boxlite.SimpleBox(image="alpine:latest", env={"A": "1"})
    with pytest.raises(TypeError, match=r"env\[0\]"):
        boxlite.SimpleBox(image="alpine:latest", env=["A=1"])
    with pytest.raises(TypeError, match=r"env\[0\] value"):
        boxlite.SimpleBox(image="alpine:latest", env=[("A", 1)])
    with pytest.raises(TypeError, match="cpus"):
        boxlite.SimpleBox(image="alpine:latest", cpus="two")
    with pytest.raises(TypeError, match="memory_mib"):
        boxlite.CodeBox(memory_mib=512.0)
    with pytest.raises(TypeError, match="image"):
        boxlite.SimpleBox(image=42)
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        boxlite.SimpleBox(image="alpine:latest", colour="red")
    with pytest.raises(TypeError, match="runtime"):
        boxlite.SimpleBox(image="alpine:latest", runtime="default")
    with pytest.raises(TypeError, match="auto_remove"):
        boxlite.SimpleBox(image="alpine:latest", auto_remove="yes")
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError too
        boxlite.SimpleBox()
    with pytest.raises(boxlite.InvalidArgumentError, match="NUL"):
        boxlite.SimpleBox(image="alpine\0latest")
    with pytest.raises(boxlite.InvalidArgumentError, match="'='"):
        boxlite.SimpleBox(image="alpine:latest", env=[("A=B", "1")])
    with pytest.raises(boxlite.InvalidArgumentError, match="read_only must be a bool or 'ro' / 'rw'"):
        boxlite.SimpleBox(image="alpine:latest", volumes=[("/a", "/b", "readonly")])
    with pytest.raises(TypeError, match="volumes"):
        boxlite.SimpleBox(image="alpine:latest", volumes=["/a:/b"])
    with pytest.raises(TypeError, match="unknown keys"):
        boxlite.SimpleBox(image="alpine:latest", volumes=[{"host_path": "/a", "guest_path": "/b", "mode": "ro"}])
    # BoxLite's spellings of a volume: a bool or "ro"/"rw", tuples or dicts
    vols = [("/a", "/b", True), ("/c", "/d", False), ("/e", "/f", "ro"), ("/g", "/h"),
            {"host": "/i", "guest": "/j", "ro": True}, {"host_path": "/k", "guest_path": "/l"}]
    got = json.loads(boxlite.BoxOptions(image="alpine:latest", volumes=vols).to_json())["volumes"]
    assert [v["read_only"] for v in got] == [True, False, True, False, True, False]
    assert [v["host_path"] for v in got] == ["/a", "/c", "/e", "/g", "/i", "/k"]
    with pytest.raises(TypeError, match="tty"):
        boxlite.InteractiveBox(image="alpine:latest", tty="yes")
    with pytest.raises(TypeError):
        boxlite.Boxlite("not options")
    with pytest.raises(TypeError, match="BoxOptions"):
        asyncio.run(boxlite.Boxlite.default().create({"image": "alpine:latest"}))
    # A host alone is a search registry (BoxLite's earlier list of names); anything else is refused.
    assert json.loads(boxlite.Options(image_registries=["r.example"]).to_json())["image_registries"] == [
        {"host": "r.example", "search": True}]
    with pytest.raises(TypeError, match=r"image_registries\[0\]"):
        boxlite.Boxlite(boxlite.Options(image_registries=[5]))


def test_warm_pool_options(tmp_path):
    with pytest.raises(TypeError, match=r"warm_pools\[0\] must be a WarmPool"):
        boxlite.Boxlite(boxlite.Options(home_dir=str(tmp_path), warm_pools=[(2, "alpine:latest")]))
    with pytest.raises(boxlite.InvalidArgumentError, match="published ports cannot be pooled"):
        boxlite.Boxlite(boxlite.Options(home_dir=str(tmp_path), warm_pools=[boxlite.WarmPool(
            1, boxlite.BoxOptions(image="alpine:latest", ports=[(8080, 80)]))]))
    with pytest.raises(boxlite.InvalidArgumentError, match="size"):
        boxlite.Boxlite(boxlite.Options(home_dir=str(tmp_path), warm_pools=[boxlite.WarmPool(0, boxlite.BoxOptions(image="alpine:latest"))]))


def test_not_started():
    box = boxlite.SimpleBox(image="alpine:latest")
    with pytest.raises(boxlite.InvalidStateError, match="not started"):
        asyncio.run(box.exec("true"))
    with pytest.raises(boxlite.InvalidStateError):
        _ = box.id
    with pytest.raises(boxlite.InvalidStateError):
        asyncio.run(box.copy_in(__file__, "/tmp/x"))
    asyncio.run(box.stop())  # stopping a box never started is a no-op


def test_bad_options_reach_the_library_typed(tmp_path):
    rt = boxlite.Boxlite(boxlite.Options(home_dir=str(tmp_path)))
    try:
        with pytest.raises(boxlite.InvalidArgumentError, match="memory"):
            asyncio.run(rt.create(boxlite.BoxOptions(image="alpine:latest", memory_mib=1)))
        with pytest.raises(boxlite.InvalidArgumentError, match="name"):
            asyncio.run(rt.create(boxlite.BoxOptions(image="alpine:latest"), name="no spaces allowed"))
        assert asyncio.run(rt.get("no-such-box")) is None
        assert asyncio.run(rt.get_info("no-such-box")) is None
        with pytest.raises(boxlite.NotFoundError):
            asyncio.run(rt.remove("no-such-box"))
        with pytest.raises(boxlite.NotFoundError):
            asyncio.run(rt.images.load(str(tmp_path / "missing.tar")))
        with pytest.raises(boxlite.UnreachableError):  # no registry answers at port 9
            asyncio.run(rt.images.pull("127.0.0.1:9/nope:1"))
    finally:
        rt.close()


def test_boot_failure_is_typed(tmp_path):
    """A box that cannot boot says why (here: a kernel that is not one)."""
    from conftest import need_image

    from boxlite import _ffi as raw

    need_image("alpine:latest")
    shim = os.path.join(os.path.dirname(raw.library_path()), "boxlite-shim")
    if not os.path.exists(shim):
        pytest.fail(f"no boxlite-shim beside {raw.library_path()}: the installed package is incomplete")
    assets = tmp_path / "assets"
    (assets / "guest").mkdir(parents=True)
    shutil.copy(shim, assets / "boxlite-shim")
    shutil.copy(os.path.join(os.path.dirname(shim), "boxlite-net"), assets / "boxlite-net")
    (assets / "guest" / "vmlinuz").write_bytes(b"not a kernel" * 1000)
    (assets / "guest" / "initramfs.cpio").write_bytes(b"")
    rt = boxlite.Boxlite(boxlite.Options(assets_dir=str(assets)))

    async def first_start_fails():
        box = await rt.create(boxlite.BoxOptions(image="alpine:latest", boot_timeout=30))  # configured: no boot yet
        try:
            with pytest.raises(boxlite.BootFailedError, match="kernel"):
                await box.start()
            assert box.info().status == "stopped"
            with pytest.raises(boxlite.BootFailedError, match="kernel"):
                await box.exec("true")  # starts it again, and says why that fails too
        finally:
            await box.remove()  # a box whose first start failed is removable
        assert await rt.get(box.id) is None

    try:
        asyncio.run(first_start_fails())
    finally:
        rt.close()
    missing = boxlite.Boxlite(boxlite.Options(assets_dir=str(tmp_path / "none")))
    try:
        with pytest.raises(boxlite.NotFoundError, match="boxlite-shim"):
            asyncio.run(missing.create(boxlite.BoxOptions(image="alpine:latest")))
    finally:
        missing.close()


def test_every_error_is_a_runtime_error(tmp_path):
    """BoxLite's documented programs catch start failures with
    ``except RuntimeError``: ours must land there too, kinds kept."""
    for name in boxlite.errors.__all__:
        cls = getattr(boxlite.errors, name)
        assert issubclass(cls, RuntimeError), name
    assert issubclass(boxlite.InvalidArgumentError, ValueError)
    assert issubclass(boxlite.TimeoutError, TimeoutError)

    async def start_missing():
        rt = boxlite.Boxlite(boxlite.Options(home_dir=str(tmp_path / "home")))
        try:
            async with boxlite.SimpleBox(image="no-such-image:never", runtime=rt):
                pass
        finally:
            rt.close()

    with pytest.raises(RuntimeError) as e:
        asyncio.run(start_missing())
    # No registry answers here: unreachable, its own kind (a registry that
    # answers says not found).
    assert isinstance(e.value, (boxlite.UnreachableError, boxlite.NotFoundError)), repr(e.value)
    assert str(e.value).count("no-such-image:never") <= 2, str(e.value)


BOXLITE_010_ERRORS = [  # boxlite 0.10.8's errors.__all__
    "AlreadyExistsError", "BoxliteError", "ConfigError", "DatabaseError", "EngineError", "ExecError",
    "ExecutionError", "ImageError", "InternalError", "InvalidArgumentError", "InvalidStateError",
    "MetadataError", "NetworkError", "NotFoundError", "ParseError", "ResourceExhaustedError",
    "SessionReapedError", "StoppedError", "StorageError", "TimeoutError", "UnsupportedError",
    "UpstreamUnavailableError",
]


def test_boxlite_010_error_classes():
    """Every error class of BoxLite 0.10 exists (a RuntimeError), and what
    we raise for its failures is one: except clauses written for it catch
    ours."""
    for name in BOXLITE_010_ERRORS:
        cls = getattr(boxlite, name)
        assert issubclass(cls, boxlite.BoxliteError) and issubclass(cls, RuntimeError), name
    pairs = [
        (boxlite.InvalidArgumentError, boxlite.ConfigError),
        (boxlite.InvalidStateError, boxlite.StoppedError),
        (boxlite.ClosedError, boxlite.StoppedError),
        (boxlite.LimitError, boxlite.ResourceExhaustedError),
        (boxlite.BootFailedError, boxlite.EngineError),
        (boxlite.UnreachableError, boxlite.ImageError),
        (boxlite.UnreachableError, boxlite.NetworkError),
    ]
    for ours, theirs in pairs:
        assert issubclass(ours, theirs), (ours, theirs)
        e = boxlite.errors.from_status(ours.status, "m")
        assert type(e) is ours and isinstance(e, theirs) and e.code == ours.code
    assert boxlite.StoppedError("x").code == "stopped"
    assert not issubclass(boxlite.NotFoundError, boxlite.ExecutionError)


def test_unknown_options_name_the_key_at_every_depth():
    """An option this SDK does not understand is an error naming it, never
    dropped: keyword arguments, option objects, and keys of dict options."""
    cases = [
        (lambda: boxlite.SimpleBox(image="alpine:latest", memroy_mib=5), "memroy_mib"),
        (lambda: boxlite.BoxOptions(image="alpine:latest", alow_net=["x"]), "alow_net"),
        (lambda: boxlite.BoxOptions(image="a", network={"mode": "enabled", "alow_net": ["x"]}).to_json(), "alow_net"),
        (lambda: boxlite.BoxOptions(image="a", ports=[{"guest_port": 80, "hostport": 1}]).to_json(), "hostport"),
        (lambda: boxlite.BoxOptions(image="a", volumes=[{"host_path": "/tmp", "guest_path": "/x", "readonly": True}]).to_json(),
         "readonly"),
        (lambda: boxlite.CopyOptions(include_parents=False), "include_parents"),
        (lambda: boxlite.Options(home="/tmp"), "home"),
    ]
    for make, key in cases:
        with pytest.raises(TypeError, match=key):
            make()
