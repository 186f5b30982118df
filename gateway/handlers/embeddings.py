"""`POST /v1/embeddings`: OpenAI's embeddings endpoint, for every upstream that embeds.

An OpenAI-wire upstream gets the client's body (with the route's model name) and its answer goes
back byte for byte; another wire's request and answer are translated
(gateway.translate.embeddings). The exchange is routed, retried and audited like any other, with
`operation = embed` and the input tokens when the upstream counts them; the record never holds
an input text or a vector.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from gateway.access.control import forwarded_headers
from gateway.client_request import ClientRequest
from gateway.cost import Tokens
from gateway.errors import InvalidRequest, UpstreamProtocolError
from gateway.formats.registry import UNREADABLE
from gateway.formats.shape import count
from gateway.handlers.exchange_state import FORWARDED_HEADERS, Endpoint, Exchange, Gateway
from gateway.handlers.upstream_errors import whole_answer
from gateway.handlers.validation import RequestBody
from gateway.settings import ResolvedTarget
from gateway.translate.embeddings import (
    EMBEDDERS,
    Embedder,
    client_texts,
    dimensions,
    encoding_format,
    openai_list,
)
from providers.base import Operation, Provider, ProviderRequest

PATHS = ("/v1/embeddings", "/embeddings")
# The `usage` object closes OpenAI's answer; it is read from the tail, not by parsing vectors.
USAGE_KEY = b'"usage"'


class EmbeddingsBody(RequestBody):
    input: Any = None

    def check_shapes(self, endpoint: str) -> None:
        if self.input is None:
            raise InvalidRequest(f"Not a valid {endpoint} request: input: is required", "input")


def relayed_usage(raw: bytes) -> int | None:
    """`usage.prompt_tokens` of an OpenAI embeddings answer, read from its last `"usage"`
    object alone (a flat object), so a body of megabytes of vectors is not parsed."""
    at = raw.rfind(USAGE_KEY)
    start = raw.find(b"{", at) if at >= 0 else -1
    end = raw.find(b"}", start) if start >= 0 else -1
    if end < 0:
        return None
    try:
        usage = orjson.loads(raw[start : end + 1])
    except orjson.JSONDecodeError:
        return None
    return count(usage.get("prompt_tokens")) if isinstance(usage, dict) else None


def _record_usage(
    exchange: Exchange, gateway: Gateway, target: ResolvedTarget, tokens: int | None
) -> None:
    """The input tokens, and their cost (embeddings bill input only) when the count is known."""
    record = exchange.record
    record.input_tokens = tokens
    if tokens is None or gateway.pricer is None:
        return
    cost = gateway.pricer.cost(
        Tokens(tokens, 0), target.provider_name, target.upstream_model, target.price
    )
    if cost is not None:
        record.cost_usd, record.cost_source = cost.usd, cost.source


def _payload(embedder: Embedder, obj: dict[str, Any], raw: bytes, model: str) -> bytes:
    if embedder.request is None:
        return raw if obj.get("model") == model else orjson.dumps({**obj, "model": model})
    return orjson.dumps(embedder.request(client_texts(obj), model, dimensions(obj)))


async def embed(
    exchange: Exchange,
    gateway: Gateway,
    request: ClientRequest,
    provider: Provider,
    target: ResolvedTarget,
    body: RequestBody,
    obj: dict[str, Any],
    raw: bytes,
) -> web.StreamResponse:
    model = target.upstream_model
    wire = provider.wire_of(model)
    embedder = EMBEDDERS.get(wire)
    if embedder is None or not provider.offers(Operation.EMBED, model):
        raise InvalidRequest(f"Provider {provider.name!r} offers no embeddings for {model!r}")
    encoding = encoding_format(obj)
    payload = _payload(embedder, obj, raw, model)
    headers = forwarded_headers(gateway.access, FORWARDED_HEADERS, request.headers)
    ask = ProviderRequest(payload, False, model, Operation.EMBED, headers)
    answer = await whole_answer(provider, ask, wire)
    response_headers = {"content-type": "application/json", "x-request-id": exchange.id}
    if embedder.answer is None:
        _record_usage(exchange, gateway, target, relayed_usage(answer))
        return web.Response(body=answer, headers=response_headers)
    texts = len(client_texts(obj))
    try:
        vectors, tokens = embedder.answer(orjson.loads(answer), texts)
    except UNREADABLE as exc:
        message = f"The upstream's embeddings are not a valid {wire} answer"
        raise UpstreamProtocolError(f"{message} ({type(exc).__name__})") from None
    _record_usage(exchange, gateway, target, tokens)
    out = openai_list(vectors, body.model, tokens, encoding)
    return web.Response(body=orjson.dumps(out), headers=response_headers)


EMBED = Endpoint("embed", "embeddings", EmbeddingsBody, embed)
