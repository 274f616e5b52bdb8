# A sandbox's processes across a restart of `boxlite serve`, with E2B's
# Python SDK: "before" starts a sandbox with a process holding a count in
# memory and prints "SANDBOX <id> <pid>"; "after <id> <pid>" (the server
# restarted between) finds the process in the sandbox's commands.list(),
# counting on, kills it and the sandbox. Prints ALL OK.
import sys
import time

from e2b import Sandbox

HOLDER = ("sh -c 'n=0; echo $$ > /tmp/pid; "
          "trap \"n=\\$((n+1)); echo \\$n > /tmp/out.tmp; mv /tmp/out.tmp /tmp/out\" USR1; "
          "while :; do sleep 1; done'")


def bump(sbx, want):
    sbx.commands.run("rm -f /tmp/out; kill -USR1 $(cat /tmp/pid)")
    for _ in range(100):
        out = sbx.commands.run("cat /tmp/out 2>/dev/null || true").stdout.strip()
        if out:
            assert int(out) == want, (out, want)
            return
        time.sleep(0.1)
    raise AssertionError("the process holding state did not answer")


if sys.argv[1] == "before":
    sandbox = Sandbox.create(timeout=600)
    holder = sandbox.commands.run(HOLDER, background=True)
    for _ in range(100):
        if sandbox.files.exists("/tmp/pid"):
            break
        time.sleep(0.1)
    bump(sandbox, 1)
    print("SANDBOX", sandbox.sandbox_id, holder.pid, flush=True)
else:
    sandbox = Sandbox.connect(sys.argv[2])
    pid = int(sys.argv[3])
    assert any(p.pid == pid for p in sandbox.commands.list()), sandbox.commands.list()
    bump(sandbox, 2)
    assert sandbox.commands.kill(pid)
    sandbox.kill()
print("ALL OK")
