"""docs/stop-reasons.md's stop-reason table, walked: one row per native value of every wire, each
row driven through the gateway.

Three checks keep the table honest:
- every native value of every wire's table (gateway.formats.stop_reasons via the wire registry)
  has exactly one row on the page, with the same normalized reason, and no row names a value the
  table lacks;
- every wire of the registry appears in the table;
- each row is an exchange: a loopback upstream of that wire answers with the row's native value,
  and an OpenAI Chat client, an Anthropic client and a Responses client each see what the row's
  columns say (the value, or `error` for an answer the gateway ends with the format's error).
So a row without a test cannot exist: the rows are the test's parameters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

# Bedrock's provider module imports botocore, which reads files as it loads; the app is built in
# the test's loop, where blockbuster forbids that: imported here, before any loop runs, so the
# file passes alone as in the suite (where another test imported it first).
import providers.bedrock  # noqa: F401
from gateway.app import build_app
from gateway.formats.registry import WIRES
from gateway.settings import parse_settings
from tests.served import LoopServers
from tests.test_endpoints import request

PAGE = Path(__file__).resolve().parents[1] / "docs" / "stop-reasons.md"
SECTION = "## Every native stop reason"
# The page's name of each wire -> the registry's.
WIRE_NAMES = {
    "OpenAI Chat": "openai",
    "Anthropic": "anthropic",
    "OpenAI Responses": "openai_responses",
    "Gemini": "gemini",
    "Bedrock": "bedrock",
}
CODE = re.compile(r"`([^`]*)`")
BROKEN = ("ERROR", "ABORTED")


@dataclass(frozen=True)
class Row:
    wire: str
    native: str
    normalized: str
    openai: str  # finish_reason, or "error"
    anthropic: str  # stop_reason, or "error"
    responses: str  # "status" or "status/reason"

    @property
    def id(self) -> str:
        return f"{self.wire}:{self.native}"


def _code(cell: str) -> str:
    found = CODE.findall(cell)
    return "/".join(found) if found else cell.strip()


def readme_rows() -> list[Row]:
    text = PAGE.read_text()
    start = text.index(SECTION)
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        if not line.startswith("| ") or line.startswith("| wire") or "---" in line:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        wire = WIRE_NAMES[cells[0]]
        rows.append(
            Row(
                wire,
                _code(cells[1]),
                cells[2],
                _code(cells[3]),
                _code(cells[4]),
                _code(cells[5]),
            )
        )
    return rows


ROWS = readme_rows()


def test_every_native_value_of_every_wire_has_one_row():
    seen: dict[tuple[str, str], Row] = {}
    for row in ROWS:
        key = (row.wire, row.native)
        assert key not in seen, f"two rows in docs/stop-reasons.md for {row.id}"
        seen[key] = row
    for wire in WIRES.values():
        for native, reason in wire.stop_reasons.items():
            row = seen.get((wire.name, native))
            assert row is not None, f"docs/stop-reasons.md has no row for {wire.name} {native!r}"
            assert row.normalized == reason.name, row.id
    known = {(w.name, n) for w in WIRES.values() for n in w.stop_reasons}
    extra = [row.id for row in ROWS if (row.wire, row.native) not in known]
    assert not extra, f"docs/stop-reasons.md rows for values no table has: {extra}"


def test_every_wire_is_in_the_table():
    assert {row.wire for row in ROWS} >= set(WIRES)


# --- driving each row ---------------------------------------------------------------------------

USAGE_OPENAI = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
USAGE_ANTHROPIC = {"input_tokens": 3, "output_tokens": 2}


def openai_answer(native: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-table",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok"},
                "finish_reason": native,
            }
        ],
        "usage": USAGE_OPENAI,
    }


def anthropic_answer(native: str, model: str) -> dict[str, Any]:
    return {
        "id": "msg_table",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": native,
        "stop_sequence": "END" if native == "stop_sequence" else None,
        "usage": USAGE_ANTHROPIC,
    }


def responses_answer(native: str, model: str) -> dict[str, Any]:
    status, _, reason = native.partition(":")
    return {
        "id": "resp_table",
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "error": None,  # a failed answer's `error.code` would be its native value instead
        "incomplete_details": {"reason": reason} if reason else None,
        "model": model,
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed" if status == "completed" else "incomplete",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
    }


def gemini_answer(native: str, model: str) -> dict[str, Any]:
    usage = {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}
    block = native.removeprefix("blockReason:")
    if block != native:  # a blocked prompt has no candidates
        return {"promptFeedback": {"blockReason": block}, "usageMetadata": usage}
    candidate = {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": native}
    return {"candidates": [candidate], "usageMetadata": usage, "responseId": "r-table"}


def bedrock_answer(native: str, model: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": native,
        "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5},
    }


# wire -> (provider settings for an upstream at URL, the answer)
Answer = Callable[[str, str], dict[str, Any]]
WIRE_UPSTREAMS: dict[str, tuple[Callable[[str], dict[str, Any]], Answer]] = {
    "openai": (lambda url: {"kind": "openai", "base_url": f"{url}/v1"}, openai_answer),
    "anthropic": (lambda url: {"kind": "anthropic", "base_url": url}, anthropic_answer),
    "openai_responses": (
        lambda url: {"kind": "openai_responses", "base_url": f"{url}/v1"},
        responses_answer,
    ),
    "gemini": (lambda url: {"kind": "gemini", "base_url": url}, gemini_answer),
    # A configured key is a Bedrock API key (a bearer token): no SigV4 credentials needed here.
    "bedrock": (
        lambda url: {"kind": "bedrock", "region": "us-east-1", "base_url": url},
        bedrock_answer,
    ),
}
# Where the wires that put the model in the URL have it: Gemini `models/<m>:<method>`, Bedrock
# `model/<m>/<operation>`.
MODEL_IN_PATH = re.compile(r"/models/([^/:]+):|/model/([^/]+)/")


class TableUpstream:
    """Answers every POST with the answer scripted for the model the gateway asked for; the
    model comes from the body, or from the path for wires that put it there."""

    def __init__(self) -> None:
        self.answers: dict[str, bytes] = {}

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        in_path = MODEL_IN_PATH.search(request.path)
        model = (
            (in_path.group(1) or in_path.group(2)) if in_path else orjson.loads(raw).get("model")
        )
        body = self.answers.get(model)
        if body is None:
            return web.json_response({"error": {"message": "unscripted"}}, status=599)
        return web.Response(body=body, content_type="application/json")


class TableStack(LoopServers):
    def __init__(self, audit: Path) -> None:
        super().__init__()
        self.upstream = TableUpstream()
        self.audit = audit
        self.url = ""

    async def _start(self) -> None:
        upstream = await self._serve(self.upstream.app())
        providers = {
            f"table_{wire}": {
                **settings(upstream),
                "api_key": "sk-table",
                "retry": {"attempts": 1},
            }
            for wire, (settings, _) in WIRE_UPSTREAMS.items()
        }
        config = {
            "providers": providers,
            "routes": [
                {"match": f"table-{wire}-*", "provider": f"table_{wire}"} for wire in WIRE_UPSTREAMS
            ],
            "audit": {"store": f"sqlite:///{self.audit / 'table.db'}"},
            "circuit": {"failures": 0},
        }
        self.url = await self._serve(build_app(parse_settings(config, env={}), env={}))


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TableStack]:
    stack = TableStack(tmp_path_factory.mktemp("table"))
    stack.start()
    yield stack
    stack.stop()


CLIENT_BODIES = {
    "openai": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    "anthropic": (
        "/v1/messages",
        {"max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]},
    ),
    "responses": ("/v1/responses", {"input": "hi"}),
}


def seen_by(client: str, status: int, body: dict[str, Any]) -> str:
    """What a client of the format sees: its stop value, or `error`."""
    if client == "responses":
        if status >= 400:
            return "error"
        reason = (body.get("incomplete_details") or {}).get("reason")
        return body["status"] + (f"/{reason}" if reason else "")
    if status >= 400:
        return "error"
    if client == "openai":
        return str(body["choices"][0]["finish_reason"])
    return str(body["stop_reason"])


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_row_is_what_each_client_sees(table: TableStack, row: Row) -> None:
    if row.wire not in WIRE_UPSTREAMS:
        pytest.fail(f"no loopback upstream drives the {row.wire} rows")
    _, answer = WIRE_UPSTREAMS[row.wire]
    model = f"table-{row.wire}-{re.sub(r'[^a-z0-9]+', '-', row.native.lower())}"
    table.upstream.answers[model] = orjson.dumps(answer(row.native, model))
    expected = {"openai": row.openai, "anthropic": row.anthropic, "responses": row.responses}
    for client, (path, body) in CLIENT_BODIES.items():
        status, _, raw = request(table.url, "POST", path, {**body, "model": model})
        got = orjson.loads(raw)
        assert seen_by(client, status, got) == expected[client], (client, status, got)
        extension = got.get("gateway") or {}
        assert extension.get("stop_reason") == row.normalized.lower(), (client, got)
        if row.normalized not in BROKEN:  # a failed Responses answer's native is its error.code
            assert extension.get("native_stop_reason") == row.native, (client, got)
