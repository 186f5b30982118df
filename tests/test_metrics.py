"""`GET /metrics` tells the same story as the audit trail.

A fresh gateway app (its own Prometheus registry and SQLite store) serves a known set of exchanges:
every stop reason of tests/test_audit_e2e.py on both wires and both client formats, requests no
route or parser accepts, an abandoned stream, and agent conversations repeating a tool call (3
times: not flagged; 4 and 5 times: flagged). `/metrics` is parsed with prometheus-client's own text
parser and every counter is compared with counts computed from the store's records; histograms
count exactly the records that have that time; the in-flight gauge is back to 0 and the audit queue
depth gauge is there. A second test makes the audit queue tiny and the store slow: exchanges wait
(back-pressure), `/metrics` counts each wait, and still no record is lost.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import GATEWAY, build_app
from gateway.audit.record import AuditRecord
from gateway.audit.sqlite_store import SQLiteStore
from tests.scenarios import Answer, script_for
from tests.test_agent_guard import READ, anthropic_loop, openai_loop
from tests.test_audit_e2e import (
    PATHS,
    Case,
    Expect,
    Servers,
    exchange_cases,
    gateway_settings,
    request_body,
    script_all,
    send_all,
    wait_idle,
)
from tests.upstream import FakeUpstream

# Error classes the upstream is to blame for, as this traffic produces them; the client-caused
# ones (a bad body, an unknown model, a client that left) must never count as upstream errors.
UPSTREAM_CLASSES = {
    "UpstreamStatusError",
    "UpstreamProtocolError",
    "stream_truncated",
    "stream_upstream_error",
}
CLIENT_CLASSES = {"InvalidJSON", "ModelNotFound", "stream_aborted"}


@pytest.fixture
async def servers() -> AsyncIterator[Servers]:
    s = Servers()
    yield s
    await s.close()


Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def parse_metrics(text: str) -> tuple[Samples, dict[str, str]]:
    """Sample name -> {sorted label pairs: value}, and family name -> type."""
    samples: Samples = defaultdict(dict)
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return samples, types


def labels(**pairs: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(pairs.items()))


def counted(counter: Iterable[tuple[tuple[tuple[str, str], ...], float]]) -> dict[Any, float]:
    out: dict[Any, float] = defaultdict(float)
    for key, value in counter:
        out[key] += value
    return {k: v for k, v in out.items() if v}


async def get_metrics(session: aiohttp.ClientSession, base: str) -> str:
    async with session.get(base + "/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["content-type"].startswith("text/plain")
        return await resp.text()


def provider_of(r: AuditRecord) -> str:
    return r.provider or "-"


def model_of(r: AuditRecord) -> str:
    return r.model if r.route is not None else "-"  # unrouted names never become labels


def runaway_cases() -> list[Case]:
    cases = []
    for n, (client, count) in enumerate([("openai", 3), ("openai", 4), ("anthropic", 5)]):
        if client == "openai":
            messages = openai_loop([READ] * count)["messages"]
        else:
            messages = anthropic_loop([READ] * count)["messages"]
        expect = Expect(200, "stop", terminator_seen=None)
        cases.append(
            Case(
                f"runaway-{n}",
                client,
                "mock",
                False,
                "mock-text",
                expect,
                extra={"messages": messages},
            )
        )
    return cases


async def abandon_stream(session: aiohttp.ClientSession, base: str, model: str) -> None:
    case = Case(model, "openai", "openai", True, model, Expect(200, None))
    resp = await session.post(base + PATHS["openai"], data=orjson.dumps(request_body(case)))
    assert resp.status == 200
    assert await resp.content.readany()
    resp.close()


async def test_metrics_counters_match_the_audit_records(tmp_path, servers):
    # A whole mock body cut in half: the upstream's answer is not JSON (502).
    broken = Case("broken-body", "openai", "mock", False, "mock-no-terminator", Expect(502, None))
    cases = [*exchange_cases(), *runaway_cases(), broken]
    upstream = FakeUpstream()
    script_all(upstream, cases)
    slow = "oa-slow-abandoned"
    upstream.script(slow, script_for("openai", Answer(text="word " * 60), slow, True, delay=0.05))
    _, upstream_url = await servers.start(upstream.app())
    db = tmp_path / "audit.db"
    app = build_app(gateway_settings(upstream_url, f"sqlite:///{db}"), env={})
    runner, base = await servers.start(app)

    async with aiohttp.ClientSession() as session:
        before, _ = parse_metrics(await get_metrics(session, base))
        assert before["gateway_in_flight_exchanges"] == {(): 0.0}
        assert "gateway_requests_total" not in before  # a fresh registry: nothing counted yet
        sent = await send_all(base, cases)
        await abandon_stream(session, base, slow)
        await wait_idle(app)
        text = await get_metrics(session, base)
    await servers.stop(runner)
    store = SQLiteStore(db)
    try:
        records = await store.fetch()
    finally:
        await store.close()

    assert len(records) == len(sent) + 1
    samples, types = parse_metrics(text)
    assert types["gateway_requests"] == "counter"
    assert types["gateway_time_to_first_byte_seconds"] == "histogram"
    assert types["gateway_in_flight_exchanges"] == "gauge"

    assert samples["gateway_requests_total"] == counted(
        (
            labels(
                provider=provider_of(r),
                model=model_of(r),
                client_format=r.client_format,
                stop_reason=r.stop_reason or "none",
            ),
            1,
        )
        for r in records
    )
    assert sum(samples["gateway_requests_total"].values()) == len(records)
    assert samples["gateway_truncated_exchanges_total"] == counted(
        (labels(provider=provider_of(r), model=model_of(r), cut_reason=r.cut_reason or ""), 1)
        for r in records
        if r.truncated
    )
    assert samples["gateway_withheld_tool_calls_total"] == counted(
        (labels(provider=provider_of(r), model=model_of(r)), len(r.withheld_tool_calls))
        for r in records
    )
    assert samples["gateway_tool_argument_parse_failures_total"] == counted(
        (labels(provider=provider_of(r), model=model_of(r)), len(r.parse_failures)) for r in records
    )
    assert samples["gateway_upstream_errors_total"] == counted(
        (labels(provider=provider_of(r), error_class=r.error_class or ""), 1)
        for r in records
        if r.error_class in UPSTREAM_CLASSES
    )
    assert samples["gateway_runaway_suspected_total"] == counted(
        (labels(provider=provider_of(r), model=model_of(r)), 1) for r in records if r.runaway_streak
    )

    # The traffic really covered what the counters are about.
    classes = {dict(k)["error_class"] for k in samples["gateway_upstream_errors_total"]}
    assert classes == UPSTREAM_CLASSES
    assert {r.error_class for r in records} >= UPSTREAM_CLASSES | CLIENT_CLASSES
    cut_reasons = {dict(k)["cut_reason"] for k in samples["gateway_truncated_exchanges_total"]}
    assert cut_reasons == {"length", "missing_terminator", "upstream_error", "cancelled"}
    assert sum(samples["gateway_runaway_suspected_total"].values()) == 2  # 4 and 5; not 3
    assert sorted(r.runaway_streak for r in records if r.runaway_streak) == [4, 5]
    unrouted = [k for k in samples["gateway_requests_total"] if dict(k)["model"] == "-"]
    assert len(unrouted) == 2  # invalid JSON and unknown model, per client format

    # Histograms: one observation per record that has the time, summed to the same seconds.
    for name, attr in (
        ("gateway_time_to_first_byte_seconds", "ttfb_ms"),
        ("gateway_request_duration_seconds", "total_ms"),
    ):
        per_provider: dict[str, list[float]] = defaultdict(list)
        for r in records:
            value = getattr(r, attr)
            if value is not None:
                per_provider[provider_of(r)].append(value / 1000)
        counts = {dict(k)["provider"]: v for k, v in samples[f"{name}_count"].items()}
        sums = {dict(k)["provider"]: v for k, v in samples[f"{name}_sum"].items()}
        assert counts == {p: float(len(v)) for p, v in per_provider.items()}, name
        assert sums == {p: pytest.approx(sum(v), rel=1e-6) for p, v in per_provider.items()}
        for provider, values in per_provider.items():
            inf = samples[f"{name}_bucket"][labels(provider=provider, le="+Inf")]
            assert inf == len(values)

    assert samples["gateway_in_flight_exchanges"] == {(): 0.0}
    assert () in samples["gateway_audit_queue_depth"]
    assert samples["gateway_audit_backpressure_events_total"] == {(): 0.0}


async def test_full_audit_queue_applies_backpressure_and_counts_it(tmp_path, servers, monkeypatch):
    original = SQLiteStore.write
    writes: list[int] = []

    async def slow_write(self: SQLiteStore, records: Any) -> None:
        # A slow disk: the first write stalls long enough for every exchange to finish meanwhile.
        await asyncio.sleep(0.3 if not writes else 0.01)
        writes.append(len(records))
        await original(self, records)

    monkeypatch.setattr(SQLiteStore, "write", slow_write)
    n = 30
    db = tmp_path / "audit.db"
    settings = gateway_settings("http://127.0.0.1:9", f"sqlite:///{db}", queue_size=1)
    app = build_app(settings, env={})
    runner, base = await servers.start(app)
    cases = [
        Case(
            f"bp-{i}",
            ("openai", "anthropic")[i % 2],
            "mock",
            bool(i % 3),
            "mock-text",
            Expect(200, "stop"),
        )
        for i in range(n)
    ]
    sent = await send_all(base, cases)
    assert [s.status for s in sent] == [200] * n
    writer = app[GATEWAY].observer.writer
    assert writer is not None
    async with aiohttp.ClientSession() as session:
        await wait_idle(app)
        samples, _ = parse_metrics(await get_metrics(session, base))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while samples["gateway_audit_queue_depth"][()] != 0:  # the writer catches up
            assert loop.time() < deadline, samples["gateway_audit_queue_depth"]
            await asyncio.sleep(0.05)
            samples, _ = parse_metrics(await get_metrics(session, base))
    events = samples["gateway_audit_backpressure_events_total"][()]
    assert events > 0, "a queue of 1 behind a slow store must make exchanges wait"
    assert events == writer.backpressure_events
    await servers.stop(runner)

    store = SQLiteStore(db)
    try:
        records = await store.fetch()
    finally:
        await store.close()
    assert sorted(r.id for r in records) == sorted(s.request_id for s in sent)  # nothing dropped
    assert sum(writes) == n
