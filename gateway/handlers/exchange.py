"""One exchange, whatever the client format: route, translate, send, relay or translate back.

    client body -> validate -> route -> request translator (or same-format passthrough)
      -> provider.send -> upstream status? -> stream: SSE -> wire decoder -> events
                                                 -> aggregator (the record) + stream writer
                                          -> whole body: events -> aggregator -> body renderer

An upstream failure before the first byte reaches the client gets a real HTTP status in the
client's own error format, also on a streaming request; after it, the stream ends with the
format's own error event.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from gateway.agent_guard import identical_tool_call_streak
from gateway.audit.build import complete_record
from gateway.audit.record import AuditRecord
from gateway.context import ExchangeContext
from gateway.edge import read_body
from gateway.encode import StreamWriter
from gateway.encode.errors import ClientFormat, render_error
from gateway.errors import (
    GatewayError,
    ModelNotFound,
    RunawaySuspected,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeout,
)
from gateway.events import Event, StopReason, StreamEnd, StreamError
from gateway.formats import anthropic_messages, openai_chat
from gateway.formats.sse import SSEDecoder, SSEFrame
from gateway.handlers.upstream_errors import status_error
from gateway.handlers.validation import parse_json, validate
from gateway.observer import ExchangeObserver
from gateway.settings import Settings
from gateway.translate.table import translate_request
from providers.base import Provider, ProviderRequest, UpstreamReply

log = logging.getLogger("gateway.exchange")

FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta", "x-api-key", "authorization")
STREAM_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache"}
EARLY_ERROR_STATUS = {"overloaded_error": 529, "rate_limit_error": 429, "timeout_error": 504}
BROKEN = frozenset({StopReason.ERROR, StopReason.ABORTED})
STREAM_DECODERS: dict[str, Callable[[], Any]] = {
    "openai": openai_chat.OpenAIChatDecoder,
    "anthropic": anthropic_messages.AnthropicDecoder,
}
BODY_DECODERS: dict[str, Callable[[dict[str, Any]], list[Event]]] = {
    "openai": openai_chat.response_events,
    "anthropic": anthropic_messages.response_events,
}


@dataclass(frozen=True, slots=True)
class ClientSpec:
    """What one client endpoint brings to the shared exchange."""

    format: ClientFormat
    endpoint: str
    body_model: Any  # the pydantic model validating the top-level body
    relay: Callable[[ExchangeContext], StreamWriter]  # same-format stream writer
    writer: Callable[[ExchangeContext, str], StreamWriter]  # cross-format stream writer
    relay_body: Callable[..., dict[str, Any]]
    build_body: Callable[..., dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Gateway:
    settings: Settings
    providers: dict[str, Provider]
    observer: ExchangeObserver


def error_response(fmt: ClientFormat, err: GatewayError, request_id: str) -> web.Response:
    status, body, headers = render_error(fmt, err, request_id)
    return web.Response(status=status, body=body, headers=headers)


async def serve(spec: ClientSpec, gateway: Gateway, request: web.Request) -> web.StreamResponse:
    """One exchange, and always its record: whatever happens, the audit trail gets it."""
    request_id = uuid.uuid4().hex[:24]
    record = AuditRecord(request_id, time.time(), spec.format, stream=False)
    ctx = ExchangeContext(request_id, "", gateway.settings.truncation.tool_calls, record=record)
    gateway.observer.started()
    response: web.StreamResponse | None = None
    try:
        response = await _exchange(spec, gateway, request, ctx)
    except GatewayError as err:
        record.error_class = type(err).__name__
        response = error_response(spec.format, err, request_id)
    except asyncio.CancelledError:
        ctx.aggregator.handle(StreamError("aborted", "the exchange was cancelled"))
        raise
    finally:
        record.ended_at = time.time()
        if record.first_byte_at is None and response is not None:
            record.first_byte_at = record.ended_at
        record.http_status = response.status if response is not None else 499
        if request.transport is None or request.transport.is_closing():
            record.client_aborted = True  # the client left before its answer was sent
        if ctx.upstream_answered or ctx.aggregator.error is not None:
            complete_record(record, ctx, gateway.settings.audit.log_content)
        await asyncio.shield(gateway.observer.finished(record))
    return response


def _check_runaway(gateway: Gateway, fmt: ClientFormat, obj: dict[str, Any], record: Any) -> None:
    guard = gateway.settings.agent_guard
    streak, name = identical_tool_call_streak(fmt, obj)
    if streak < guard.identical_tool_calls:
        return
    record.runaway_streak = streak
    if guard.action == "reject":
        raise RunawaySuspected(
            f"Runaway suspected: the conversation ends with {streak} identical calls to tool "
            f"{name!r} (limit {guard.identical_tool_calls}); not sent upstream"
        )


async def _exchange(
    spec: ClientSpec, gateway: Gateway, request: web.Request, ctx: ExchangeContext
) -> web.StreamResponse:
    record = ctx.record
    assert record is not None
    raw = await read_body(request)
    obj = parse_json(raw)
    body = validate(spec.body_model, obj, spec.endpoint)
    record.model = body.model
    record.stream = bool(body.stream)
    if gateway.settings.audit.log_content:
        ctx.request_body = obj
    route = gateway.settings.resolve_route(body.model)
    if route is None:
        names = ", ".join(gateway.settings.model_names()) or "see GET /v1/models"
        raise ModelNotFound(f"No route for model {body.model!r} (routable: {names})")
    record.route = route.route.match
    record.provider = ctx.provider = route.provider_name
    record.upstream_model = route.upstream_model
    _check_runaway(gateway, spec.format, obj, record)
    provider = gateway.providers[route.provider_name]
    upstream_body = translate_request(spec.format, provider.wire, obj, route.upstream_model)
    # Same format, no rename: the client's bytes go as they came.
    payload = raw if upstream_body is None else orjson.dumps(upstream_body)
    headers = {k: request.headers[k] for k in FORWARDED_HEADERS if k in request.headers}
    ctx.include_usage = bool((obj.get("stream_options") or {}).get("include_usage"))
    reply = await provider.send(ProviderRequest(payload, record.stream, headers))
    try:
        if reply.status >= 400:
            raise status_error(reply.status, reply.headers, await reply.read(), provider.wire)
        ctx.upstream_answered = True
        if record.stream:
            return await _stream(spec, provider, ctx, reply, request, body.model)
        return await _whole(spec, provider, ctx, reply, body.model)
    finally:
        reply.release()


async def _whole(
    spec: ClientSpec, provider: Provider, ctx: ExchangeContext, reply: UpstreamReply, model: str
) -> web.Response:
    raw = await reply.read()
    try:
        upstream = orjson.loads(raw)
        if not isinstance(upstream, dict):
            raise TypeError("not an object")
        events = BODY_DECODERS[provider.wire](upstream)
    except (ValueError, TypeError, AttributeError) as exc:
        message = f"The upstream's response is not a valid {provider.wire} body"
        ctx.aggregator.handle(StreamError("protocol", message))  # the record: cut, not unknown
        raise UpstreamProtocolError(f"{message} ({type(exc).__name__})") from None
    agg = ctx.aggregator
    for event in events:
        agg.handle(event)
    resp = agg.final()
    verdict = ctx.verdict()
    if verdict.stop_reason in BROKEN:
        err = UpstreamError(f"The upstream stopped the generation ({verdict.native_stop_reason})")
        status, body, headers = render_error(spec.format, err, ctx.request_id)
        data = {**orjson.loads(body), "gateway": ctx.extension(verdict)}
        return web.Response(status=status, body=orjson.dumps(data), headers=headers)
    if provider.wire == spec.format:
        out = spec.relay_body(upstream, ctx, verdict)
    else:
        out = spec.build_body(resp, ctx, verdict, model)
    headers = {"content-type": "application/json", "x-request-id": ctx.request_id}
    return web.Response(body=orjson.dumps(out), headers=headers)


class _StreamRun:
    """Drives one upstream stream into one client response, preparing the response lazily."""

    def __init__(
        self,
        spec: ClientSpec,
        provider: Provider,
        ctx: ExchangeContext,
        request: web.Request,
        model: str,
    ) -> None:
        self.ctx = ctx
        self.request = request
        self.decoder = STREAM_DECODERS[provider.wire]()
        same = provider.wire == spec.format
        self.writer = spec.relay(ctx) if same else spec.writer(ctx, model)
        self.response: web.StreamResponse | None = None
        self.over = False

    async def handle(self, frame: SSEFrame | None, obj: Any, events: list[Event]) -> None:
        agg = self.ctx.aggregator
        for event in events:
            agg.handle(event)
            if isinstance(event, StreamEnd | StreamError):
                self.over = True
                if self.response is None and isinstance(event, StreamError):
                    return  # nothing reached the client yet: it gets a real HTTP status
        out = self.writer.feed(frame, obj, events)
        if out:
            await self.write(out)

    async def write(self, data: bytes) -> None:
        if self.response is None:
            if self.ctx.record is not None:
                self.ctx.record.first_byte_at = time.time()
            self.response = web.StreamResponse(
                headers={**STREAM_HEADERS, "x-request-id": self.ctx.request_id}
            )
            await self.response.prepare(self.request)
        await self.response.write(data)

    async def frame(self, frame: SSEFrame) -> None:
        try:
            obj, events = self.decoder.decode(frame)
        except (orjson.JSONDecodeError, ValueError) as exc:
            message = f"upstream sent an unreadable event ({type(exc).__name__})"
            obj, events = None, [StreamError("protocol", message)]
        await self.handle(frame, obj, events)


async def _stream(
    spec: ClientSpec,
    provider: Provider,
    ctx: ExchangeContext,
    reply: UpstreamReply,
    request: web.Request,
    model: str,
) -> web.StreamResponse:
    run = _StreamRun(spec, provider, ctx, request, model)
    sse = SSEDecoder()
    try:
        async for chunk in reply.iter_chunks():
            for frame in sse.feed(chunk):
                await run.frame(frame)
                if run.over:
                    break
            if run.over:
                break
        else:
            for frame in sse.close():
                await run.frame(frame)
            if not run.over:
                await run.handle(None, None, run.decoder.eof())
    except UpstreamTimeout as exc:
        await _fail(run, StreamError("timeout", exc.message, "timeout_error"), exc)
    except UpstreamError as exc:
        await _fail(run, StreamError("truncated", exc.message), exc)
    except ConnectionError:
        ctx.aggregator.handle(StreamError("aborted", "the client disconnected"))
        log.info("client disconnected", extra={"request_id": ctx.request_id})
    finally:
        ctx.aggregator.final()  # joins the record and reports argument parse failures
    if run.response is None:
        # Nothing reached the client: the failure gets a real HTTP status.
        return _early_failure(spec.format, ctx)
    try:
        await run.response.write_eof()
    except ConnectionError:
        ctx.aggregator.handle(StreamError("aborted", "the client disconnected"))
    return run.response


async def _fail(run: _StreamRun, error: StreamError, exc: UpstreamError) -> None:
    if run.response is None:
        run.ctx.aggregator.handle(error)
        raise exc
    await run.handle(None, None, [error])


def _early_failure(fmt: ClientFormat, ctx: ExchangeContext) -> web.Response:
    error = ctx.aggregator.error
    if error is None:
        raise UpstreamProtocolError("The upstream stream ended before sending anything")
    status = error.status if error.status and error.status >= 400 else 502
    status = EARLY_ERROR_STATUS.get(error.error_type or "", status)
    err = UpstreamStatusError(status, error.message, error.error_type)
    return error_response(fmt, err, ctx.request_id)
