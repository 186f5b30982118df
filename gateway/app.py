"""build_app(settings): the aiohttp application, its routes and its providers' lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import traceback
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.access.control import AccessControl, admin_only, build_access, require_key
from gateway.access.limits import RENEW_EVERY
from gateway.audit.opening import open_store
from gateway.audit.store import audit_off
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
from gateway.live_config import LiveConfig
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

GATEWAY = web.AppKey("gateway", Gateway)  # the one the app started with
LIVE = web.AppKey("live", LiveConfig)  # the one serving now, and its reload
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


def endpoint(client: ClientFormat, live: LiveConfig, other: Endpoint | None = None) -> Handler:
    """Each exchange runs to its end with the configuration it started with (`live.gateway` at
    its start), whatever reloads meanwhile."""

    async def handle(request: web.Request) -> web.StreamResponse:
        return await serve(client, live.gateway, request, other)

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
    state: SharedState, current: Callable[[], AccessControl | None]
) -> Callable[[web.Application], AsyncIterator[None]]:
    """The shared state's lifetime, and the renewal of the per-key slots this process holds
    (under the access checks `current` returns: a reload may add them)."""

    async def renew_slots() -> None:
        while True:
            await asyncio.sleep(RENEW_EVERY)
            access = current()
            if access is not None:
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


def share_circuits(sync: CircuitSync) -> Callable[[web.Application], AsyncIterator[None]]:
    """Circuits shared through the state (opened by `keep_state`, registered before)."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        sync.circuits.on_local = sync.changed
        pulling = asyncio.create_task(sync.run())
        yield
        pulling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pulling
        await sync.drain()

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
    config_path: Path | None = None,
    adapt: Callable[[Settings], Settings] | None = None,
) -> web.Application:
    """The gateway's app. `metrics_dir`: the workers' shared prometheus_client multiprocess
    directory, so `/metrics` reports every worker (gateway.metrics); None for one process.
    `prices`: the price table cut to the configured providers (gateway.price_subset); None:
    genai-prices' whole table. `config_path`: the file a reload (`app[LIVE].reload()`) rereads;
    None: `$GATEWAY_CONFIG` or the built-in default; `adapt`: what the process made of the
    file's settings (a worker's gateway.workers.for_workers), done to the reloaded ones too."""
    limits = settings.limits
    app = web.Application(client_max_size=limits.max_body_bytes, middlewares=[unexpected_errors])
    app[HTTP_LIMITS] = HttpLimits(limits.max_header_bytes, limits.max_headers)
    app[LEAN_POSTS] = True  # the endpoints' handlers read only what LeanRequest offers
    providers = {name: build_provider(name, cfg, env) for name, cfg in settings.providers.items()}
    metrics = GatewayMetrics(limits.metric_models, multiprocess_dir=metrics_dir)
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
    sync: CircuitSync | None = None
    if state.kind != "memory" and settings.circuit.failures:
        errors = metrics.state_errors
        sync = CircuitSync(
            resilience.circuits,
            state,
            route_targets(settings),
            on_error=lambda op: errors.labels(op).inc(),
        )

    async def rebuild(new: Settings, old: Gateway) -> Gateway:
        """The Gateway of a reloaded configuration: the providers whose settings did not change
        are kept (their pools stay warm), so are the circuits while [circuit] is the same."""
        kept = {
            name: old.providers[name]
            for name, cfg in new.providers.items()
            if name in old.providers and old.settings.providers.get(name) == cfg
        }
        fresh = {
            name: build_provider(name, cfg, env)
            for name, cfg in new.providers.items()
            if name not in kept
        }
        for provider in fresh.values():
            await provider.start()
        resilience = Resilience(new, on_circuit=metrics.circuit)
        assert old.resilience is not None
        if new.circuit == old.settings.circuit:
            resilience.circuits = old.resilience.circuits
            resilience.balancer = old.resilience.balancer
        if sync is not None:
            sync.retarget(resilience.circuits, route_targets(new))
        access = old.access
        if access is not None:
            access.reconfigure(new)
        else:
            access = build_access(new, state, metrics)
            if access is not None:
                observer.settle = access.finished
        return Gateway(
            new,
            {name: kept.get(name) or fresh[name] for name in new.providers},
            observer,
            response_store,
            resilience=resilience,
            access=access,
            pricer=old.pricer,
            placeholder_keys=placeholder_providers(new, env),
        )

    live = app[LIVE] = LiveConfig(
        gateway, rebuild, config_path, env, on_result=metrics.reload, adapt=adapt
    )
    publish_pools = metrics.watch_pools(
        lambda: {name: p.pool_stats() for name, p in live.gateway.providers.items()}
    )
    app.cleanup_ctx.append(keep_state(state, lambda: live.gateway.access))
    if sync is not None:
        app.cleanup_ctx.append(share_circuits(sync))

    audit_source = AuditSource()

    async def audit_writer(app: web.Application) -> AsyncIterator[None]:
        if audit_off(settings.audit.store):
            yield  # no store, no writer: `observer.writer` stays None
            return
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
        await live.close()
        for provider in live.providers():
            await provider.close()

    async def keep_responses(app: web.Application) -> AsyncIterator[None]:
        await response_store.open()
        yield
        await response_store.close()

    async def closing(app: web.Application) -> None:
        live.closing()  # what is cancelled from now on, the server ended
        # When the grace ends the gateway ends what is still running itself, before the server
        # closes the sockets (STOP_MARGIN later), so streams get their format's error event and
        # answers not started a 503.
        grace = settings.server.shutdown_grace
        asyncio.get_running_loop().call_later(grace, live.stop_exchanges)

    app.cleanup_ctx.append(audit_writer)
    app.cleanup_ctx.append(close_providers)
    app.cleanup_ctx.append(keep_responses)
    if publish_pools is not None:
        app.cleanup_ctx.append(every(PUBLISH_EVERY, publish_pools))
    app.on_shutdown.append(closing)

    async def models(request: web.Request) -> web.StreamResponse:
        return meta.models_response(request, live.settings, live.gateway.providers)

    async def metrics_text(request: web.Request) -> web.StreamResponse:
        body = metrics.render()
        return web.Response(body=body, headers={"content-type": CONTENT_TYPE_LATEST})

    def keyed(handler: Handler) -> Handler:
        """Behind a gateway key once keys are configured (a reload may configure them)."""
        return require_key(lambda: live.gateway.access, handler)

    def admin(handler: Handler) -> Handler:
        return admin_only(lambda: live.settings, handler)

    async def not_found(request: web.Request) -> web.Response:
        return format_error(request, NotFound(f"No endpoint {request.method} {request.path}"))

    for client in CLIENT_FORMATS.values():
        for path in client.paths:
            app.router.add_post(path, endpoint(client, live))
            if client.refuses_websocket:
                app.router.add_get(path, websocket_refusal(client, not_found))
    app.router.add_post(count_tokens.PATH, endpoint(ANTHROPIC, live, count_tokens.COUNT_TOKENS))
    for path in embeddings.PATHS:
        app.router.add_post(path, endpoint(OPENAI, live, embeddings.EMBED))
    get_stored, delete_stored = stored_response_handlers(response_store)
    for path in RESPONSES.paths:
        app.router.add_get(path + "/{id}", keyed(get_stored))
        app.router.add_delete(path + "/{id}", keyed(delete_stored))
    app.router.add_get("/v1/models", keyed(models))
    app.router.add_get("/healthz", meta.healthz)

    async def health(request: web.Request) -> web.Response:
        assert live.gateway.resilience is not None
        return meta.health_response(live.settings, live.gateway.resilience.circuits)

    app.router.add_get("/health", admin(health))
    app.router.add_get("/metrics", admin(metrics_text))
    add_dashboard(app, audit_source, admin)
    app.router.add_get("/", meta.root)  # also answers HEAD /
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app


def route_targets(settings: Settings) -> list[str]:
    return [t.key for route in settings.routes for t in route.target_list()]
