"""What the BoxLite-client scripts of tests/rest share: check, and run,
which leaves without finalizing the interpreter (BoxLite 0.10.8's
extension can panic in a tokio worker while the interpreter finalizes,
"The Python interpreter is not initialized", aborting an exit that follows
work that all succeeded, whatever the server)."""
import asyncio
import os
import sys


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what, flush=True)


def run(main):
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)
