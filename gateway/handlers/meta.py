"""`GET /v1/models`, `GET /healthz` (liveness), `GET /health` (targets and their circuits) and the
base URL probe (`HEAD /`) Claude Code sends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from gateway.client_formats import detect
from gateway.resilience.circuit import CLOSED, OPEN, Circuits
from gateway.settings import Settings
from providers.base import Provider


def model_names(settings: Settings, providers: Mapping[str, Provider]) -> list[str]:
    """The routes' names, then the names each provider answers on its own, when a route sends
    them to that provider."""
    names = settings.model_names()
    for name, provider in providers.items():
        for model in provider.offered_models():
            route = settings.resolve_route(model)
            if route is None or model in names:
                continue
            if any(target.provider_name == name for target in route.targets):
                names.append(model)
    return names


def models_response(
    request: web.Request, settings: Settings, providers: Mapping[str, Provider]
) -> web.Response:
    """The list in the shape of the client's format (Anthropic's for `anthropic-version`)."""
    body = detect(request.path, request.headers).models_body(model_names(settings, providers))
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def health_response(settings: Settings, circuits: Circuits) -> web.Response:
    """`GET /health`: every configured target and its circuit; "degraded" while one is not
    closed, "unavailable" (503) while every target of some route is open."""
    failing = circuits.snapshot()
    targets: dict[str, dict[str, Any]] = {}
    unavailable = []
    for route in settings.routes:
        keys = [target.key for target in route.target_list()]
        for key in keys:
            targets.setdefault(key, failing.get(key, {"state": CLOSED}))
        if all(targets[key]["state"] == OPEN for key in keys):
            unavailable.append(route.match)
    degraded = any(row["state"] != CLOSED for row in targets.values())
    status = "unavailable" if unavailable else "degraded" if degraded else "ok"
    body = {"status": status, "targets": targets, "unavailable_routes": unavailable}
    return web.Response(
        status=503 if unavailable else 200,
        body=orjson.dumps(body),
        content_type="application/json",
    )


async def healthz(request: web.Request) -> web.Response:
    return web.Response(body=b'{"status":"ok"}', content_type="application/json")


async def root(request: web.Request) -> web.Response:
    return web.Response(body=b'{"service":"llm-gateway"}', content_type="application/json")
