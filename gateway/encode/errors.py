"""Each client format's own error JSON, as a response body or as an in-stream error event.

Errors are classified by HTTP status and structured fields, never by message text.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson

from gateway.errors import GatewayError, InvalidRequest, UpstreamStatusError
from gateway.events import StreamError
from gateway.formats.sse import encode

ClientFormat = Literal["openai", "anthropic"]

OPENAI_TYPES = {
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
ANTHROPIC_TYPES = {
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
ANTHROPIC_TYPE_NAMES = frozenset(ANTHROPIC_TYPES.values())
# Statuses one client's SDK has no class for, mapped to the nearest it has.
OPENAI_STATUS = {529: 503}


def error_type(fmt: ClientFormat, status: int) -> str:
    table = OPENAI_TYPES if fmt == "openai" else ANTHROPIC_TYPES
    if status in table:
        return table[status]
    if status >= 500:
        return "server_error" if fmt == "openai" else "api_error"
    return "invalid_request_error"


def client_status(fmt: ClientFormat, err: GatewayError) -> int:
    return OPENAI_STATUS.get(err.status, err.status) if fmt == "openai" else err.status


def error_body(fmt: ClientFormat, err: GatewayError, request_id: str) -> dict[str, Any]:
    status = client_status(fmt, err)
    kind = error_type(fmt, status)
    code: str | None = err.code
    if isinstance(err, UpstreamStatusError):
        code = err.error_code or err.error_type
    if fmt == "openai":
        param = err.param if isinstance(err, InvalidRequest) else None
        return {"error": {"message": err.message, "type": kind, "param": param, "code": code}}
    return {
        "type": "error",
        "error": {"type": kind, "message": err.message},
        "request_id": request_id,
    }


def render_error(
    fmt: ClientFormat, err: GatewayError, request_id: str
) -> tuple[int, bytes, dict[str, str]]:
    """Status, body and headers of an error response in the client's format."""
    headers = {"content-type": "application/json", "x-request-id": request_id}
    if isinstance(err, UpstreamStatusError):
        if err.retry_after:
            headers["retry-after"] = err.retry_after
        if err.body is not None and err.source == fmt:
            return err.status, err.body, headers
    return client_status(fmt, err), orjson.dumps(error_body(fmt, err, request_id)), headers


def stream_error_frame(fmt: ClientFormat, error: StreamError, ext: dict[str, Any]) -> bytes:
    """The in-stream error event that ends a stream that broke after its first byte."""
    code = "stream_truncated" if error.kind == "truncated" else error.kind
    if fmt == "openai":
        kind = error.error_type or "server_error"
        body = {"error": {"message": error.message, "type": kind, "param": None, "code": code}}
        return encode(orjson.dumps({**body, "gateway": ext}))
    kind = error.error_type if error.error_type in ANTHROPIC_TYPE_NAMES else "api_error"
    body = {"type": "error", "error": {"type": kind, "message": error.message}, "gateway": ext}
    return encode(orjson.dumps(body), "error")
