"""One alpine:latest box (the busybox stand-in) for the whole module, driven
through InteractiveBox(tty=False) as in BoxLite's docs: commands, streaming,
stdin, signals, timeouts, file copy, bad input, use after close."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
import re
import urllib.request

import pytest

import boxlite
from conftest import REST, need_image


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


@pytest.mark.local_only("prestart: a local template VM parks the box's shell; a REST box starts it at first use")
def test_asks_for_its_shell_prestarted(box, run):
    # A box started from a template finds exec()'s shell started (the Go
    # suite's TestPrestartedSessions shows the take-over).
    assert box.info().prestart == ["shell"]
    assert run(box.exec("sh", "-c", "echo ok")).stdout == "ok\n"


def test_hostname_is_boxlites(box, run):
    r = run(box.exec("hostname"))
    assert r.stdout == "boxlite\n", r


@pytest.mark.local_only("a hostname: the REST API has no field for it (and warm starts are the server's)")
def test_hostname_option(run):
    async def go():
        async with boxlite.SimpleBox(image="alpine:latest", memory_mib=256, hostname="py-box") as b:
            r = await b.exec("hostname")
            # A fresh box's first start is a warm one (see README, Warm starts).
            assert b.info().start in ("template", "new-template"), (b.info().start, b.info().start_note)
            return r.stdout, b.info().hostname
    assert run(go()) == ("py-box\n", "py-box")
    with pytest.raises(boxlite.InvalidArgumentError, match="hostname"):
        run(boxlite.SimpleBox(image="alpine:latest", hostname="no_underscores").__aenter__())


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
    assert info.memory_mib == 256

    async def awaited():  # BoxLite programs may await info()
        return await box.info()

    assert run(awaited()).id == box.id


@pytest.mark.local_only("the VM's accelerator and warnings are the server's: the REST API does not show them")
def test_info_accel(box):
    info = box.info()
    assert info.accel in ("kvm", "tcg")
    # A TCG box says that it is not behind a security boundary.
    assert (info.accel == "tcg") == any(w.startswith("tcg:") for w in info.warnings), info.warnings


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
        # a timeout interrupts the command, not the shell; it is a result (BoxLite 0.10)
        r = run(box.exec("sh", "-c", "echo before; sleep 30", timeout=1))
        assert r.timed_out and r.exit_code != 0 and "timed out after 1 seconds" in r.error_message, r
        assert r.stdout == "before\n"
        with pytest.raises(boxlite.TimeoutError):  # the session itself raises
            run(box.shell_session.exec("sleep", "30", timeout=1))
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


def test_timeout_is_a_result(box, run):
    # BoxLite 0.10's README: `result = await box.exec("sleep", "60", timeout=5)`.
    # With cwd, InteractiveBox.exec is SimpleBox.exec (a process of its own).
    r = run(box.exec("sh", "-c", "echo started; sleep 30", timeout=0.5, cwd="/"))
    assert r.timed_out and r.exit_code in (-15, -9), r
    assert r.error_message == "Command 'sh -c echo started; sleep 30' timed out after 0.5 seconds"
    assert r.stdout == "started\n"
    # Execution.wait() says so as well; it never raised
    async def low():
        ex = await box.box.exec("sleep", "30", timeout=0.3)
        try:
            return await ex.wait()
        finally:
            ex.close()
    st = run(low())
    assert st.timed_out and st.exit_code in (-15, -9) and "timed out" in st.error_message, st


def test_boxlite_010_info_and_execution_id(box, run):
    info = box.info()
    assert info.auto_delete == 1 and info.state.exit_code is None
    assert info.started_at and info.last_activity_at >= info.started_at, (info.started_at, info.last_activity_at)
    if not REST:  # a REST box's last activity is its start (the server does not say more)
        before = info.last_activity_at
        run(box.exec("true", cwd="/"))
        assert box.info().last_activity_at > before

    async def ids():
        ex = await box.box.exec("true")
        try:
            await ex.wait()
            return ex.id, ex.id()
        finally:
            ex.close()
    prop, call = run(ids())
    assert prop == call and type(call) is str and len(call) == 12  # BoxLite 0.10: id(); before: a property
    opts = boxlite.BoxOptions(image="alpine:latest", auto_delete=0)
    assert '"auto_remove": false' in opts.to_json()
    with pytest.raises(boxlite.InvalidArgumentError):
        boxlite.BoxOptions(image="alpine:latest", auto_delete=-1).to_json()


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
    assert (st.signal, st.exit_code) == (15, -15)
    assert (st2.signal, st2.exit_code) == (9, -9)


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
    run(box.copy_out("/srv/tree", str(dest), layout="docker"))  # docker cp: the new name is the copy
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


def test_copy_layout_is_boxlites(box, run, tmp_path):
    # BoxLite 0.10's cp example: copy_in(dir, "/app") with no /app, then
    # copy_out("/app", out) finds the files at out/app/<dir name>/.
    src = tmp_path / "boxlite_copy"
    src.mkdir()
    (src / "hello.txt").write_text("hello\n")
    run(box.exec("rm", "-rf", "/app"))
    run(box.copy_in(str(src), "/app"))
    assert run(box.exec("cat", "/app/boxlite_copy/hello.txt")).stdout == "hello\n"
    run(box.copy_in(str(src), "/app"))  # /app exists now: the same place
    assert run(box.exec("ls", "/app")).stdout == "boxlite_copy\n"
    out = tmp_path / "out"  # copy_out makes it, and puts app inside
    run(box.copy_out("/app", str(out)))
    assert (out / "app" / "boxlite_copy" / "hello.txt").read_text() == "hello\n"
    run(box.copy_out("/app", str(out)))  # exists now: the same place
    assert os.listdir(out) == ["app"]
    # A directory's contents ("/.") and files keep their rules.
    run(box.copy_in(str(src) + "/.", "/app2"))
    assert run(box.exec("cat", "/app2/hello.txt")).stdout == "hello\n"
    run(box.copy_in(str(src / "hello.txt"), "/app3/renamed.txt"))
    assert run(box.exec("cat", "/app3/renamed.txt")).stdout == "hello\n"
    run(box.copy_out("/app3/renamed.txt", str(tmp_path / "f.txt")))
    assert (tmp_path / "f.txt").read_text() == "hello\n"
    # docker cp's layout on request: a missing destination becomes the copy
    # (over REST through boxlite serve's layout=docker)
    run(box.copy_in(str(src), "/app4", layout="docker"))
    assert run(box.exec("cat", "/app4/hello.txt")).stdout == "hello\n"
    run(box.copy_in(str(src), "/app4", layout="docker"))  # exists now: inside, docker's way
    assert run(box.exec("cat", "/app4/boxlite_copy/hello.txt")).stdout == "hello\n"
    with pytest.raises(boxlite.InvalidArgumentError):
        run(box.copy_in(str(src), "/app5", layout="rsync"))


def test_tunnel_connect_and_forward(box, run):
    # A tunnel to httpd in the box (connect, forward): locally over the agent channel, on a
    # REST runtime through the server's descriptor and CONNECT listener.
    run(box.exec("sh", "-c", "mkdir -p /tw && echo tunnel-ok > /tw/index.html && "
                 "(httpd -f -p 127.0.0.1:8011 -h /tw </dev/null >/dev/null 2>&1 &)"))

    async def fetch():
        for _ in range(50):
            try:
                conn = await (await box.tunnel(8011)).connect()
            except boxlite.UnreachableError:
                await asyncio.sleep(0.2)
                continue
            await conn.write(b"GET /index.html HTTP/1.0\r\n\r\n")
            await conn.shutdown_write()
            answer = b""
            while True:
                b = await conn.read(4096)
                if not b:
                    break
                answer += b
            await conn.close()
            if answer:
                return answer
            await asyncio.sleep(0.2)
        return b""

    assert run(fetch()).endswith(b"tunnel-ok\n")

    async def forwarded():
        fw = await (await box.tunnel(8011)).forward(boxlite.SocketAddress.tcp("127.0.0.1", 0))
        addr = fw.local_addr()
        loop = asyncio.get_running_loop()
        url = f"http://{addr.host}:{addr.port}/index.html"
        try:
            return [await loop.run_in_executor(None, lambda: urllib.request.urlopen(url, timeout=60).read()) for _ in range(2)]
        finally:
            await fw.close()

    assert run(forwarded()) == [b"tunnel-ok\n"] * 2


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


def _host_tree(root):
    """Host files a box must never reach: {relative path: sha256 or link target}."""
    (root / "hd").mkdir(parents=True)
    (root / "secret").write_bytes(b"host secret\n")
    (root / "hd" / "inner").write_bytes(b"host inner\n")
    return _hashes(root)


def _hashes(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                out[os.path.relpath(p, root)] = "-> " + os.readlink(p)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
            else:
                out[os.path.relpath(p, root)] = "dir %o" % (os.stat(p).st_mode & 0o7777)
    return out


def test_copy_out_twice_never_writes_through_planted_symlinks(box, run, tmp_path):
    # A box plants symlinks to host paths; a second copy_out into the same
    # folder (a merge) must replace them, never write through them.
    host = tmp_path / "host"
    before = _host_tree(host)
    out = tmp_path / "out"
    out.mkdir()
    rel_file = os.path.relpath(host / "secret", out / "tree")  # ../host/secret
    rel_dir = os.path.relpath(host / "hd", out / "tree" / "sub")  # ../../../host/hd
    plant = (f"rm -rf /tree /tree2 && mkdir -p /tree/sub && echo real > /tree/real && "
             f"ln -s {host}/secret /tree/x && ln -s {host}/hd /tree/d && ln -s {rel_file} /tree/r && "
             f"ln -s {rel_dir} /tree/sub/rd && ln -s {host}/hd /tree2")
    assert run(box.exec("sh", "-c", plant)).exit_code == 0
    run(box.copy_out("/tree", out))
    run(box.copy_out("/tree2", out))
    t = out / "tree"
    assert os.readlink(t / "x") == f"{host}/secret" and os.readlink(t / "d") == f"{host}/hd"
    assert os.readlink(t / "r") == rel_file and os.readlink(t / "sub" / "rd") == rel_dir
    assert os.readlink(out / "tree2") == f"{host}/hd"
    assert (t / "r").read_bytes() == b"host secret\n"  # the link does point at the host file
    # Now the box turns every link into a real file or directory of its own.
    swap = ("cd /tree && rm x d r sub/rd && echo pwned > x && mkdir d && echo pwned > d/inner && "
            "echo pwned > r && mkdir sub/rd && echo pwned > sub/rd/inner && "
            "rm /tree2 && mkdir /tree2 && echo pwned > /tree2/inner")
    assert run(box.exec("sh", "-c", swap)).exit_code == 0
    run(box.copy_out("/tree", out))  # merges into out/tree
    run(box.copy_out("/tree", str(out) + "/"))
    run(box.copy_out("/tree2", out))  # replaces the link out/tree2
    run(box.copy_out("/tree/", out, include_parent=False))  # contents into out itself
    assert _hashes(host) == before, "a host file outside the destination changed"
    for p in (t / "x", t / "r", t / "d" / "inner", t / "sub" / "rd" / "inner", out / "tree2" / "inner", out / "x"):
        assert not os.path.islink(p) and p.read_bytes() == b"pwned\n", p
    assert not os.path.islink(t / "d") and not os.path.islink(out / "tree2")
    assert (t / "real").read_text() == "real\n"
    assert not [n for n in os.listdir(out) if n.startswith(".boxlite-copy")]


def test_copy_out_limits(box, run, tmp_path):
    assert run(box.exec("sh", "-c", "rm -rf /lim && mkdir -p /lim/many && head -c 3000000 /dev/zero > /lim/big && "
                                    "cd /lim/many && for i in $(seq 50); do echo $i > f$i; done")).exit_code == 0
    with pytest.raises(boxlite.LimitError, match="bytes of file data") as ei:
        run(box.copy_out("/lim", tmp_path / "a", max_bytes=1 << 20))
    assert ei.value.code == "limit" and "left in place" not in str(ei.value)
    assert not (tmp_path / "a").exists()
    with pytest.raises(boxlite.LimitError, match="entries"):
        run(box.copy_out("/lim/many", tmp_path / "b", max_entries=10))
    merged = tmp_path / "m"
    (merged / "many").mkdir(parents=True)
    with pytest.raises(boxlite.LimitError) as ei:
        run(box.copy_out("/lim/many", merged, max_entries=10))
    assert "left in place" in str(ei.value)
    run(box.copy_out("/lim", tmp_path / "c", max_bytes=4 << 20))
    assert os.path.getsize(tmp_path / "c" / "lim" / "big") == 3000000  # BoxLite's layout: c made, lim inside
    with pytest.raises(boxlite.InvalidArgumentError):
        run(box.copy_out("/lim", tmp_path / "d", max_bytes=0))
    with pytest.raises(TypeError):
        run(box.copy_out("/lim", tmp_path / "d", max_entries="10"))


def _peak_rss_reset() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS


def _vm(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) << 10
    raise AssertionError(key)


def test_copy_out_streams(box, run, tmp_path):
    # 96 MiB through copy_out: the host never holds the archive.
    assert run(box.exec("sh", "-c", "head -c 100663296 /dev/urandom > /root/stream.bin")).exit_code == 0
    digest = run(box.exec("sha256sum", "/root/stream.bin")).stdout.split()[0]
    _peak_rss_reset()
    base = _vm("VmRSS")
    run(box.copy_out("/root/stream.bin", tmp_path / "s.bin"))
    grew = _vm("VmHWM") - base
    run(box.exec("rm", "/root/stream.bin"))
    h = hashlib.sha256()
    with open(tmp_path / "s.bin", "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    assert h.hexdigest() == digest
    print(f"copy_out of 96 MiB: peak RSS grew by {grew / (1 << 20):.1f} MiB")
    assert grew < 24 << 20, f"peak RSS grew by {grew >> 20} MiB copying 96 MiB"


# ---- sync API on the same box ---------------------------------------------------------------------


def test_sync_api_wraps_the_same_box(box):
    sbox = boxlite.SyncBox(box.box)
    assert sbox.id == box.id
    ex = sbox.exec("sh", "-c", "echo one; echo two")
    assert list(ex.stdout()) == ["one\n", "two\n"]
    assert ex.wait().exit_code == 0
    ex.close()
    assert sbox.run("echo", "sync").stdout == "sync\n"
    # BoxLite's Execution.id: 12 hex digits, one per execution, sync and async alike
    ex2 = sbox.exec("true")
    assert re.fullmatch(r"[0-9a-f]{12}", ex.id) and ex2.id != ex.id
    ex2.wait()
    ex2.close()


def test_sync_signatures_as_boxlite_reads_them():
    # BoxLite's programs look for keyword parameters in these signatures.
    params = inspect.signature(boxlite.SyncSimpleBox.__init__).parameters
    for name in ("image", "memory_mib", "cpus", "runtime", "name", "auto_remove", "reuse_existing"):
        assert name in params, name
    assert "reuse_existing" in inspect.signature(boxlite.SyncCodeBox.__init__).parameters
    assert inspect.signature(boxlite.SyncCodeBox.__init__).parameters["image"].default == "python:slim"
    with pytest.raises(TypeError, match="unexpected keyword argument 'imagee'"):
        boxlite.SyncSimpleBox(image="alpine:latest", imagee="x")


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

