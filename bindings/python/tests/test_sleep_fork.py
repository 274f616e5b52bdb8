"""Boxes that sleep and wake (issue 23's must-shows, in Python): a CodeBox's
interpreter outlives the process that made it, a pause and a SIGKILL; a
CodeBox forks with its interpreter; snapshots keep a box's memory."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest

import boxlite
from boxlite import Boxlite, BoxOptions
from conftest import need_image, shim_children

PKG = pathlib.Path(__file__).resolve().parents[1]

FIRST = textwrap.dedent("""
    import asyncio, os, signal, sys
    import boxlite

    async def main(name):
        cb = boxlite.CodeBox(name=name, reuse_existing=True, auto_remove=False, detach=True, memory_mib=512)
        await cb.start()
        await cb.run("x = 42\\nf = open('/tmp/notes', 'w+')\\nf.write('still open')\\nf.flush()")
        await cb.pause()
        print("paused", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no clean exit: the box sleeps on

    asyncio.run(main(sys.argv[1]))
""")

SECOND = textwrap.dedent("""
    import asyncio, sys
    import boxlite

    async def main(name):
        async with boxlite.CodeBox(name=name, reuse_existing=True) as cb:
            assert not cb.created
            print(await cb.run("f.seek(0)\\nprint(x, f.read())"), end="")

    asyncio.run(main(sys.argv[1]))
""")


@pytest.mark.local_only("named sessions and pause need a local runtime")
def test_codebox_outlives_its_process(run):
    need_image("python:slim")
    name = f"pytest-wake-{uuid.uuid4().hex[:8]}"
    try:
        p = subprocess.run([sys.executable, "-c", FIRST, name], capture_output=True, text=True, timeout=600, cwd=str(PKG))
        assert p.returncode == -signal.SIGKILL and p.stdout == "paused\n", (p.returncode, p.stdout, p.stderr)
        box = run(Boxlite.default().get(name))
        assert box is not None and box.info().status == "paused"
        assert not shim_children(), "a paused box has no process"
        p = subprocess.run([sys.executable, "-c", SECOND, name], capture_output=True, text=True, timeout=600, cwd=str(PKG))
        assert p.returncode == 0, p.stderr
        assert p.stdout == "42 still open\n", p.stdout
    finally:
        run(Boxlite.default().remove(name, force=True))


@pytest.mark.local_only("fork needs a local runtime")
def test_codebox_fork(run):
    need_image("python:slim")
    cb = boxlite.CodeBox(memory_mib=512)
    run(cb.start())
    forks = []
    try:
        assert run(cb.run("x = 42\nprint(x)")) == "42\n"
        forks = run(cb.fork(3))
        assert len(forks) == 3 and all(isinstance(f, boxlite.CodeBox) for f in forks)
        for f in forks:
            assert run(f.run("print(x)")) == "42\n"
        run(forks[0].run("x = 7"))
        assert [run(f.run("print(x)")) for f in forks] == ["7\n", "42\n", "42\n"]
        assert run(cb.run("print(x)")) == "42\n"
        seen = set()
        for b in [cb] + forks:
            ident = run(b.run("import socket\nprint(open('/proc/sys/kernel/random/uuid').read().strip(),"
                              " open('/proc/sys/kernel/random/boot_id').read().strip(), socket.gethostname())")).split()
            assert len(ident) == 3 and not (set(ident) & seen), (ident, seen)
            seen |= set(ident)
    finally:
        for f in forks:
            run(f.stop())
        run(cb.stop())


@pytest.mark.local_only("memory snapshots need a local runtime")
def test_memory_snapshot(run):
    need_image("alpine:latest")
    rt = Boxlite.default()
    box = run(rt.create(BoxOptions(image="alpine:latest", auto_remove=False)))
    try:
        run(box.start())
        run(box.run("sh", "-c", "echo one > /root/f; sync"))
        si = run(box.snapshot.create("m", memory=True))
        assert si.memory and si.memory_bytes > 0 and box.info().status == "running", si
        run(box.run("sh", "-c", "echo two > /root/f; sync"))
        with pytest.raises(TypeError):
            run(box.snapshot.create("bad", memory="yes"))
        run(box.stop())
        run(box.snapshot.restore("m"))
        assert box.info().status == "paused"
        assert run(box.run("cat", "/root/f")).stdout == "one\n"
        assert [s.name for s in run(box.snapshot.list())] == ["m"]
        run(box.stop())
        with pytest.raises(boxlite.InvalidStateError):
            run(box.snapshot.create("none", memory=True))
    finally:
        run(box.remove(force=True))
