"""An upstream's error reply, read once into UpstreamStatusError (by status and structured body,
each wire's shape read by its row's `error_fields`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import UpstreamStatusError
from gateway.formats.registry import wire_for
from providers.base import Provider, ProviderRequest

MAX_MESSAGE = 2000


def status_error(
    status: int, headers: Mapping[str, str], body: bytes, wire: str
) -> UpstreamStatusError:
    parsed: Any = None
    with contextlib.suppress(orjson.JSONDecodeError):
        parsed = orjson.loads(body)
    error = wire_for(wire).error_fields(parsed, headers)
    message = error.message if error is not None else None
    if not message:
        message = f"The upstream answered HTTP {status}"
    return UpstreamStatusError(
        status,
        message[:MAX_MESSAGE],
        error_type=error.type if error is not None else None,
        error_code=error.code if error is not None else None,
        retry_after=headers.get("retry-after") or (error.retry_after if error else None),
        body=body if error is not None else None,
        source=wire,
        details=error.details if error is not None else None,
    )


async def whole_answer(provider: Provider, ask: ProviderRequest, wire: str) -> bytes:
    """The upstream's whole answer to `ask` (a token count, embeddings), or its error status
    raised as UpstreamStatusError; the connection is released either way."""
    reply = await provider.send(ask)
    try:
        raw = await reply.read()
        if reply.status >= 400:
            raise status_error(reply.status, reply.headers, raw, wire)
        return raw
    finally:
        reply.release()
