"""One exchange, whatever the client format: validate, route, attempt, answer, record.

    client body -> validate (the format's body model) -> route -> runaway signal
      -> attempts over the route's targets (gateway.resilience: order, circuits, retries)
         -> attempt: request translator (or same-format passthrough) -> provider.send
            -> stream (gateway.handlers.streaming) or whole body (gateway.handlers.whole)

The exchange owns what the client sees and the audit record; each attempt owns its provider,
decoder, aggregator and verdict, so a retry or a fallback is another attempt, as long as no byte
reached the client: a failure after the first byte ends the stream with the format's error event
and is never retried. Whatever happens, the trail gets exactly one record, listing every attempt.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from gateway.access.control import forwarded_headers
from gateway.agent_guard import identical_tool_call_streak
from gateway.audit.record import AuditRecord
from gateway.client_formats import ClientFormat
from gateway.client_request import ClientRequest
from gateway.cost import Pricer
from gateway.encode import ReplyTerms
from gateway.error_reply import error_response
from gateway.errors import (
    CircuitOpen,
    GatewayError,
    InvalidRequest,
    ModelNotFound,
    RunawaySuspected,
    ServiceUnavailable,
    UpstreamError,
    UpstreamStatusError,
    UpstreamTimeout,
)
from gateway.events import StreamError
from gateway.formats.registry import wire_for
from gateway.handlers.attempt import Attempt
from gateway.handlers.attempt_log import admitted, note, note_answer
from gateway.handlers.chaining import chained, open_chain
from gateway.handlers.continuation import Continuations, note_attempts
from gateway.handlers.error_extension import error_extension
from gateway.handlers.exchange_state import (
    FORWARDED_HEADERS,
    AttemptRun,
    Endpoint,
    Exchange,
    Gateway,
)
from gateway.handlers.payload import record_dropped, upstream_payload
from gateway.handlers.recording import complete_record, record_cost
from gateway.handlers.recovery import Recovery, splices_for
from gateway.handlers.streaming import stream_reply
from gateway.handlers.upstream_errors import status_error
from gateway.handlers.validation import RequestBody, parse_json, validate
from gateway.handlers.whole import continue_whole, decode_whole, render_whole
from gateway.request_body import read_body
from gateway.request_ids import new_request_id
from gateway.resilience.outcome import CLIENT_LEFT, Outcome, failed_outcome
from gateway.resilience.retry import Retries
from gateway.settings import ResolvedRoute, ResolvedTarget
from providers.base import Provider, ProviderRequest


async def serve(
    client: ClientFormat,
    gateway: Gateway,
    request: ClientRequest,
    endpoint: Endpoint | None = None,
) -> web.StreamResponse:
    """One exchange, and always its record: whatever happens, the audit trail gets it. Without
    `endpoint` it is the client format's own: a model answer."""
    request_id = new_request_id()
    record = AuditRecord(request_id, time.time(), client.name, stream=False)
    if endpoint is not None:
        record.operation = endpoint.operation
    exchange = Exchange(request_id, client, record)
    gateway.observer.started()
    response: web.StreamResponse | None = None
    task = asyncio.current_task()
    if task is not None:
        gateway.running.add(task)
    try:
        response = await _exchange(exchange, gateway, request, endpoint)
    except GatewayError as err:
        record.error_class = type(err).__name__
        if isinstance(err, UpstreamTimeout):
            record.timeout = err.which
        extension = None
        if isinstance(err, UpstreamError):  # which upstream failed; not the client's own error
            extension = error_extension(record, gateway.placeholder_keys)
        response = error_response(client, err, request_id, extension)
    except asyncio.CancelledError:
        exchange.ended_by = "server" if gateway.closing else "client"
        if exchange.attempt is not None:
            exchange.attempt.broke(StreamError("aborted", "the exchange was cancelled"))
        if not _answer_shutdown(gateway, record, task):
            raise
        response = error_response(client, SHUTTING_DOWN, request_id)
    finally:
        if task is not None:
            gateway.running.discard(task)
        assert gateway.pricer is not None  # Gateway.__post_init__
        _close_record(exchange, response, request, gateway.pricer)  # as the exchange ends
        await gateway.observer.hand_over(record, request)  # a whole answer is written first
    return response


SHUTTING_DOWN = ServiceUnavailable("The gateway is shutting down; retry the request", 1)


def _answer_shutdown(gateway: Gateway, record: AuditRecord, task: asyncio.Task[Any] | None) -> bool:
    """Whether an exchange the shutdown stopped before its first byte still gets a 503 (its
    client is told to retry elsewhere, instead of a closed socket)."""
    if not gateway.closing or record.first_byte_at is not None or task is None:
        return False
    return task.uncancel() == 0


def _close_record(
    exchange: Exchange, response: web.StreamResponse | None, request: ClientRequest, pricer: Pricer
) -> None:
    record = exchange.record
    record.ended_at = time.time()
    if record.first_byte_at is None and response is not None:
        record.first_byte_at = record.ended_at
    if response is not None:
        record.http_status = response.status
    elif record.http_status is None:  # a stream that started keeps the status it was sent with
        record.http_status = 499  # nothing was sent: the client left (or the server stopped) first
    attempt = exchange.attempt
    if exchange.ended_by is None:
        error = attempt.aggregator.error if attempt is not None else None
        left = request.transport is None or request.transport.is_closing()
        if left or (error is not None and error.kind == "aborted"):
            exchange.ended_by = "client"  # the client left before its answer was sent
    record.ended_by = exchange.ended_by
    record.client_aborted = exchange.ended_by == "client"
    if attempt is not None and (attempt.answered or attempt.aggregator.error is not None):
        complete_record(record, attempt, exchange.request_body)
        if attempt.answered:
            record_cost(record, pricer, attempt.aggregator.snapshot, exchange.price)


def _check_runaway(
    gateway: Gateway, client: ClientFormat, obj: dict[str, Any], record: Any
) -> None:
    guard = gateway.settings.agent_guard
    streak, name = identical_tool_call_streak(client.tool_turns, obj)
    if streak < guard.identical_tool_calls:
        return
    record.runaway_streak = streak
    if guard.action == "reject":
        raise RunawaySuspected(
            f"Runaway suspected: the conversation ends with {streak} identical calls to tool "
            f"{name!r} (limit {guard.identical_tool_calls}); not sent upstream"
        )


async def _exchange(
    exchange: Exchange, gateway: Gateway, request: ClientRequest, endpoint: Endpoint | None
) -> web.StreamResponse:
    client, record, settings = exchange.client, exchange.record, gateway.settings
    if gateway.access is not None:  # gateway keys and limits (gateway.access): 401, 429
        await gateway.access.admit(request, record)
    raw = await read_body(request)
    obj = parse_json(raw)
    if endpoint is None:
        body = validate(client.body_model, obj, client.endpoint)
    else:
        body = validate(endpoint.body_model, obj, endpoint.name)
    record.model = body.model
    record.stream = bool(body.stream)
    if settings.audit.log_content:
        exchange.request_body = obj
    route = settings.resolve_route(body.model)
    if route is None:
        names = ", ".join(settings.model_names()) or "see GET /v1/models"
        raise ModelNotFound(f"No route for model {body.model!r} (routable: {names})")
    record.route = route.route.match
    record.provider = route.provider_name
    record.upstream_model = route.upstream_model
    if gateway.access is not None:
        gateway.access.allow_route(record, route)  # 403
    if endpoint is not None:
        return await _attempts(exchange, gateway, request, route, body, obj, raw, endpoint.run)
    if client.keeps_responses and chained(obj):
        chain, obj, raw = await open_chain(gateway.responses, obj, raw, request.headers)
        exchange.chain = chain
        record.previous_response_id = chain.parent_id
    _check_runaway(gateway, client, obj, record)
    return await _attempts(exchange, gateway, request, route, body, obj, raw, _attempt)


async def _attempts(
    exchange: Exchange,
    gateway: Gateway,
    request: ClientRequest,
    route: ResolvedRoute,
    body: RequestBody,
    obj: dict[str, Any],
    raw: bytes,
    run: AttemptRun,
) -> web.StreamResponse:
    """Attempts over the route's targets until one answers: a failure before the first byte
    reached the client moves on to the next admitted target when the retry table allows it,
    after a backoff when that target was tried already."""
    resilience = gateway.resilience
    assert resilience is not None  # Gateway.__post_init__
    record = exchange.record
    balancer, circuits = resilience.balancer, resilience.circuits
    order = exchange.order = balancer.order(route)
    exchange.route = route
    counted = route.route.balance == "least_in_flight"  # only that balance reads in-flight
    began = time.monotonic()
    retries: Retries | None = None  # built at the first failure: most exchanges have none
    tried: list[str] = []
    position = 0
    while True:
        found = admitted(order, position, circuits, record)
        if found is None:
            keys = [t.key for t in order]
            raise CircuitOpen(
                f"Every target of route {route.route.match!r} is cooling down after repeated "
                "failures (circuit open)",
                circuits.retry_in(keys),
            )
        position, target = found
        key = target.key
        tried.append(key)
        provider = gateway.providers[target.provider_name]
        record.provider, record.upstream_model = target.provider_name, target.upstream_model
        started = time.monotonic() if tried[1:] else began
        exchange.pool_wait = 0.0
        if counted:
            balancer.started(key)
        try:
            response = await run(exchange, gateway, request, provider, target, body, obj, raw)
        except GatewayError as exc:
            if retries is None:
                retries = resilience.policy(route).begin(began)
            outcome = failed_outcome(exc, retries.policy.retry_on)
            note(record, target, outcome, started, exchange.pool_wait)
            if isinstance(exc, UpstreamStatusError) and exc.details:
                record.attempts[-1]["error_details"] = exc.details  # e.g. a filtered prompt's
            if outcome.target_failed:
                circuits.failed(key)
            else:
                circuits.released(key)
            following = admitted(order, position + 1, circuits, record)
            if following is None:
                raise
            circuits.released(following[1].key)  # only looked at: the next turn admits it
            delay = retries.after_failure(outcome, revisit=following[1].key in tried)
            if delay is None:
                raise
            if delay > 0:
                await asyncio.sleep(delay)
            position = following[0]
            continue
        except asyncio.CancelledError:
            note(record, target, Outcome(CLIENT_LEFT), started, exchange.pool_wait)
            circuits.released(key)
            raise
        finally:
            if counted:
                balancer.ended(key)
        attempt = exchange.attempt
        error = attempt.aggregator.error if attempt is not None else None
        broke = error is not None and error.kind != "aborted"
        continued, status, waited = exchange.continuations, response.status, exchange.pool_wait
        if continued is None or not note_attempts(
            record, continued, target, started, status, broke, waited
        ):
            note_answer(record, circuits, target, started, status, broke, waited)
        return response


async def _attempt(
    exchange: Exchange,
    gateway: Gateway,
    request: ClientRequest,
    provider: Provider,
    target: ResolvedTarget,
    body: RequestBody,
    obj: dict[str, Any],
    raw: bytes,
) -> web.StreamResponse:
    """One try at one target."""
    client, record = exchange.client, exchange.record
    wire = wire_for(provider.wire_of(target.upstream_model))
    wire = wire.with_stop_reasons(provider.own_stop_reasons)  # quirk flags: its own values
    policy = gateway.settings.truncation.tool_calls
    translation = upstream_payload(client, wire.name, obj, raw, target.upstream_model)
    record_dropped(record, translation.dropped)
    if translation.dropped.tools and gateway.settings.responses.unsupported_tools == "reject":
        names = ", ".join(translation.dropped.tools)
        raise InvalidRequest(f"tools: this upstream cannot run these tools: {names}", "tools")
    recovery = _recovery(exchange, gateway, request, target, body, obj)
    terms = ReplyTerms(
        exchange.id,
        provider.name,
        body.model,
        policy,
        body.include_usage,
        dropped=translation.dropped,
        tools=translation.tools,
        response_id=body.new_response_id(),
        echo=body.echo(obj),
        encrypted_reasoning=body.wants_encrypted_reasoning,
        splices=recovery.splices if recovery is not None else None,
    )
    record.response_id = terms.response_id
    attempt = exchange.attempt = Attempt(provider, wire, terms)
    exchange.price = target.price
    headers = forwarded_headers(gateway.access, FORWARDED_HEADERS, request.headers)
    payload = translation.payload
    attempt.sent_bytes = len(payload)
    upstream = ProviderRequest(payload, record.stream, target.upstream_model, headers=headers)
    reply = await provider.send(upstream)
    exchange.pool_wait = reply.pool_wait
    try:
        if reply.status >= 400:
            raise status_error(reply.status, reply.headers, await reply.read(), wire.name)
        if record.stream:
            attempt.answered = True
            response = await stream_reply(client, attempt, reply, request, record, recovery)
        else:
            answer = await reply.read()  # a failure here is the attempt's, not a cut answer
            attempt.answered = True
            body_of_answer = decode_whole(attempt, answer)
            continued = recovery is not None and await continue_whole(attempt, recovery)
            response = render_whole(client, attempt, body_of_answer, rebuilt=continued)
        if exchange.chain is not None:
            await exchange.chain.keep(attempt)
        return response
    finally:
        reply.release()


def _recovery(
    exchange: Exchange,
    gateway: Gateway,
    request: ClientRequest,
    target: ResolvedTarget,
    body: RequestBody,
    obj: dict[str, Any],
) -> Recovery | None:
    """What may mend this attempt's answer if it is cut (gateway.handlers.recovery), when its
    route turns recovery on and the request asks for one answer."""
    exchange.continuations = None
    route, resilience = exchange.route, gateway.resilience
    assert route is not None and resilience is not None  # routed; Gateway.__post_init__
    settings = resilience.recovery(route)
    if settings is None:  # the default: nothing is continued
        return None
    stream = exchange.record.stream
    splices = splices_for(settings, stream)
    if splices is None or body.answers(obj) != 1:
        return None
    headers = forwarded_headers(gateway.access, FORWARDED_HEADERS, request.headers)
    exchange.continuations = Continuations(
        exchange.client,
        obj,
        exchange.order,
        target,
        gateway.providers,
        resilience.circuits,
        gateway.settings.retry_for(route),
        headers,
        stream,
    )
    return Recovery(splices, exchange.continuations)
