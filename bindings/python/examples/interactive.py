# InteractiveBox driven by a program (no terminal forwarding).
import asyncio

import boxlite


async def main():
    async with boxlite.InteractiveBox(image="alpine:latest", tty=False) as box:
        print((await box.exec("uname", "-a")).stdout, end="")
        r = await box.exec("ls", "/no/such/path")
        print("exit", r.exit_code, "stderr:", r.stderr, end="")
        await box.exec("sh", "-c", "echo kept > /root/state")
        print((await box.exec("cat", "/root/state")).stdout, end="")


asyncio.run(main())
