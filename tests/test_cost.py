"""Cost per exchange, piece by piece: the pricer, the `price` settings, the report and /metrics
arithmetic, and migration 5 on a trail written at schema version 4 (SQLite, and PostgreSQL when
GATEWAY_TEST_POSTGRES_URL is set). The end-to-end path is tests/test_cost_e2e.py."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import sqlite3
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from genai_prices import Usage, calc_price

from gateway.audit.migrations import (
    COLUMNS,
    JSON_COLUMNS,
    LATEST_VERSION,
    MIGRATIONS,
    migrate_postgresql,
    migrate_sqlite,
)
from gateway.audit.postgres_store import encode as postgres_encode
from gateway.audit.record import AuditRecord
from gateway.audit.render import render_csv, render_json, render_table
from gateway.audit.report import summarize
from gateway.audit.sqlite_store import encode as sqlite_encode
from gateway.cost import Pricer, Tokens, price_provider, route_cost
from gateway.metrics import GatewayMetrics
from gateway.price_table import whole_table
from gateway.settings import ConfigError, parse_settings
from gateway.settings_price import PriceSettings
from tests.audit_util import BACKENDS, Backend, full_record, open_backend, sparse_record

PRICER = Pricer({"openai": "openai", "anthropic": "anthropic", "local": None})


def table(model: str, provider: str | None, **usage: int) -> float:
    return float(calc_price(Usage(**usage), model_ref=model, provider_id=provider).total_price)


# --- the pricer ---------------------------------------------------------------------------------


def test_table_cost_is_genai_prices_own() -> None:
    cost = PRICER.cost(Tokens(1500, 200, 1000, None), "openai", "gpt-4o")
    assert cost is not None and cost.source == "table"
    assert cost.usd == table(
        "gpt-4o", "openai", input_tokens=1500, output_tokens=200, cache_read_tokens=1000
    )
    cost = PRICER.cost(Tokens(3000, 10, 2000, 500), "anthropic", "claude-sonnet-4-5")
    assert cost is not None
    assert cost.usd == table(
        "claude-sonnet-4-5",
        "anthropic",
        input_tokens=3000,
        output_tokens=10,
        cache_read_tokens=2000,
        cache_write_tokens=500,
    )


def test_a_kind_without_a_price_provider_is_matched_by_model_name() -> None:
    cost = PRICER.cost(Tokens(1000, 100), "local", "claude-sonnet-4-5")
    assert cost is not None
    assert cost.usd == table("claude-sonnet-4-5", None, input_tokens=1000, output_tokens=100)
    assert PRICER.cost(Tokens(1000, 100), "local", "llama3.1:8b") is None


def test_the_price_provider_follows_the_base_url_else_the_kind() -> None:
    s = parse_settings(
        {
            "providers": {
                "groq": {"kind": "openai", "base_url": "https://api.groq.com/openai/v1"},
                "official": {"kind": "openai"},
                "loopback": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1"},
                "claude": {"kind": "anthropic", "base_url": "http://127.0.0.1:9"},
                "mock": {"kind": "mock"},
            }
        }
    )
    assert {name: price_provider(p, whole_table()) for name, p in s.providers.items()} == {
        "groq": "groq",
        "official": "openai",
        "loopback": "openai",
        "claude": "anthropic",
        "mock": None,
    }
    pricer = Pricer.for_settings(s)
    cost = pricer.cost(Tokens(1000, 100), "groq", "llama-3.3-70b-versatile")
    assert cost is not None
    assert cost.usd == table(
        "llama-3.3-70b-versatile", "groq", input_tokens=1000, output_tokens=100
    )
    assert pricer.cost(Tokens(1000, 100), "loopback", "llama-3.3-70b-versatile") is None


@pytest.mark.parametrize(
    ("tokens", "provider", "model"),
    [
        (Tokens(10, 5), "openai", "no-such-model"),  # the table has no such model
        (Tokens(10, 5), "openai", "claude-sonnet-4-5"),  # nor has OpenAI's provider this one
        (Tokens(None, 5), "openai", "gpt-4o"),  # no input count
        (Tokens(10, None), "openai", "gpt-4o"),  # no output count
        (Tokens(10, 5, 50), "openai", "gpt-4o"),  # more cached than input: contradicts itself
        (Tokens(10, 5), None, "gpt-4o"),  # no provider answered
        (Tokens(10, 5), "unconfigured", "gpt-4o"),
        (Tokens(10, 5), "openai", ""),
    ],
)
def test_unknown_cost_is_none_never_zero(tokens: Tokens, provider: str | None, model: str) -> None:
    assert PRICER.cost(tokens, provider, model) is None


def test_lookups_are_cached_up_to_a_bound_and_still_price_past_it() -> None:
    pricer = Pricer({"openai": "openai"}, max_cached=2)
    names = ["gpt-4o", "no-such-model-1", "no-such-model-2", "gpt-4o-mini"]
    for name in names * 2:
        pricer.cost(Tokens(10, 5), "openai", name)
    mini = pricer.cost(Tokens(10, 5), "openai", "gpt-4o-mini")  # past the bound: not cached
    assert mini is not None
    assert mini.usd == table("gpt-4o-mini", "openai", input_tokens=10, output_tokens=5)
    assert pricer.cost(Tokens(10, 5), "openai", "no-such-model-1") is None  # a cached miss


def test_route_price_is_exact_and_cache_rates_default_to_input() -> None:
    price = PriceSettings(input=2.5, output=10, cache_read=0.25, cache_write=3.125)
    got = route_cost(Tokens(4000, 700, 1000, 2000), price)
    exact = (1000 * Decimal("2.5") + 1000 * Decimal("0.25") + 2000 * Decimal("3.125")) + 7000
    assert got == float(exact / 10**6) == 0.016
    plain = PriceSettings(input=0.1, output=0.3)
    assert route_cost(Tokens(4000, 700, 1000, 2000), plain) == float(
        (4000 * Decimal("0.1") + 700 * Decimal("0.3")) / 10**6
    )
    assert route_cost(Tokens(10, 1, 20, 0), price) is None  # more cached than input
    free = PRICER.cost(Tokens(10, 1), "openai", "gpt-4o", PriceSettings(input=0, output=0))
    assert free is not None and free.usd == 0.0 and free.source == "route"  # known: zero


# --- the `price` settings -----------------------------------------------------------------------


def settings_with(route: dict[str, Any]) -> Any:
    return parse_settings({"providers": {"m": {"kind": "mock"}}, "routes": [route]})


def test_route_and_target_prices_resolve_the_target_first() -> None:
    deal = {"input": 1, "output": 2}
    own = {"input": 3, "output": 4, "cache_read": 0.5}
    s = settings_with(
        {
            "match": "x*",
            "price": deal,
            "targets": [{"provider": "m", "price": own}, {"provider": "m", "upstream_model": "y"}],
        }
    )
    route = s.resolve_route("x1")
    assert route is not None
    first, second = route.targets
    assert first.price == PriceSettings(input=3.0, output=4.0, cache_read=0.5)
    assert second.price == PriceSettings(input=1.0, output=2.0)
    short = settings_with({"match": "z", "provider": "m", "price": deal}).resolve_route("z")
    assert short is not None and short.targets[0].price == PriceSettings(input=1, output=2)
    none = settings_with({"match": "z", "provider": "m"}).resolve_route("z")
    assert none is not None and none.targets[0].price is None


@pytest.mark.parametrize(
    ("price", "problem"),
    [
        ({"input": -1, "output": 1}, "routes[0].price.input: must be greater than or equal to 0"),
        ({"input": 1, "output": 1, "cached": 1}, "routes[0].price.cached: unknown key"),
        ({"input": 1}, "routes[0].price.output: required key missing"),
        ({"input": "2.5", "output": 1}, "routes[0].price.input: must be a valid number"),
        ({"input": True, "output": 1}, "routes[0].price.input"),
        ({"input": float("inf"), "output": 1}, "routes[0].price.input: must be a finite number"),
        ({"input": 1, "output": 1, "cache_write": -0.5}, "routes[0].price.cache_write"),
    ],
)
def test_bad_prices_are_refused_naming_the_key(price: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings_with({"match": "x", "provider": "m", "price": price})
    assert problem in str(info.value)


def test_a_bad_target_price_names_the_target() -> None:
    with pytest.raises(ConfigError, match=r"routes\[0\]\.targets\[0\]\.price\.output"):
        settings_with({"match": "x", "targets": [{"provider": "m", "price": {"input": 1}}]})


# --- the report and /metrics --------------------------------------------------------------------


def answered(i: int, provider: str, model: str, cost: float | None) -> AuditRecord:
    return sparse_record(
        i,
        provider=provider,
        model=model,
        route="*",
        stop_reason="stop",
        cost_usd=cost,
        cost_source=None if cost is None else "table",
    )


def cost_records() -> list[AuditRecord]:
    return [
        answered(1, "openai", "gpt-4o", 0.1),
        answered(2, "openai", "gpt-4o", 0.2),
        answered(3, "openai", "gpt-4o-mini", None),  # unknown
        answered(4, "anthropic", "claude", 0.000041),
        sparse_record(5, provider="openai", model="gpt-4o", route="*", http_status=502),
    ]


def test_report_sums_known_costs_and_counts_unknown_apart() -> None:
    groups = {s.group: s for s in summarize(cost_records(), "provider")}
    assert groups["openai"].cost_usd == math.fsum([0.1, 0.2])
    assert groups["openai"].cost_unknown == 1  # not the refused 502: nothing answered
    assert groups["anthropic"].cost_usd == 0.000041 and groups["anthropic"].cost_unknown == 0
    by_model = {s.group: s for s in summarize(cost_records(), "model")}
    assert by_model["gpt-4o-mini"].cost_usd is None and by_model["gpt-4o-mini"].cost_unknown == 1
    as_json = {g["group"]: g for g in orjson.loads(render_json(summarize(cost_records(), "model")))}
    assert as_json["gpt-4o"]["cost_usd"] == math.fsum([0.1, 0.2])
    assert (as_json["gpt-4o-mini"]["cost_usd"], as_json["gpt-4o-mini"]["cost_unknown"]) == (None, 1)
    lines = render_csv(summarize(cost_records(), "model")).splitlines()
    at = lines[0].split(",").index("cost_usd")  # then cost_unknown
    rows = {line.split(",")[1]: line.split(",")[at : at + 2] for line in lines[1:]}
    assert rows == {
        "gpt-4o": ["0.30000000", "0"],
        "gpt-4o-mini": ["", "1"],
        "claude": ["0.00004100", "0"],
    }


def test_table_shows_cost_only_when_some_cost_is_known() -> None:
    text = render_table(summarize(cost_records(), "provider"), "provider", 80)
    cost_part = text[text.index("cost by provider") :].splitlines()
    cells = {line.split()[0]: line.split()[1:] for line in cost_part[3:] if line[:1].isalpha()}
    assert cells == {"openai": ["$0.3000", "1"], "anthropic": ["$0.000041", "0"]}
    assert max(len(line) for line in text.splitlines()) <= 80
    unknown_only = [answered(1, "openai", "gpt-4o-mini", None)]
    assert "cost" not in render_table(summarize(unknown_only, "provider"), "provider", 80)


def samples(metrics: GatewayMetrics, name: str) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name:
                out[(sample.labels["provider"], sample.labels["model"])] = sample.value
    return out


def test_metrics_count_cost_and_unknown_with_folded_model_labels() -> None:
    metrics = GatewayMetrics(metric_models=2)
    for record in cost_records():
        metrics.observe(record)
    metrics.observe(answered(6, "openai", "gpt-4o", 0.25))
    assert samples(metrics, "gateway_cost_usd_total") == {
        ("openai", "gpt-4o"): pytest.approx(0.55),
        ("anthropic", "other"): 0.000041,  # past metric_models = 2 distinct names
    }
    assert samples(metrics, "gateway_cost_unknown_exchanges_total") == {
        ("openai", "gpt-4o-mini"): 1.0
    }


# --- migration 5 --------------------------------------------------------------------------------


V4_COLUMNS = COLUMNS[: COLUMNS.index("cost_usd")]


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with open_backend(request.param, tmp_path) as b:
        yield b


async def _seed_v4(backend: Backend, record: AuditRecord) -> None:
    """A trail as a gateway at schema 4 left it, holding `record` (its v4 columns only)."""
    if backend.kind == "sqlite":
        assert backend.path is not None
        path = backend.path

        def seed() -> None:
            path.parent.mkdir(parents=True)
            conn = sqlite3.connect(path, isolation_level=None)
            try:
                migrate_sqlite(conn, MIGRATIONS[:4])
                conn.execute(
                    f"INSERT INTO audit_records ({', '.join(V4_COLUMNS)}) "
                    f"VALUES ({', '.join('?' for _ in V4_COLUMNS)})",
                    sqlite_encode(record)[: len(V4_COLUMNS)],
                )
            finally:
                conn.close()

        await asyncio.to_thread(seed)
        return
    conn = await asyncpg.connect(backend.url)
    try:
        await migrate_postgresql(conn, MIGRATIONS[:4])
        marks = ", ".join(
            f"${i}::jsonb" if c in JSON_COLUMNS else f"${i}" for i, c in enumerate(V4_COLUMNS, 1)
        )
        await conn.execute(
            f"INSERT INTO audit_records ({', '.join(V4_COLUMNS)}) VALUES ({marks})",
            *postgres_encode(record)[: len(V4_COLUMNS)],
        )
    finally:
        await conn.close()


async def test_migration_5_adds_the_cost_to_a_schema_4_trail(backend: Backend) -> None:
    """The old row keeps everything and reads back with an unknown cost (NULL, not 0); new rows
    hold their cost, and the report counts the old answered row as of unknown cost."""
    old = dataclasses.replace(full_record(1), cost_usd=None, cost_source=None)
    await _seed_v4(backend, old)
    assert await backend.versions() == [1, 2, 3, 4]
    store = backend.store()
    await store.open()
    assert await backend.versions() == list(range(1, LATEST_VERSION + 1))
    columns = await backend.columns()
    assert columns[columns.index("key_name") + 1 :][:2] == ["cost_usd", "cost_source"]
    new = full_record(2, cost_usd=0.000123456789, cost_source="route")
    await store.write([new])
    got = {r.id: r for r in await store.fetch()}
    assert got[old.id] == old and got[old.id].cost_usd is None
    assert got[new.id] == new and got[new.id].cost_usd == 0.000123456789
    rows = await backend.rows("SELECT id, cost_usd, cost_source FROM audit_records ORDER BY id")
    assert rows == [(old.id, None, None), (new.id, 0.000123456789, "route")]
    groups = {s.group: s for s in summarize(list(got.values()), "provider")}
    assert (groups[old.provider or ""].cost_usd, groups[old.provider or ""].cost_unknown) == (
        None,
        1,
    )
    assert (groups[new.provider or ""].cost_usd, groups[new.provider or ""].cost_unknown) == (
        0.000123456789,
        0,
    )


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai", "gpt-4o-mini"),
        ("openai", "gpt-4o"),
        ("anthropic", "claude-sonnet-4-5"),  # tiered past 200k input tokens
        ("anthropic", "claude-3-5-haiku-latest"),
        ("google", "gemini-2.5-pro"),  # tiered too
        ("aws", "anthropic.claude-3-5-sonnet-20240620-v1:0"),
    ],
)
@pytest.mark.parametrize("input_tokens", [0, 1, 1200, 199_999, 200_001, 1_000_000])
def test_the_fast_path_is_genai_prices_to_the_last_digit(provider, model, input_tokens):
    """Plain prices are computed from rates read once (gateway.cost.Linear): the same figure
    as genai-prices' own calculation, below and above a tier's threshold."""
    from genai_prices import Usage, calc_price

    from gateway.cost import Linear

    pricer = Pricer({provider: provider})
    read, write = min(100, input_tokens), min(50, max(0, input_tokens - 100))
    tokens = Tokens(input_tokens, 321, read, write)
    cost = pricer.cost(tokens, provider, model)
    usage = Usage(
        input_tokens=input_tokens,
        output_tokens=321,
        cache_read_tokens=read,
        cache_write_tokens=write,
    )
    expected = float(calc_price(usage, model, provider_id=provider).total_price)
    assert cost is not None and cost.usd == expected
    assert any(isinstance(rates, Linear) for rates in pricer._linear.values())
