"""The runtime API (Boxlite, BoxOptions, Box): create, get, list, stop,
restart with the disk kept, remove; and the example programs, run as they
are."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import uuid

import pytest

import boxlite
from boxlite import Boxlite, BoxOptions
from conftest import need_image

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def test_box_lifecycle(run):
    need_image("alpine:latest")
    rt = Boxlite.default()
    name = f"pytest-{uuid.uuid4().hex[:8]}"
    opts = BoxOptions(image="alpine:latest", env=[("FOO", "bar")], working_dir="/tmp", memory_mib=256, auto_remove=False)
    box = run(rt.create(opts, name=name))
    try:
        assert box.name == name and box.info().status == "running"
        r = run(box.run("sh", "-c", "echo $FOO; pwd; echo kept > /root/disk.txt"))
        assert r.stdout == "bar\n/tmp\n", r

        same = run(rt.get(name))
        assert same is not None and same.id == box.id
        assert run(rt.get(box.id[:6])).id == box.id
        same.close()
        infos = run(rt.list_info())
        assert any(i.id == box.id and i.name == name for i in infos)
        assert run(rt.get_info(name)).status == "running"

        with pytest.raises(boxlite.AlreadyExistsError):
            run(rt.create(BoxOptions(image="alpine:latest"), name=name))
        with pytest.raises(boxlite.InvalidStateError, match="force"):
            run(rt.remove(name))

        run(box.stop())
        assert box.info().status == "stopped"
        with pytest.raises(boxlite.InvalidStateError, match="stopped"):
            run(box.exec("true"))
        run(box.stop())  # no-op

        run(box.start())  # the disk keeps what the first run wrote
        assert run(box.run("cat", "/root/disk.txt")).stdout == "kept\n"
    finally:
        run(rt.remove(name, force=True))
        box.close()
    assert run(rt.get(name)) is None
    with pytest.raises(boxlite.ClosedError):
        box.info()


def test_examples_run_unchanged():
    need_image("alpine:latest")
    procs = {
        name: subprocess.Popen([sys.executable, str(EXAMPLES / name)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        # (interactive.py makes the same calls as test_alpine.py's first tests)
        for name in ("streaming.py", "sync_hello.py")
    }
    out = {}
    for name, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, f"{name}: {stderr}"
        out[name] = stdout
    assert out["streaming.py"] == "[stdout] progress 1\n[stdout] progress 2\n[stdout] progress 3\nExit code: 0\n"
    assert out["sync_hello.py"] == "Hello from a synchronous microVM\n"
