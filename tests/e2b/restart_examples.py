# A sandbox's processes across a restart of `boxlite serve`, with E2B's
# Python SDK: "before" starts a sandbox with a process holding a count in
# memory and prints "SANDBOX <id> <pid> <secret>"; "after <id> <pid>
# <secret>" (the server restarted between) finds the process in the
# sandbox's commands.list(), counting on, kills it and the sandbox.
# Prints ALL OK.
import sys

from e2b import Sandbox

from sdkutil import bump, start_holder

if sys.argv[1] == "before":
    sandbox = Sandbox.create(timeout=600)
    holder = start_holder(sandbox)
    secret, _ = bump(sandbox, 1)
    print("SANDBOX", sandbox.sandbox_id, holder.pid, secret, flush=True)
else:
    sandbox = Sandbox.connect(sys.argv[2])
    pid = int(sys.argv[3])
    assert any(p.pid == pid for p in sandbox.commands.list()), sandbox.commands.list()
    assert bump(sandbox, 2) == (sys.argv[4], 2)
    assert sandbox.commands.kill(pid)
    sandbox.kill()
print("ALL OK")
