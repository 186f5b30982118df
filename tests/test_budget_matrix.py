"""A key's token budget holds on every client format x upstream wire, streamed and not.

Each cell has its own key with `tokens_per_window = 40`; an answer uses 12 + 34 = 46 tokens, so
the first request is served and the second refused with 429. The OpenAI-wire upstream streams
usage only when asked (`stream_options.include_usage`), as OpenAI does, and no client here asks:
the gateway must, or a stream would be free.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.access_util import PATHS, audit_rows, key_table, new_key, payload, request, serve_keyed
from tests.conftest import Stack
from tests.scenarios import Answer, script_for

CLIENTS = ("openai", "anthropic", "responses")
WIRES = {"openai": "oa", "anthropic": "an"}  # the upstream wire -> its routes' prefix
CELLS = list(itertools.product(CLIENTS, WIRES, (False, True)))
KEYS = {cell: new_key("-".join(map(str, cell))) for cell in CELLS}


def cell_name(cell: tuple[str, str, bool]) -> str:
    client, wire, stream = cell
    return f"{client}-{wire}-{'stream' if stream else 'whole'}"


@pytest.fixture(scope="module")
def budgeted(stack: Stack) -> tuple[str, str]:
    keys = [
        key_table(cell_name(cell), key, tokens_per_window=40, window="1h")
        for cell, key in KEYS.items()
    ]
    return serve_keyed(stack, "budget-matrix", keys=keys)


def ask(url: str, client: str, model: str, stream: bool, key: str) -> int:
    headers = {"authorization": f"Bearer {key}"}
    if client == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
    reply = request(url, "POST", PATHS[client], headers, payload(client, model, stream))
    return reply.status


@pytest.mark.parametrize(("client", "wire", "stream"), CELLS, ids=[cell_name(c) for c in CELLS])
def test_the_second_request_past_the_budget_is_refused(
    stack: Stack, budgeted: tuple[str, str], unique_model: Any, client: str, wire: str, stream: bool
) -> None:
    name, url = budgeted
    model = unique_model(WIRES[wire])
    script = script_for(wire, Answer(text="hello"), model, stream, usage_if_asked=True)
    stack.upstream.script(model, script)
    key = KEYS[(client, wire, stream)]

    assert ask(url, client, model, stream, key) == 200
    assert ask(url, client, model, stream, key) == 429

    (served,) = audit_rows(stack, name, model)
    assert (served["input_tokens"], served["output_tokens"]) == (12, 34)
    assert len(stack.upstream.received[model]) == 1
