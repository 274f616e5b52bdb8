# CodeBox.run() keeps the interpreter's state between calls (a persistent session).
import asyncio

import boxlite


async def main():
    async with boxlite.CodeBox() as codebox:
        await codebox.run("import json\ndef process(data):\n    return {k: v * 2 for k, v in data.items()}\n")
        print(await codebox.run('output = process({"a": 1, "b": 2, "c": 3})\nprint(json.dumps(output))'))


asyncio.run(main())
