"""Drives `boxlite serve` with BoxLite's own Python package (boxlite 0.10.8
from PyPI, installed by the Go test into a virtualenv of its own). Every
check raises on failure; the Go test reads the exit code and the output.
Environment: BOXLITE_REST_URL, BOXLITE_API_KEY (BoxliteRestOptions.from_env),
WORK (a scratch directory on the host)."""
import os

import boxlite
from restcheck import check, run

WORK = os.environ["WORK"]



async def main():
    rt = boxlite.Boxlite.rest(boxlite.BoxliteRestOptions.from_env())

    # SimpleBox, as BoxLite's README writes it, on a REST runtime.
    async with boxlite.SimpleBox(image="alpine:latest", memory_mib=256, runtime=rt, name="rest-simple") as box:
        r = await box.exec("sh", "-c", "echo hello; echo oops >&2; exit 3")
        check(r.exit_code == 3, f"exit code 3 (got {r.exit_code})")
        check(r.stdout == "hello\n", f"stdout streamed (got {r.stdout!r})")
        check(r.stderr == "oops\n", f"stderr streamed (got {r.stderr!r})")

        r = await box.exec("sh", "-c", "echo $GREETING; pwd", env={"GREETING": "hi there"}, cwd="/home")
        check(r.stdout == "hi there\n/home\n", f"env and cwd (got {r.stdout!r})")

        r = await box.exec("sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done")
        lines = r.stdout.splitlines()
        check(len(lines) == 2000 and lines[-1] == "line 1999", f"2000 lines in order (got {len(lines)})")

        # Silent for longer than BoxLite's client waits for a first frame
        # (WS_FIRST_FRAME_TIMEOUT, 10 s): the server's first ping must come
        # sooner, or the client drops the attach and loses the output.
        r = await box.exec("sh", "-c", "sleep 13; echo woke")
        check(r.exit_code == 0 and r.stdout == "woke\n", f"output of a silent exec (got {r.exit_code} {r.stdout!r})")

        # Files in and out.
        src = os.path.join(WORK, "src")
        os.makedirs(os.path.join(src, "sub"), exist_ok=True)
        with open(os.path.join(src, "a.txt"), "w") as f:
            f.write("alpha\n")
        with open(os.path.join(src, "sub", "b.txt"), "w") as f:
            f.write("beta\n")
        await box.copy_in(os.path.join(WORK, "src", "a.txt"), "/root/a.txt")
        r = await box.exec("cat", "/root/a.txt")
        check(r.stdout == "alpha\n", f"copy_in of a file (got {r.stdout!r})")
        await box.copy_in(src, "/srv/in")
        r = await box.exec("sh", "-c", "find /srv/in -type f | sort; cat $(find /srv/in -name b.txt)")
        print("tree in box:", r.stdout.split(), flush=True)
        check("beta\n" in r.stdout, "copy_in of a directory")
        await box.exec("sh", "-c", "mkdir -p /out/d && echo gamma > /out/d/c.txt")
        dst = os.path.join(WORK, "out")
        await box.copy_out("/out/d", dst)
        found = [os.path.relpath(os.path.join(d, f), dst) for d, _, fs in os.walk(dst) for f in fs]
        print("tree on host:", found, flush=True)
        check(any(p.endswith("c.txt") for p in found), "copy_out of a directory")

        # (SimpleBox.info() in BoxLite 0.10.8 leaves a task that panics in
        # pyo3 when the interpreter exits, whatever the server; the
        # runtime's get_info asks the same route.)
        info = await rt.get_info("rest-simple")
        check(info.state.status == "running", f"info: running (got {info.state.status})")
        # (The server answers started_at; BoxLite 0.10.8's REST client sets
        # BoxInfo.started_at to None whatever the answer: types.rs says the
        # REST surface does not publish it. Our SDKs read it.)
        m = await box.metrics()
        print("metrics:", m, flush=True)

    # The runtime's view: list, get, metrics, remove.
    box = await rt.create(boxlite.BoxOptions(image="alpine:latest", memory_mib=256), name="rest-kept")
    ids = [i.id for i in await rt.list_info()]
    check(box.id in ids, "list_info shows the box")
    got = await rt.get("rest-kept")
    check(got is not None and got.id == box.id, "get by name")
    ex = await box.exec("sh", ["-c", "read x; echo got $x"])
    stdin = ex.stdin()
    await stdin.send_input(b"typed\n")
    out = [line async for line in ex.stdout()]
    res = await ex.wait()
    check(out == ["got typed\n"] and res.exit_code == 0, f"stdin reaches the process (got {out})")
    await box.stop()
    info = await rt.get_info("rest-kept")
    check(info.state.status == "stopped", f"stopped (got {info.state.status})")
    rm = await rt.metrics()
    print("runtime metrics:", rm, flush=True)
    # SimpleBox stopped its box on exit; a REST runtime is told nothing of
    # auto_remove (BoxLite's client does not send it), so remove it here.
    await rt.remove("rest-simple", force=True)
    await rt.remove("rest-kept", force=True)
    check(await rt.get("rest-kept") is None, "removed")
    print("ALL OK", flush=True)


run(main)
