"""BoxLite's documented programs run unchanged: the CodeBox quick example
and the persistent-shell guide's programmatic session (copied verbatim from
BoxLite's docs), each in a process of its own, once with the images and once
with an empty home and no registry answering, where they must print their
"failed to start" line, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import need_image

CODEBOX_QUICK = '''
import asyncio

import boxlite

async def main() -> None:
    # CodeBox defaults to the "python:slim" image; no arguments required
    try:
        async with boxlite.CodeBox() as cb:
            # run() hands the code to python -c inside the sandbox and returns the stdout string
            output = await cb.run("print('Hello from a microVM!')")
            print(output)  # -> Hello from a microVM!
    except RuntimeError as e:
        # Startup issues such as image pull failure / no virtualization raise a standard RuntimeError
        print(f"CodeBox failed to start: {e}")

if __name__ == "__main__":
    asyncio.run(main())
'''

PERSISTENT_SHELL = '''
import asyncio

from boxlite import InteractiveBox


async def main() -> None:
    # tty=False: drive it from code, do not forward I/O to the host terminal.
    # The microVM stays up for the whole block, then auto_remove tears it down.
    try:
        async with InteractiveBox(image="alpine:latest", tty=False) as box:
            print(f"shell session up, box id = {box.id}")

            # Commands go into the same live session. Pass the command and its
            # arguments separately — never as one joined string.
            kernel = await box.exec("uname", "-a")
            print("kernel:", kernel.stdout.strip())

            # A non-zero exit does not raise — check exit_code yourself
            missing = await box.exec("ls", "/no/such/path")
            if missing.exit_code != 0:
                print(f"expected failure (exit={missing.exit_code}): {missing.stderr.strip()}")

            # The point of this guide: state survives between calls
            await box.exec("sh", "-c", "echo 'persisted across calls' > /tmp/marker.txt")
            marker = await box.exec("cat", "/tmp/marker.txt")
            print("read back:", marker.stdout.strip())

            # info() is synchronous — do not await it
            print("box info:", type(box.info()).__name__)
    except RuntimeError as exc:
        print(f"sandbox failed to start: {exc}")


asyncio.run(main())
'''


def run(program: str, home: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, BOXLITE_HOME=home, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("program,image,want", [
    (CODEBOX_QUICK, "python:slim", ["Hello from a microVM!"]),
    (PERSISTENT_SHELL, "alpine:latest", ["shell session up, box id = ", "kernel: Linux boxlite",
                                          "expected failure (exit=1): ls: /no/such/path", "read back: persisted across calls",
                                          "box info: BoxInfo"]),
])
def test_documented_program(program, image, want, tmp_path):
    need_image(image)
    r = run(program, os.environ["BOXLITE_HOME"])
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    for line in want:
        assert line in r.stdout, (line, r.stdout, r.stderr)

    # No image, no registry: the documented except RuntimeError catches it.
    r = run(program, str(tmp_path / "empty-home"))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "failed to start: " in r.stdout and image in r.stdout, r.stdout
