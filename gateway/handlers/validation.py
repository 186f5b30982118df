"""Request validation at the edge: the top-level shape of each endpoint's body.

Only the fields the gateway itself reads are checked; everything else is kept as sent
(forward compatibility), and message contents are the translators' concern. A body the gateway
must encode again (translated, or renamed by a route, or repeated in the answer) and cannot is
refused by `nested_too_deep`, which names the field; the client's own bytes, forwarded
unchanged, are never walked.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from gateway.encode.responses_ids import new_response_id
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

    def new_response_id(self) -> str | None:
        """The id of the answer, when the format's answers carry one the gateway mints."""
        return None

    def echo(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Request fields the format's answer repeats back to the client."""
        return {}

    def check_echo(self, endpoint: str, obj: dict[str, Any]) -> None:
        """Refuse echoed fields the answer could not encode again (`_check_echo`)."""
        _check_echo(endpoint, self.echo(obj))

    @property
    def wants_encrypted_reasoning(self) -> bool:
        return False

    def answers(self, obj: dict[str, Any]) -> int:
        """How many answers the request asks for (a cut stream is continued only with one)."""
        return 1


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    include_usage: StrictBool | None = None


class ChatCompletionsBody(RequestBody):
    messages: list[dict[str, Any]] = Field(min_length=1)
    stream_options: StreamOptions | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def answers(self, obj: dict[str, Any]) -> int:
        n = obj.get("n")
        return n if isinstance(n, int) and not isinstance(n, bool) else 1

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


# Echoed on a Responses answer, so SDK models and agents see what they sent (RESPONSES §3).
RESPONSES_ECHO = (
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "max_output_tokens",
    "previous_response_id",
    "reasoning",
    "text",
    "truncation",
    "store",
    "metadata",
    "user",
)
RESPONSES_ECHO_DEFAULTS: dict[str, Any] = {
    "instructions": None,
    "tools": [],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "temperature": None,
    "top_p": None,
    "max_output_tokens": None,
    "previous_response_id": None,
    "reasoning": None,
    "text": {"format": {"type": "text"}},
    "truncation": "disabled",
    "store": True,
    "metadata": {},
    "user": None,
}
_ECHO_DEFAULTS = {key: RESPONSES_ECHO_DEFAULTS[key] for key in RESPONSES_ECHO}
_ECHO_KEYS = frozenset(RESPONSES_ECHO)
_CONTAINERS = (dict, list)
# Offered by OpenAI, not by the gateway: accepting them silently would fake their behaviour.
RESPONSES_REFUSED = ("background", "conversation", "prompt")


class ResponsesBody(RequestBody):
    """`POST /v1/responses`. `input` is a string (one user message) or a list of items; each
    item the gateway must pair or route (calls, call outputs, messages) is checked here."""

    input: Any = None
    previous_response_id: str | None = None
    include: list[Any] | None = None
    background: Any = None
    conversation: Any = None
    prompt: Any = None

    def check_shapes(self, endpoint: str) -> None:
        if not (self.background is self.conversation is self.prompt is None):  # RESPONSES_REFUSED
            for name in RESPONSES_REFUSED:
                if getattr(self, name) not in (None, False):
                    raise _invalid(endpoint, name, "is not supported by this gateway")
        items = self.input
        if isinstance(items, list):
            for i, item in enumerate(items):
                _check_item(endpoint, i, item)
        elif items is None:
            if self.previous_response_id is None:
                raise _invalid(endpoint, "input", "is required")
        elif not isinstance(items, str):
            raise _invalid(endpoint, "input", "must be a string or an array of items")

    def new_response_id(self) -> str:
        return new_response_id()

    def echo(self, obj: dict[str, Any]) -> dict[str, Any]:
        echoed = _ECHO_DEFAULTS.copy()  # in RESPONSES_ECHO's order, the request's values over
        for key in _ECHO_KEYS.intersection(obj):
            echoed[key] = obj[key]
        # The request's own: `obj` is the body sent upstream, which a chained request reaches
        # without it (its history inlined instead: gateway.handlers.chaining).
        echoed["previous_response_id"] = self.previous_response_id
        return echoed

    def check_echo(self, endpoint: str, obj: dict[str, Any]) -> None:
        # The defaults and a scalar from orjson.loads (no lone surrogate, a big integer a float)
        # always encode: only a request's object or array can be nested too deep.
        for key in _ECHO_KEYS.intersection(obj):
            if type(obj[key]) in _CONTAINERS:
                _check_echo(endpoint, self.echo(obj))
                return

    @property
    def wants_encrypted_reasoning(self) -> bool:
        return "reasoning.encrypted_content" in (self.include or ())


_CALL_ITEMS = (
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
)


_PAIRED_ITEMS = frozenset(_CALL_ITEMS)
_NAMED_ITEMS = frozenset({"function_call", "custom_tool_call"})


def _check_item(endpoint: str, i: int, item: Any) -> None:
    """Runs for each input item, and an agent's request holds hundreds: each field is read
    once, and the kinds are sets."""
    if not isinstance(item, dict):
        raise _invalid(endpoint, f"input[{i}]", "must be an object")
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":  # the common item: only its role to check
        if not isinstance(item.get("role"), str):
            raise _invalid(endpoint, f"input[{i}].role", "must be a string")
        return
    if not isinstance(kind, str):
        raise _invalid(endpoint, f"input[{i}].type", "must be a string")
    if kind not in _PAIRED_ITEMS:
        return
    call_id = item.get("call_id")
    if not (isinstance(call_id, str) and call_id):
        raise _invalid(
            endpoint, f"input[{i}].call_id", "is required to pair a call with its output"
        )
    if kind in _NAMED_ITEMS and not isinstance(item.get("name"), str):
        raise _invalid(endpoint, f"input[{i}].name", "must be a string")


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
    body.check_echo(endpoint, obj)
    return body


def _check_echo(endpoint: str, echoed: dict[str, Any]) -> None:
    """The answer repeats these fields inside itself (a stream's events one level deeper), so
    they are encoded again even when the translation left them out: one nested deeper than
    the encoder writes is refused now, by name, instead of failing the answer with a 500."""
    if not echoed:
        return
    try:
        orjson.dumps({"response": echoed})  # as deep as a stream event holds them
    except orjson.JSONEncodeError:
        raise nested_too_deep(endpoint, echoed) from None


def nested_too_deep(endpoint: str, obj: dict[str, Any]) -> InvalidRequest:
    """The error for a body the encoder refused: the field nested deeper than MAX_DEPTH."""
    field = too_deep(obj, MAX_DEPTH)
    error = _invalid(endpoint, field or "the body", f"nested deeper than {MAX_DEPTH} levels")
    error.param = field or None
    return error
