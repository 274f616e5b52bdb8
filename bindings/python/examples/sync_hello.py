# The sync API, for scripts without asyncio.
from boxlite import SyncSimpleBox

with SyncSimpleBox(image="alpine:latest") as box:
    result = box.exec("echo", "Hello from a synchronous microVM")
    print(result.stdout, end="")
