# Streaming output from a long-running command, as in BoxLite's Execution docs.
import asyncio

from boxlite import Boxlite, BoxOptions


async def main():
    runtime = Boxlite.default()
    box = await runtime.create(BoxOptions(image="alpine:latest"))
    async with box:
        execution = await box.exec("sh", ["-c", "for i in 1 2 3; do echo progress $i; sleep 0.2; done"])
        async for line in execution.stdout():
            print(f"[stdout] {line}", end="")
        result = await execution.wait()
        print(f"Exit code: {result.exit_code}")


asyncio.run(main())
