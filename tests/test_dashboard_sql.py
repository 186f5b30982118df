"""The dashboard's SQL aggregates give exactly what `gateway audit` computes in Python, on SQLite
and PostgreSQL: every group's figures (by provider, model, route and client), the latest cut
exchanges, and the JSON `gateway audit --format json` prints, over a seeded mix of records that
exercises every rule of the report (errors, unknown and missing stop reasons, retries, fallbacks
past an open circuit, withheld calls, token counts that are not answers, unknown costs,
recovered streams)."""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.audit.command import run_audit
from gateway.audit.objects import summary_object
from gateway.audit.record import AuditRecord
from gateway.audit.report import summarize as python_summarize
from gateway.audit.report import truncated_list
from gateway.audit.store import AuditStore
from gateway.dashboard import aggregate
from gateway.dashboard.aggregate import Window
from tests.audit_util import BACKENDS, T0, open_backend

PROVIDERS = ["openai", "anthropic", "gemini", None, ""]
MODELS = ["gpt-x", "claude-y", "", "gemini-z"]
STOPS = [None, "stop", "length", "tool_calls", "context_window", "refusal", "weird", "error"]
OUTCOMES = ["answered", "error_status", "timeout", "circuit_open", "broken", "unreachable"]
TOOLS = ["get_weather", "search", "run_shell"]


def random_attempts(rng: random.Random) -> list[dict[str, Any]]:
    attempts = []
    for _ in range(rng.choice([0, 1, 1, 1, 2, 3])):
        attempt: dict[str, Any] = {
            "provider": rng.choice(["openai", "anthropic", None]),
            "upstream_model": rng.choice(["m1", "m2"]),
            "outcome": rng.choice(OUTCOMES),
        }
        if rng.random() < 0.1:
            del attempt["outcome"]  # an attempt without an outcome counts as tried
        attempts.append(attempt)
    return attempts


def random_record(i: int, rng: random.Random) -> AuditRecord:
    started = T0 + i * 7.5 + rng.random()
    truncated = rng.random() < 0.3
    withheld = (
        [{"id": f"call_{i}_{k}", "name": rng.choice(TOOLS)} for k in range(rng.choice([0, 1, 2]))]
        if truncated
        else []
    )
    return AuditRecord(
        id=f"req_{i:05d}_{rng.randrange(1 << 30):x}",
        started_at=started,
        client_format=rng.choice(["openai", "anthropic", "responses"]),
        stream=rng.random() < 0.5,
        model=rng.choice(MODELS),
        route=rng.choice(["gpt-*", None, "claude-*"]),
        provider=rng.choice(PROVIDERS),
        first_byte_at=None if rng.random() < 0.2 else started + rng.random() * 2,
        ended_at=None if rng.random() < 0.1 else started + 2 + rng.random() * 5,
        http_status=rng.choice([200, 200, 200, 400, 429, 500, 502, None]),
        stop_reason=rng.choice(STOPS),
        truncated=truncated,
        cut_reason=rng.choice(
            ["max_tokens", "missing_terminator", "connection_lost", "context_window"]
        )
        if truncated
        else None,
        withheld_tool_calls=withheld,
        parse_failures=[{"error_class": "JSONDecodeError", "offset": 3, "length": 9}]
        * rng.choice([0, 0, 1, 2]),
        input_tokens=rng.choice([None, rng.randrange(1, 5000)]),
        output_tokens=rng.choice([None, rng.randrange(1, 900)]),
        error_class=rng.choice([None, None, None, "UpstreamTimeout"]),
        dropped_fields=rng.choice([None, [], ["logprobs"], ["seed", "n"]]),
        attempts=random_attempts(rng),
        cost_usd=rng.choice([None, round(rng.random() / 100, 8)]),
        ended_by=rng.choice([None, "client", "server"]) if truncated else None,
        operation=rng.choice(["generate"] * 8 + ["count_tokens", "embed"]),
        recovered=rng.choice([None, None, None, {"breaks": 1, "causes": ["upstream_timeout"]}]),
    )


RECORDS = [random_record(i, random.Random(1000 + i)) for i in range(400)]


@asynccontextmanager
async def filled(
    kind: str, tmp_path: Path, records: list[AuditRecord] = RECORDS
) -> AsyncIterator[AuditStore]:
    """An opened store of `kind` holding `records`."""
    async with open_backend(kind, tmp_path) as backend:
        store = backend.store()
        await store.open()
        await store.write(records)
        yield store


def normalized(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Costs are float sums (fsum in Python, the database's own SUM): equal to 1e-9 relative."""
    out = []
    for item in objects:
        item = dict(item)
        cost = item.pop("cost_usd", None)
        item["cost_usd"] = None if cost is None else round(cost, 9)
        out.append(item)
    return out


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("by", ["provider", "model", "route", "client"])
async def test_sql_summaries_equal_the_python_report(kind: str, by: str, tmp_path: Path) -> None:
    async with filled(kind, tmp_path) as store:
        expected = [summary_object(s) for s in python_summarize(RECORDS, by)]
        got = [summary_object(s) for s in await aggregate.summarize(store, by, Window())]
        assert normalized(got) == normalized(expected)
        # A window and a provider filter select the same records as filtering in Python.
        since, until = T0 + 600, T0 + 2400
        picked = [r for r in RECORDS if since <= r.started_at < until and r.provider == "openai"]
        window = Window(since=since, until=until, provider="openai")
        expected = [summary_object(s) for s in python_summarize(picked, by)]
        got = [summary_object(s) for s in await aggregate.summarize(store, by, window)]
        assert normalized(got) == normalized(expected)
        assert any(s["retried"] for s in expected) and any(s["fallbacks"] for s in expected)


@pytest.mark.parametrize("kind", BACKENDS)
async def test_missing_provider_filter_and_latest_cut(kind: str, tmp_path: Path) -> None:
    async with filled(kind, tmp_path) as store:
        nobody = [r for r in RECORDS if not r.provider]
        got = await aggregate.summarize(store, "provider", Window(provider="-"))
        assert [s.group for s in got] == ["-"]
        assert got[0].requests == sum(1 for r in nobody if r.operation == "generate")
        assert await aggregate.latest_cut(store, Window(), 25) == truncated_list(RECORDS, 25)


@pytest.mark.parametrize("kind", BACKENDS)
async def test_latest_cut_ties_in_gateway_audits_order(kind: str, tmp_path: Path) -> None:
    """Cut exchanges started at the same instant, some past the limit: the same ones, in the
    same order, as `gateway audit --truncated --limit` prints."""
    rng = random.Random(5)
    tied = [random_record(i, rng) for i in range(12)]
    for i, record in enumerate(tied):
        record.started_at = T0 + (i % 2)  # two instants, six records each
        record.truncated, record.cut_reason = True, "length"
    async with filled(kind, tmp_path, tied) as store:
        for limit in (3, 8, 20):
            printed = orjson.loads(
                await run_audit(
                    store, since=None, by="provider", fmt="json", truncated=True, limit=limit
                )
            )
            got = await aggregate.latest_cut(store, Window(), limit)
            assert [t.id for t in got] == [p["id"] for p in printed]


@pytest.mark.parametrize("kind", BACKENDS)
async def test_api_json_equals_gateway_audit_json(kind: str, tmp_path: Path) -> None:
    """What `gateway audit --format json` prints (its own code, run over the same store) and what
    the dashboard's summary holds are the same objects."""
    async with filled(kind, tmp_path) as store:
        for by in ("provider", "model"):
            printed = orjson.loads(
                await run_audit(store, since=None, by=by, fmt="json", truncated=False, limit=20)
            )
            overview = await aggregate.overview(store, Window(), 3600)
            assert normalized(overview[f"by_{by}"]) == normalized(printed)
        printed = orjson.loads(
            await run_audit(store, since=None, by="provider", fmt="json", truncated=True, limit=20)
        )
        assert overview["latest_cut"] == printed


@pytest.mark.parametrize("kind", BACKENDS)
async def test_overview_panels(kind: str, tmp_path: Path) -> None:
    async with filled(kind, tmp_path) as store:
        step = 600
        overview = await aggregate.overview(store, Window(), step)
        answers = [r for r in RECORDS if r.operation == "generate"]
        # The series adds up to the totals, and each point is in its bucket.
        series = overview["series"]
        assert sum(p["requests"] for p in series) == len(answers) == overview["totals"]["requests"]
        assert sum(p["truncated"] for p in series) == sum(r.truncated for r in answers)
        for point in series:
            assert point["t"] % step == 0
            assert sum(point["stop_reasons"].values()) == point["requests"]
            assert sum(v["requests"] for v in point["providers"].values()) == point["requests"]
        first = min(r.started_at for r in RECORDS)
        assert series[0]["t"] == math.floor(first / step) * step
        # Withheld calls per tool name, and cut reasons, as counted in Python.
        tools: dict[str, int] = {}
        for r in answers:
            for call in r.withheld_tool_calls:
                tools[call["name"]] = tools.get(call["name"], 0) + 1
        assert {t["name"]: t["count"] for t in overview["withheld_tools"]} == tools
        reasons: dict[str, int] = {}
        for r in answers:
            if r.truncated:
                reasons[r.cut_reason or "-"] = reasons.get(r.cut_reason or "-", 0) + 1
        assert {c["reason"]: c["count"] for c in overview["cut_reasons"]} == reasons
        assert {"connection_lost", "missing_terminator"} <= set(reasons)  # two bars, not one
        assert overview["choices"]["providers"] == sorted({r.provider or "-" for r in RECORDS})
        # A model filter narrows every panel.
        narrowed = await aggregate.overview(store, Window(model="gpt-x"), step)
        assert [s["group"] for s in narrowed["by_model"]] == ["gpt-x"]
        assert narrowed["totals"]["requests"] == sum(1 for r in answers if r.model == "gpt-x")
