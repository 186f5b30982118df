"""The error seam every client format fills in: its error types by status, its error body and
its in-stream error event. Rendering happens only here, at the edge.

Errors are classified by HTTP status and structured fields, never by message text.

    status, body, headers = render_error(OPENAI_ERRORS, "openai", err, request_id)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import GatewayError, InvalidRequest, UpstreamStatusError
from gateway.events import StreamError


@dataclass(frozen=True, slots=True)
class ErrorDetails:
    """An error as every format needs it, already classified."""

    message: str
    type: str
    code: str | None
    param: str | None
    request_id: str


@dataclass(frozen=True, slots=True)
class ErrorFormat:
    types: Mapping[int, str]  # HTTP status -> the format's error type
    server_type: str  # any other 5xx
    client_type: str  # any other 4xx
    body: Callable[[ErrorDetails], dict[str, Any]]
    stream_frame: Callable[[StreamError, dict[str, Any]], bytes]  # error event + gateway object
    # Statuses the format's SDK has no class for, mapped to the nearest it has.
    statuses: Mapping[int, int] = field(default_factory=dict)
    # Upstream error types -> the code this format's clients act on (Codex retries on
    # `rate_limit_exceeded` with its delay).
    codes: Mapping[str, str] = field(default_factory=dict)
    # The type this format gives one of the gateway's own errors where its status's type is not
    # what the real API sends (OpenAI: a bad key is an `invalid_request_error`); None: by status.
    own_type: Callable[[GatewayError], str | None] = lambda err: None

    def error_type(self, status: int) -> str:
        if status in self.types:
            return self.types[status]
        return self.server_type if status >= 500 else self.client_type

    def status(self, err: GatewayError) -> int:
        return self.statuses.get(err.status, err.status)

    def details(self, err: GatewayError, request_id: str) -> ErrorDetails:
        code: str | None = err.code
        if isinstance(err, UpstreamStatusError):
            code = err.error_code or err.error_type
            code = self.codes.get(code or "", code)
        param = err.param if isinstance(err, InvalidRequest) else None
        kind = self.own_type(err) or self.error_type(self.status(err))
        return ErrorDetails(err.message, kind, code, param, request_id)


def stream_error_code(error: StreamError) -> str:
    return "stream_truncated" if error.kind == "truncated" else error.kind


def render_error(
    errors: ErrorFormat,
    relay_wire: str,
    err: GatewayError,
    request_id: str,
    extension: dict[str, Any] | None = None,
) -> tuple[int, bytes, dict[str, str]]:
    """Status, body and headers of an error response in one client format, with `extension` as
    its top-level `gateway` member (as a broken stream's error event has it). An upstream's own
    error body is relayed to a client of the wire it came in (`relay_wire`) as it was sent, the
    `gateway` member added."""
    headers = {"content-type": "application/json", "x-request-id": request_id}
    if err.retry_after:
        headers["retry-after"] = err.retry_after
    if isinstance(err, UpstreamStatusError) and err.body is not None and err.source == relay_wire:
        body = err.body if extension is None else with_member(err.body, "gateway", extension)
        return err.status, body, headers
    data = errors.body(errors.details(err, request_id))
    if extension is not None:
        data["gateway"] = extension
    return errors.status(err), orjson.dumps(data), headers


def with_member(body: bytes, name: str, value: Any) -> bytes:
    """A JSON object's bytes with one more member, the rest byte for byte as they were; a body
    holding `name` already is rewritten with `value` in its place, one that is no object is
    left alone."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if not isinstance(parsed, dict):
        return body
    if name in parsed:
        return orjson.dumps({**parsed, name: value})
    end = body.rstrip()
    inside = end[:-1]  # the object's closing brace cut
    comma = b"," if parsed else b""
    member = comma + orjson.dumps(name) + b":" + orjson.dumps(value)
    return inside + member + b"}" + body[len(end) :]
