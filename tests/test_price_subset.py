"""A serving process prices with genai-prices' table cut to its providers (gateway.price_subset).

The cut table must price every model as the whole table does, fallbacks included (Azure's
lookups fall back to OpenAI's and Anthropic's models, Google's to Anthropic's); the serving
process must never import the whole table when its providers are all known to it; a provider
priced by the model name takes the whole table; a failing child costs nothing but the saving.
The last test runs the real `gateway serve` against the loopback upstream and checks the cost
it recorded against genai-prices' own calculation.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from genai_prices import Usage, calc_price

from gateway import price_subset
from gateway.cost import Pricer, Prices, Tokens
from gateway.price_subset import PendingPrices, cut, hints_of
from gateway.price_table import table_of, whole_table
from gateway.settings import parse_settings
from tests.conftest import Stack
from tests.scenarios import Answer, openai_body
from tests.test_shutdown import GatewayProcess
from tests.upstream import FakeUpstream, Script

HINTS = {
    "loopback": ("http://127.0.0.1:9/v1", "openai"),
    "claude": ("http://127.0.0.1:9", "anthropic"),
    "azure": ("https://r.openai.azure.com/openai/v1", "azure"),
    "groq": ("https://api.groq.com/openai/v1", "openai"),
    "gemini": ("http://127.0.0.1:9", "google"),
}
TOKENS = (Tokens(1500, 300), Tokens(200_000, 800, 1000, 500), Tokens(40, 7, 10, 0))


def test_the_cut_table_prices_every_model_as_the_whole_one() -> None:
    whole = whole_table()
    providers, chosen = cut(HINTS)
    assert providers == {
        "loopback": "openai",
        "claude": "anthropic",
        "azure": "azure",
        "groq": "groq",
        "gemini": "google",
    }
    assert chosen is not None
    ids = [p.id for p in chosen]
    # The configured ones and their fallbacks, nothing else.
    fallbacks = {
        f
        for p in whole.providers
        if p.id in providers.values()
        for f in p.fallback_model_providers or ()
    }
    assert set(ids) == set(providers.values()) | fallbacks
    assert {"anthropic", "deepseek", "x-ai"} <= set(ids) and len(ids) < len(whole.providers) / 3
    cut_pricer = Pricer.of(Prices(providers, table_of(chosen)))
    whole_pricer = Pricer(providers, table=whole)
    # Every model of every kept provider, asked of every configured provider: found or not
    # (a fallback's model asked of Azure is found, of Groq not), the same cost to the digit.
    names = sorted({m.id for p in chosen for m in p.models})
    found = 0
    for name in providers:
        for model in names:
            for tokens in TOKENS:
                expected = whole_pricer.cost(tokens, name, model)
                assert cut_pricer.cost(tokens, name, model) == expected, (name, model, tokens)
                found += expected is not None
    assert found > 1000
    assert cut_pricer.cost(Tokens(1000, 100), "azure", "claude-sonnet-4-5") is not None


def test_a_provider_priced_by_the_model_name_takes_the_whole_table() -> None:
    mock = parse_settings({"providers": {"m": {"kind": "mock"}, "o": {"kind": "openai"}}})
    assert hints_of(mock) is None
    pending = PendingPrices.start(mock)
    assert pending.process is None
    prices = asyncio.run(pending.result())
    assert prices.table is whole_table() and prices.providers == {"m": None, "o": "openai"}
    # Known only once the table is read: a base URL it does not know, on a kind without a hint.
    assert cut({"self": ("http://127.0.0.1:9/v1", None)}) == ({"self": None}, None)


# In a fresh interpreter, as `gateway serve` does: the child answers, this process never
# imports the table (nor genai-prices' `__init__`), and prices as genai-prices does.
SERVING = """
import asyncio, sys
from gateway.cost import Pricer, Tokens
from gateway.price_subset import PendingPrices
from gateway.settings import parse_settings

settings = parse_settings({"providers": {
    "o": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"},
    "a": {"kind": "anthropic", "base_url": "http://127.0.0.1:9", "api_key": "k"},
}})
prices = asyncio.run(PendingPrices.start(settings).result())
pricer = Pricer.of(prices)
costs = [pricer.cost(Tokens(1500, 200, 1000, None), "o", "gpt-4o"),
         pricer.cost(Tokens(2600, 250, 2000, 500), "a", "claude-sonnet-4-5")]
loaded = sorted(m for m in sys.modules if m.startswith(("genai_prices", "httpx2")))
print(repr((dict(prices.providers), [p.id for p in prices.table.providers],
            [c.usd for c in costs], loaded)))
"""


def test_the_serving_process_never_imports_the_whole_table() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SERVING], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    providers, kept, costs, loaded = eval(result.stdout)  # our own repr
    assert providers == {"o": "openai", "a": "anthropic"}
    assert kept == ["anthropic", "openai"]
    assert costs == [
        float(
            calc_price(
                Usage(input_tokens=1500, output_tokens=200, cache_read_tokens=1000),
                "gpt-4o",
                provider_id="openai",
            ).total_price
        ),
        float(
            calc_price(
                Usage(
                    input_tokens=2600,
                    output_tokens=250,
                    cache_read_tokens=2000,
                    cache_write_tokens=500,
                ),
                "claude-sonnet-4-5",
                provider_id="anthropic",
            ).total_price
        ),
    ]
    assert "genai_prices.data" not in loaded
    assert "genai_prices" not in loaded and not [m for m in loaded if m.startswith("httpx2")]
    assert "genai_prices.types" in loaded


OPENAI_ONLY = {"providers": {"o": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1"}}}


@pytest.mark.parametrize(
    "child",
    [("-c", "import sys; sys.exit(3)"), ("-c", "import sys; sys.stdout.write('not a pickle')")],
    ids=["exits", "garbles"],
)
def test_a_failing_child_leaves_the_whole_table(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, child: tuple[str, ...]
) -> None:
    monkeypatch.setattr(price_subset, "CHILD", child)
    with caplog.at_level(logging.WARNING, logger="gateway.prices"):
        # Started outside a loop here (a serving process starts it before it serves).
        pending = PendingPrices.start(parse_settings(OPENAI_ONLY))
        prices = asyncio.run(pending.result())
    assert prices.table is whole_table()
    assert prices.providers == {"o": "openai"}
    assert [r.getMessage() for r in caplog.records] == [
        "price table: the child process failed (exit 3); the whole table"
        if child[1].endswith("exit(3)")
        else "price table: the child's answer (UnpicklingError); the whole table"
    ]


# --- the real `gateway serve` -----------------------------------------------------------------

CONFIG = """
[providers.openai]
kind = "openai"
base_url = "{upstream}/v1"
api_key = "sk-upstream"

[[routes]]
match = "subset-*"
provider = "openai"
upstream_model = "gpt-4o"

[audit]
store = "sqlite:///{db}"
"""


def cost_of(db: Path, model: str) -> tuple[Any, ...]:
    deadline = time.monotonic() + 10
    while True:
        with sqlite3.connect(db) as conn:
            row = conn.execute(
                "SELECT cost_usd, cost_source FROM audit_records WHERE model = ?", (model,)
            ).fetchone()
        if row is not None:
            return tuple(row)
        assert time.monotonic() < deadline, "no record"
        time.sleep(0.02)


async def test_gateway_serve_records_genai_prices_own_cost(
    stack: Stack, upstream: FakeUpstream, tmp_path: Path
) -> None:
    body = openai_body(Answer(text="42", usage=(1200, 300)), "gpt-4o")
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 1000}
    upstream.script("gpt-4o", Script(body=orjson.dumps(body)))
    config = tmp_path / "gateway.toml"
    db = tmp_path / "trail.db"
    config.write_text(CONFIG.format(upstream=stack.upstream_url, db=db))
    gateway = GatewayProcess(config, tmp_path, "--log-level", "debug")
    try:
        base = await gateway.ready()
        async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0) as oa:
            reply = await oa.chat.completions.create(
                model="subset-x", messages=[{"role": "user", "content": "hi"}]
            )
        assert reply.choices[0].message.content == "42"
        gateway.signal(signal.SIGTERM)
        assert await gateway.wait(15) == 0
    finally:
        gateway.kill()
    usage = Usage(input_tokens=1200, output_tokens=300, cache_read_tokens=1000)
    expected = float(calc_price(usage, "gpt-4o", provider_id="openai").total_price)
    assert cost_of(db, "subset-x") == (expected, "table")
    # It priced with the cut table, which a child process read: the table's OpenAI only (each
    # worker says so: one per core by default).
    said = [orjson.loads(line) for line in gateway.lines if '"price table' in line]
    assert said and {tuple(line["price_providers"]) for line in said} == {("openai",)}


def test_the_child_starts_without_asyncio() -> None:
    """The child imports gateway.price_subset: asyncio would be 60 ms more of its start."""
    code = "import sys, gateway.price_subset; print('asyncio' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
