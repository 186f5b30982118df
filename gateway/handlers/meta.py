"""`GET /v1/models`, `GET /healthz` and the base URL probe (`HEAD /`) Claude Code sends."""

from __future__ import annotations

import time

import orjson
from aiohttp import web

from gateway.settings import Settings
from providers.mock import CONVERSATION_SCENARIOS, SCENARIOS


def model_names(settings: Settings) -> list[str]:
    names = settings.model_names()
    if any(p.kind == "mock" for p in settings.providers.values()):
        scenarios = (*SCENARIOS, *CONVERSATION_SCENARIOS)
        names += [f"mock-{s}" for s in scenarios if f"mock-{s}" not in names]
    return names


def models_response(request: web.Request, settings: Settings) -> web.Response:
    """The OpenAI list shape, or the Anthropic one for a client that sends anthropic-version."""
    names = model_names(settings)
    if "anthropic-version" in request.headers:
        data = [
            {"id": n, "type": "model", "display_name": n, "created_at": "2025-01-01T00:00:00Z"}
            for n in names
        ]
        body = {
            "data": data,
            "has_more": False,
            "first_id": names[0] if names else None,
            "last_id": names[-1] if names else None,
        }
    else:
        created = int(time.time())
        data = [
            {"id": n, "object": "model", "created": created, "owned_by": "gateway"} for n in names
        ]
        body = {"object": "list", "data": data}
    return web.Response(body=orjson.dumps(body), content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    return web.Response(body=b'{"status":"ok"}', content_type="application/json")


async def root(request: web.Request) -> web.Response:
    return web.Response(body=b'{"service":"llm-gateway"}', content_type="application/json")
