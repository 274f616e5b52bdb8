"""python:slim: BoxLite's CodeBox example run unchanged as a program, then one
shared CodeBox for the rest."""

from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

import boxlite
from conftest import need_image

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def test_doc_example_unchanged():
    need_image("python:slim")
    p = subprocess.run([sys.executable, str(EXAMPLES / "codebox_hello.py")], capture_output=True, text=True,
                       timeout=300, cwd=str(EXAMPLES.parent.parent))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "Hello from a microVM!\n\n"


@pytest.fixture(scope="module")
def cb(run):
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
