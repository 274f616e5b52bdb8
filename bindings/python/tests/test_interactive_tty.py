"""InteractiveBox(tty=True) used as a person would: a small program that
forwards its terminal to the box's shell, run inside tmux, typed at with
send-keys and read with capture-pane. One box boot."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import need_image

PROGRAM = textwrap.dedent(
    """
    import asyncio
    import boxlite

    async def main():
        async with boxlite.InteractiveBox(image="alpine:latest", tty=True, memory_mib=256) as box:
            await box.wait()
            print("PROGRAM-DONE exit=%d" % box.exit_status.exit_code, flush=True)

    asyncio.run(main())
    """
)


def _tmux() -> str:
    path = shutil.which("tmux")
    if path is None:  # `make setup` installs it; a test installs nothing
        pytest.fail("tmux is not installed: run `make setup` (it is in the Makefile's APT_PKGS)")
    return path


def test_interactive_tty_in_tmux(tmp_path):
    need_image("alpine:latest")
    tmux = _tmux()
    sock = str(tmp_path / "tmux.sock")
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = dict(os.environ, TERM="xterm")

    def t(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([tmux, "-S", sock, *args], env=env, capture_output=True, text=True)

    def screen() -> str:
        return t("capture-pane", "-p", "-t", "bx").stdout

    def wait_screen(pattern: str, within: float) -> str:
        rx = re.compile(pattern, re.M)
        deadline = time.monotonic() + within
        shown = ""
        while time.monotonic() < deadline:
            shown = screen()
            if rx.search(shown):
                return shown
            time.sleep(0.1)
        pytest.fail(f"the screen never showed {pattern!r}:\n{shown}")

    script = f"{sys.executable} {prog}; echo program-rc=$?; sleep 600"
    r = t("new-session", "-d", "-s", "bx", "-x", "100", "-y", "30", "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    try:
        wait_screen(r"^/ #\s*$", 120)  # the box booted and its shell prompts
        t("send-keys", "-t", "bx", "echo hi-from-tty", "Enter")
        wait_screen(r"^hi-from-tty\s*$", 30)
        # The terminal has the window's size, and follows it.
        t("send-keys", "-t", "bx", "clear; stty size", "Enter")
        wait_screen(r"^30 100\s*$", 30)
        t("resize-window", "-t", "bx", "-x", "120", "-y", "40")
        t("send-keys", "-t", "bx", "clear; stty size", "Enter")
        wait_screen(r"^40 120\s*$", 30)
        t("send-keys", "-t", "bx", "exit", "Enter")
        shown = wait_screen(r"^program-rc=\d+", 60)
        assert re.search(r"^PROGRAM-DONE exit=0\s*$", shown, re.M), shown
        assert re.search(r"^program-rc=0\s*$", shown, re.M), shown
    finally:
        t("kill-server")  # our own server, on our own socket


def test_interactive_tty_stdin_at_its_end(tmp_path):
    # </dev/null: the ^D the end of input types must reach the shell, which
    # then exits, rather than be lost while its line editor starts.
    need_image("alpine:latest")
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    r = subprocess.run([sys.executable, str(prog)], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert "PROGRAM-DONE exit=0" in r.stdout
