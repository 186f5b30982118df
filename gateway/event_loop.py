"""The event loop `gateway serve` runs on: uvloop when it is installed (it is, by default, on
Linux and macOS), else asyncio's own. uvloop's transports and timers are libuv's, which takes a
measurable share off the per-request and per-chunk cost (issue 12's profile: 11-25%).

`GATEWAY_EVENT_LOOP=asyncio` keeps asyncio's loop (to compare, or to rule uvloop out).

    name = run(main())     # runs main() to completion; `loop_name()` says which loop
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
ENV = "GATEWAY_EVENT_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory; None for asyncio's default (not installed, or asked not to)."""
    if os.environ.get(ENV, "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def loop_name() -> str:
    return "asyncio" if loop_factory() is None else "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
