"""The issue's scenario through a real gateway: an upstream reports usage no store can hold.

One answer carries `prompt_tokens = 2**63` and a list for `completion_tokens`; forty ordinary
exchanges follow, more than the audit queue holds. Every one is answered, every one is recorded
(the odd usage as unknown), and the gateway shuts down promptly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import orjson
import pytest

from gateway.app import GATEWAY, build_app
from tests.audit_util import BACKENDS, open_backend
from tests.test_audit_e2e import Servers, gateway_settings
from tests.upstream import FakeUpstream, Script

FOLLOWERS = 40


@pytest.fixture
async def servers() -> AsyncIterator[Servers]:
    s = Servers()
    yield s
    await s.close()


def completion(model: str, usage: dict[str, object]) -> bytes:
    return orjson.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "fine"},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }
    )


async def ask(session: aiohttp.ClientSession, base: str, model: str) -> int:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    async with session.post(f"{base}/v1/chat/completions", json=body) as resp:
        await resp.read()
        return resp.status


@pytest.mark.parametrize("kind", BACKENDS)
async def test_usage_no_store_can_hold_blocks_nothing(
    kind: str, tmp_path: Path, servers: Servers
) -> None:
    huge = {"prompt_tokens": 2**63, "completion_tokens": [1, 2], "total_tokens": 2**63}
    async with open_backend(kind, tmp_path) as backend:
        upstream = FakeUpstream()
        upstream.script("oa-huge-usage", Script(body=completion("oa-huge-usage", huge)))
        fine = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
        upstream.script("oa-fine", Script(body=completion("oa-fine", fine)))
        _, upstream_url = await servers.start(upstream.app())
        app = build_app(gateway_settings(upstream_url, backend.url, queue_size=4), env={})
        runner, base = await servers.start(app)

        timeout = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            assert await ask(session, base, "oa-huge-usage") == 200
            statuses = await asyncio.gather(
                *(ask(session, base, "oa-fine") for _ in range(FOLLOWERS))
            )
        assert statuses == [200] * FOLLOWERS
        writer = app[GATEWAY].observer.writer
        assert writer is not None

        started = time.monotonic()
        await asyncio.wait_for(servers.stop(runner), 10)
        assert time.monotonic() - started < 5

        records = await backend.store().fetch()
        assert len(records) == FOLLOWERS + 1
        [odd] = [r for r in records if r.model == "oa-huge-usage"]
        assert (odd.input_tokens, odd.output_tokens, odd.stop_reason) == (None, None, "stop")
        assert all(r.input_tokens == 12 for r in records if r.model == "oa-fine")
        # Coerced when the record was filled: the store never had to refuse anything.
        assert (writer.repaired_records, writer.rejected_records) == (0, 0)
