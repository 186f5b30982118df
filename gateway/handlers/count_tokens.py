"""`POST /v1/messages/count_tokens`: a Messages request's input tokens, before it is sent.

Claude Code asks before each turn. The upstream answers when it offers counting (Anthropic's
own endpoint; Gemini's `countTokens`, Bedrock's `CountTokens` and Vertex AI's through their
providers, from the request translated to their wire); otherwise the gateway estimates
(gateway.token_estimate) and says so. Either way the answer is Anthropic's
`{"input_tokens": N}` with the `gateway` object: `provider`, `request_id`, `estimated`, and the
`tokenizer` an estimate used. The exchange is routed, retried and audited like any other, with
`operation = count_tokens` and the count as its input tokens.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web
from pydantic import Field

from gateway.access.control import forwarded_headers
from gateway.client_formats import ClientFormat
from gateway.client_request import ClientRequest
from gateway.errors import UpstreamProtocolError
from gateway.formats.registry import UNREADABLE, wire_for
from gateway.handlers.exchange_state import FORWARDED_HEADERS, Endpoint, Exchange, Gateway
from gateway.handlers.payload import upstream_payload
from gateway.handlers.upstream_errors import whole_answer
from gateway.handlers.validation import RequestBody
from gateway.settings import ResolvedTarget
from gateway.token_estimate import ENCODING, estimate_input_tokens
from providers.base import Operation, Provider, ProviderRequest

PATH = "/v1/messages/count_tokens"
# What a count request holds that a generation's body would not take upstream.
NOT_COUNTED = ("stream", "max_tokens")


class CountTokensBody(RequestBody):
    messages: list[dict[str, Any]] = Field(min_length=1)


def _upstream_body(
    client: ClientFormat, client_body: dict[str, Any], raw: bytes, wire: str, upstream_model: str
) -> bytes:
    """The request in the wire's generation shape (gateway.handlers.payload: the client's own
    bytes for its own wire, translated for another); the provider puts it in its counting
    envelope. A field a count request must not carry upstream is left out first."""
    body = {k: v for k, v in client_body.items() if k not in NOT_COUNTED}
    sent = raw if len(body) == len(client_body) else orjson.dumps(body)
    return upstream_payload(client, wire, body, sent, upstream_model).payload


async def _counted_upstream(
    exchange: Exchange,
    gateway: Gateway,
    request: ClientRequest,
    provider: Provider,
    target: ResolvedTarget,
    obj: dict[str, Any],
    raw: bytes,
) -> int | None:
    """The upstream's own count; None when it has none to give."""
    model = target.upstream_model
    wire = wire_for(provider.wire_of(model))
    if wire.token_count is None or not provider.offers(Operation.COUNT_TOKENS, model):
        return None
    headers = forwarded_headers(gateway.access, FORWARDED_HEADERS, request.headers)
    payload = _upstream_body(exchange.client, obj, raw, wire.name, model)
    ask = ProviderRequest(payload, False, model, Operation.COUNT_TOKENS, headers)
    raw = await whole_answer(provider, ask, wire.name)
    try:
        return wire.token_count(orjson.loads(raw))
    except UNREADABLE as exc:
        message = f"The upstream's token count is not a valid {wire.name} answer"
        raise UpstreamProtocolError(f"{message} ({type(exc).__name__})") from None


async def count_tokens(
    exchange: Exchange,
    gateway: Gateway,
    request: ClientRequest,
    provider: Provider,
    target: ResolvedTarget,
    body: RequestBody,
    obj: dict[str, Any],
    raw: bytes,
) -> web.StreamResponse:
    counted = await _counted_upstream(exchange, gateway, request, provider, target, obj, raw)
    extension: dict[str, Any] = {"provider": provider.name, "request_id": exchange.id}
    if counted is None:
        counted = await estimate_input_tokens(obj)
        extension.update(estimated=True, tokenizer=ENCODING)
    else:
        extension["estimated"] = False
    exchange.record.input_tokens = counted
    answer = {"input_tokens": counted, "gateway": extension}
    headers = {"content-type": "application/json", "x-request-id": exchange.id}
    return web.Response(body=orjson.dumps(answer), headers=headers)


COUNT_TOKENS = Endpoint("count_tokens", "count tokens", CountTokensBody, count_tokens)
