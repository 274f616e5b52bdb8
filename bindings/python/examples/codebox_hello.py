# BoxLite's documented CodeBox example, unchanged.
import asyncio

import boxlite


async def main():
    async with boxlite.CodeBox() as cb:
        print(await cb.run("print('Hello from a microVM!')"))


asyncio.run(main())
