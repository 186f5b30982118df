"""OpenAI's error JSON: `{"error": {"message", "type", "param", "code"}}`, and the same object as
the `data:` chunk that ends a broken stream."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from gateway.encode.errors import ErrorDetails, ErrorFormat, stream_error_code
from gateway.errors import GatewayError, RateLimited, Unauthorized
from gateway.events import StreamError
from gateway.formats.sse import encode

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "upstream_error",
    503: "service_unavailable_error",
    504: "timeout_error",
}


def own_type(err: GatewayError) -> str | None:
    """As OpenAI answers: a bad key is `invalid_request_error` / `invalid_api_key`; a rate limit's
    type names the limit (`requests` or `tokens`), its code is `rate_limit_exceeded`."""
    if isinstance(err, RateLimited):
        return err.limit
    if isinstance(err, Unauthorized):
        return "invalid_request_error"
    return None


def body(error: ErrorDetails) -> dict[str, Any]:
    fields = {"message": error.message, "type": error.type, "param": error.param}
    return {"error": {**fields, "code": error.code}}


def stream_frame(error: StreamError, ext: dict[str, Any]) -> bytes:
    kind = error.error_type or "server_error"
    fields = {"message": error.message, "type": kind, "param": None}
    return encode(
        orjson.dumps({"error": {**fields, "code": stream_error_code(error)}, "gateway": ext})
    )


ERRORS = ErrorFormat(
    TYPES,
    server_type="server_error",
    client_type="invalid_request_error",
    body=body,
    stream_frame=stream_frame,
    statuses={529: 503},  # the openai SDK has no class for Anthropic's "overloaded"
    own_type=own_type,
)

# The Responses API's own error codes for what an upstream of another wire reports.
RESPONSES_ERRORS = dataclasses.replace(
    ERRORS,
    codes={
        "rate_limit_error": "rate_limit_exceeded",
        "overloaded_error": "server_error",
        "RESOURCE_EXHAUSTED": "rate_limit_exceeded",  # Gemini's rate limit
    },
)
