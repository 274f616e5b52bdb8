# E2B's documented examples, unchanged, against `boxlite serve`
# (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY from tests/e2b). Prints ALL OK.
import subprocess
import sys
import time

from e2b import (Sandbox, CommandExitException, FileNotFoundException, SandboxException,
                 SandboxNotFoundException, SandboxNotRunningException, SandboxQuery, SandboxState)
from e2b.sandbox.commands.command_handle import PtySize

from sdkutil import lap


sandbox = Sandbox.create()
print("created", sandbox.sandbox_id, lap(), flush=True)

# commands.run with on_stdout
seen = []
result = sandbox.commands.run("echo hi", on_stdout=lambda data: seen.append(data))
assert result.stdout == "hi\n", result
assert result.exit_code == 0, result
assert "".join(seen) == "hi\n", seen
result = sandbox.commands.run("echo err >&2; echo $FOO", envs={"FOO": "bar"})
assert result.stdout == "bar\n" and result.stderr == "err\n", result
try:
    sandbox.commands.run("exit 3")
    raise AssertionError("exit 3 did not raise")
except CommandExitException as e:
    assert e.exit_code == 3, e
print("commands.run ok", lap(), flush=True)

# a background command, then kill
command = sandbox.commands.run("sleep 600", background=True)
assert any(p.pid == command.pid for p in sandbox.commands.list()), "the background command is not listed"
assert command.kill()
for _ in range(100):
    if not any(p.pid == command.pid for p in sandbox.commands.list()):
        break
    time.sleep(0.1)
else:
    raise AssertionError("the killed command is still listed")
print("background + kill ok", lap(), flush=True)

# files
sandbox.files.write("/home/e2b-test/hello.txt", "hello world")
assert sandbox.files.read("/home/e2b-test/hello.txt") == "hello world"
sandbox.files.write("/home/e2b-test/data.bin", b"\x00\x01\x02" * 1000)
assert sandbox.files.read("/home/e2b-test/data.bin", format="bytes") == b"\x00\x01\x02" * 1000
entries = {e.name: e for e in sandbox.files.list("/home/e2b-test")}
assert set(entries) == {"hello.txt", "data.bin"}, entries
assert entries["data.bin"].size == 3000, entries["data.bin"]
assert sandbox.files.exists("/home/e2b-test/hello.txt")
assert not sandbox.files.exists("/home/e2b-test/nope")
assert sandbox.files.make_dir("/home/e2b-test/sub")
assert not sandbox.files.make_dir("/home/e2b-test/sub")
sandbox.files.rename("/home/e2b-test/data.bin", "/home/e2b-test/sub/data.bin")
deep = [e.path for e in sandbox.files.list("/home/e2b-test", depth=2)]
assert "/home/e2b-test/sub/data.bin" in deep, deep
sandbox.files.remove("/home/e2b-test/sub")
assert not sandbox.files.exists("/home/e2b-test/sub")
info = sandbox.files.get_info("/home/e2b-test/hello.txt")
assert info.size == 11 and info.type.value == "file", info
try:
    sandbox.files.read("/home/e2b-test/nope")
    raise AssertionError("reading a missing file did not raise")
except FileNotFoundException:
    pass
print("files ok", lap(), flush=True)

# watch_dir seeing a write
handle = sandbox.files.watch_dir("/home/e2b-test")
sandbox.files.write("/home/e2b-test/watched.txt", "watch me")
names = []
for _ in range(60):
    names += [(ev.name, ev.type.name) for ev in handle.get_new_events()]
    if any(n == "watched.txt" for n, _ in names):
        break
    time.sleep(0.5)
handle.stop()
assert any(n == "watched.txt" for n, _ in names), names
assert not any(".boxlite-copy-" in n for n, _ in names), names
print("watch_dir ok", names, lap(), flush=True)

# pty.create and send_stdin
terminal = sandbox.pty.create(PtySize(rows=24, cols=80))
sandbox.pty.send_stdin(terminal.pid, b"echo pty-$((40+2))\n")
sandbox.pty.resize(terminal.pid, PtySize(rows=30, cols=100))
sandbox.pty.send_stdin(terminal.pid, b"exit\n")
out = []
terminal.wait(on_pty=lambda data: out.append(bytes(data)))
assert b"pty-42" in b"".join(out), out
print("pty ok", lap(), flush=True)

# set_timeout
sandbox.set_timeout(120)
info = sandbox.get_info()
left = (info.end_at - info.started_at).total_seconds()
assert 100 < (info.end_at.timestamp() - time.time()) <= 121, info
print("set_timeout ok", lap(), flush=True)

# Sandbox.connect(id) from a second process
second = subprocess.run(
    [sys.executable, "-c", "import sys; from e2b import Sandbox; s = Sandbox.connect(sys.argv[1]); print(s.commands.run('cat /home/e2b-test/hello.txt').stdout)", sandbox.sandbox_id],
    capture_output=True, text=True, timeout=300)
assert second.returncode == 0 and "hello world" in second.stdout, (second.stdout, second.stderr)
print("connect from a second process ok", lap(), flush=True)

# fork: new sandboxes from this one's state
fork1, fork2 = sandbox.fork(count=2, timeout=120)
for f in (fork1, fork2):
    assert not isinstance(f, Exception), f
    assert f.sandbox_id != sandbox.sandbox_id
    assert f.files.read("/home/e2b-test/hello.txt") == "hello world"
    f.files.write("/home/e2b-test/fork.txt", f.sandbox_id)
    assert f.commands.run("cat /home/e2b-test/fork.txt").stdout == f.sandbox_id
assert not sandbox.files.exists("/home/e2b-test/fork.txt")
fork1.kill()
fork2.kill()
print("fork ok", lap(), flush=True)

# network update (egress rules replaced on the running sandbox)
sandbox.update_network({"allow_out": ["192.0.2.1"], "deny_out": ["0.0.0.0/0"]})
sandbox.update_network({})  # omitted fields are cleared: egress open again
try:
    sandbox.update_network({"deny_out": ["10.0.0.0/8"]})
    raise AssertionError("a deny list boxlite cannot enforce was accepted")
except SandboxException as e:
    assert "denyOut" in str(e), e
assert sandbox.commands.run("echo still").stdout == "still\n"
print("update_network ok", lap(), flush=True)

# list, kill
assert sandbox.sandbox_id in [s.sandbox_id for s in Sandbox.list().next_items()]
assert sandbox.is_running()
sandbox.kill()
assert sandbox.sandbox_id not in [s.sandbox_id for s in Sandbox.list().next_items()]
print("kill ok", lap(), flush=True)

# errors as E2B's SDK types them
try:
    sandbox.commands.run("echo hi")
    raise AssertionError("a command in a killed sandbox did not raise")
except SandboxNotRunningException:
    pass
assert not sandbox.is_running()
try:
    Sandbox.connect(sandbox.sandbox_id)
    raise AssertionError("connecting to a killed sandbox did not raise")
except SandboxNotFoundException:
    pass
try:
    Sandbox.create("no-such-template")
    raise AssertionError("an unknown template did not raise")
except SandboxException as e:
    assert e.status_code == 404 and "no-such-template" in str(e), e
print("errors ok", lap(), flush=True)

# a sandbox's timeout kills it
short = Sandbox.create(timeout=2)
born = time.monotonic()
for _ in range(40):
    if short.sandbox_id not in [s.sandbox_id for s in Sandbox.list().next_items()]:
        break
    time.sleep(0.25)
else:
    raise AssertionError("the timeout did not kill the sandbox")
assert time.monotonic() - born >= 1.5, "killed before its timeout"
print("timeout enforced ok", lap(), flush=True)

# on_timeout "pause": the timeout pauses the sandbox, connect resumes it
sleepy = Sandbox.create(timeout=2, lifecycle={"on_timeout": "pause"})
sleepy.files.write("/home/e2b-test/kept.txt", "kept")
for _ in range(120):
    if [s for s in Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED])).next_items() if s.sandbox_id == sleepy.sandbox_id]:
        break
    time.sleep(0.25)
else:
    raise AssertionError("the timeout did not pause the sandbox")
woken = Sandbox.connect(sleepy.sandbox_id)
assert woken.files.read("/home/e2b-test/kept.txt") == "kept"
woken.kill()
print("timeout pauses ok", lap(), flush=True)
print("ALL OK")
