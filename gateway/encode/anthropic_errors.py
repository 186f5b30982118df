"""Anthropic's error JSON: `{"type": "error", "error": {"type", "message"}, "request_id"}`, and
the `event: error` that ends a broken stream."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.encode.errors import ErrorDetails, ErrorFormat
from gateway.events import StreamError
from gateway.formats.sse import encode

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
TYPE_NAMES = frozenset(TYPES.values())


def body(error: ErrorDetails) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": error.type, "message": error.message},
        "request_id": error.request_id,
    }


def stream_frame(error: StreamError, ext: dict[str, Any]) -> bytes:
    kind = error.error_type if error.error_type in TYPE_NAMES else "api_error"
    event = {"type": "error", "error": {"type": kind, "message": error.message}, "gateway": ext}
    return encode(orjson.dumps(event), "error")


ERRORS = ErrorFormat(
    TYPES,
    server_type="api_error",
    client_type="invalid_request_error",
    body=body,
    stream_frame=stream_frame,
)
