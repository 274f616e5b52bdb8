"""python:slim: BoxLite's CodeBox example run unchanged as a program, then one
shared CodeBox for the rest."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

import boxlite
from conftest import REST, need_image

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.local_only("the example program opens its own default runtime: a local one")
def test_doc_example_unchanged():
    need_image("python:slim")
    p = subprocess.run([sys.executable, str(EXAMPLES / "codebox_hello.py")], capture_output=True, text=True,
                       timeout=300, cwd=str(EXAMPLES.parent.parent))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "Hello from a microVM!\n\n"


@pytest.fixture(scope="module")
def session_example():
    """The persistent-session example as a program, started at once so that
    its box boots while the module's box works."""
    if REST:
        yield None  # the example opens a local runtime of its own (test_session_example_program)
        return
    need_image("python:slim")
    p = subprocess.Popen([sys.executable, str(EXAMPLES / "codebox_session.py")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=str(EXAMPLES.parent.parent))
    yield p
    p.kill()
    p.wait()


@pytest.fixture(scope="module")
def cb(run, session_example):
    need_image("python:slim")
    box = boxlite.CodeBox(memory_mib=512)
    run(box.__aenter__())
    yield box
    run(box.__aexit__(None, None, None))


def test_traceback_in_stderr(cb, run):
    r = run(cb.exec("/usr/local/bin/python", "-c", "raise ValueError('boom')"))
    assert r.exit_code != 0
    assert "Traceback (most recent call last)" in r.stderr and "ValueError: boom" in r.stderr
    assert r.stdout == ""


def test_quickstart_exec(cb, run):
    r = run(cb.exec("python", "-c", "print('Hello from BoxLite!')"))
    assert (r.exit_code, r.stdout) == (0, "Hello from BoxLite!\n")


def test_run_returns_stdout(cb, run):
    assert run(cb.run("x = sum(range(100))\nprint(f'Sum of 0-99: {x}')")) == "Sum of 0-99: 4950\n"


def test_run_failure_keeps_the_traceback(cb, run):
    out = run(cb.run("print('before'); 1/0"))
    assert out.startswith("before\n") and "ZeroDivisionError" in out


def test_run_timeout(cb, run):
    with pytest.raises(boxlite.TimeoutError):
        run(cb.run("while True: pass", timeout=1))
    assert run(cb.run("print('alive')")) == "alive\n"


def test_run_large_code(cb, run):
    blob = os.urandom(200_000)
    code = f"import base64, hashlib\nb = base64.b64decode('{base64.b64encode(blob).decode()}')\nprint(hashlib.sha256(b).hexdigest())\n"
    assert len(code) > 200_000  # beyond one argument's limit: goes through stdin
    assert run(cb.run(code)) == hashlib.sha256(blob).hexdigest() + "\n"


def test_run_script(cb, run, tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import sys\nprint('script on', sys.version_info[0])\n")
    assert run(cb.run_script(str(script))) == "script on 3\n"


def test_run_bad_input(cb, run):
    with pytest.raises(TypeError, match="code"):
        run(cb.run(b"print(1)"))
    with pytest.raises(boxlite.InvalidArgumentError):
        run(cb.run("print(1)", timeout=-2))
    with pytest.raises(TypeError, match="package"):
        run(cb.install_package(None))


def _tiny_wheel(path: pathlib.Path) -> pathlib.Path:
    whl = path / "tinypkg-0.1-py3-none-any.whl"
    files = {
        "tinypkg/__init__.py": b"ANSWER = 42\n",
        "tinypkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
        "tinypkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(whl, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append("tinypkg-0.1.dist-info/RECORD,,")
        z.writestr("tinypkg-0.1.dist-info/RECORD", "\n".join(record) + "\n")
    return whl


def test_install_package_offline(cb, run, tmp_path):
    whl = _tiny_wheel(tmp_path)
    run(cb.copy_in(str(whl), "/root/"))
    out = run(cb.install_package(f"/root/{whl.name}"))
    assert "Successfully installed tinypkg-0.1" in out, out
    assert run(cb.run("import tinypkg; print(tinypkg.ANSWER)")) == "42\n"


# ---- persistent sessions ------------------------------------------------------------


@pytest.mark.local_only("the example program opens its own default runtime: a local one")
def test_session_example_program(session_example):
    out, err = session_example.communicate(timeout=300)
    assert session_example.returncode == 0, err
    assert out == '{"a": 2, "b": 4, "c": 6}\n\n'


def test_run_keeps_state(cb, run):
    run(cb.run("import json\ndef process(data):\n    return {k: v * 2 for k, v in data.items()}\n"))
    out = run(cb.run('output = process({"a": 1, "b": 2, "c": 3})\nprint(json.dumps(output))'))
    assert out == '{"a": 2, "b": 4, "c": 6}\n'
    # __main__, blank lines inside a block, output without a trailing newline
    code = "if __name__ == '__main__':\n    total = 0\n\n    for i in range(4):\n        total += i\nprint(total, end='')"
    assert run(cb.run(code)) == "6"


def test_run_cell_value_and_streams(cb, run):
    r = run(cb.run_cell("import sys\nprint('out')\nprint('err', file=sys.stderr)\n{'answer': 6 * 7}"))
    assert isinstance(r, boxlite.CellResult) and r.success
    assert (r.stdout, r.stderr, r.value, r.error, r.exit_code) == ("out\n", "err\n", "{'answer': 42}", None, 0)
    assert run(cb.run_cell("None")).value is None
    assert run(cb.run("'not printed'")) == ""


def test_run_cell_exception(cb, run):
    r = run(cb.run_cell("def check(v):\n    if v < 0:\n        raise ValueError(f'negative: {v}')\n\ncheck(-1)"))
    assert r.error is not None and not r.success
    assert (r.error.type, r.error.message, r.exit_code) == ("ValueError", "negative: -1", 1)
    tb = r.error.traceback
    assert tb.startswith("Traceback (most recent call last):\n") and tb.endswith("ValueError: negative: -1\n")
    assert 'File "<cell-' in tb and "line 5, in <module>" in tb and "line 3, in check" in tb
    assert "boxlite-session" not in tb
    r = run(cb.run_cell("import sys; sys.exit(7)"))
    assert (r.error.type, r.exit_code) == ("SystemExit", 7)
    assert run(cb.run_cell("1 +")).error.type == "SyntaxError"


def test_timeout_keeps_state(cb, run):
    run(cb.run("x = 1"))
    with pytest.raises(boxlite.TimeoutError) as e:
        run(cb.run("print('spinning', flush=True)\nwhile True: pass", timeout=1))
    assert e.value.result.timed_out and not e.value.result.restarted
    assert e.value.stdout == "spinning\n" and "keeps its state" in str(e.value)
    assert run(cb.run("print(x)")) == "1\n"


def test_cell_ignoring_interrupt_restarts_session(cb, run):
    run(cb.run("y = 2"))
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
    with pytest.raises(boxlite.TimeoutError, match="restarted") as e:
        run(cb.run(code, timeout=1))
    assert e.value.result.restarted and "gone" in str(e.value)
    assert run(cb.run("print('y' in globals())")) == "False\n"
    assert run(cb.session()).info()["restarts"] >= 1


def test_large_output(cb, run):
    out = run(cb.run("import sys\nsys.stdout.write('z' * 3_000_000)\nprint()\nfor i in range(10000): print(i)"))
    assert len(out) == 3_000_001 + sum(len(f"{i}\n") for i in range(10000))
    assert out.endswith("\n9999\n")


def test_stream(cb, run):
    async def go():
        cell = cb.stream("import time, sys\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)\n"
                         "print('done', file=sys.stderr)\n'value'")
        chunks = []
        async for chunk in cell:
            chunks.append((chunk.stream, chunk.text, cell._h is not None and raw_done(cell)))
        return chunks, await cell.result()

    def raw_done(cell):
        from boxlite import _ffi

        return _ffi.cell_result(cell._h, 0)[0] != _ffi.AGAIN

    chunks, result = run(go())
    assert "".join(t for s, t, _ in chunks if s == "stdout") == "0\n1\n2\n"
    assert "".join(t for s, t, _ in chunks if s == "stderr") == "done\n"
    assert not chunks[0][2], "the first chunk came only after the cell ended"
    assert result.value == "'value'" and result.stdout == ""


def test_cancel_interrupts_cell(cb, run):
    async def go():
        await cb.run("z = 3")
        task = asyncio.ensure_future(cb.run("import time; time.sleep(60)"))
        await asyncio.sleep(1.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await asyncio.wait_for(cb.run("print(z)"), 30)

    assert run(go()) == "3\n"


def test_sessions_and_reset(cb, run):
    async def go():
        await cb.run("w = 'default'")
        other = await cb.new_session()
        try:
            assert await other.run("print('w' in globals())") == "False\n"
            await other.run("w = 'other'")
            assert await cb.run("print(w)") == "default\n"
        finally:
            other.close()
        await cb.reset()
        return await cb.run("print('w' in globals())")

    assert run(go()) == "False\n"



def test_sync_session_by_delegation(cb, run):
    # The sync API delegates: a PythonSession's methods are there, blocking.
    from boxlite.sync_api import SyncPythonSession

    s = SyncPythonSession(run(cb.new_session()))
    try:
        s.run("x = 6")
        assert s.run_cell("x * 7").value == "42"
        assert "".join(c.text for c in s.stream("print(x)")) == "6\n"
        s.reset()
        assert s.run_cell("'x' in globals()").value == "False"
        assert s.info()["kind"] == "python"
    finally:
        s.close()
    assert s.closed


def test_sync_api_has_every_async_method():
    # A method or property added to an async class is in its sync class
    # without another copy (sync_api builds them by delegation).
    import inspect

    from boxlite import sync_api

    assert len(sync_api._SYNC) >= 12
    for async_cls, sync_cls in sync_api._SYNC.items():
        for name in dir(async_cls):
            attr = inspect.getattr_static(async_cls, name)
            if name.startswith("_") or isinstance(attr, (staticmethod, classmethod)):
                continue
            if inspect.iscoroutinefunction(attr) or isinstance(attr, property) or inspect.isasyncgenfunction(attr):
                assert hasattr(sync_cls, name), f"{sync_cls.__name__} lacks {name}"

    class Later(boxlite.PythonSession):
        async def later(self, n):
            return n + 1

    class SyncLater(sync_api._Sync, of=Later):
        pass

    assert SyncLater(Later(None, None)).later(1) == 2


def test_session_raw_layer(cb, run):
    import json

    from boxlite import _ffi as raw

    s = run(cb.session())
    assert json.loads(raw.session_run(s._h, "6 * 7"))["value"] == "42"
    info = s.info()
    assert info["kind"] == "python" and info["pid"] > 0 and info["python"].startswith("3.")
    with pytest.raises(TypeError, match="boxlite_session_t"):
        raw.session_info(cb.box._h)  # a box handle is not a session
    with pytest.raises(boxlite.InvalidArgumentError, match="not a shell one"):
        raw.session_exec(s._h, '{"argv": ["true"]}')
    with pytest.raises(boxlite.InvalidArgumentError, match="ruby"):
        raw.session_new(cb.box._h, "ruby", None)
    with pytest.raises(boxlite.InvalidArgumentError, match="unknown field"):
        raw.session_new(cb.box._h, "python", '{"pyhton": "x"}')
    with pytest.raises(boxlite.NotFoundError):
        raw.session_new(cb.box._h, "python", '{"python": "/no/python3"}')
    with pytest.raises(TypeError, match="code"):
        cb.stream(42)
    with pytest.raises(boxlite.InvalidArgumentError, match="timeout"):
        run(cb.run_cell("1", timeout=-1))


def test_run_output_truncated_marker(cb, run):
    # A cell's output is collected up to the runtime's limit (64 MiB) per stream.
    r = run(cb.run_cell("import sys; sys.stdout.write('x' * (70 << 20)); print('e', file=sys.stderr)"))
    assert len(r.stdout) == 64 << 20 and r.stdout_truncated and not r.stderr_truncated and r.stderr == "e\n"
    del r
    out = run(cb.run("import sys; sys.stdout.write('y' * 5000)", output_limit_bytes=1000))
    assert out == "y" * 1000 + "\n[output truncated: stdout was longer than 1000 bytes; the rest was dropped]\n"
    out = run(cb.run("import sys; sys.stdout.write('y' * 5000); 1/0", output_limit_bytes=1000))
    assert out.startswith("y" * 1000 + "Traceback") and out.endswith(
        "\n[output truncated: stdout was longer than 1000 bytes; the rest was dropped]\n")
    assert run(cb.run("print('small')")) == "small\n"
    r = run(cb.run_cell("print('small')"))
    assert not r.stdout_truncated and not r.stderr_truncated


@pytest.mark.local_only("prestart: a local template VM parks run()'s interpreter; a REST box starts it at first use")
def test_run_takes_over_the_prestarted_interpreter(run):
    """A CodeBox started from a template finds run()'s interpreter started
    (its template VM parked it): the first run() is answered by a process
    that was there before it."""
    need_image("python:slim")

    async def main():
        async with boxlite.CodeBox(memory_mib=512) as box:
            info = box.info()
            assert info.prestart == ["python"]
            assert info.start in ("template", "new-template"), (info.start, info.start_note)
            r = await box.exec("sh", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null"
                               " | grep -q boxlite-sessio[n] && echo ${p#/proc/}; done; true")
            parked = r.stdout.split()
            assert len(parked) == 1, r.stdout
            assert (await box.run("import os; print(os.getpid())")).strip() == parked[0]

    run(main())
