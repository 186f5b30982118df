"""What each exchange cost, end to end: real SDKs -> a real gateway -> the loopback upstream.

The gateway here has routes that send real model names upstream (the shared stack's routes use
made-up ones, which no price table knows), so each record's cost can be checked against
genai-prices' own `calc_price` for the usage the fake upstream reported, cache tokens included,
whole and streamed (where the usage comes at the end of the stream). Records are read back from
the gateway's SQLite trail; `/metrics` and `gateway audit` are read from the same gateway.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import sqlite3
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import orjson
import pytest
from genai_prices import Usage, calc_price
from prometheus_client.parser import text_string_to_metric_families

from gateway.audit.command import run_audit
from gateway.audit.migrations import COLUMNS
from gateway.audit.record import AuditRecord
from gateway.audit.sqlite_store import SQLiteStore, decode
from tests.conftest import Stack
from tests.scenarios import Answer, anthropic_body, anthropic_events, openai_body, openai_chunks
from tests.upstream import FakeUpstream, Script, anthropic_sse, openai_sse

NAME = "cost"
DEAL = {"input": 2.5, "output": 10, "cache_read": 0.25, "cache_write": 3.125}
TARGET_DEAL = {"input": 0.7, "output": 1.3}
ROUTES = [
    {"match": "cost-oa-*", "provider": "openai", "upstream_model": "gpt-4o"},
    {"match": "cost-an-*", "provider": "anthropic", "upstream_model": "claude-sonnet-4-5"},
    {"match": "cost-dated-*", "provider": "openai", "upstream_model": "gpt-4o-dated"},
    {"match": "cost-deal-*", "provider": "openai", "upstream_model": "gpt-4o-mini", "price": DEAL},
    {
        "match": "cost-target-*",
        "price": DEAL,
        "targets": [
            {"provider": "anthropic", "upstream_model": "claude-haiku-4-5", "price": TARGET_DEAL}
        ],
    },
    {"match": "cost-unknown-*", "provider": "openai", "upstream_model": "cost-no-such-model"},
]
TEXT = "The answer is 42."


@pytest.fixture(scope="module")
def gateway(stack: Stack) -> str:
    return stack.add_gateway(NAME, {"routes": ROUTES})


def model(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def record_of(stack: Stack, client_model: str, timeout: float = 10.0) -> AuditRecord:
    """The audit record of the one exchange that asked for `client_model`, once written."""
    deadline = time.monotonic() + timeout
    sql = f"SELECT {', '.join(COLUMNS)} FROM audit_records WHERE model = ?"
    while True:
        conn = sqlite3.connect(stack.audit_db(NAME))
        try:
            rows = conn.execute(sql, (client_model,)).fetchall()
        finally:
            conn.close()
        if rows:
            assert len(rows) == 1
            return decode(rows[0])
        assert time.monotonic() < deadline, f"no record for {client_model}"
        time.sleep(0.02)


def table_cost(
    model_ref: str, provider: str, inp: int, out: int, read: int = 0, write: int = 0
) -> float:
    """genai-prices' own price for this usage (`inp` counts every input token)."""
    usage = Usage(
        input_tokens=inp, output_tokens=out, cache_read_tokens=read, cache_write_tokens=write
    )
    return float(calc_price(usage, model_ref=model_ref, provider_id=provider).total_price)


# --- what the upstream says -------------------------------------------------------------------


def openai_whole(answered: str, prompt: int, completion: int, cached: int = 0) -> Script:
    body = openai_body(Answer(text=TEXT, usage=(prompt, completion)), answered)
    if cached:
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
    return Script(body=orjson.dumps(body))


def openai_stream(answered: str, prompt: int, completion: int, cached: int = 0) -> Script:
    chunks = openai_chunks(Answer(text=TEXT, usage=(prompt, completion)), answered)
    if cached:
        chunks[-1]["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
    return Script(chunks=openai_sse(chunks))


def anthropic_usage(fresh: int, read: int, write: int) -> dict[str, int]:
    return {
        "input_tokens": fresh,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


def anthropic_whole(answered: str, fresh: int, out: int, read: int, write: int) -> Script:
    body = anthropic_body(Answer(text=TEXT, usage=(fresh, out)), answered)
    body["usage"] = {**anthropic_usage(fresh, read, write), "output_tokens": out}
    return Script(body=orjson.dumps(body))


def anthropic_stream(answered: str, fresh: int, out: int, read: int, write: int) -> Script:
    events = anthropic_events(Answer(text=TEXT, usage=(fresh, out)), answered)
    start = copy.deepcopy(events[0])
    start["message"]["usage"] = {**anthropic_usage(fresh, read, write), "output_tokens": 1}
    return Script(chunks=anthropic_sse([start, *events[1:]]))


def oa(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key="sk-client", max_retries=0)


def an(base: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base, api_key="sk-client", max_retries=0)


def ask_openai(base: str, client_model: str, stream: bool = False) -> str:
    messages: Any = [{"role": "user", "content": "hi"}]
    if not stream:
        reply = oa(base).chat.completions.create(model=client_model, messages=messages)
        return reply.choices[0].message.content or ""
    text = ""
    for chunk in oa(base).chat.completions.create(
        model=client_model, messages=messages, stream=True, stream_options={"include_usage": True}
    ):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
    return text


def ask_anthropic(base: str, client_model: str, stream: bool = False) -> str:
    messages: Any = [{"role": "user", "content": "hi"}]
    if not stream:
        reply = an(base).messages.create(model=client_model, max_tokens=100, messages=messages)
        return "".join(b.text for b in reply.content if b.type == "text")
    with an(base).messages.stream(model=client_model, max_tokens=100, messages=messages) as s:
        return "".join(s.text_stream)


# --- the price table --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_openai_cost_is_genai_prices_own_with_cached_tokens(
    stack: Stack, upstream: FakeUpstream, gateway: str, stream: bool
) -> None:
    """prompt_tokens include the cached ones: 1200 in, 1000 of them cached, at gpt-4o's rates."""
    script = openai_stream if stream else openai_whole
    upstream.script("gpt-4o", script("gpt-4o", 1200, 300, cached=1000))
    client_model = model("cost-oa")
    assert ask_openai(gateway, client_model, stream) == TEXT
    record = record_of(stack, client_model)
    assert (record.input_tokens, record.output_tokens, record.cache_read_tokens) == (
        1200,
        300,
        1000,
    )
    expected = table_cost("gpt-4o", "openai", 1200, 300, read=1000)
    assert record.cost_usd == expected and record.cost_source == "table"
    # The cached tokens are priced at the cache rate: less than the same tokens uncached.
    assert expected < table_cost("gpt-4o", "openai", 1200, 300)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_anthropic_cost_is_genai_prices_own_with_cache_reads_and_writes(
    stack: Stack, upstream: FakeUpstream, gateway: str, stream: bool
) -> None:
    """Anthropic's input_tokens exclude the cache: 100 fresh + 2000 read + 500 written."""
    script = anthropic_stream if stream else anthropic_whole
    upstream.script("claude-sonnet-4-5", script("claude-sonnet-4-5", 100, 250, 2000, 500))
    client_model = model("cost-an")
    assert ask_anthropic(gateway, client_model, stream) == TEXT
    record = record_of(stack, client_model)
    assert record.input_tokens == 2600 and record.output_tokens == 250
    assert (record.cache_read_tokens, record.cache_creation_tokens) == (2000, 500)
    expected = table_cost("claude-sonnet-4-5", "anthropic", 2600, 250, read=2000, write=500)
    assert record.cost_usd == expected and record.cost_source == "table"
    assert expected != table_cost("claude-sonnet-4-5", "anthropic", 2600, 250)


def test_the_provider_kind_that_answered_prices_a_translated_exchange(
    stack: Stack, upstream: FakeUpstream, gateway: str
) -> None:
    """An Anthropic client answered by the OpenAI wire is priced at OpenAI's table."""
    upstream.script("gpt-4o", openai_whole("gpt-4o", 500, 40))
    client_model = model("cost-oa")
    assert ask_anthropic(gateway, client_model) == TEXT
    record = record_of(stack, client_model)
    assert record.client_format == "anthropic" and record.provider == "openai"
    assert record.cost_usd == table_cost("gpt-4o", "openai", 500, 40)


def test_the_model_that_answered_is_priced(
    stack: Stack, upstream: FakeUpstream, gateway: str
) -> None:
    """Asked `gpt-4o-dated`, the upstream answers as gpt-4o-2024-05-13: priced as that one."""
    upstream.script("gpt-4o-dated", openai_whole("gpt-4o-2024-05-13", 1000, 100))
    client_model = model("cost-dated")
    ask_openai(gateway, client_model)
    record = record_of(stack, client_model)
    expected = table_cost("gpt-4o-2024-05-13", "openai", 1000, 100)
    assert record.cost_usd == expected and expected != table_cost("gpt-4o", "openai", 1000, 100)


# --- unknown, and the route's own price -------------------------------------------------------


def test_an_unknown_model_has_no_cost_never_zero(
    stack: Stack, upstream: FakeUpstream, gateway: str
) -> None:
    upstream.script("cost-no-such-model", openai_whole("cost-no-such-model", 10, 5))
    client_model = model("cost-unknown")
    assert ask_openai(gateway, client_model) == TEXT
    record = record_of(stack, client_model)
    assert record.input_tokens == 10  # the usage came; the price table has no such model
    assert record.cost_usd is None and record.cost_source is None


def test_an_answer_without_usage_has_no_cost(
    stack: Stack, upstream: FakeUpstream, gateway: str
) -> None:
    body = openai_body(Answer(text=TEXT), "gpt-4o")
    del body["usage"]
    upstream.script("gpt-4o", Script(body=orjson.dumps(body)))
    client_model = model("cost-oa")
    ask_openai(gateway, client_model)
    record = record_of(stack, client_model)
    assert record.input_tokens is None and record.cost_usd is None


def test_a_stream_that_broke_has_no_cost(
    stack: Stack, upstream: FakeUpstream, gateway: str
) -> None:
    """Cut after the text began: the input is known, the output billed is not (message_start
    says 1), so the cost is unknown, not the price of one output token."""
    script = anthropic_stream("claude-sonnet-4-5", 100, 250, 0, 0)
    upstream.script("claude-sonnet-4-5", dataclasses.replace(script, drop_after=4))
    client_model = model("cost-an")
    with pytest.raises(anthropic.APIError):
        ask_anthropic(gateway, client_model, stream=True)
    record = record_of(stack, client_model)
    assert record.input_tokens == 100 and record.stop_reason is not None
    assert record.cost_usd is None and record.cost_source is None


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_route_price_wins_over_the_table_and_is_exact(
    stack: Stack, upstream: FakeUpstream, gateway: str, stream: bool
) -> None:
    script = openai_stream if stream else openai_whole
    upstream.script("gpt-4o-mini", script("gpt-4o-mini", 3000, 700, cached=1000))
    client_model = model("cost-deal")
    ask_openai(gateway, client_model, stream)
    record = record_of(stack, client_model)
    # 2000 fresh at 2.5, 1000 cached at 0.25, 700 out at 10, per million
    exact = (Decimal(2000) * Decimal("2.5") + 1000 * Decimal("0.25") + 700 * 10) / 10**6
    assert record.cost_usd == float(exact) == 0.01225 and record.cost_source == "route"
    assert record.cost_usd != table_cost("gpt-4o-mini", "openai", 3000, 700, read=1000)


def test_a_target_price_wins_over_its_route_price(
    stack: Stack, upstream: FakeUpstream, gateway: str
) -> None:
    """The target's price has no cache rates: the cache tokens are billed at its input rate."""
    upstream.script("claude-haiku-4-5", anthropic_whole("claude-haiku-4-5", 100, 20, 300, 600))
    client_model = model("cost-target")
    ask_anthropic(gateway, client_model)
    record = record_of(stack, client_model)
    exact = (Decimal(1000) * Decimal("0.7") + 20 * Decimal("1.3")) / 10**6
    assert record.cost_usd == float(exact) and record.cost_source == "route"


# --- /metrics and gateway audit ----------------------------------------------------------------


async def _get(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200
        return await resp.text()


def metric(stack: Stack, base: str, name: str, **labels: str) -> float:
    text = stack.run(_get(base + "/metrics"))
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def test_metrics_count_cost_and_unknown_cost(
    stack: Stack, upstream: FakeUpstream, gateway: str
) -> None:
    known, unknown = model("cost-oa"), model("cost-unknown")
    upstream.script("gpt-4o", openai_whole("gpt-4o", 800, 60))
    upstream.script("cost-no-such-model", openai_whole("cost-no-such-model", 10, 5))
    ask_openai(gateway, known)
    ask_openai(gateway, unknown)
    cost = record_of(stack, known).cost_usd
    record_of(stack, unknown)
    assert cost is not None and cost > 0
    labels = {"provider": "openai", "model": known}
    assert metric(stack, gateway, "gateway_cost_usd_total", **labels) == pytest.approx(
        cost, rel=1e-12
    )
    assert metric(stack, gateway, "gateway_cost_unknown_exchanges_total", **labels) == 0
    labels = {"provider": "openai", "model": unknown}
    assert metric(stack, gateway, "gateway_cost_unknown_exchanges_total", **labels) == 1
    assert metric(stack, gateway, "gateway_cost_usd_total", **labels) == 0


def test_gateway_audit_reports_cost_by_provider_and_model(
    stack: Stack, upstream: FakeUpstream, gateway: str
) -> None:
    upstream.script("gpt-4o", openai_whole("gpt-4o", 900, 90))
    upstream.script("cost-no-such-model", openai_whole("cost-no-such-model", 10, 5))
    priced, unpriced = model("cost-oa"), model("cost-unknown")
    ask_openai(gateway, priced)
    ask_openai(gateway, unpriced)
    cost = record_of(stack, priced).cost_usd
    record_of(stack, unpriced)
    db = stack.audit_db(NAME)
    records = asyncio.run(_fetch(db))
    openai_known = [r.cost_usd for r in records if r.provider == "openai" and r.cost_usd]
    openai_unknown = [r for r in records if r.provider == "openai" and r.cost_usd is None]

    by_provider = {g["group"]: g for g in orjson.loads(asyncio.run(_audit(db, "provider", "json")))}
    assert by_provider["openai"]["cost_usd"] == pytest.approx(sum(openai_known), rel=1e-12)
    assert by_provider["openai"]["cost_unknown"] == len(openai_unknown) >= 1
    by_model = {g["group"]: g for g in orjson.loads(asyncio.run(_audit(db, "model", "json")))}
    assert by_model[priced]["cost_usd"] == cost and by_model[priced]["cost_unknown"] == 0
    assert by_model[unpriced]["cost_usd"] is None and by_model[unpriced]["cost_unknown"] == 1

    lines = asyncio.run(_audit(db, "model", "csv")).splitlines()
    header = lines[0].split(",")
    at = header.index("cost_usd")
    assert header[at : at + 2] == ["cost_usd", "cost_unknown"]
    rows = {line.split(",")[1]: line.split(",") for line in lines[1:]}
    assert rows[priced][at : at + 2] == [f"{cost:.8f}", "0"]
    assert rows[unpriced][at : at + 2] == ["", "1"]

    table = asyncio.run(_audit(db, "provider", "table"))
    assert "cost by provider" in table
    cost_rows = table[table.index("cost by provider") :].splitlines()
    openai_row = next(line for line in cost_rows if line.startswith("openai")).split()
    assert openai_row[1].startswith("$") and openai_row[2] == str(len(openai_unknown))


async def _fetch(db: Path) -> list[AuditRecord]:
    store = SQLiteStore(db)
    try:
        return await store.fetch()
    finally:
        await store.close()


async def _audit(db: Path, by: str, fmt: str) -> str:
    store = SQLiteStore(db)
    try:
        return await run_audit(store, since=None, by=by, fmt=fmt, truncated=False, limit=20)
    finally:
        await store.close()
