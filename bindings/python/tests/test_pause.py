"""Pause and resume with memory (box.pause / box.resume, async and sync): a
paused box has no process, says "paused" in its info and the runtime's
metrics, and comes back as the same machine (same boot id, its /tmp), by
resume() or by the next exec. box.fork makes running copies of it."""

from __future__ import annotations

import uuid

import pytest

import boxlite
from boxlite import Boxlite, BoxOptions
from boxlite.sync_api import SyncBox
from conftest import need_image, shim_children


@pytest.mark.local_only("a REST runtime refuses pause (unsupported)")
def test_pause_resume(run):
    need_image("alpine:latest")
    rt = Boxlite.default()
    name = f"pytest-pause-{uuid.uuid4().hex[:8]}"
    box = run(rt.create(BoxOptions(image="alpine:latest", auto_remove=False), name=name))
    try:
        run(box.start())
        before = run(box.run("sh", "-c", "echo 42 > /tmp/f; cat /proc/sys/kernel/random/boot_id")).stdout
        assert shim_children(), "a running box has a shim"

        saved = run(box.pause())
        assert saved["state_bytes"] > 0 and saved["save_ms"] >= 0, saved
        assert box.info().status == "paused"
        assert not shim_children(), "a paused box has no process"
        assert run(rt.metrics()).num_paused_boxes >= 1
        assert run(box.pause()) is not None  # a paused box: no-op

        # the next exec resumes it: the same machine
        r = run(box.run("sh", "-c", "cat /tmp/f; cat /proc/sys/kernel/random/boot_id"))
        assert r.stdout == "42\n" + before, r
        assert box.info().status == "running"
        assert run(rt.metrics()).num_paused_boxes == 0

        # the sync API on the same box, with an explicit resume
        sync = SyncBox._of(box)
        sync.pause()
        assert sync.info().status == "paused" and not shim_children()
        sync.resume()
        sync.resume()  # a running box: no-op
        assert sync.info().status == "running" and shim_children()
        assert run(box.run("cat", "/proc/sys/kernel/random/boot_id")).stdout == before

        # fork: two running copies with /tmp/f, each its own machine
        forks = run(box.fork(2, names=[name + "-a"]))
        try:
            assert len(forks) == 2 and forks[0].name == name + "-a"
            hosts = {run(box.run("hostname")).stdout}
            for f in forks:
                assert f.info().status == "running"
                r = run(f.run("sh", "-c", "cat /tmp/f; hostname"))
                assert r.stdout.startswith("42\n") and r.stdout[3:] not in hosts, (r, hosts)
                hosts.add(r.stdout[3:])
            with pytest.raises(TypeError):
                run(box.fork("2"))
            with pytest.raises(boxlite.InvalidArgumentError):
                run(box.fork(0))
        finally:
            for f in forks:
                run(f.remove(force=True))
                f.close()

        run(box.stop())
        with pytest.raises(boxlite.InvalidStateError):
            run(box.fork())
        with pytest.raises(boxlite.InvalidStateError):
            run(box.pause())
        with pytest.raises(boxlite.InvalidStateError):
            run(box.resume())
    finally:
        run(rt.remove(name, force=True))
        box.close()
