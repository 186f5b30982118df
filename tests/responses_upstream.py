"""A loopback upstream speaking the OpenAI Responses wire, and the streams tests script on it.

`ResponsesUpstream` is the shared `FakeUpstream` (scripted per model, records what it received)
with the Responses route added. The builders write the wire as OpenAI does: every SSE event has
an `event:` line and a `data:` object of the same `type`, `sequence_number` 0, 1, 2, ..., and
the terminal event carries the whole response.

    upstream.script(model, Script(chunks=responses_sse(stream_events(
        [text_item("hi"), call_item("call_1", "weather", '{"city": "Paris"}')]))))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
from aiohttp import web

from gateway.app import build_app
from gateway.settings import parse_settings
from tests.served import LoopServers
from tests.upstream import FakeUpstream

Item = dict[str, Any]
USAGE = {
    "input_tokens": 12,
    "input_tokens_details": {"cached_tokens": 5},
    "output_tokens": 34,
    "output_tokens_details": {"reasoning_tokens": 7},
    "total_tokens": 46,
}


class ResponsesUpstream(FakeUpstream):
    def app(self) -> web.Application:
        app = super().app()
        app.router.add_post("/v1/responses", self.handle)
        return app


def text_item(text: str, item_id: str = "msg_1") -> Item:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "message", "id": item_id, "role": "assistant", "content": [part]}


def refusal_item(refusal: str, item_id: str = "msg_r") -> Item:
    part = {"type": "refusal", "refusal": refusal}
    return {"type": "message", "id": item_id, "role": "assistant", "content": [part]}


def call_item(call_id: str, name: str, arguments: str, item_id: str | None = None) -> Item:
    return {
        "type": "function_call",
        "id": item_id or "fc_" + call_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def reasoning_item(summary: str, item_id: str = "rs_1") -> Item:
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": summary}],
    }


def response(
    items: list[Item],
    status: str = "completed",
    reason: str | None = None,
    usage: dict[str, Any] | None = USAGE,
    response_id: str = "resp_1",
    model: str = "gpt-up",
) -> dict[str, Any]:
    done = [
        {**item, "status": "completed" if status == "completed" else "incomplete"} for item in items
    ]
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "model": model,
        "output": done,
        "usage": usage,
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def item_events(position: int, item: Item, size: int = 4) -> list[dict[str, Any]]:
    """The events of one output item: added, its deltas in `size`-character pieces, done."""
    kind = item["type"]
    base = {"output_index": position, "item_id": item["id"]}
    added = {**item, "status": "in_progress"}
    events: list[dict[str, Any]] = []
    if kind == "function_call":
        added["arguments"] = ""
        events.append(
            {"type": "response.output_item.added", "output_index": position, "item": added}
        )
        for piece in _pieces(item["arguments"], size):
            events.append(
                {"type": "response.function_call_arguments.delta", **base, "delta": piece}
            )
        events.append(
            {
                "type": "response.function_call_arguments.done",
                **base,
                "arguments": item["arguments"],
            }
        )
    elif kind == "message":
        added["content"] = []
        events.append(
            {"type": "response.output_item.added", "output_index": position, "item": added}
        )
        for c, part in enumerate(item["content"]):
            at = {**base, "content_index": c}
            key, delta_type = (
                ("text", "response.output_text.delta")
                if part["type"] == "output_text"
                else ("refusal", "response.refusal.delta")
            )
            empty = {**part, key: ""}
            events.append({"type": "response.content_part.added", **at, "part": empty})
            for piece in _pieces(part[key], size):
                events.append({"type": delta_type, **at, "delta": piece})
            events.append({"type": "response.content_part.done", **at, "part": part})
    elif kind == "reasoning":
        added["summary"] = []
        events.append(
            {"type": "response.output_item.added", "output_index": position, "item": added}
        )
        for s, part in enumerate(item["summary"]):
            at = {**base, "summary_index": s}
            for piece in _pieces(part["text"], size):
                events.append(
                    {"type": "response.reasoning_summary_text.delta", **at, "delta": piece}
                )
    done = {**item, "status": "completed"}
    events.append({"type": "response.output_item.done", "output_index": position, "item": done})
    return events


def stream_events(
    items: list[Item],
    status: str = "completed",
    reason: str | None = None,
    terminal: bool = True,
    size: int = 4,
) -> list[dict[str, Any]]:
    """A whole Responses stream: created, in_progress, the items, the terminal event."""
    start = {**response([], usage=None), "status": "in_progress"}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for position, item in enumerate(items):
        events += item_events(position, item, size)
    if terminal:
        final = response(items, status, reason)
        events.append({"type": f"response.{status}", "response": final})
    return events


def responses_sse(events: list[dict[str, Any]]) -> list[bytes]:
    out = []
    for n, event in enumerate(events):
        data = orjson.dumps({**event, "sequence_number": n})
        out.append(b"event: " + event["type"].encode() + b"\ndata: " + data + b"\n\n")
    return out


def failed_events(
    code: str = "server_error", message: str = "The model failed"
) -> list[dict[str, Any]]:
    """An `error` event (the nested shape the wire carries) and `response.failed`."""
    error = {"type": code, "code": code, "message": message, "param": None}
    failed = {**response([], "failed", usage=None), "error": {"code": code, "message": message}}
    return [{"type": "error", "error": error}, {"type": "response.failed", "response": failed}]


RESPONSES_KEY = "sk-upstream-SECRET-responses-0003"
POLICIES = ("withhold", "pass")


def gateway_settings(upstream_url: str, policy: str, audit_store: str) -> dict[str, Any]:
    return {
        "providers": {
            "responses": {
                "kind": "openai_responses",
                "base_url": f"{upstream_url}/v1",
                "api_key": RESPONSES_KEY,
                "timeout": 5,
                "retry": {"attempts": 1},  # as tests/conftest.py's stack: one attempt
            },
        },
        "routes": [{"match": "rs-*", "provider": "responses"}],
        "truncation": {"tool_calls": policy},
        "audit": {"store": audit_store},
        "circuit": {"failures": 0},
    }


class ResponsesStack(LoopServers):
    """A Responses upstream and one gateway per truncation policy, on their own loop thread
    (so the sync SDK clients can drive them), as tests/conftest.py's stack does."""

    def __init__(self, audit_dir: Path) -> None:
        super().__init__()
        self.audit_dir = audit_dir
        self.upstream = ResponsesUpstream()
        self.urls: dict[str, str] = {}

    async def _start(self) -> None:
        upstream_url = await self._serve(self.upstream.app())
        for policy in POLICIES:
            store = f"sqlite:///{self.audit_dir / f'audit-{policy}.db'}"
            config = gateway_settings(upstream_url, policy, store)
            self.urls[policy] = await self._serve(build_app(parse_settings(config), env={}))

    def openai(self, policy: str = "withhold") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.urls[policy] + "/v1", api_key="sk-client", max_retries=0)

    def anthropic(self, policy: str = "withhold") -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.urls[policy], api_key="sk-client", max_retries=0)
