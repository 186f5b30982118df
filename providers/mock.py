"""An offline provider answering Anthropic Messages requests with real Anthropic wire bytes.

No network and no sockets. Each scenario is one small function building the list of stream events
api.anthropic.com would send; one encoder turns that list into SSE frames (streaming) or folds it
into the Message body (non-streaming), so the two forms can never disagree. The scenario is the
request's model minus a leading "mock-" (`mock-tool` -> `tool`); an unknown name gets `text`.
`mock-agent` answers from the conversation, for agent loops: it calls the first tool given until
the last user message holds a tool_result, then quotes that result's first line (end_turn). The
call's arguments are `{"city": "Paris"}`, or, when the tool requires other properties, the user's
first message in each of them (a sub-agent tool gets the question as its `task`).

    provider = MockProvider()
    reply = await provider.send(ProviderRequest(body=b'{"model": "mock-tool", ...}', stream=True))
    async for chunk in reply.iter_chunks(): ...
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from providers.base import NO_OWN_STOP_REASONS, Operation, ProviderRequest
from providers.http_pool import PoolStats
from providers.mock_events import (
    Event,
    count_tokens,
    text_block,
    thinking_block,
    tool_block,
)

_HELLO = (
    "Hello! This is the offline mock provider of the LLM gateway. No model was called: this "
    "canned answer lets you try clients and streaming without network access or API keys."
)
_LONG = (
    "Here is a long answer that keeps going well past the token budget the request allowed, "
    "so the last sentence is cut off right in the mid"
)
_PARIS = ["", '{"ci', 'ty": "Pa', 'ris"}']
_TOKYO = ["", '{"ci', 'ty": "To', 'kyo"}']
_REFUSAL = {
    "type": "refusal",
    "category": None,
    "explanation": "The mock provider refuses every request of this scenario, for testing.",
}
_ERROR_STATUS = {"invalid_request_error": 400, "overloaded_error": 529}


@dataclass(frozen=True, slots=True)
class _Ask:
    """The parts of the request the scenarios use."""

    model: str
    tools: tuple[str, ...]
    stop_sequences: tuple[str, ...]
    max_tokens: int | None
    input_tokens: int
    tool_result: str | None = None  # first line of a tool_result in the last user message
    first_required: tuple[str, ...] = ()  # the `required` properties of the first tool's schema
    prompt: str = ""  # the text of the first user message


def _read_request(body: bytes, default_model: str) -> _Ask:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ValueError("request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ValueError("request body must be a JSON object")
    model = data.get("model")
    tools = [t for t in data.get("tools") or [] if isinstance(t, dict)]
    stops = data.get("stop_sequences") or []
    max_tokens = data.get("max_tokens")
    return _Ask(
        model=model if isinstance(model, str) else default_model,
        tools=tuple(t["name"] for t in tools if isinstance(t.get("name"), str)),
        stop_sequences=tuple(s for s in stops if isinstance(s, str)),
        max_tokens=max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None,
        input_tokens=max(1, len(body) // 4),
        tool_result=_last_tool_result(data.get("messages")),
        first_required=_required(tools[0].get("input_schema") if tools else None),
        prompt=_first_user_text(data.get("messages")),
    )


def _required(schema: Any) -> tuple[str, ...]:
    required = schema.get("required") if isinstance(schema, dict) else None
    return tuple(r for r in required if isinstance(r, str)) if isinstance(required, list) else ()


def _first_user_text(messages: Any) -> str:
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                texts = [b.get("text") for b in content if isinstance(b, dict)]
                content = "\n".join(t for t in texts if isinstance(t, str))
            return content if isinstance(content, str) else ""
    return ""


def _last_tool_result(messages: Any) -> str | None:
    """The first line of the first tool_result in the last user message, if it holds one."""
    messages = messages if isinstance(messages, list) else []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_result":
            result = block.get("content")
            if isinstance(result, list):
                texts = [b.get("text") for b in result if isinstance(b, dict)]
                result = "\n".join(t for t in texts if isinstance(t, str))
            return result.split("\n", 1)[0] if isinstance(result, str) else ""
    return None


def _message(
    ask: _Ask,
    blocks: list[Event],
    stop_reason: str,
    *,
    stop_sequence: str | None = None,
    stop_details: Event | None = None,
    output_tokens: int | None = None,
) -> list[Event]:
    """A complete stream around the content-block events: start, ping, blocks, delta, stop."""
    message: Event = {
        "id": f"msg_mock_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": ask.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": ask.input_tokens, "output_tokens": 1},
    }
    delta: Event = {"stop_reason": stop_reason, "stop_sequence": stop_sequence}
    if stop_details is not None:
        delta["stop_details"] = stop_details
    usage = {"output_tokens": output_tokens or count_tokens(blocks)}
    return [
        {"type": "message_start", "message": message},
        {"type": "ping"},
        *blocks,
        {"type": "message_delta", "delta": delta, "usage": usage},
        {"type": "message_stop"},
    ]


# --- scenarios -------------------------------------------------------------------------------


def _tool_name(ask: _Ask, position: int) -> str:
    if not ask.tools:
        return "get_weather"
    return ask.tools[min(position, len(ask.tools) - 1)]


def _s_text(ask: _Ask) -> list[Event]:
    return _message(ask, text_block(0, _HELLO), "end_turn")


def _s_tool(ask: _Ask) -> list[Event]:
    return _message(ask, tool_block(0, _tool_name(ask, 0), _PARIS), "tool_use")


def _s_parallel_tools(ask: _Ask) -> list[Event]:
    blocks = [
        *tool_block(0, _tool_name(ask, 0), _PARIS),
        *tool_block(1, _tool_name(ask, 1), _TOKYO),
    ]
    return _message(ask, blocks, "tool_use")


def _s_tool_cut(ask: _Ask) -> list[Event]:
    """The budget ran out inside the tool input: the block is never closed (real fixture shape)."""
    cut = ["", '{"ci', 'ty": "Par']
    text = text_block(0, "Let me look up the weather.")
    return _message(
        ask, [*text, *tool_block(1, _tool_name(ask, 0), cut, close=False)], "max_tokens"
    )


def _s_length(ask: _Ask) -> list[Event]:
    return _message(ask, text_block(0, _LONG), "max_tokens", output_tokens=ask.max_tokens)


def _s_refusal(ask: _Ask) -> list[Event]:
    return _message(ask, text_block(0, ""), "refusal", stop_details=_REFUSAL)


def _s_no_terminator(ask: _Ask) -> list[Event]:
    """The connection just ends: no message_delta, no message_stop."""
    return _message(ask, text_block(0, _HELLO), "end_turn")[:-2]


def _s_stop_sequence(ask: _Ask) -> list[Event]:
    sequence = ask.stop_sequences[0] if ask.stop_sequences else "\n\nHuman:"
    return _message(ask, text_block(0, "One, two, three."), "stop_sequence", stop_sequence=sequence)


def _s_error_mid_stream(ask: _Ask) -> list[Event]:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    head = _message(ask, [], "end_turn")[:2]
    return [*head, *text_block(0, "This answer will be interrupted by", close=False), error]


def _s_thinking(ask: _Ask) -> list[Event]:
    reasoning = "The user wants a short answer. A friendly greeting that names the mock is enough."
    return _message(ask, [*thinking_block(0, reasoning), *text_block(1, _HELLO)], "end_turn")


def _agent_arguments(ask: _Ask) -> list[str]:
    """`{"city": "Paris"}`, unless the first tool requires other properties: each of those gets
    the user's prompt (so a sub-agent tool's `task` is the question the agent was asked)."""
    if set(ask.first_required) <= {"city"}:
        return _PARIS
    values = {name: "Paris" if name == "city" else ask.prompt for name in ask.first_required}
    return ["", orjson.dumps(values).decode()]


def _s_agent(ask: _Ask) -> list[Event]:
    """One step of a one-tool agent: call the first tool, then quote what it answered."""
    if ask.tool_result is None:
        return _message(ask, tool_block(0, _tool_name(ask, 0), _agent_arguments(ask)), "tool_use")
    return _message(ask, text_block(0, f'The tool answered: "{ask.tool_result}"'), "end_turn")


def _ending(stop_reason: str) -> Callable[[_Ask], list[Event]]:
    def scenario(ask: _Ask) -> list[Event]:
        return _message(ask, text_block(0, f"This turn ends with {stop_reason}."), stop_reason)

    return scenario


_SCENARIOS: dict[str, Callable[[_Ask], list[Event]]] = {
    "text": _s_text,
    "tool": _s_tool,
    "parallel-tools": _s_parallel_tools,
    "tool-cut": _s_tool_cut,
    "length": _s_length,
    "refusal": _s_refusal,
    "no-terminator": _s_no_terminator,
    "stop-sequence": _s_stop_sequence,
    "pause": _ending("pause_turn"),
    "context-window": _ending("model_context_window_exceeded"),
    "unknown-stop": _ending("some_future_reason"),
    "error-mid-stream": _s_error_mid_stream,
    "thinking": _s_thinking,
}
SCENARIOS: tuple[str, ...] = tuple(_SCENARIOS)
# Scenarios whose answer depends on the conversation so far, for agent loops (`mock-agent`).
_CONVERSATION_SCENARIOS: dict[str, Callable[[_Ask], list[Event]]] = {"agent": _s_agent}
CONVERSATION_SCENARIOS: tuple[str, ...] = tuple(_CONVERSATION_SCENARIOS)
_ALL_SCENARIOS = {**_SCENARIOS, **_CONVERSATION_SCENARIOS}


def scenario_for(model: str) -> str:
    name = model.removeprefix("mock-")
    return name if name in _ALL_SCENARIOS else "text"


# --- the encoder -----------------------------------------------------------------------------


def _fold(events: list[Event]) -> Event:
    """Fold stream events into the Message body, as the SDK's accumulator does."""
    message: Event = {}
    json_bufs: dict[int, str] = {}
    for event in events:
        kind = event["type"]
        if kind == "message_start":
            start = event["message"]
            message = {**start, "content": [], "usage": dict(start["usage"])}
        elif kind == "content_block_start":
            message["content"].append(dict(event["content_block"]))
        elif kind == "content_block_delta":
            block, delta, index = message["content"][event["index"]], event["delta"], event["index"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                json_bufs[index] = json_bufs.get(index, "") + delta["partial_json"]
        elif kind == "message_delta":
            message["stop_reason"] = event["delta"]["stop_reason"]
            message["stop_sequence"] = event["delta"]["stop_sequence"]
            message["stop_details"] = event["delta"].get("stop_details")
            message["usage"].update(event["usage"])
    for index, raw in json_bufs.items():
        message["content"][index]["input"] = _lenient_json(raw)
    return message


def _lenient_json(raw: str) -> Any:
    """A cut input (`{"city": "Par`) becomes `{}`, as the SDK's partial parser leaves it."""
    try:
        return orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        return {}


def _headers(content_type: str) -> dict[str, str]:
    return {"content-type": content_type, "request-id": f"req_mock_{secrets.token_hex(12)}"}


def _error_reply(error: Event) -> MockReply:
    body = {"type": "error", "error": error, "request_id": f"req_mock_{secrets.token_hex(12)}"}
    status = _ERROR_STATUS.get(error["type"], 500)
    return MockReply(status, _headers("application/json"), [orjson.dumps(body)])


def _frame(event: Event) -> bytes:
    kind: str = event["type"]
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def _encode(events: list[Event], stream: bool) -> MockReply:
    if stream:
        frames = [_frame(e) for e in events]
        return MockReply(200, _headers("text/event-stream"), frames)
    error = next((e["error"] for e in events if e["type"] == "error"), None)
    if error is not None:
        return _error_reply(error)
    body = orjson.dumps(_fold(events))
    if events[-1]["type"] != "message_stop":
        body = body[: len(body) // 2]  # the connection dropped: what arrived is not JSON
    return MockReply(200, _headers("application/json"), [body])


class MockReply:
    """An `UpstreamReply` over bytes prepared in advance, one piece per SSE frame."""

    pool_wait = 0.0

    def __init__(self, status: int, headers: Mapping[str, str], pieces: list[bytes]) -> None:
        self.status = status
        self.headers = headers
        self._pieces = pieces

    async def read(self) -> bytes:
        return b"".join(self._pieces)

    async def iter_chunks(self) -> AsyncGenerator[bytes, None]:
        for piece in self._pieces:
            yield piece
            await asyncio.sleep(0)  # let other tasks run, so the stream is visibly incremental

    def release(self) -> None:
        pass


class MockProvider:
    """The offline Anthropic-wire provider; see the module docstring for the scenarios."""

    wire = "anthropic"
    own_stop_reasons = NO_OWN_STOP_REASONS

    def __init__(self, name: str = "mock") -> None:
        self.name = name

    async def send(self, request: ProviderRequest) -> MockReply:
        try:
            ask = _read_request(request.body, default_model=request.model)
        except ValueError as exc:
            return _error_reply({"type": "invalid_request_error", "message": str(exc)})
        return _encode(_ALL_SCENARIOS[scenario_for(ask.model)](ask), request.stream)

    def wire_of(self, model: str) -> str:
        return self.wire

    def offers(self, operation: Operation, model: str) -> bool:
        return operation is Operation.GENERATE

    def offered_models(self) -> Sequence[str]:
        return [f"mock-{name}" for name in _ALL_SCENARIOS]

    def pool_stats(self) -> PoolStats | None:
        return None

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass
