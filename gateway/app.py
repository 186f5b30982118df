"""build_app(settings): the aiohttp application, its routes and its providers' lifetime."""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import AsyncIterator, Mapping

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.audit.store import open_store
from gateway.audit.writer import AuditWriter
from gateway.edge import CLIENT_FORMAT, new_request_id
from gateway.encode.errors import ClientFormat, render_error
from gateway.errors import GatewayError, NotFound
from gateway.handlers import chat_completions, messages, meta
from gateway.handlers.exchange import Gateway, serve
from gateway.metrics import GatewayMetrics
from gateway.observer import ExchangeObserver
from gateway.settings import ProviderSettings, Settings
from providers.anthropic import AnthropicProvider
from providers.base import Provider
from providers.mock import MockProvider
from providers.openai import OpenAIProvider

GATEWAY = web.AppKey("gateway", Gateway)
log = logging.getLogger("gateway.app")


def client_format(request: web.Request) -> ClientFormat:
    if request.path.endswith("/messages") or "anthropic-version" in request.headers:
        return "anthropic"
    return "openai"


@web.middleware
async def unexpected_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A bug must still answer in the client's format, and its log must not carry content:
    exception messages can quote request data, so only the class and the frames are logged."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception as exc:
        frames = "".join(traceback.format_tb(exc.__traceback__))
        log.error("unhandled %s on %s\n%s", type(exc).__name__, request.path, frames)
        err = GatewayError("The gateway failed to handle this request")
        status, body, headers = render_error(client_format(request), err, new_request_id())
        return web.Response(status=status, body=body, headers=headers)


def build_provider(name: str, config: ProviderSettings, env: Mapping[str, str]) -> Provider:
    if config.kind == "mock":
        return MockProvider(name)
    cls = OpenAIProvider if config.kind == "openai" else AnthropicProvider
    assert config.base_url is not None
    return cls(
        name,
        config.base_url,
        config.resolve_api_key(env),
        timeout=config.timeout,
        connect_timeout=config.connect_timeout,
    )


def build_app(settings: Settings, env: Mapping[str, str] = os.environ) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[unexpected_errors])
    providers = {name: build_provider(name, cfg, env) for name, cfg in settings.providers.items()}
    metrics = GatewayMetrics()
    observer = ExchangeObserver(metrics)
    gateway = Gateway(settings, providers, observer)
    app[GATEWAY] = gateway
    app[CLIENT_FORMAT] = client_format

    async def audit_writer(app: web.Application) -> AsyncIterator[None]:
        if settings.audit.log_content:
            log.warning("content logging is ON: message text and tool arguments are recorded")
        store = open_store(settings.audit.store)
        await store.open()
        writer = AuditWriter(
            store,
            max_queue=settings.audit.queue_size,
            on_depth=metrics.queue_depth.set,
            on_backpressure=metrics.backpressure.inc,
        )
        writer.start()
        observer.writer = writer
        yield
        # Runs after the server stopped accepting and in-flight exchanges ended (or were
        # cancelled at the end of the grace): let their records reach the queue, flush it all.
        if not await observer.wait_idle(timeout=5.0):
            log.error(
                "audit: exchanges still unfinished at shutdown",
                extra={"in_flight": observer.in_flight},
            )
        await writer.close()
        observer.writer = None

    async def close_providers(app: web.Application) -> AsyncIterator[None]:
        yield
        for provider in providers.values():
            await provider.close()

    app.cleanup_ctx.append(audit_writer)
    app.cleanup_ctx.append(close_providers)

    async def chat(request: web.Request) -> web.StreamResponse:
        return await serve(chat_completions.SPEC, gateway, request)

    async def anthropic_messages(request: web.Request) -> web.StreamResponse:
        return await serve(messages.SPEC, gateway, request)

    async def models(request: web.Request) -> web.Response:
        return meta.models_response(request, settings)

    async def metrics_text(request: web.Request) -> web.Response:
        body = metrics.render()
        return web.Response(body=body, headers={"content-type": CONTENT_TYPE_LATEST})

    async def not_found(request: web.Request) -> web.Response:
        err = NotFound(f"No endpoint {request.method} {request.path}")
        status, body, headers = render_error(client_format(request), err, new_request_id())
        return web.Response(status=status, body=body, headers=headers)

    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/chat/completions", chat)
    app.router.add_post("/v1/messages", anthropic_messages)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/healthz", meta.healthz)
    app.router.add_get("/metrics", metrics_text)
    app.router.add_get("/", meta.root)  # also answers HEAD /
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app
