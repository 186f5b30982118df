"""`GET /v1/models`, `GET /healthz` and the base URL probe (`HEAD /`) Claude Code sends."""

from __future__ import annotations

from collections.abc import Mapping

import orjson
from aiohttp import web

from gateway.client_formats import detect
from gateway.settings import Settings
from providers.base import Provider


def model_names(settings: Settings, providers: Mapping[str, Provider]) -> list[str]:
    """The routes' names, then the names each provider answers on its own, when a route sends
    them to that provider."""
    names = settings.model_names()
    for name, provider in providers.items():
        for model in provider.offered_models():
            route = settings.resolve_route(model)
            if route is not None and route.provider_name == name and model not in names:
                names.append(model)
    return names


def models_response(
    request: web.Request, settings: Settings, providers: Mapping[str, Provider]
) -> web.Response:
    """The list in the shape of the client's format (Anthropic's for `anthropic-version`)."""
    body = detect(request.path, request.headers).models_body(model_names(settings, providers))
    return web.Response(body=orjson.dumps(body), content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    return web.Response(body=b'{"status":"ok"}', content_type="application/json")


async def root(request: web.Request) -> web.Response:
    return web.Response(body=b'{"service":"llm-gateway"}', content_type="application/json")
