# E2B's snapshots (https://e2b.dev/docs/sandbox/snapshots) with E2B's Python
# SDK against `boxlite serve` (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY;
# OTHER_API_KEY is a second key of the server's). Prints ALL OK.
import os
import time

from e2b import Sandbox, SandboxException, SandboxNotFoundException

from sdkutil import bump, lap, start_holder

other = {"api_key": os.environ["OTHER_API_KEY"]}

sandbox = Sandbox.create(timeout=600)
sandbox.files.write("/root/note.txt", "before the snapshot")
holder = start_holder(sandbox)
secret, _ = bump(sandbox, 1)
bump(sandbox, 2)
print("source ready", sandbox.sandbox_id, lap(), flush=True)

# E2B's example: a snapshot of the running sandbox, then sandboxes from it.
snapshot = sandbox.create_snapshot()
assert snapshot.snapshot_id.endswith(":default"), snapshot
print("create_snapshot ok", snapshot.snapshot_id, lap(), flush=True)

# The source runs on, and changes after the snapshot are not in it; then it
# is killed: the snapshot outlives it.
assert sandbox.commands.run("echo still").stdout == "still\n"
sandbox.files.write("/root/note.txt", "after the snapshot")
bump(sandbox, 3)
src_host = sandbox.commands.run("hostname").stdout.strip()
assert [s.snapshot_id for s in sandbox.list_snapshots().next_items()] == [snapshot.snapshot_id]
sandbox.kill()

a = Sandbox.create(snapshot.snapshot_id, timeout=300)
b = Sandbox.create(snapshot.snapshot_id, timeout=300)
print("two sandboxes from the snapshot", a.sandbox_id, b.sandbox_id, lap(), flush=True)
assert a.sandbox_id != b.sandbox_id
for s in (a, b):
    assert s.is_running()
    assert s.get_info().template_id == snapshot.snapshot_id, s.get_info()
    assert s.files.read("/root/note.txt") == "before the snapshot"
# The process runs on in each, with its memory at the snapshot's instant
# (count 2, not the 3 the source reached after); each count is its own.
assert bump(a, 3) == (secret, 3)
assert bump(a, 4) == (secret, 4)
assert bump(b, 3) == (secret, 3)  # not 5: a's counts are a's
# ... and is one of each sandbox's processes: listed, and killed in one
# while it runs on in the other.
for s in (a, b):
    assert any(p.pid == holder.pid for p in s.commands.list()), s.commands.list()
assert a.commands.kill(holder.pid)
for _ in range(100):
    if not any(p.pid == holder.pid for p in a.commands.list()):
        break
    time.sleep(0.1)
else:
    raise AssertionError("the killed process is still listed")
assert bump(b, 4) == (secret, 4)
a.files.write("/root/note.txt", "changed in a")
assert b.files.read("/root/note.txt") == "before the snapshot"
assert a.files.read("/root/note.txt") == "changed in a"
hosts = {s.commands.run("hostname").stdout.strip() for s in (a, b)}
assert len(hosts) == 2 and src_host not in hosts, (hosts, src_host)
# Every E2B call works in them: a command with envs, files, a listing.
assert a.commands.run("echo $X", envs={"X": "y"}).stdout == "y\n"
assert {e.name for e in b.files.list("/root")} >= {"note.txt"}
print("state at the instant, each its own ok", lap(), flush=True)

# Another key sees none of it.
assert Sandbox.list_snapshots(**other).next_items() == []
try:
    Sandbox.create(snapshot.snapshot_id, **other)
    raise AssertionError("another key created a sandbox from the snapshot")
except SandboxException as e:
    assert e.status_code == 404, e
assert Sandbox.delete_snapshot(snapshot.snapshot_id, **other) is False
try:
    Sandbox.create_snapshot(a.sandbox_id, **other)
    raise AssertionError("another key snapshotted a sandbox not its own")
except SandboxNotFoundException:
    pass
print("another key ok", lap(), flush=True)

# Bad ids: E2B's error shape, the SDK's exceptions.
for bad in ("../../etc", "x" * 300):
    try:
        Sandbox.delete_snapshot(bad)
        raise AssertionError(f"delete_snapshot({bad!r}) passed")
    except SandboxException as e:
        assert e.status_code == 400, e
try:
    Sandbox.create("nosuchsnapshot0000000:default")
    raise AssertionError("an unknown snapshot id created a sandbox")
except SandboxException as e:
    assert e.status_code == 404, e
print("bad ids ok", lap(), flush=True)

# A filesystem snapshot (no memory): a sandbox from it boots from the disk
# of that instant, without the processes.
fs_snap = a.create_snapshot(mode="filesystem")
c = Sandbox.create(fs_snap.snapshot_id, timeout=300)
assert c.files.read("/root/note.txt") == "changed in a"
assert c.commands.list() == [], c.commands.list()
assert c.commands.run("echo booted").stdout == "booted\n"
c.kill()
assert Sandbox.delete_snapshot(fs_snap.snapshot_id) is True
print("filesystem snapshot ok", lap(), flush=True)

# A pause keeps the process: the resumed sandbox has it, counting on.
assert b.pause()
b = Sandbox.connect(b.sandbox_id)
assert any(p.pid == holder.pid for p in b.commands.list()), b.commands.list()
assert bump(b, 5) == (secret, 5)
print("pause + resume keeps the process ok", lap(), flush=True)

# A timeout ends a sandbox from a snapshot as any other.
b.set_timeout(2)
for _ in range(100):
    if not b.is_running():
        break
    time.sleep(0.2)
else:
    raise AssertionError("the sandbox from the snapshot outlived its timeout")
print("timeout ok", lap(), flush=True)

# list and delete
listed = Sandbox.list_snapshots().next_items()
assert snapshot.snapshot_id in [s.snapshot_id for s in listed], listed
assert Sandbox.delete_snapshot(snapshot.snapshot_id) is True
assert Sandbox.delete_snapshot(snapshot.snapshot_id) is False
assert snapshot.snapshot_id not in [s.snapshot_id for s in Sandbox.list_snapshots().next_items()]
try:
    Sandbox.create(snapshot.snapshot_id)
    raise AssertionError("a deleted snapshot created a sandbox")
except SandboxException as e:
    assert e.status_code == 404, e
# The sandboxes made from it run on.
assert a.commands.run("cat /root/note.txt").stdout == "changed in a"
a.kill()
print("list + delete ok", lap(), flush=True)
print("ALL OK")
