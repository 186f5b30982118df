"""A loopback upstream speaking the Gemini API wire, and the answers tests script on it.

`GeminiUpstream` is the shared `FakeUpstream` (scripted per model, records what it received)
answering `POST /v1beta/models/{model}:generateContent` and `:streamGenerateContent?alt=sse`:
the model comes from the URL, as Gemini has it. The builders write what Gemini sends: each SSE
frame a whole GenerateContentResponse (`data: {...}` and a blank line), no terminator, the
finishReason and the cumulative usage on the last chunk.

    upstream.script(model, Script(chunks=gemini_sse([chunk([text("hi")]),
                                                     chunk([], finish="STOP")])))
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
from aiohttp import web

from gateway.app import build_app
from gateway.settings import parse_settings
from tests.served import LoopServers
from tests.upstream import FakeUpstream, Received, Script

Part = dict[str, Any]
GEMINI_KEY = "AIza-upstream-SECRET-gemini-0003"
RESPONSE_ID = "rsp-GemINI_42"
MODEL_VERSION = "gemini-3-pro-preview"
USAGE = {
    "promptTokenCount": 40,
    "candidatesTokenCount": 12,
    "thoughtsTokenCount": 30,
    "cachedContentTokenCount": 25,
    "totalTokenCount": 82,
}
SIGNATURE = "+vv8/f7/Z2F0ZXdheS10aG91Z2h0LXNpZ25hdHVy+/8="  # base64 with +, / and padding
POLICIES = ("withhold", "pass")


def text(value: str, signature: str | None = None) -> Part:
    part: Part = {"text": value}
    if signature:
        part["thoughtSignature"] = signature
    return part


def thought(value: str, signature: str | None = None) -> Part:
    return {**text(value, signature), "thought": True}


def call(name: str, args: dict[str, Any], signature: str | None = None) -> Part:
    part: Part = {"functionCall": {"name": name, "args": args}}
    if signature:
        part["thoughtSignature"] = signature
    return part


def chunk(
    parts: list[Part],
    finish: str | None = None,
    usage: dict[str, Any] | None = USAGE,
    response_id: str = RESPONSE_ID,
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate]}
    if usage is not None:
        out["usageMetadata"] = usage
    out["modelVersion"] = MODEL_VERSION
    out["responseId"] = response_id
    return out


def blocked(reason: str = "SAFETY") -> dict[str, Any]:
    return {
        "promptFeedback": {"blockReason": reason},
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
        "modelVersion": MODEL_VERSION,
        "responseId": RESPONSE_ID,
    }


def whole(parts: list[Part], finish: str = "STOP", **kwargs: Any) -> dict[str, Any]:
    """The non-streamed body of the same answer."""
    return chunk(parts, finish, **kwargs)


def gemini_sse(chunks: list[dict[str, Any]]) -> list[bytes]:
    return [b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks]


def answer(parts: list[Part], finish: str = "STOP", stream: bool = True, **kwargs: Any) -> Script:
    """The answer streamed one part a chunk (the finish on a last, empty chunk), or whole."""
    if not stream:
        return Script(body=orjson.dumps(whole(parts, finish, **kwargs)))
    chunks = [chunk([part], usage=kwargs.get("usage", USAGE)) for part in parts]
    chunks.append(chunk([text("")], finish, **kwargs))
    return Script(chunks=gemini_sse(chunks))


def error_body(code: int, status: str, message: str, retry: str | None = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if retry is not None:
        error["details"] = [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry}
        ]
    return orjson.dumps({"error": error})


class GeminiUpstream(FakeUpstream):
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1beta/models/{target}", self.handle_gemini)
        return app

    async def handle_gemini(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        model, _, _method = request.match_info["target"].partition(":")
        script = self.scripts.get(model)
        if script is None:
            return web.json_response({"error": {"message": f"unscripted {model}"}}, status=599)
        self.received[model].append(Received(request.path_qs, dict(request.headers), raw))
        following = self.sequences.get(model)
        if following:
            self.scripts[model] = following.pop(0)
        try:
            return await self._play(request, script)
        except asyncio.CancelledError:
            self.closed[model] = time.monotonic()
            raise


def gateway_settings(upstream_url: str, policy: str, audit_store: str) -> dict[str, Any]:
    return {
        "providers": {
            "gemini": {
                "kind": "gemini",
                "base_url": upstream_url,
                "api_key": GEMINI_KEY,
                "timeout": 5,
                "retry": {"attempts": 1},  # as tests/conftest.py's stack: one attempt
            },
            "gemini_own_key": {
                "kind": "gemini",
                "base_url": upstream_url,
                "timeout": 5,
                "retry": {"attempts": 1},
            },
        },
        "routes": [
            {"match": "gm-own-*", "provider": "gemini_own_key"},
            {"match": "gm-*", "provider": "gemini"},
        ],
        "truncation": {"tool_calls": policy},
        "audit": {"store": audit_store},
        "circuit": {"failures": 0},
    }


class GeminiStack(LoopServers):
    """A Gemini upstream and one gateway per truncation policy, on their own loop thread (so the
    sync SDK clients can drive them), as tests/conftest.py's stack does."""

    def __init__(self, audit_dir: Path) -> None:
        super().__init__()
        self.audit_dir = audit_dir
        self.upstream = GeminiUpstream()
        self.urls: dict[str, str] = {}

    async def _start(self) -> None:
        upstream_url = await self._serve(self.upstream.app())
        for policy in POLICIES:
            store = f"sqlite:///{self.audit_db(policy)}"
            config = gateway_settings(upstream_url, policy, store)
            self.urls[policy] = await self._serve(build_app(parse_settings(config), env={}))

    def audit_db(self, policy: str = "withhold") -> Path:
        return self.audit_dir / f"audit-gemini-{policy}.db"

    def openai(self, policy: str = "withhold") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.urls[policy] + "/v1", api_key="sk-client", max_retries=0)

    def anthropic(self, policy: str = "withhold") -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.urls[policy], api_key="sk-client", max_retries=0)
