"""Running blocking library calls off the event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Callable, Optional

_executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
_lock = threading.Lock()


def executor() -> concurrent.futures.ThreadPoolExecutor:
    """boxlite's own thread pool: blocking calls (boot, stop, wait, stdin
    writes) never starve the loop's default executor, and vice versa."""
    global _executor
    if _executor is None:
        with _lock:
            if _executor is None:
                _executor = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="boxlite")
    return _executor


async def blocking(fn: Callable, *args: Any, on_abandon: Optional[Callable[[Any], None]] = None) -> Any:
    """Runs fn(*args) in a worker thread and awaits it.

    If the awaiting task is cancelled, the call still completes in its thread;
    on_abandon(result) then runs there, so what the call created (a booted box,
    say) is released instead of leaked."""
    loop = asyncio.get_running_loop()
    cf = executor().submit(fn, *args)
    try:
        return await asyncio.wrap_future(cf, loop=loop)
    except asyncio.CancelledError:
        if on_abandon is not None:

            def release(f: concurrent.futures.Future) -> None:
                if not f.cancelled() and f.exception() is None:
                    try:
                        on_abandon(f.result())
                    except Exception:  # best effort: the caller is gone
                        pass

            cf.add_done_callback(release)
        raise
