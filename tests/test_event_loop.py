"""`gateway serve`'s event loop: uvloop when installed (a dependency on Linux), asyncio's own
when `GATEWAY_EVENT_LOOP=asyncio` asks for it."""

from __future__ import annotations

import asyncio
import sys

import pytest

from gateway import event_loop


async def running_loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop is not a dependency on Windows")
def test_serve_runs_on_uvloop_by_default(monkeypatch):
    monkeypatch.delenv(event_loop.ENV, raising=False)
    assert event_loop.loop_name() == "uvloop"
    assert event_loop.run(running_loop_module()).startswith("uvloop")


def test_asyncio_loop_when_asked(monkeypatch):
    monkeypatch.setenv(event_loop.ENV, "asyncio")
    assert event_loop.loop_name() == "asyncio"
    assert event_loop.run(running_loop_module()).startswith("asyncio")
