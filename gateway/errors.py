"""Typed errors, mapped once at the boundary where they arise.

GatewayError                      status, code; rendered per client format at the edge
├── RequestError                  400: the client's request is wrong
│   ├── InvalidJSON
│   ├── InvalidRequest            not the endpoint's format, a bad field
│   │   └── PreviousResponseNotFound   a Responses chain the gateway does not hold
│   ├── RunawaySuspected          the conversation ends in identical tool calls (guard: reject)
│   ├── MalformedHTTP             the HTTP parser refused the request (syntax, framing, encoding)
│   ├── RequestTooLarge           413: the body, once decoded, is over the size limit
│   ├── RequestLineTooLong        400: the request line is over the HTTP parser's limit
│   ├── HeaderFieldsTooLarge      431: a header field, or their number, is over the limit
│   ├── UpgradeRequired           426: a WebSocket upgrade, not offered
│   └── NotFound                  404: no such endpoint
│       └── ModelNotFound         404: no route matches the model
├── AccessError                   the gateway's own keys and limits refused the request
│   ├── Unauthorized              401: no gateway key, or not a configured one
│   ├── Forbidden                 403: the key may not use this route
│   └── RateLimited               429: a request rate, token budget or concurrency limit
├── ServiceUnavailable            503: the gateway is shutting down
└── UpstreamError                 the upstream failed
    ├── UpstreamStatusError       the upstream answered 4xx/5xx (status kept)
    ├── UpstreamUnreachable       502: connection refused, DNS, reset before a response
    │   └── UpstreamCredentialsUnavailable  502: no token for the upstream (e.g. Google ADC)
    ├── UpstreamTimeout           504: no answer in time
    ├── UpstreamProtocolError     502: the upstream's answer is not its wire format
    ├── CircuitOpen               503: every target of the route is cooling down after failures
    └── StreamBroken              the stream broke after the first byte reached the client
"""

from __future__ import annotations

import math
from typing import Any


def retry_after_header(seconds: float) -> str:
    """A `retry-after` value: whole seconds, rounded up, at least 1."""
    return str(max(1, math.ceil(seconds)))


class GatewayError(Exception):
    status: int = 500
    code: str = "gateway_error"
    retry_after: str | None = None  # sent as the `retry-after` header when set

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RequestError(GatewayError):
    status = 400
    code = "invalid_request"


class InvalidJSON(RequestError):
    code = "invalid_json"


class InvalidRequest(RequestError):
    code = "invalid_request"

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class RunawaySuspected(RequestError):
    code = "runaway_suspected"


class MalformedHTTP(RequestError):
    code = "malformed_http"


class RequestTooLarge(RequestError):
    status = 413
    code = "request_too_large"


class RequestLineTooLong(RequestError):
    """400, not 414: both SDKs raise their BadRequestError for a 400 and no class of theirs for a
    414; the code says which limit it was."""

    code = "request_line_too_long"


class HeaderFieldsTooLarge(RequestError):
    status = 431
    code = "header_fields_too_large"


class NotFound(RequestError):
    status = 404
    code = "not_found"


class ModelNotFound(NotFound):
    code = "model_not_found"


class UpgradeRequired(RequestError):
    """426: a WebSocket upgrade the gateway does not serve (the client falls back to HTTP)."""

    status = 426
    code = "upgrade_required"


class AccessError(GatewayError):
    """The gateway's own access control refused the request (gateway.access); nothing went
    upstream. Messages never quote the presented key."""

    status = 403
    code = "access_denied"


class Unauthorized(AccessError):
    status = 401
    code = "invalid_api_key"


class Forbidden(AccessError):
    status = 403
    code = "permission_denied"


class RateLimited(AccessError):
    """429 with `retry-after`; `limit` says which limit: "requests" (a request rate or a
    concurrency limit) or "tokens" (a token budget), as OpenAI names its rate-limit types."""

    status = 429
    code = "rate_limit_exceeded"

    def __init__(self, message: str, limit: str, retry_after: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.retry_after = retry_after_header(retry_after)


class UpstreamError(GatewayError):
    status = 502
    code = "upstream_error"


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an error status; its type and message are kept."""

    code = "upstream_status"

    def __init__(
        self,
        status: int,
        message: str,
        error_type: str | None = None,
        error_code: str | None = None,
        retry_after: str | None = None,
        body: bytes | None = None,
        source: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        # What the error's body says beyond its message, fit for the audit record (never text):
        # e.g. the categories of a filtered prompt (gateway.formats.wire_error.WireError.details).
        self.details = details
        self.error_type = error_type
        self.error_code = error_code
        self.retry_after = retry_after
        self.body = body  # the upstream's own error JSON, relayed as is to a same-format client
        self.source = source  # the wire format `body` is in


class UpstreamUnreachable(UpstreamError):
    status = 502
    code = "upstream_unreachable"


class UpstreamCredentialsUnavailable(UpstreamUnreachable):
    """The provider could not obtain the credential it signs requests with (a token endpoint
    that failed, a key file that cannot be read): the upstream was never asked."""

    code = "upstream_credentials_unavailable"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"

    def __init__(self, message: str, which: str = "first_byte") -> None:
        super().__init__(message)
        self.which = which  # the timeout that fired: connect, first_byte, idle or total


class UpstreamProtocolError(UpstreamError):
    status = 502
    code = "upstream_protocol_error"


class CircuitOpen(UpstreamError):
    """503: every target of the route is skipped after repeated failures (its circuit is open)."""

    status = 503
    code = "circuit_open"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after_header(retry_after)


class ServiceUnavailable(GatewayError):
    """503 from the gateway itself (it is shutting down), with when to retry."""

    status = 503
    code = "service_unavailable"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after_header(retry_after)


class StreamBroken(UpstreamError):
    code = "stream_broken"


class PreviousResponseNotFound(InvalidRequest):
    """400: a `previous_response_id` the gateway does not hold for this caller."""

    code = "previous_response_not_found"
