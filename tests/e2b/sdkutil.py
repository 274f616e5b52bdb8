# What the examples share: a lap timer for the log, and (the snapshot and
# restart examples) a process holding state in memory only (a secret and a
# count in shell variables; each SIGUSR1 counts one and writes "secret
# count" to /tmp/out).
import time

_t = time.monotonic()


def lap():
    """Seconds since the last lap, for the log."""
    global _t
    now = time.monotonic()
    d, _t = now - _t, now
    return f"({d:.1f} s)"


HOLDER = ("sh -c 'secret=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d \" \\n\"); n=0; echo $$ > /tmp/pid; "
          "trap \"n=\\$((n+1)); echo \\$secret \\$n > /tmp/out.tmp; mv /tmp/out.tmp /tmp/out\" USR1; "
          "while :; do sleep 1; done'")


def start_holder(sbx):
    """Starts the process in the background; its command handle."""
    handle = sbx.commands.run(HOLDER, background=True)
    for _ in range(100):
        if sbx.files.exists("/tmp/pid"):
            return handle
        time.sleep(0.1)
    raise AssertionError("the process holding state did not start")


def bump(sbx, want_count):
    """Signals the process and waits for its answer: (secret, count)."""
    sbx.commands.run("rm -f /tmp/out; kill -USR1 $(cat /tmp/pid)")
    for _ in range(100):
        out = sbx.commands.run("cat /tmp/out 2>/dev/null || true").stdout.split()
        if out:
            assert int(out[1]) == want_count, (out, want_count)
            return out[0], int(out[1])
        time.sleep(0.1)
    raise AssertionError("the process holding state did not answer")
