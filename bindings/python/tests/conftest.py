"""Shared fixtures. The suite boots a handful of real boxes (TCG here: seconds
each), one per module where the module's tests can share it.

Images: tests use ``alpine:latest`` (a busybox-based stand-in) and
``python:slim``. When the runtime home lacks them, they are loaded from the
repository's build/images/{alpine,python}.tar if present; tests needing an
image that is still missing fail, saying how to build it (never a skip).

Home: $BOXLITE_HOME, else the repository's build/home (as `make test` uses),
else a temporary directory."""

from __future__ import annotations

import asyncio
import os
import pathlib
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
IMAGE_TARS = {
    "alpine:latest": REPO / "build" / "images" / "alpine.tar",
    "python:slim": REPO / "build" / "images" / "python.tar",
}

if not os.environ.get("BOXLITE_HOME"):
    home = REPO / "build" / "home"
    os.environ["BOXLITE_HOME"] = str(home) if home.parent.is_dir() else tempfile.mkdtemp(prefix="boxlite-test-")

import boxlite  # noqa: E402  (after BOXLITE_HOME is settled)

# With BOXLITE_REST_URL set (make test-rest-sdk), the runtime every test gets
# by default is a REST one: Boxlite.rest(BoxliteRestOptions.from_env()), its
# boxes on that server. Tests that are local by nature are marked
# @pytest.mark.local_only("why") and reported skipped with their reason.
REST = bool(os.environ.get("BOXLITE_REST_URL"))
if REST:
    _rest_runtime = None

    def _rest_default() -> "boxlite.Boxlite":
        global _rest_runtime
        if _rest_runtime is None or _rest_runtime.closed:
            _rest_runtime = boxlite.Boxlite.rest(boxlite.BoxliteRestOptions.from_env())
        return _rest_runtime

    boxlite.Boxlite.default = staticmethod(_rest_default)


def pytest_configure(config):
    config.addinivalue_line("markers", "local_only(reason): needs a local runtime (skipped, with the reason, on a REST one)")


def pytest_collection_modifyitems(config, items):
    if not REST:
        return
    for item in items:
        m = item.get_closest_marker("local_only")
        if m is not None:
            item.add_marker(pytest.mark.skip(reason="local only on a REST runtime: " + (m.args[0] if m.args else "")))


def _matches(stored: str, name: str) -> bool:
    return stored == name or stored.endswith("/" + name)


async def _ensure_images() -> set:
    rt = boxlite.Boxlite.default()
    have = {i.name for i in await rt.images.list()}
    for name, tar in IMAGE_TARS.items():
        # A REST server's images are its own (make test-rest-sdk loads them there).
        if not REST and not any(_matches(h, name) for h in have) and tar.is_file():
            for img in await rt.images.load(str(tar)):
                have.add(img.name)
    return {name for name in IMAGE_TARS if any(_matches(h, name) for h in have)}


_available = None


def available_images() -> set:
    global _available
    if _available is None:
        _available = asyncio.run(_ensure_images())
    return _available


def need_image(name: str) -> None:
    if name not in available_images():
        tar = IMAGE_TARS.get(name)
        # A failure, not a skip: a suite must never pass having tested nothing.
        pytest.fail(
            f"image {name} is not loaded in {os.environ['BOXLITE_HOME']} and {tar} does not exist yet "
            "(build it with `make images` in the repository root)"
        )


@pytest.fixture(scope="module")
def loop():
    """One event loop per module, so a module's box and its executions share it."""
    lp = asyncio.new_event_loop()
    yield lp
    lp.run_until_complete(lp.shutdown_asyncgens())
    lp.close()


@pytest.fixture(scope="module")
def run(loop):
    """run(coro): runs a coroutine on the module's loop (no pytest-asyncio needed)."""
    return loop.run_until_complete


def pytest_report_header(config):
    from boxlite import _ffi

    return [
        f"boxlite package: {os.path.dirname(boxlite.__file__)}",
        f"libboxlite: {_ffi.library_path()}",
        f"BOXLITE_HOME: {os.environ['BOXLITE_HOME']}",
    ]


def shim_children() -> set:
    """The boxlite-shim processes this test process started and that still
    run: a box that boots has one, so a check that nothing booted compares
    this before and after instead of timing the call."""
    import glob
    pids = set()
    for f in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        with open(f) as fh:
            for p in fh.read().split():
                try:
                    with open(f"/proc/{p}/comm") as c:
                        if c.read().strip() == "boxlite-shim":
                            pids.add(int(p))
                except OSError:
                    pass
    return pids
