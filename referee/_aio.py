"""Running referee's async core from plain synchronous code."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion from synchronous code.

    Works whether or not the calling thread already runs an event loop (a notebook, an async
    trainer): in that case the coroutine runs on a private loop in a helper thread, since a
    running loop cannot be re-entered.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:  # re-raised in the caller's thread below
            error.append(exc)

    thread = threading.Thread(target=target, name="referee-run-sync", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]
