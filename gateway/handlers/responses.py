"""Request ids, and error responses in the client's own format, for every handler."""

from __future__ import annotations

import uuid

from aiohttp import web

from gateway.client_formats import ClientFormat
from gateway.errors import GatewayError


def error_response(client: ClientFormat, err: GatewayError, request_id: str) -> web.Response:
    status, body, headers = client.render_error(err, request_id)
    return web.Response(status=status, body=body, headers=headers)


def new_request_id() -> str:
    return uuid.uuid4().hex[:24]
