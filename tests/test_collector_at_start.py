"""`gateway serve` and a worker start with the garbage collector off (its collections during the
imports were 30-50 ms of CPU before the first answer); once the process listens,
`settle_collector` collects the start's garbage, freezes what start-up made, and turns the
collector back on: a serving process never runs without it. It runs a while after the process
listens (SETTLE_AFTER_S), so that the first answers do not wait for it."""

from __future__ import annotations

import asyncio
import functools
import gc
import socket
import weakref
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from gateway import serving
from gateway.listen import open_listeners
from gateway.price_subset import GivenPrices
from gateway.serving import settle_collector
from gateway.settings import Settings, load_settings


@pytest.fixture
def collector_state() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_settle_collector_collects_the_start_freezes_it_and_turns_the_collector_on(
    collector_state: None,
) -> None:
    gc.unfreeze()
    gc.disable()
    garbage = Cycle()
    gone = weakref.ref(garbage)
    alive = Cycle()
    del garbage  # a cycle: only the collector frees it, and the collector is off
    assert gone() is not None
    settle_collector()
    assert gone() is None  # collected before the freeze, not frozen with the rest
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0  # what start-up made is out of the collector's walks
    assert alive.me is alive


def test_a_server_answers_before_its_collector_settles_and_settles_after_a_while(
    collector_state: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first answers right after the start do not wait for the settling walk (some 30 ms):
    it runs SETTLE_AFTER_S after the server listens, and then the collector is on."""
    monkeypatch.setattr(serving, "SETTLE_AFTER_S", 0.3)
    config = tmp_path / "gateway.toml"
    store = f"sqlite:///{tmp_path / 'audit.db'}"
    config.write_text(
        f'[audit]\nstore = "{store}"\n\n[providers.mock]\nkind = "mock"\n\n'
        '[[routes]]\nmatch = "mock*"\nprovider = "mock"\n'
    )
    settings = load_settings(config, {})
    sockets = open_listeners("127.0.0.1", 0)
    gc.unfreeze()
    gc.disable()  # as `gateway serve` starts
    asyncio.run(_serve_and_watch(settings, sockets, store))


async def _serve_and_watch(settings: Settings, sockets: list[socket.socket], store: str) -> None:
    port = sockets[0].getsockname()[1]
    ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stop: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def until() -> str:
        return await stop

    on_ready = functools.partial(lambda port: ready.set_result(None))
    plan = serving.Serving(on_ready=on_ready, until=until, prices=GivenPrices(settings, None))
    server = asyncio.create_task(serving.run_server(settings, sockets, store, plan))
    try:
        await asyncio.wait_for(ready, 10)
        body = {"model": "mock-1", "messages": [{"role": "user", "content": "hi"}]}
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            async with session.post(url, json=body) as answer:
                assert answer.status == 200
                await answer.read()
        assert not gc.isenabled()  # answered before the collector settled
        assert gc.get_freeze_count() == 0
        for _ in range(100):
            if gc.isenabled():
                break
            await asyncio.sleep(0.05)
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
    finally:
        stop.set_result("test over")
        await asyncio.wait_for(server, 10)
