"""One run mixing every wire, reported by `gateway audit`: an OpenAI Chat, an Anthropic, an
OpenAI Responses, a Gemini and a Bedrock upstream (and Azure OpenAI, a kind on the OpenAI wire)
each answer one complete and one cut (max tokens) exchange, through clients of all three
formats, into one audit trail. The report (the real console script, JSON by provider) shows
each provider's truncation rate, its stop reasons and its cost, known for each model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from genai_prices import Usage, calc_price

from tests.test_endpoints import request
from tests.test_stop_reason_table import (
    CLIENT_BODIES,
    TableStack,
    anthropic_answer,
    bedrock_answer,
    gemini_answer,
    openai_answer,
    responses_answer,
)

# provider name -> (its settings at the upstream URL, the model it serves, its answer builder,
# the native values of a complete and a cut answer, the genai-prices provider)
WIRES: dict[str, tuple[Any, str, Any, tuple[str, str], str]] = {
    "openai": (
        lambda url: {"kind": "openai", "base_url": f"{url}/v1"},
        "gpt-4o-mini",
        openai_answer,
        ("stop", "length"),
        "openai",
    ),
    "anthropic": (
        lambda url: {"kind": "anthropic", "base_url": url},
        "claude-sonnet-4-5",
        anthropic_answer,
        ("end_turn", "max_tokens"),
        "anthropic",
    ),
    "responses": (
        lambda url: {"kind": "openai_responses", "base_url": f"{url}/v1"},
        "gpt-4o",
        responses_answer,
        ("completed", "incomplete:max_output_tokens"),
        "openai",
    ),
    "gemini": (
        lambda url: {"kind": "gemini", "base_url": url},
        "gemini-2.5-flash",
        gemini_answer,
        ("STOP", "MAX_TOKENS"),
        "google",
    ),
    "bedrock": (
        lambda url: {"kind": "bedrock", "region": "us-east-1", "base_url": url},
        "anthropic.claude-3-5-sonnet-20240620-v1:0",
        bedrock_answer,
        ("end_turn", "max_tokens"),
        "aws",
    ),
    "azure": (
        lambda url: {"kind": "azure_openai", "base_url": url, "api_version": "v1"},
        "gpt-4.1",
        openai_answer,
        ("stop", "length"),
        "azure",
    ),
}
# The figures every answer builder reports (tests/test_stop_reason_table.py).
INPUT_TOKENS, OUTPUT_TOKENS = 3, 2


class MixedStack(TableStack):
    async def _start(self) -> None:
        upstream = await self._serve(self.upstream.app())
        providers = {
            name: {**settings(upstream), "api_key": "sk-mixed", "retry": {"attempts": 1}}
            for name, (settings, *_) in WIRES.items()
        }
        # Each served model under two client names: `<name>` answers completely, `<name>-cut`
        # is cut; both go to the same upstream model, priced by the model that answered.
        routes = [
            {"match": f"{name}-{kind}", "provider": name, "upstream_model": f"{model}"}
            for name, (_, model, *_) in WIRES.items()
            for kind in ("whole", "cut")
        ]
        config = {
            "providers": providers,
            "routes": routes,
            "audit": {"store": f"sqlite:///{self.audit / 'mixed.db'}"},
            "circuit": {"failures": 0},
        }
        from gateway.app import build_app
        from gateway.settings import parse_settings

        self.url = await self._serve(build_app(parse_settings(config, env={}), env={}))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MixedStack]:
    stack = MixedStack(tmp_path_factory.mktemp("mixed"))
    stack.start()
    yield stack
    stack.stop()


def test_gateway_audit_reports_every_wire(mixed: MixedStack) -> None:
    clients = list(CLIENT_BODIES.items())
    for position, (name, (_, model, answer, (whole, cut), _)) in enumerate(WIRES.items()):
        for kind, native in (("whole", whole), ("cut", cut)):
            # One upstream model serves both: the answer is set before each exchange.
            mixed.upstream.answers[model] = orjson.dumps(answer(native, model))
            path, body = clients[position % len(clients)][1]
            status, _, raw = request(mixed.url, "POST", path, {**body, "model": f"{name}-{kind}"})
            assert status == 200, raw[:300]

    report = {row["group"]: row for row in json.loads(audit(mixed, "--format", "json"))}
    assert set(report) == set(WIRES)
    for name, (_, model, _, _, price_provider) in WIRES.items():
        row = report[name]
        assert row["requests"] == 2, name
        assert (row["truncated"], row["truncated_rate"]) == (1, 0.5), name
        stops = {k: v for k, v in row["stop_reasons"].items() if v}
        assert stops == {"stop": 1, "length": 1}, (name, stops)
        usage = Usage(input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS)
        expected = float(calc_price(usage, model, provider_id=price_provider).total_price) * 2
        assert row["cost_usd"] == pytest.approx(expected, rel=1e-9), name
        assert row["cost_unknown"] == 0, name

    table = audit(mixed, "--format", "table")
    for name in WIRES:
        assert name in table
    assert "cost by provider" in table


def audit(mixed: MixedStack, *args: str) -> str:
    store = f"sqlite:///{mixed.audit / 'mixed.db'}"
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "audit", "--store", store, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    return result.stdout
