"""build_app(settings): the aiohttp application, its routes and its providers' lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import traceback
from collections.abc import AsyncIterator, Callable, Mapping

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.access.control import AccessControl, admin_only, build_access
from gateway.access.limits import RENEW_EVERY
from gateway.audit.opening import open_store
from gateway.audit.writer import AuditWriter
from gateway.client_formats import (
    ANTHROPIC,
    CLIENT_FORMATS,
    OPENAI,
    RESPONSES,
    ClientFormat,
    detect,
)
from gateway.cost import Pricer, Prices
from gateway.dashboard.routes import AuditSource, add_dashboard
from gateway.edge import HTTP_LIMITS, LEAN_POSTS, HttpLimits
from gateway.error_reply import error_response
from gateway.errors import GatewayError, NotFound, UpgradeRequired
from gateway.handlers import count_tokens, embeddings, meta
from gateway.handlers.exchange import serve
from gateway.handlers.exchange_state import Endpoint, Gateway
from gateway.handlers.stored import stored_response_handlers
from gateway.metrics import GatewayMetrics
from gateway.observer import ExchangeObserver
from gateway.placeholder_keys import placeholder_providers
from gateway.pool_metrics import PUBLISH_EVERY
from gateway.request_ids import new_request_id
from gateway.resilience.plan import Resilience
from gateway.resilience.shared_circuits import CircuitSync
from gateway.responses_store import open_response_store
from gateway.settings import Settings
from gateway.state import SharedState, open_state
from providers.registry import build_provider

GATEWAY = web.AppKey("gateway", Gateway)
# The server's own shutdown waits this much beyond the grace before it closes the sockets under
# the handlers: the gateway stops what is still running at the grace itself, sockets still open.
STOP_MARGIN = 0.5
log = logging.getLogger("gateway.app")


def format_error(request: web.Request, err: GatewayError) -> web.Response:
    """An error outside an endpoint's exchange, in the format the request looks like."""
    return error_response(detect(request.path, request.headers), err, new_request_id())


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
        return format_error(request, GatewayError("The gateway failed to handle this request"))


def _unchanged(handler: Handler) -> Handler:
    return handler


def endpoint(client: ClientFormat, gateway: Gateway, other: Endpoint | None = None) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await serve(client, gateway, request, other)

    return handle


def websocket_refusal(client: ClientFormat, otherwise: Handler) -> Handler:
    """Codex tries the Responses WebSocket first and falls back to HTTP at once on a 426 (on
    anything else it spends its retries first): the upgrade is refused, in the format's JSON."""

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.headers.get("upgrade", "").lower() != "websocket":
            return await otherwise(request)
        err = UpgradeRequired("This gateway serves the Responses API over HTTP only; use POST")
        response = error_response(client, err, new_request_id())
        response.headers["connection"] = "close"
        response.force_close()
        return response

    return handle


def keep_state(
    state: SharedState, access: AccessControl
) -> Callable[[web.Application], AsyncIterator[None]]:
    """The shared state's lifetime, and the renewal of the per-key slots this process holds."""

    async def renew_slots() -> None:
        while True:
            await asyncio.sleep(RENEW_EVERY)
            await access.limiter.renew()

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        await state.open()
        renewal = asyncio.create_task(renew_slots())
        yield
        renewal.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewal
        await state.close()

    return ctx


def share_circuits(
    sync: CircuitSync, state: SharedState, *, opened: bool
) -> Callable[[web.Application], AsyncIterator[None]]:
    """Circuits shared through the state; `opened`: the access checks' context opens it."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        if not opened:
            await state.open()
        sync.circuits.on_local = sync.changed
        pulling = asyncio.create_task(sync.run())
        yield
        pulling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pulling
        await sync.drain()
        if not opened:
            await state.close()

    return ctx


def every(
    seconds: float, job: Callable[[], None]
) -> Callable[[web.Application], AsyncIterator[None]]:
    """`job` every `seconds` while the app runs, and once more when it stops."""

    async def repeat() -> None:
        while True:
            await asyncio.sleep(seconds)
            job()

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(repeat())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        job()

    return ctx


def build_app(
    settings: Settings,
    env: Mapping[str, str] = os.environ,
    *,
    metrics_dir: str | None = None,
    prices: Prices | None = None,
) -> web.Application:
    """The gateway's app. `metrics_dir`: the workers' shared prometheus_client multiprocess
    directory, so `/metrics` reports every worker (gateway.metrics); None for one process.
    `prices`: the price table cut to the configured providers (gateway.price_subset); None:
    genai-prices' whole table."""
    limits = settings.limits
    app = web.Application(client_max_size=limits.max_body_bytes, middlewares=[unexpected_errors])
    app[HTTP_LIMITS] = HttpLimits(limits.max_header_bytes, limits.max_headers)
    app[LEAN_POSTS] = True  # the endpoints' handlers read only what LeanRequest offers
    providers = {name: build_provider(name, cfg, env) for name, cfg in settings.providers.items()}
    metrics = GatewayMetrics(limits.metric_models, multiprocess_dir=metrics_dir)
    publish_pools = metrics.watch_pools(
        lambda: {name: p.pool_stats() for name, p in providers.items()}
    )
    observer = ExchangeObserver(metrics)
    if settings.telemetry.export is not None:  # OpenTelemetry is imported only then
        from gateway.otel import export_spans

        # Before the audit writer's: cleanup runs in reverse, so spans flush after the writer
        # waited for the exchanges still running.
        app.cleanup_ctx.append(export_spans(settings, observer, metrics))
    responses = settings.responses
    response_store = open_response_store(
        responses.store, responses.ttl, responses.max_entries, responses.max_bytes
    )
    resilience = Resilience(settings, on_circuit=metrics.circuit)
    state = open_state(settings.state)
    access = build_access(settings, state, metrics)
    gateway = Gateway(
        settings,
        providers,
        observer,
        response_store,
        resilience=resilience,
        access=access,
        pricer=None if prices is None else Pricer.of(prices),
        placeholder_keys=placeholder_providers(settings, env),
    )
    app[GATEWAY] = gateway
    assert gateway.pricer is not None
    log.debug("price table", extra={"price_providers": gateway.pricer.table_providers()})
    if access is not None:
        observer.settle = access.finished
        app.cleanup_ctx.append(keep_state(state, access))
    if state.kind != "memory" and settings.circuit.failures:
        targets = [t.key for route in settings.routes for t in route.target_list()]
        errors = metrics.state_errors
        sync = CircuitSync(
            resilience.circuits, state, targets, on_error=lambda op: errors.labels(op).inc()
        )
        app.cleanup_ctx.append(share_circuits(sync, state, opened=access is not None))

    audit_source = AuditSource()

    async def audit_writer(app: web.Application) -> AsyncIterator[None]:
        if settings.audit.log_content:
            log.warning("content logging is ON: message text and tool arguments are recorded")
        store = open_store(settings.audit.store)
        await store.open()
        audit_source.store = store  # the dashboard's reads
        writer = AuditWriter(
            store,
            max_queue=settings.audit.queue_size,
            on_depth=metrics.queue_depth.set,
            on_backpressure=metrics.backpressure.inc,
            on_rejected=metrics.rejected.inc,
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
        audit_source.store = None

    async def close_providers(app: web.Application) -> AsyncIterator[None]:
        for provider in providers.values():
            await provider.start()
        yield
        for provider in providers.values():
            await provider.close()

    async def keep_responses(app: web.Application) -> AsyncIterator[None]:
        await response_store.open()
        yield
        await response_store.close()

    async def closing(app: web.Application) -> None:
        gateway.closing = True  # what is cancelled from now on, the server ended
        # When the grace ends the gateway ends what is still running itself, before the server
        # closes the sockets (STOP_MARGIN later), so streams get their format's error event and
        # answers not started a 503.
        grace = settings.server.shutdown_grace
        asyncio.get_running_loop().call_later(grace, gateway.stop_exchanges)

    app.cleanup_ctx.append(audit_writer)
    app.cleanup_ctx.append(close_providers)
    app.cleanup_ctx.append(keep_responses)
    if publish_pools is not None:
        app.cleanup_ctx.append(every(PUBLISH_EVERY, publish_pools))
    app.on_shutdown.append(closing)

    async def models(request: web.Request) -> web.StreamResponse:
        return meta.models_response(request, settings, providers)

    async def metrics_text(request: web.Request) -> web.StreamResponse:
        body = metrics.render()
        return web.Response(body=body, headers={"content-type": CONTENT_TYPE_LATEST})

    # Behind a gateway key (or the admin key) once keys are configured; unchanged without.
    keyed: Callable[[Handler], Handler] = access.require_key if access else _unchanged

    async def not_found(request: web.Request) -> web.Response:
        return format_error(request, NotFound(f"No endpoint {request.method} {request.path}"))

    for client in CLIENT_FORMATS.values():
        for path in client.paths:
            app.router.add_post(path, endpoint(client, gateway))
            if client.refuses_websocket:
                app.router.add_get(path, websocket_refusal(client, not_found))
    app.router.add_post(count_tokens.PATH, endpoint(ANTHROPIC, gateway, count_tokens.COUNT_TOKENS))
    for path in embeddings.PATHS:
        app.router.add_post(path, endpoint(OPENAI, gateway, embeddings.EMBED))
    get_stored, delete_stored = stored_response_handlers(response_store)
    for path in RESPONSES.paths:
        app.router.add_get(path + "/{id}", keyed(get_stored))
        app.router.add_delete(path + "/{id}", keyed(delete_stored))
    app.router.add_get("/v1/models", keyed(models))
    app.router.add_get("/healthz", meta.healthz)

    async def health(request: web.Request) -> web.Response:
        return meta.health_response(settings, resilience.circuits)

    app.router.add_get("/health", admin_only(settings, health))
    app.router.add_get("/metrics", admin_only(settings, metrics_text))
    add_dashboard(app, audit_source, lambda handler: admin_only(settings, handler))
    app.router.add_get("/", meta.root)  # also answers HEAD /
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app
