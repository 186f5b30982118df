"""Request validation at the edge: the top-level shape of each endpoint's body.

Only the fields the gateway itself reads are checked; everything else is kept as sent
(forward compatibility), and message contents are the translators' concern. A body the gateway
must encode again (translated, or renamed by a route) and cannot is refused by `nested_too_deep`,
which names the field; the client's own bytes, forwarded unchanged, are never walked.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from gateway.errors import InvalidJSON, InvalidRequest
from gateway.translate.nesting import MAX_DEPTH, too_deep


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    model: str = Field(min_length=1)
    stream: StrictBool | None = False
    tools: list[dict[str, Any]] | None = None  # read by the mock provider and the translators

    def check_shapes(self, endpoint: str) -> None:
        """Shapes below the top level that the gateway reads on every route."""

    @property
    def include_usage(self) -> bool:
        """Whether a streamed answer ends with a usage chunk the client asked for."""
        return False


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    include_usage: StrictBool | None = None


class ChatCompletionsBody(RequestBody):
    messages: list[dict[str, Any]] = Field(min_length=1)
    stream_options: StreamOptions | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def check_shapes(self, endpoint: str) -> None:
        # The runaway guard reads every assistant tool call, whatever the route.
        for i, message in enumerate(self.messages):
            calls = message.get("tool_calls")
            if calls is None:
                continue
            path = f"messages[{i}].tool_calls"
            if not isinstance(calls, list):
                raise _invalid(endpoint, path, "must be an array")
            for k, call in enumerate(calls):
                if not isinstance(call, dict):
                    raise _invalid(endpoint, f"{path}[{k}]", "must be an object")
                if not isinstance(call.get("function", {}), dict):
                    raise _invalid(endpoint, f"{path}[{k}].function", "must be an object")


class MessagesBody(RequestBody):
    messages: list[dict[str, Any]]
    max_tokens: StrictInt = Field(ge=1)
    stop_sequences: list[str] | None = None


def parse_json(raw: bytes) -> dict[str, Any]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidJSON(f"The request body is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise InvalidRequest("The request body must be a JSON object")
    return obj


def _invalid(endpoint: str, param: str, problem: str) -> InvalidRequest:
    return InvalidRequest(f"Not a valid {endpoint} request: {param}: {problem}", param)


def validate(model: type[RequestBody], obj: dict[str, Any], endpoint: str) -> RequestBody:
    try:
        body = model.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        param = ".".join(str(part) for part in first["loc"])
        raise _invalid(endpoint, param, first["msg"]) from None
    body.check_shapes(endpoint)
    return body


def nested_too_deep(endpoint: str, obj: dict[str, Any]) -> InvalidRequest:
    """The error for a body the encoder refused: the field nested deeper than MAX_DEPTH."""
    field = too_deep(obj, MAX_DEPTH)
    error = _invalid(endpoint, field or "the body", f"nested deeper than {MAX_DEPTH} levels")
    error.param = field or None
    return error
