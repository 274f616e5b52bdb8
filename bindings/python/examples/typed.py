# A typed program: `mypy --strict` accepts it against the installed package
# (tests/install/mypy.sh checks). The async API, the sync API, and the classes
# `async with` / `with` give back: CodeBox stays a CodeBox, SimpleBox a SimpleBox.
from __future__ import annotations

import asyncio
from typing import List

import boxlite
from boxlite import CellResult, CodeBox, ExecResult, SimpleBox, SyncCodeBox, SyncSimpleBox


async def run_async() -> List[str]:
    out: List[str] = []
    async with CodeBox() as cb:
        await cb.run("x = 21")
        printed: str = await cb.run("print(x * 2)")
        cell: CellResult = await cb.run_cell("x + 1")
        out += [printed.strip(), repr(cell.value)]
    async with SimpleBox(image="alpine:latest") as box:
        r: ExecResult = await box.exec("sh", "-c", "echo hi; exit 3")
        out.append(f"{r.exit_code} {r.stdout.strip()}")
    async with boxlite.Boxlite.default() as rt:
        infos = await rt.list_info()
        out.append(str(len(infos) >= 0))
    return out


def run_sync() -> List[str]:
    with SyncCodeBox() as cb:
        printed: str = cb.run("print(6 * 7)")
    with SyncSimpleBox(image="alpine:latest") as box:
        r: ExecResult = box.exec("echo", "hi")
    return [printed.strip(), r.stdout.strip()]


def main() -> None:
    try:
        print(asyncio.run(run_async()), run_sync())
    except boxlite.BoxliteError as e:
        print(type(e).__name__, e)


if __name__ == "__main__":
    main()
