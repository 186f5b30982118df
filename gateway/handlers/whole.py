"""A whole (non-streaming) answer: one attempt's upstream body into the client's body.

    upstream JSON -> wire body decoder -> events -> aggregator -> verdict -> body renderer

With [recovery] max_tokens = "continue", an answer cut at max tokens is continued by further
whole answers before it is rendered (`continue_whole`), and rebuilt from the aggregate.

A body that is not the wire's is a 502 in the client's format (and a cut answer in the record);
an upstream that stopped the generation with an error answers with the client's error JSON,
carrying the `gateway` object.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from gateway.client_formats import ClientFormat
from gateway.errors import UpstreamError, UpstreamProtocolError
from gateway.events import Event, StreamError
from gateway.formats.registry import UNREADABLE, Wire
from gateway.handlers.attempt import BROKEN, Attempt
from gateway.handlers.recovery import LENGTH, Recovery
from gateway.normalize.splice import OverlapTrimmer, spliced


def body_events(wire: Wire, raw: bytes) -> tuple[dict[str, Any], list[Event]]:
    """A whole body and its events; one of UNREADABLE when it is not the wire's."""
    upstream = orjson.loads(raw)
    if not isinstance(upstream, dict):
        raise TypeError("not an object")
    return upstream, wire.body_events(upstream)


def _decode(attempt: Attempt, raw: bytes) -> tuple[dict[str, Any], StreamError | None]:
    agg = attempt.aggregator
    try:
        upstream, events = body_events(attempt.wire, raw)
    except UNREADABLE as exc:
        message = f"The upstream's response is not a valid {attempt.wire.name} body"
        agg.handle(StreamError("protocol", message))  # the record: cut, not unknown
        return {}, StreamError("protocol", f"{message} ({type(exc).__name__})")
    for event in events:
        problem = agg.handle(event)
        if problem is not None:
            return upstream, problem
    return upstream, None


def decode_whole(attempt: Attempt, raw: bytes) -> dict[str, Any]:
    """The upstream body, its events in the attempt's aggregator; a body that is not the
    wire's raises UpstreamProtocolError (a 502 in the client's format)."""
    upstream, problem = _decode(attempt, raw)
    if problem is not None:
        raise UpstreamProtocolError(problem.message)
    return upstream


def render_whole(
    client: ClientFormat, attempt: Attempt, upstream: dict[str, Any], rebuilt: bool = False
) -> web.Response:
    """The client's body; `rebuilt`: from the aggregate alone, never the upstream's body relayed
    (the answer is more than that body: a continuation was spliced on)."""
    terms = attempt.terms
    response = attempt.aggregator.final()
    verdict = attempt.verdict()
    if verdict.stop_reason in BROKEN and not client.broken_in_body:
        err = UpstreamError(f"The upstream stopped the generation ({verdict.native_stop_reason})")
        status, body, headers = client.render_error(err, terms.request_id)
        data = {**orjson.loads(body), "gateway": terms.extension(verdict)}
        return web.Response(status=status, body=orjson.dumps(data), headers=headers)
    if rebuilt:
        out = client.build_body(response, verdict, terms)
    else:
        out = client.render_body(attempt.wire.name, upstream, response, verdict, terms)
    headers = {"content-type": "application/json", "x-request-id": terms.request_id}
    return web.Response(body=orjson.dumps(out), headers=headers)


async def continue_whole(attempt: Attempt, recovery: Recovery) -> bool:
    """A whole answer cut at max tokens, continued ([recovery] max_tokens) by whole answers
    (gateway.handlers.recovery) until one stops otherwise or the bound is reached; whether any
    was spliced on. A continuation that fails or is not its wire's ends the splicing there."""
    agg = attempt.aggregator
    continued = False
    while recovery.mends_length(agg):
        sent = agg.text_so_far()
        found = await recovery.continuer(sent, LENGTH)
        if found is None:
            break
        try:
            _, events = body_events(found.wire, await found.reply.read())
        except (UpstreamError, *UNREADABLE):
            recovery.continuer.discard()
            break
        finally:
            found.reply.release()
        recovery.splices.spliced_at(LENGTH, len(sent), found.target)
        agg.resume()
        for event in spliced(events, OverlapTrimmer(sent, found.blank_sent)):
            agg.handle(event)
        continued = True
    return continued
