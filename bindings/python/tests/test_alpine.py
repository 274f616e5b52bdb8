"""One alpine:latest box (the busybox stand-in) for the whole module, driven
through InteractiveBox(tty=False) as in BoxLite's docs: commands, streaming,
stdin, signals, timeouts, file copy, bad input, use after close."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest

import boxlite
from conftest import need_image


@pytest.fixture(scope="module")
def box(run):
    need_image("alpine:latest")
    b = boxlite.InteractiveBox(image="alpine:latest", tty=False, memory_mib=256)
    run(b.__aenter__())
    yield b
    run(b.__aexit__(None, None, None))


# ---- the documented examples -------------------------------------------------------


def test_uname(box, run):
    r = run(box.exec("uname", "-a"))
    assert r.exit_code == 0, r
    assert r.stdout.startswith("Linux ") and r.stderr == ""


def test_failing_command(box, run):
    r = run(box.exec("ls", "/no/such/path"))
    assert r.exit_code == 1
    assert "/no/such/path" in r.stderr and r.stdout == ""


def test_files_persist_between_execs(box, run):
    r = run(box.exec("sh", "-c", "echo 'hello from exec 1' > /root/note.txt"))
    assert r.exit_code == 0, r
    r = run(box.exec("cat", "/root/note.txt"))
    assert r.stdout == "hello from exec 1\n"


def test_info(box, run):
    info = box.info()
    assert info.id == box.id and len(info.id) == 12
    assert info.status == "running" and info.state.running
    assert info.accel in ("kvm", "tcg")
    assert info.memory_mib == 256

    async def awaited():  # BoxLite programs may await info()
        return await box.info()

    assert run(awaited()).id == box.id


# ---- the live shell ---------------------------------------------------------------------


def test_shell_keeps_cwd_and_variables(box, run):
    try:
        assert run(box.exec("cd", "/tmp")).exit_code == 0
        assert run(box.exec("export", "A=1")).exit_code == 0
        r = run(box.exec("sh", "-c", "pwd; echo $A"))
        assert (r.exit_code, r.stdout) == (0, "/tmp\n1\n")
        run(box.exec("eval", "B=two; greet() { echo \"hi $1\"; }"))
        assert run(box.exec("eval", 'echo "$B"; greet you')).stdout == "two\nhi you\n"
        assert run(box.exec("greet", "again")).stdout == "hi again\n"
        # arguments are words, never shell code
        assert run(box.exec("echo", "$A", "a'b", "x;y", "*")).stdout == "$A a'b x;y *\n"
        # env is for one command
        assert run(box.exec("sh", "-c", "echo $C", env={"C": "once"})).stdout == "once\n"
        assert run(box.exec("sh", "-c", "echo [$C]")).stdout == "[]\n"
        # exit codes and stderr per call, output without a newline
        r = run(box.exec("sh", "-c", "printf out; printf err >&2; exit 5"))
        assert (r.exit_code, r.stdout, r.stderr) == (5, "out", "err")
        # a timeout interrupts the command, not the shell
        with pytest.raises(boxlite.TimeoutError):
            run(box.exec("sleep", "30", timeout=1))
        assert run(box.exec("pwd")).stdout == "/tmp\n"
        assert box.shell_session.info()["restarts"] == 0
    finally:
        run(box.exec("cd", "/"))


# ---- SimpleBox.exec options ----------------------------------------------------------


def test_exec_env_cwd_user(box, run):
    r = run(box.exec("sh", "-c", 'echo "$GREETING|$(pwd)|$(id -u)"', env={"GREETING": "hi there"}, cwd="/tmp", user="box"))
    assert r.stdout == "hi there|/tmp|1000\n", r


def test_missing_command(box, run):
    r = run(box.exec("no-such-command", "x"))
    assert r.exit_code == 127 and "no-such-command" in r.error_message and r.stderr


def test_timeout_raises(box, run):
    with pytest.raises(boxlite.TimeoutError, match="timed out after 0.5 seconds"):
        run(box.exec("sleep", "30", timeout=0.5))
    with pytest.raises(TimeoutError):  # builtins.TimeoutError catches it too
        run(box.exec("sleep", "30", timeout=0.3))


def test_exact_output_and_binary(box, run):
    # 3 MiB through both streams at once: exact, in order, nothing lost
    r = run(box.exec("sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line$i; echo err$i >&2; i=$((i+1)); done"))
    assert r.stdout == "".join(f"line{i}\n" for i in range(3000))
    assert r.stderr == "".join(f"err{i}\n" for i in range(3000))
    r = run(box.exec("printf", "caf\\303\\251 \\342\\202\\254"))
    assert r.stdout == "café €"


def test_concurrent_execs(box, run):
    async def many():
        return await asyncio.gather(*(box.exec("sh", "-c", f"sleep 0.2; echo {i}") for i in range(6)))

    results = run(many())
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)]


# ---- streaming Execution ----------------------------------------------------------------


def test_streaming_stdin_stdout_stderr(box, run):
    async def go():
        ex = await box.box.exec("sh", "-c", "read a; echo got:$a; echo oops >&2; read b; echo got:$b; exit 3")
        stdin = ex.stdin()
        await stdin.send_input(b"one\n")
        out = ex.stdout()
        first = await out.__anext__()
        await stdin.write("two\n")
        await stdin.close()
        rest = [line async for line in out]
        err = [line async for line in ex.stderr()]
        st = await ex.wait()
        ex.close()
        return first, rest, err, st

    first, rest, err, st = run(go())
    assert first == "got:one\n" and rest == ["got:two\n"] and err == ["oops\n"]
    assert st.exit_code == 3 and not st.success


def test_boxlite_native_exec_style(box, run):
    # exec(cmd, [args], [(k, v)]) as in BoxLite's low-level docs
    async def go():
        ex = await box.box.exec("sh", ["-c", "echo $X; echo a; echo b"], [("X", "native")])
        lines = [line async for line in ex.stdout()]
        st = await ex.wait()
        ex2 = await box.box.exec("echo", args=["keyword", "args"], env={"UNUSED": "1"})
        kw = await ex2.stdout().read_text()
        await ex2.wait()
        with pytest.raises(TypeError, match="args"):
            await box.box.exec("echo", args="not-a-list")
        return lines, st, kw

    lines, st, kw = run(go())
    assert lines == ["native\n", "a\n", "b\n"] and st.exit_code == 0
    assert kw == "keyword args\n"


def test_wait_without_reading_does_not_deadlock(box, run):
    # 4 MiB of output nobody reads while waiting, then read after the exit
    async def go():
        ex = await box.box.exec("dd", "if=/dev/zero", "bs=65536", "count=64")
        st = await ex.wait()
        data = await ex.stdout().read()
        ex.close()
        return st, data

    st, data = run(go())
    assert st.exit_code == 0 and data == b"\0" * (4 << 20)


def test_wait_closes_untaken_stdin(box, run):
    async def go():
        ex = await box.box.exec("cat")  # would read stdin forever
        st = await asyncio.wait_for(ex.wait(), 20)
        ex.close()
        return st

    assert run(go()).exit_code == 0


def test_signal_kill_resize(box, run):
    async def go():
        ex = await box.box.exec("sleep", "30")
        with pytest.raises(boxlite.InvalidStateError):  # no terminal
            await ex.resize_tty(24, 80)
        with pytest.raises(boxlite.InvalidArgumentError):
            await ex.signal(0)
        with pytest.raises(boxlite.InvalidArgumentError):
            await ex.kill(2**40)
        with pytest.raises(TypeError):
            await ex.kill("TERM")
        await ex.signal(15)
        st = await ex.wait()
        ex2 = await box.box.exec("sleep", "30")
        await ex2.kill()
        st2 = await ex2.wait()
        with pytest.raises(boxlite.InvalidStateError):  # it has exited
            await ex2.kill()
        ex2.close()
        with pytest.raises(boxlite.ClosedError):  # use after close
            await ex2.kill()
        ex.close()
        ex.close()
        return st, st2

    st, st2 = run(go())
    assert (st.signal, st.exit_code) == (15, 128 + 15)
    assert (st2.signal, st2.exit_code) == (9, 128 + 9)


def test_close_kills_running_process(box, run):
    async def go():
        ex = await box.box.exec("sh", "-c", "echo started; sleep 30")
        assert await ex.stdout().__anext__() == "started\n"
        reader = asyncio.ensure_future(ex.stdout().__anext__())
        await asyncio.sleep(0.1)
        ex.close()
        with pytest.raises(StopAsyncIteration):
            await reader
        with pytest.raises(boxlite.ClosedError):
            await ex.wait()
        r = await box.exec("sh", "-c", "ps | grep -c '[s]leep 30' || true")
        return r.stdout.strip()

    assert run(go()) == "0"


def test_cancelled_exec_kills_the_process(box, run):
    async def go():
        task = asyncio.ensure_future(box.exec("sh", "-c", "sleep 31"))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.2)
        return (await box.exec("sh", "-c", "ps | grep -c '[s]leep 31' || true")).stdout.strip()

    assert run(go()) == "0"


def test_box_run_single_call(box, run):
    r = run(box.box.run("sh", "-c", "echo out; echo err >&2; exit 4"))
    assert (r.exit_code, r.stdout, r.stderr) == (4, "out\n", "err\n")
    r = run(box.box.run("sleep", "30", timeout=0.3))
    assert r.timed_out


# ---- bad input -------------------------------------------------------------------------------


def test_exec_bad_types(box, run):
    with pytest.raises(TypeError, match=r"env must be a dict"):
        run(box.exec("env", env=[("A", "1")]))
    with pytest.raises(TypeError, match=r"args\[1\]"):
        run(box.exec("echo", "a", 2))
    with pytest.raises(TypeError, match="cmd"):
        run(box.exec(None))
    with pytest.raises(TypeError, match="timeout"):
        run(box.exec("true", timeout="5"))
    with pytest.raises(boxlite.InvalidArgumentError, match="timeout"):
        run(box.exec("true", timeout=-1))
    with pytest.raises(boxlite.InvalidArgumentError, match="NUL"):
        run(box.exec("echo", "a\0b"))
    with pytest.raises(boxlite.InvalidArgumentError, match="empty"):
        run(box.exec(""))
    with pytest.raises(TypeError):
        run(box.box.exec("echo", ["a", 1]))
    with pytest.raises(TypeError, match="stdin data"):

        async def bad_stdin():
            ex = await box.box.exec("cat")
            try:
                await ex.stdin().write(12)
            finally:
                ex.close()

        run(bad_stdin())
    # the box is still fine
    assert run(box.exec("echo", "ok")).stdout == "ok\n"


def test_huge_arguments(box, run):
    with pytest.raises((boxlite.LimitError, boxlite.InvalidArgumentError)):
        run(box.exec("echo", "x" * (4 << 20)))
    with pytest.raises((boxlite.LimitError, boxlite.InvalidArgumentError)):
        run(box.exec("echo", *(["y" * 1000] * 5000)))
    assert run(box.exec("echo", "still alive")).stdout == "still alive\n"


def test_stdin_not_requested(box, run):
    async def go():
        ex = await box.box.exec("true", stdin=False)
        try:
            ex.stdin()
        finally:
            await ex.wait()
            ex.close()

    with pytest.raises(boxlite.InvalidStateError, match="stdin"):
        run(go())


# ---- files ---------------------------------------------------------------------------------------


def test_copy_file_roundtrip_binary(box, run, tmp_path):
    blob = os.urandom(3 << 20) + bytes(range(256)) * 4
    src = tmp_path / "blob.bin"
    src.write_bytes(blob)
    run(box.copy_in(str(src), "/root/data/"))  # into a directory (created)
    r = run(box.exec("sha256sum", "/root/data/blob.bin"))
    assert r.stdout.split()[0] == hashlib.sha256(blob).hexdigest()
    run(box.copy_in(src, "/root/renamed.bin"))  # to a new name, PathLike accepted
    out = tmp_path / "back.bin"
    run(box.copy_out("/root/renamed.bin", str(out)))
    assert out.read_bytes() == blob


def test_copy_directory_roundtrip(box, run, tmp_path):
    src = tmp_path / "tree"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "a.txt").write_text("alpha\n")
    (src / "sub" / "b.bin").write_bytes(b"\x00\xffbeta")
    (src / "sub" / "deeper" / "ünïcode name.txt").write_text("gamma")
    os.symlink("a.txt", src / "link")
    (src / "sub" / "run.sh").write_text("#!/bin/sh\necho ran\n")
    os.chmod(src / "sub" / "run.sh", 0o755)
    run(box.exec("mkdir", "-p", "/srv"))
    run(box.copy_in(str(src), "/srv"))  # existing dir: lands as /srv/tree
    r = run(box.exec("sh", "-c", "cd /srv/tree && cat a.txt link && sub/run.sh && cat 'sub/deeper/ünïcode name.txt'"))
    assert r.stdout == "alpha\nalpha\nran\ngamma", r
    run(box.exec("ln", "-s", "/etc/hostname", "/srv/tree/absolute-link"))
    dest = tmp_path / "out"
    run(box.copy_out("/srv/tree", str(dest)))  # new name
    assert (dest / "a.txt").read_text() == "alpha\n"
    assert (dest / "sub" / "b.bin").read_bytes() == b"\x00\xffbeta"
    assert os.readlink(dest / "link") == "a.txt"
    assert os.readlink(dest / "absolute-link") == "/etc/hostname"  # kept as a link, not followed
    assert os.access(dest / "sub" / "run.sh", os.X_OK)
    assert (dest / "sub" / "deeper" / "ünïcode name.txt").read_text() == "gamma"
    existing = tmp_path / "existing"
    existing.mkdir()
    run(box.copy_out("/srv/tree/", str(existing)))  # existing dir: lands inside
    assert (existing / "tree" / "a.txt").read_text() == "alpha\n"


def test_copy_errors(box, run, tmp_path):
    with pytest.raises(boxlite.NotFoundError, match="no such file"):
        run(box.copy_out("/no/such/file", str(tmp_path / "x")))
    with pytest.raises(FileNotFoundError):
        run(box.copy_in(str(tmp_path / "missing"), "/root/"))
    (tmp_path / "f").write_text("x")
    run(box.copy_in(str(tmp_path / "f"), "/root/f-once"))
    with pytest.raises(boxlite.AlreadyExistsError):
        run(box.copy_in(str(tmp_path / "f"), "/root/f-once", overwrite=False))
    with pytest.raises(boxlite.InvalidArgumentError):
        run(box.copy_out("/", str(tmp_path / "root")))
    with pytest.raises(TypeError):
        run(box.copy_in(str(tmp_path / "f"), 5))


def test_copy_out_refuses_hostile_archive(box, run, tmp_path):
    # A box can put anything in the tar it sends: a symlink to the host's
    # tmp_path followed by a file written "through" it must be refused.
    run(box.exec("sh", "-c", f"rm -rf /evil && mkdir -p /evil && ln -s {tmp_path} /evil/escape"))
    # Build the hostile archive in the box by hand: entry evil/escape (symlink)
    # then evil/escape/pwned (a file) - busybox tar appends with a second -c.
    run(box.exec("sh", "-c", "cd / && mkdir -p /stage/evil/escape && echo pwned > /stage/evil/escape/pwned && "
                              "tar -c -f /tmp/a.tar evil && cd /stage && tar -c -f /tmp/b.tar evil/escape/pwned && "
                              "cat /tmp/a.tar | head -c -1024 > /tmp/evil.tar && cat /tmp/b.tar >> /tmp/evil.tar"))
    from boxlite import _copy

    async def hostile():
        ex = await box.box.exec("cat", "/tmp/evil.tar")
        data = await ex.stdout().read()
        await ex.wait()
        ex.close()
        import io

        with pytest.raises(boxlite.InvalidArgumentError, match="symlink"):
            _copy._extract(io.BytesIO(data), "evil", str(tmp_path / "dest"), True, False)

    run(hostile())
    assert not (tmp_path / "pwned").exists()


# ---- sync API on the same box ---------------------------------------------------------------------


def test_sync_api_wraps_the_same_box(box):
    sbox = boxlite.SyncBox(box.box)
    assert sbox.id == box.id
    ex = sbox.exec("sh", "-c", "echo one; echo two")
    assert list(ex.stdout()) == ["one\n", "two\n"]
    assert ex.wait().exit_code == 0
    ex.close()
    assert sbox.run("echo", "sync").stdout == "sync\n"


# ---- after close (last: it stops the module's box) --------------------------------------------------


def test_zz_use_after_stop(box, run):
    saved = box._box
    run(box.stop())
    with pytest.raises(boxlite.InvalidStateError, match="not started"):
        run(box.exec("true"))
    with pytest.raises(boxlite.ClosedError):
        run(saved.exec("true"))
    with pytest.raises(boxlite.ClosedError):
        saved.info()
    run(box.stop())  # idempotent
