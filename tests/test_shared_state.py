"""`[state]`: the counters behind rate limits, token budgets and per-key concurrency, in memory or
in a real Redis (`GATEWAY_TEST_REDIS_URL`, from .ci/redis.sh), shared by two gateway replicas; and
failing open, never with a 500, when Redis cannot be reached."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from gateway.settings import StateSettings
from gateway.state import MemoryState, SharedState, open_state
from tests.access_util import (
    audit_rows,
    key_table,
    labels,
    metric_samples,
    new_key,
    post,
    redis_url,
    request,
    request_id,
    serve_keyed,
    wait_for,
)
from tests.conftest import free_port
from tests.scenarios import Answer, script_for

BACKENDS = ("memory", "redis")


def prefix() -> str:
    return f"gw-test-{uuid.uuid4().hex[:10]}:"


@pytest.fixture(params=BACKENDS)
async def state(request: pytest.FixtureRequest) -> AsyncIterator[SharedState]:
    if request.param == "memory":
        backend: SharedState = MemoryState()
    else:
        backend = open_state(StateSettings(redis=redis_url(), prefix=prefix()))
    await backend.open()
    yield backend
    await backend.close()


async def test_incr_counts_and_expires(state: SharedState):
    assert await state.incr("n", 3, ttl=0.3) == 3
    assert await state.incr("n", 4, ttl=0.3) == 7
    assert await state.get("n") == b"7"
    await asyncio.sleep(0.5)
    assert await state.get("n") is None  # expired: a window's counter goes away with it
    assert await state.incr("n", 1, ttl=5) == 1


async def test_incr_never_goes_below_zero(state: SharedState):
    assert await state.incr("c", 1, ttl=5) == 1
    assert await state.incr("c", -1, ttl=5) == 0
    assert await state.get("c") is None
    assert await state.incr("c", -1, ttl=5) == 0  # a release after expiry is not a debt


async def test_get_set_with_ttl_and_delete(state: SharedState):
    await state.set("breaker:x", b"open", ttl=0.3)
    assert await state.get("breaker:x") == b"open"
    await asyncio.sleep(0.5)
    assert await state.get("breaker:x") is None
    await state.set("breaker:x", b"half", ttl=5)
    await state.delete("breaker:x")
    assert await state.get("breaker:x") is None


async def test_concurrent_increments_are_not_lost(state: SharedState):
    values = await asyncio.gather(*(state.incr("many", 1, ttl=5) for _ in range(50)))
    assert sorted(values) == list(range(1, 51))


async def test_slots_are_bounded_released_and_leased(state: SharedState):
    assert await state.acquire("slots", "a", limit=2, lease=0.4)
    assert await state.acquire("slots", "b", limit=2, lease=5)
    assert not await state.acquire("slots", "c", limit=2, lease=5)
    await state.release("slots", "b")
    assert await state.acquire("slots", "c", limit=2, lease=5)
    await state.renew("slots", ["c"], lease=5)
    # "a" is never renewed, as when its replica died: its lease runs out and frees the slot.
    await asyncio.sleep(0.6)
    assert await state.acquire("slots", "d", limit=2, lease=5)
    assert not await state.acquire("slots", "e", limit=2, lease=5)


async def test_a_renewed_lease_outlives_its_first_term(state: SharedState):
    assert await state.acquire("held", "long", limit=1, lease=0.4)
    for _ in range(3):
        await asyncio.sleep(0.2)
        await state.renew("held", ["long"], lease=0.4)
    assert not await state.acquire("held", "other", limit=1, lease=5)


# --- two replicas, one Redis --------------------------------------------------------------------


def scripted(upstream, unique_model, stall: float = 0.0) -> str:
    model = unique_model("oa")
    upstream.script(model, script_for("openai", Answer(text="hello"), model, False, stall=stall))
    return model


def two_replicas(stack, **tables) -> list[tuple[str, str]]:
    """Two gateways sharing one Redis (and one key prefix): (name, url) each."""
    shared = {"redis": redis_url(), "prefix": prefix()}
    return [serve_keyed(stack, f"replica{n}", state=shared, **tables) for n in (1, 2)]


def test_two_replicas_share_a_keys_request_rate(stack, upstream, unique_model):
    key = new_key("shared")
    (name_a, a), (name_b, b) = two_replicas(
        stack, keys=[key_table("shared", key, requests_per_window=3, window="1h")]
    )
    model = scripted(upstream, unique_model)
    auth = {"authorization": f"Bearer {key}"}

    served = [post(url, "openai", model, auth).status for url in (a, b, a)]
    refused = [post(url, "openai", model, auth) for url in (b, a)]

    assert served == [200, 200, 200]
    assert [r.status for r in refused] == [429, 429]
    assert all(r.json["error"]["type"] == "requests" for r in refused)
    assert all(int(r.headers["retry-after"]) >= 1 for r in refused)
    assert len(upstream.received[model]) == 3
    rows = audit_rows(stack, name_b, ids=[request_id(refused[0])])
    rows += audit_rows(stack, name_a, ids=[request_id(refused[1])])
    assert [(r["http_status"], r["key_name"]) for r in rows] == [(429, "shared")] * 2


def test_two_replicas_share_a_keys_token_budget(stack, upstream, unique_model):
    key = new_key("tokens")
    (_, a), (_, b) = two_replicas(
        stack, keys=[key_table("tokens", key, tokens_per_window=40, window="1h")]
    )
    model = scripted(upstream, unique_model)
    client = openai.OpenAI(base_url=b + "/v1", api_key=key, max_retries=0)

    assert post(a, "openai", model, {"authorization": f"Bearer {key}"}).status == 200  # 46 tokens
    with pytest.raises(openai.RateLimitError) as err:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])

    assert err.value.body["type"] == "tokens"


def test_two_replicas_share_a_keys_concurrency(stack, upstream, unique_model):
    key = new_key("conc")
    (_, a), (_, b) = two_replicas(
        stack, keys=[key_table("conc", key)], limits={"max_concurrent_per_key": 1}
    )
    held = scripted(upstream, unique_model, stall=1.5)
    model = scripted(upstream, unique_model)
    auth = {"authorization": f"Bearer {key}"}

    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(post, a, "openai", held, auth)
        assert wait_for(lambda: upstream.received.get(held))
        refused = post(b, "openai", model, auth)
        assert first.result().status == 200

    assert refused.status == 429
    assert refused.headers["retry-after"] == "1"
    assert upstream.received[model] == []
    assert post(b, "openai", model, auth).status == 200  # released through Redis


# --- Redis unreachable --------------------------------------------------------------------------


def test_an_unreachable_redis_fails_open_with_a_warning_and_a_metric(
    stack, upstream, unique_model, caplog
):
    key, admin = new_key("open"), new_key("admin")
    dead = f"redis://:SECRET-redis-password@127.0.0.1:{free_port()}/0"
    _, url = serve_keyed(
        stack,
        "deadredis",
        keys=[key_table("open", key, requests_per_window=1, tokens_per_window=10)],
        admin={"sha256": key_table("admin", admin)["sha256"]},
        limits={"max_concurrent_per_key": 1},
        state={"redis": dead, "timeout": 0.2},
    )
    model = scripted(upstream, unique_model)
    caplog.set_level(logging.WARNING, logger="gateway.access")

    replies = [post(url, "openai", model, {"authorization": f"Bearer {key}"}) for _ in range(3)]

    assert [r.status for r in replies] == [200, 200, 200]  # limits of 1: open, not enforced
    warnings = [r for r in caplog.records if r.name == "gateway.access"]
    assert warnings and warnings[0].levelno == logging.WARNING
    assert "fail open" in warnings[0].getMessage()
    assert len(warnings) == 1  # not once per request
    for record in caplog.records:
        assert "SECRET-redis-password" not in record.getMessage() + repr(record.__dict__)
    metrics = request(url, "GET", "/metrics", {"x-api-key": admin}).body.decode()
    errors = metric_samples(metrics)["gateway_shared_state_errors_total"]
    assert errors[labels(operation="admit")] == 3
    assert errors[labels(operation="release")] == 3
