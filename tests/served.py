"""Servers on an event loop of their own, in a thread: the scaffolding of every test stack.

The sync SDK clients block the test's thread, so the upstreams and gateways they call run on
another. A stack subclasses `LoopServers` and says what it serves in `_start`:

    class MyStack(LoopServers):
        async def _start(self) -> None:
            self.url = await self._serve(build_app(...))

    stack = MyStack(); stack.start(); ...; stack.stop()
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

from aiohttp import web

from gateway.edge import make_runner


class LoopServers:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runners: list[web.AppRunner] = []

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    async def _serve(self, app: web.Application) -> str:
        """`app` on a free loopback port: its base URL."""
        runner = make_runner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self._runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    async def _start(self) -> None:
        """What the stack serves."""

    async def _stop(self) -> None:
        for runner in reversed(self._runners):
            await runner.cleanup()

    def start(self) -> None:
        self.thread.start()
        self.run(self._start())

    def stop(self) -> None:
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
