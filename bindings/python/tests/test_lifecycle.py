"""The runtime API (Boxlite, BoxOptions, Box): create, get, list, stop,
restart with the disk kept, remove; and the example programs, run as they
are."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time
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
        info = box.info()
        assert box.name == name and info.status == "configured" and not info.state.running, info.raw
        assert "runtime" not in info.raw
        run(box.start())  # BoxLite's create-then-start
        run(box.start())  # a running box: no-op
        assert box.info().status == "running"
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
        run(box.stop())  # no-op

        # exec on a stopped box starts it again, and the disk keeps what the first run wrote
        assert run(box.run("cat", "/root/disk.txt")).stdout == "kept\n"
        assert box.info().status == "running"
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


_DETACHED_CHILD = r"""
import asyncio, sys
import boxlite

async def main(name):
    rt = boxlite.Boxlite(boxlite.Options())
    box = await rt.create(boxlite.BoxOptions(image="alpine:latest", memory_mib=256, detach=True, auto_remove=False), name=name)
    await box.start()
    r = await box.run("sh", "-c", "echo in-ram > /dev/shm/mark; sleep 1000 >/dev/null 2>&1 & echo $!")
    assert r.exit_code == 0, r
    info = box.info().raw["runtime"]
    print(box.id, r.stdout.strip(), info["shim_pid"], info["vmm_pid"], flush=True)
    rt.close()  # leaves the detached box running; so does the exit

asyncio.run(main(sys.argv[1]))
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_detach_and_reattach_from_another_process(run):
    """A process creates a detached box, starts a background process and
    writes a RAM-only file in it, and exits; this process finds it running,
    reattaches (a runtime of its own, then SimpleBox reuse_existing) and
    sees both (the same VM, not a reboot); closing that runtime leaves the
    box running; removing it leaves no shim."""
    need_image("alpine:latest")
    name = f"pytest-detach-{uuid.uuid4().hex[:6]}"
    p = subprocess.run([sys.executable, "-c", _DETACHED_CHILD, name], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    box_id, sleep_pid, shim_pid, vmm_pid = p.stdout.split()
    shim_pid, vmm_pid = int(shim_pid), int(vmm_pid)
    rt = Boxlite.default()
    try:
        assert _alive(shim_pid), "the detached box's shim died with its creator"
        assert run(rt.get_info(name)).status == "running"

        other = Boxlite(boxlite.Options())
        box = run(other.get(name))
        r = run(box.run("sh", "-c", f"cat /dev/shm/mark; kill -0 {sleep_pid} && echo alive"))
        assert r.stdout == "in-ram\nalive\n", r
        other.close()  # closing a runtime that did not start it leaves it running
        assert _alive(shim_pid) and run(rt.get_info(name)).status == "running"

        async def reuse():
            async with boxlite.SimpleBox(image="alpine:latest", name=name, reuse_existing=True, runtime=rt,
                                         auto_remove=False) as sb:
                assert sb.created is False and sb.id == box_id
                return (await sb.exec("cat", "/dev/shm/mark")).stdout

        assert run(reuse()) == "in-ram\n"  # its exit stops the box
        assert run(rt.get_info(name)).status == "stopped"
    finally:
        run(rt.remove(name, force=True))
    assert run(rt.get(name)) is None
    deadline = time.monotonic() + 20
    while (_alive(shim_pid) or _alive(vmm_pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(shim_pid) and not _alive(vmm_pid), "shim or VMM left after remove"
