"""An error as an HTTP response in the client's own format: for the handlers, the access check and
the dashboard alike (gateway.edge renders the errors aiohttp raises itself)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.client_formats import ClientFormat
from gateway.errors import GatewayError


def error_response(
    client: ClientFormat,
    err: GatewayError,
    request_id: str,
    extension: dict[str, Any] | None = None,
) -> web.Response:
    """`extension`: the body's `gateway` member (gateway.handlers.error_extension)."""
    status, body, headers = client.render_error(err, request_id, extension)
    return web.Response(status=status, body=body, headers=headers)
