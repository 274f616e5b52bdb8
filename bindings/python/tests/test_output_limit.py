"""Output collected from a command is capped per stream (output_limit_bytes,
default 64 MiB): the rest is read and dropped, the result says so, the host
does not grow with the box's output. One alpine:latest box for the module."""

from __future__ import annotations

import asyncio

import pytest

import boxlite
from boxlite.session import CellError, CellResult, ShellSession
from conftest import need_image

MiB = 1 << 20


@pytest.fixture(scope="module")
def box(run):
    need_image("alpine:latest")
    b = boxlite.SimpleBox(image="alpine:latest", memory_mib=256)
    run(b.__aenter__())
    yield b
    run(b.__aexit__(None, None, None))


def _reset_peak() -> int:
    """Resets VmHWM to the current RSS (Linux clear_refs) and returns that RSS."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _vm("VmRSS")


def _vm(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) << 10
    raise AssertionError(f"{key} not in /proc/self/status")


BIG = "head -c %d /dev/zero; echo err >&2" % (96 * MiB)  # 96 MiB of stdout, then a line of stderr


# ---- collected in this package (any library) ----------------------------------------------------


def test_exec_caps_at_64_mib_and_host_stays_small(box, run):
    base = _reset_peak()
    r = run(box.exec("sh", "-c", BIG))
    grew = _vm("VmHWM") - base
    assert r.exit_code == 0
    assert len(r.stdout) == 64 * MiB and r.stdout_truncated
    assert r.stderr == "err\n" and not r.stderr_truncated
    del r
    print(f"exec of 96 MiB: peak RSS grew by {grew / MiB:.0f} MiB")
    # 64 MiB kept as bytes, then as the str of the result (about 130 MiB at
    # the peak); collecting all 96 MiB as bytes, a copy and a str is ~290
    assert grew < 200 * MiB, f"peak RSS grew by {grew / MiB:.0f} MiB"


def test_exec_limit_per_call(box, run):
    r = run(box.exec("sh", "-c", "seq 1 20000; seq 1 20000 >&2", output_limit_bytes=1000))
    full = "".join(f"{i}\n" for i in range(1, 20001))
    assert r.stdout == full[:1000] and r.stdout_truncated
    assert r.stderr == full[:1000] and r.stderr_truncated
    r = run(box.exec("sh", "-c", "seq 1 20000", output_limit_bytes=len(full)))
    assert r.stdout == full and not r.stdout_truncated  # exactly the limit: nothing dropped
    r = run(box.exec("echo", "small"))
    assert (r.stdout, r.stdout_truncated, r.stderr_truncated) == ("small\n", False, False)


def test_exec_limit_checked(box, run):
    for bad, exc in ((0, boxlite.InvalidArgumentError), (-5, boxlite.InvalidArgumentError),
                     ("10", TypeError), (True, TypeError), (1.5, TypeError)):
        with pytest.raises(exc, match="output_limit_bytes"):
            run(box.exec("true", output_limit_bytes=bad))
    with pytest.raises(TypeError, match="output_limit_bytes"):
        boxlite.Options(output_limit_bytes="1").to_json()


def test_wait_without_reading_drops_past_the_limit(box, run):
    # Nobody reads while wait() runs: the process is not blocked, and only
    # output_limit_bytes of unread output per stream is held.
    async def go():
        ex = await box.box.exec("sh", "-c", "head -c %d /dev/zero" % (20 * MiB), output_limit_bytes=2 * MiB)
        try:
            st = await asyncio.wait_for(ex.wait(), 120)
            data = await ex.stdout().read()
            return st, data, ex.stdout_truncated, ex.stderr_truncated
        finally:
            ex.close()

    st, data, out_cut, err_cut = run(go())
    assert st.exit_code == 0 and len(data) == 2 * MiB and out_cut and not err_cut


def test_streaming_reader_gets_everything(box, run):
    # A reader that keeps up while wait() is awaited loses nothing.
    async def go():
        ex = await box.box.exec("sh", "-c", "head -c %d /dev/zero" % (20 * MiB), output_limit_bytes=8 * MiB)
        try:
            async def count():
                n = 0
                async for b in ex.stdout().iter_bytes():
                    n += len(b)
                return n

            n, st = await asyncio.gather(count(), ex.wait())
            return n, ex.stdout_truncated
        finally:
            ex.close()

    assert run(go()) == (20 * MiB, False)


def test_cell_result_marker():
    r = CellResult(stdout="abc", stderr="", stdout_truncated=True, output_limit_bytes=3)
    assert r.output == "abc\n[output truncated: stdout was longer than 3 bytes; the rest was dropped]\n"
    r = CellResult.from_json('{"stdout": "ab", "stderr": "tb", "stdout_truncated": true, "stderr_truncated": true,'
                             ' "error": {"type": "E", "message": "m", "traceback": "T"}}', 2)
    assert r.stdout_truncated and r.stderr_truncated and r.error == CellError("E", "m", "T")
    assert r.output == "abtbT\n[output truncated: stdout and stderr was longer than 2 bytes; the rest was dropped]\n"
    assert CellResult(stdout="x", stderr="y" * 5, stderr_truncated=True).output == "x"  # stderr not in output
    assert CellResult.from_json('{"stdout": "x"}').output == "x"


# ---- collected by the library (need the C ABI's output limit) ----------------------------------


def test_box_run_caps_at_64_mib(box, run):
    base = _reset_peak()
    r = run(box.box.run("sh", "-c", BIG))
    grew = _vm("VmHWM") - base
    assert len(r.stdout) == 64 * MiB and r.stdout_truncated
    assert r.stderr == "err\n" and not r.stderr_truncated
    del r
    # the library's 64 MiB, its copy for C, Python's bytes and str: under 300 MiB
    assert grew < 300 * MiB, f"peak RSS grew by {grew / MiB:.0f} MiB"


def test_box_run_limit_per_call(box, run):
    r = run(box.box.run("sh", "-c", "seq 1 20000; echo e >&2", output_limit_bytes=1000))
    assert len(r.stdout) == 1000 and r.stdout_truncated and not r.stderr_truncated and r.stderr == "e\n"
    r = run(box.box.run("echo", "small"))
    assert (r.stdout, r.stdout_truncated, r.stderr_truncated) == ("small\n", False, False)


def test_shell_session_limit(box, run):
    async def go():
        sh = await ShellSession.start(box.box)
        try:
            small = await sh.exec("echo", "hi")
            cut = await sh.exec("eval", "seq 1 20000", output_limit_bytes=1000)
            big = await sh.exec("eval", "head -c %d /dev/zero" % (72 * MiB))
            return small, cut, big
        finally:
            sh.close()

    small, cut, big = run(go())
    assert small.stdout == "hi\n" and not small.stdout_truncated
    assert len(cut.stdout) == 1000 and cut.stdout_truncated
    assert len(big.stdout) == 64 * MiB and big.stdout_truncated


def test_runtime_option(run, tmp_path):
    # A runtime with a 4 KiB limit: SimpleBox.exec and Box.run both use it.
    import os

    rt = boxlite.Boxlite(boxlite.Options(home_dir=os.environ["BOXLITE_HOME"], output_limit_bytes=4096))
    try:
        assert rt.output_limit_bytes == 4096

        async def go():
            async with boxlite.SimpleBox(image="alpine:latest", memory_mib=256, runtime=rt) as b:
                return await b.exec("sh", "-c", "seq 1 20000"), await b.box.run("sh", "-c", "seq 1 20000")

        e, r = run(go())
        assert len(e.stdout) == 4096 and e.stdout_truncated
        assert len(r.stdout) == 4096 and r.stdout_truncated
    finally:
        rt.close()
