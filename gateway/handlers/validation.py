"""Request validation at the edge: the top-level shape of each endpoint's body.

Only the fields the gateway itself reads are checked; everything else is kept as sent
(forward compatibility), and message contents are the translators' concern.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from gateway.errors import InvalidJSON, InvalidRequest


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    model: str = Field(min_length=1)
    stream: StrictBool | None = False

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


class MessagesBody(RequestBody):
    messages: list[dict[str, Any]]
    max_tokens: StrictInt = Field(ge=1)


def parse_json(raw: bytes) -> dict[str, Any]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidJSON(f"The request body is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise InvalidRequest("The request body must be a JSON object")
    return obj


def validate(model: type[RequestBody], obj: dict[str, Any], endpoint: str) -> RequestBody:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        param = ".".join(str(part) for part in first["loc"])
        message = f"Not a valid {endpoint} request: {param}: {first['msg']}"
        raise InvalidRequest(message, param) from None
