"""A whole (non-streaming) answer: one attempt's upstream body into the client's body.

    upstream JSON -> wire body decoder -> events -> aggregator -> verdict -> body renderer

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
from gateway.events import StreamError
from gateway.formats.registry import UNREADABLE
from gateway.handlers.attempt import BROKEN, Attempt


def _decode(attempt: Attempt, raw: bytes) -> tuple[dict[str, Any], StreamError | None]:
    agg = attempt.aggregator
    try:
        upstream = orjson.loads(raw)
        if not isinstance(upstream, dict):
            raise TypeError("not an object")
        events = attempt.wire.body_events(upstream)
    except UNREADABLE as exc:
        message = f"The upstream's response is not a valid {attempt.wire.name} body"
        agg.handle(StreamError("protocol", message))  # the record: cut, not unknown
        return {}, StreamError("protocol", f"{message} ({type(exc).__name__})")
    for event in events:
        problem = agg.handle(event)
        if problem is not None:
            return upstream, problem
    return upstream, None


def whole_reply(client: ClientFormat, attempt: Attempt, raw: bytes) -> web.Response:
    upstream, problem = _decode(attempt, raw)
    if problem is not None:
        raise UpstreamProtocolError(problem.message)
    terms = attempt.terms
    response = attempt.aggregator.final()
    verdict = attempt.verdict()
    if verdict.stop_reason in BROKEN and not client.broken_in_body:
        err = UpstreamError(f"The upstream stopped the generation ({verdict.native_stop_reason})")
        status, body, headers = client.render_error(err, terms.request_id)
        data = {**orjson.loads(body), "gateway": terms.extension(verdict)}
        return web.Response(status=status, body=orjson.dumps(data), headers=headers)
    out = client.render_body(attempt.wire.name, upstream, response, verdict, terms)
    headers = {"content-type": "application/json", "x-request-id": terms.request_id}
    return web.Response(body=orjson.dumps(out), headers=headers)
