"""Request ids, and error responses in the client's own format, for every handler."""

from __future__ import annotations

import random
import time

from aiohttp import web

from gateway.client_formats import ClientFormat
from gateway.errors import GatewayError


def error_response(client: ClientFormat, err: GatewayError, request_id: str) -> web.Response:
    status, body, headers = client.render_error(err, request_id)
    return web.Response(status=status, body=body, headers=headers)


def new_request_id() -> str:
    """24 hex digits: the time in milliseconds, then 48 random bits.

    Time first, so ids grow with time: the audit store's primary-key index takes each new record
    at its right edge, and an insert costs the same with a thousand records or millions (a random
    id lands on any page of the index: once the index outgrows the page cache, on one not in it).
    `random` is reseeded in a forked child, so workers never share a sequence."""
    return f"{time.time_ns() // 1_000_000:012x}{random.getrandbits(48):012x}"
