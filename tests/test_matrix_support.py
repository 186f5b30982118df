"""Shared drivers for the conformance matrix (test_matrix_*.py, test_tool_args.py).

No tests live here. `drive` scripts the loopback upstream, calls the gateway with a real SDK client
(OpenAI or Anthropic, streaming or not) and returns what that client saw as a `Seen`: the text,
the tool calls the SDK accumulated, the client-visible stop reason, the `gateway` extension object
and where it arrived, and the error the SDK raised, if any. `raw_stream` reads a gateway stream
with plain HTTP, to check the bytes themselves (how a stream ends).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anthropic
import openai
from openai.lib.streaming.chat import ChatCompletionStreamState

from tests.conftest import (
    anthropic_client,
    async_anthropic_client,
    async_openai_client,
    openai_client,
)
from tests.scenarios import Answer, Tool, script_for
from tests.upstream import Received, Script

CLIENTS = ("openai", "anthropic")
WIRES = ("openai", "anthropic")
PREFIX = {"openai": "oa", "anthropic": "an"}
# The configured provider name (the key under [providers]) each wire is routed to.
PROVIDER = {"openai": "openai", "anthropic": "anthropic"}
PAIRS = [(client, wire) for client in CLIENTS for wire in WIRES]
PAIR_IDS = [f"{client}-client<-{wire}-wire" for client, wire in PAIRS]
EXTENSION_KEYS = {
    "stop_reason",
    "native_stop_reason",
    "provider",
    "request_id",
    "truncated",
    "withheld_tool_calls",
}
PROBE = {"x_gateway_probe": {"kept": True, "n": [1, 2]}}  # a field no gateway knows

ScriptLike = Script | Callable[[str], Script]


@dataclass
class ToolSeen:
    id: str
    name: str
    raw: str | None  # the arguments string (OpenAI clients); None for Anthropic
    args: Any  # parsed arguments: json.loads(raw) for OpenAI, block.input for Anthropic


@dataclass
class Seen:
    model: str
    text: str = ""
    tools: list[ToolSeen] = field(default_factory=list)
    stop: str | None = None  # finish_reason / stop_reason as the client sees it
    native: str | None = None  # OpenAI choices[0].native_finish_reason
    stop_sequence: str | None = None  # Anthropic only
    gateway: dict[str, Any] | None = None  # the extension object
    gateway_frames: int = 0  # how many stream frames carried a `gateway` object
    stream_kinds: list[str] = field(default_factory=list)  # chunk / event kinds, in order
    error: Exception | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # top-level unknown fields
    received: Received | None = None  # what the upstream got
    obj: Any = None  # the SDK's final object (completion, message or snapshot)

    @property
    def tool_map(self) -> dict[str, ToolSeen]:
        return {t.id: t for t in self.tools}


def request_kwargs(
    client: str, wire: str, model: str, tool_names: list[str], *, stream: bool = False
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "What is the weather in Zürich?"}],
    }
    if client == "openai":
        if tool_names:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": f"{name} tool",
                        "parameters": {"type": "object", "properties": {}},
                    },
                }
                for name in tool_names
            ]
    else:
        kwargs["max_tokens"] = 256
        if tool_names:
            kwargs["tools"] = [
                {
                    "name": name,
                    "description": f"{name} tool",
                    "input_schema": {"type": "object", "properties": {}},
                }
                for name in tool_names
            ]
    if client == wire:
        kwargs["extra_body"] = PROBE
    return kwargs


def _tool_names(answer: Answer) -> list[str]:
    return sorted({t.name for t in answer.tools})


def _parse(raw: str | None) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _setup(
    upstream: Any,
    unique_model: Callable[[str], str],
    wire: str,
    answer: Answer,
    stream: bool,
    script: ScriptLike | None,
) -> str:
    model = unique_model(PREFIX[wire])
    if script is None:
        built = script_for(wire, answer, model, stream)
    elif callable(script):
        built = script(model)
    else:
        built = script
    upstream.script(model, built)
    return model


def _received(upstream: Any, model: str) -> Received | None:
    got = upstream.received.get(model) or []
    return got[-1] if got else None


# --- OpenAI client -------------------------------------------------------------------------


def _openai_message(seen: Seen, completion: Any) -> None:
    seen.obj = completion
    seen.extra = dict(completion.model_extra or {})
    seen.gateway = seen.extra.get("gateway")
    if not completion.choices:
        return
    choice = completion.choices[0]
    seen.stop = choice.finish_reason
    seen.native = (choice.model_extra or {}).get("native_finish_reason")
    message = choice.message
    seen.text = message.content or ""
    for call in message.tool_calls or ():
        raw = call.function.arguments
        seen.tools.append(ToolSeen(call.id, call.function.name, raw, _parse(raw)))


def _openai_chunk(seen: Seen, state: ChatCompletionStreamState, chunk: Any) -> None:
    state.handle_chunk(chunk)
    extra = chunk.model_extra or {}
    finish = [c for c in chunk.choices if c.finish_reason is not None]
    seen.stream_kinds.append("finish" if finish else ("usage" if not chunk.choices else "delta"))
    if "gateway" in extra:
        seen.gateway_frames += 1
        if finish:  # the extension belongs on the chunk that carries finish_reason
            seen.gateway = extra["gateway"]
    if finish:
        seen.stop = finish[0].finish_reason
        seen.native = (finish[0].model_extra or {}).get("native_finish_reason")


def _openai_snapshot(seen: Seen, state: ChatCompletionStreamState, started: bool) -> None:
    if not started:
        return
    snapshot = seen.obj = state.current_completion_snapshot
    if not snapshot.choices:
        return
    message = snapshot.choices[0].message
    seen.text = message.content or ""
    for call in message.tool_calls or ():
        raw = call.function.arguments
        seen.tools.append(ToolSeen(call.id, call.function.name, raw, _parse(raw)))


def _openai_sync(client: openai.OpenAI, seen: Seen, kwargs: dict[str, Any], stream: bool) -> None:
    if not stream:
        try:
            _openai_message(seen, client.chat.completions.create(**kwargs))
        except openai.APIError as exc:
            seen.error = exc
        return
    state = ChatCompletionStreamState()
    started = False
    try:
        for chunk in client.chat.completions.create(stream=True, **kwargs):
            started = True
            _openai_chunk(seen, state, chunk)
    except openai.APIError as exc:
        seen.error = exc
    _openai_snapshot(seen, state, started)


async def _openai_async(
    client: openai.AsyncOpenAI, seen: Seen, kwargs: dict[str, Any], stream: bool
) -> None:
    if not stream:
        try:
            _openai_message(seen, await client.chat.completions.create(**kwargs))
        except openai.APIError as exc:
            seen.error = exc
        return
    state = ChatCompletionStreamState()
    started = False
    try:
        async for chunk in await client.chat.completions.create(stream=True, **kwargs):
            started = True
            _openai_chunk(seen, state, chunk)
    except openai.APIError as exc:
        seen.error = exc
    _openai_snapshot(seen, state, started)


# --- Anthropic client ----------------------------------------------------------------------


def _anthropic_message(seen: Seen, message: Any) -> None:
    seen.obj = message
    seen.stop = message.stop_reason
    seen.stop_sequence = message.stop_sequence
    for block in message.content:
        if block.type == "text":
            seen.text += block.text
        elif block.type == "tool_use":
            seen.tools.append(ToolSeen(block.id, block.name, None, block.input))


def _anthropic_event(seen: Seen, event: Any) -> None:
    seen.stream_kinds.append(event.type)
    extra = getattr(event, "model_extra", None) or {}
    if "gateway" in extra:
        seen.gateway_frames += 1
        if event.type == "message_delta":
            seen.gateway = extra["gateway"]


def _anthropic_sync(
    client: anthropic.Anthropic, seen: Seen, kwargs: dict[str, Any], stream: bool
) -> None:
    if not stream:
        try:
            message = client.messages.create(**kwargs)
        except anthropic.APIError as exc:
            seen.error = exc
            return
        seen.extra = dict(message.model_extra or {})
        seen.gateway = seen.extra.get("gateway")
        _anthropic_message(seen, message)
        return
    try:
        with client.messages.stream(**kwargs) as events:
            try:
                for event in events:
                    _anthropic_event(seen, event)
            except anthropic.APIError as exc:
                seen.error = exc
            _anthropic_message(seen, events.current_message_snapshot)
    except anthropic.APIError as exc:  # an HTTP error status before the stream
        seen.error = exc


async def _anthropic_async(
    client: anthropic.AsyncAnthropic, seen: Seen, kwargs: dict[str, Any], stream: bool
) -> None:
    if not stream:
        try:
            message = await client.messages.create(**kwargs)
        except anthropic.APIError as exc:
            seen.error = exc
            return
        seen.extra = dict(message.model_extra or {})
        seen.gateway = seen.extra.get("gateway")
        _anthropic_message(seen, message)
        return
    try:
        async with client.messages.stream(**kwargs) as events:
            try:
                async for event in events:
                    _anthropic_event(seen, event)
            except anthropic.APIError as exc:
                seen.error = exc
            _anthropic_message(seen, events.current_message_snapshot)
    except anthropic.APIError as exc:
        seen.error = exc


# --- entry points --------------------------------------------------------------------------


def drive(
    stack: Any,
    upstream: Any,
    unique_model: Callable[[str], str],
    client: str,
    wire: str,
    answer: Answer,
    *,
    stream: bool,
    policy: str = "withhold",
    script: ScriptLike | None = None,
    tool_names: list[str] | None = None,
) -> Seen:
    """Script the upstream with `answer` (or `script`), call the gateway with the sync SDK."""
    model = _setup(upstream, unique_model, wire, answer, stream, script)
    names = _tool_names(answer) if tool_names is None else tool_names
    kwargs = request_kwargs(client, wire, model, names, stream=stream)
    seen = Seen(model)
    if client == "openai":
        _openai_sync(openai_client(stack, policy), seen, kwargs, stream)
    else:
        _anthropic_sync(anthropic_client(stack, policy), seen, kwargs, stream)
    seen.received = _received(upstream, model)
    return seen


async def adrive(
    stack: Any,
    upstream: Any,
    unique_model: Callable[[str], str],
    client: str,
    wire: str,
    answer: Answer,
    *,
    stream: bool,
    policy: str = "withhold",
    script: ScriptLike | None = None,
) -> Seen:
    """`drive` with the async SDK clients."""
    model = _setup(upstream, unique_model, wire, answer, stream, script)
    kwargs = request_kwargs(client, wire, model, _tool_names(answer), stream=stream)
    seen = Seen(model)
    if client == "openai":
        oa = async_openai_client(stack, policy)
        async with oa:
            await _openai_async(oa, seen, kwargs, stream)
    else:
        an = async_anthropic_client(stack, policy)
        async with an:
            await _anthropic_async(an, seen, kwargs, stream)
    seen.received = _received(upstream, model)
    return seen


# --- checks --------------------------------------------------------------------------------


def check_extension(
    seen: Seen,
    *,
    stop: str,
    native: str | None,
    wire: str,
    truncated: bool,
    withheld: list[dict[str, str]] | None = None,
    stream: bool,
) -> None:
    """The `gateway` object is there, where the contract puts it, with the expected values."""
    ext = seen.gateway
    assert isinstance(ext, dict), (
        f"no gateway extension object (stream frames: {seen.stream_kinds})"
    )
    missing = EXTENSION_KEYS - ext.keys()
    assert not missing, f"gateway object lacks {sorted(missing)}: {ext}"
    assert ext["stop_reason"] == stop
    assert ext["native_stop_reason"] == native
    assert ext["provider"] == PROVIDER[wire]
    assert isinstance(ext["request_id"], str) and ext["request_id"]
    assert ext["truncated"] is truncated
    assert ext["withheld_tool_calls"] == (withheld or [])
    if stream:
        assert seen.gateway_frames == 1, "exactly one stream frame carries the gateway object"


def check_tools(seen: Seen, expected: list[Any], client: str, *, exact_raw: bool = False) -> None:
    """Ids kept exactly, names, and arguments equal after JSON parsing (raw too, if asked)."""
    assert [(t.id, t.name) for t in seen.tools] == [(t.id, t.name) for t in expected]
    for got, want in zip(seen.tools, expected, strict=True):
        assert got.args == json.loads(want.arguments), f"arguments of {want.id}"
        if client == "openai":
            assert isinstance(got.raw, str)
            if exact_raw:
                assert got.raw == want.arguments


def check_received(seen: Seen, client: str, wire: str, *, stream: bool) -> None:
    """What the upstream got: the right path, the model unchanged, the stream flag; same-format
    traffic keeps fields the gateway does not know."""
    got = seen.received
    assert got is not None, "the upstream received nothing"
    assert got.path == ("/v1/chat/completions" if wire == "openai" else "/v1/messages")
    body = got.json
    assert body["model"] == seen.model
    assert bool(body.get("stream")) is stream
    if client == wire:
        assert body["x_gateway_probe"] == PROBE["x_gateway_probe"]
    if wire == "anthropic":
        assert isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 0
    if client == "anthropic" and wire == "openai":
        assert 256 in (body.get("max_tokens"), body.get("max_completion_tokens"))


# --- raw HTTP ------------------------------------------------------------------------------


@dataclass
class Frame:
    event: str | None
    data: str

    @property
    def json(self) -> Any:
        return json.loads(self.data)


def parse_frames(text: str) -> list[Frame]:
    frames = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if event is not None or data:
            frames.append(Frame(event, "\n".join(data)))
    return frames


def raw_stream(stack: Any, client: str, model: str, policy: str = "withhold") -> list[Frame]:
    """POST a streaming request with plain HTTP and read the whole body.

    http.client raises IncompleteRead when the chunked body is not terminated properly, so a
    socket the gateway closed without finishing the response fails here."""
    url = urlsplit(stack.urls[policy])
    messages = [{"role": "user", "content": "hi"}]
    if client == "openai":
        path = "/v1/chat/completions"
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
        headers = {"authorization": "Bearer sk-client"}
    else:
        path = "/v1/messages"
        body = {"model": model, "max_tokens": 64, "messages": messages, "stream": True}
        headers = {"x-api-key": "sk-client", "anthropic-version": "2023-06-01"}
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request(
            "POST",
            path,
            body=json.dumps(body).encode(),
            headers={"content-type": "application/json", **headers},
        )
        response = conn.getresponse()
        assert response.status == 200, response.read()[:500]
        assert response.getheader("content-type", "").startswith("text/event-stream")
        text = response.read().decode("utf-8")
    finally:
        conn.close()
    return parse_frames(text)


def check_error_ending(frames: list[Frame], client: str) -> None:
    """The stream ends with the client format's own error event, and never finishes normally."""
    assert frames, "empty stream"
    last = frames[-1]
    if client == "openai":
        assert last.data != "[DONE]", "a broken stream must not end with [DONE]"
        body = last.json
        assert isinstance(body.get("error"), dict) and body["error"].get("message")
        for frame in frames[:-1]:
            assert frame.data != "[DONE]"
            for choice in frame.json.get("choices") or ():
                assert choice.get("finish_reason") is None, "a normal finish before the error"
    else:
        assert last.event == "error"
        body = last.json
        assert body["type"] == "error" and body["error"]["type"] and body["error"]["message"]
        kinds = [f.event for f in frames]
        assert "message_stop" not in kinds and "message_delta" not in kinds


def text_of(frames: list[Frame], client: str) -> str:
    """The text deltas of a raw stream."""
    out = []
    for frame in frames:
        if frame.data == "[DONE]" or not frame.data:
            continue
        body = frame.json
        if client == "openai":
            for choice in body.get("choices") or ():
                out.append((choice.get("delta") or {}).get("content") or "")
        elif body.get("type") == "content_block_delta" and body["delta"]["type"] == "text_delta":
            out.append(body["delta"]["text"])
    return "".join(out)


# --- scenarios shared by the streaming and the whole-body matrix ---------------------------

TEXT = "Hello from the upstream: Zürich ☀️ 東京."
WEATHER = {"openai": "call_Qx7-aZ_09", "anthropic": "toolu_01AbC-xyz_9"}
TIME = {"openai": "call_second_Ü", "anthropic": "toolu_02DeF"}


def one_tool(wire: str) -> list[Tool]:
    return [Tool(WEATHER[wire], "get_weather", '{"city": "Zürich", "unit": "celsius"}')]


def two_tools(wire: str) -> list[Tool]:
    return [
        Tool(WEATHER[wire], "get_weather", '{"city":"Paris","days":[1,2,3]}'),
        Tool(TIME[wire], "get_time", '{"tz": "Asia/Tokyo", "label": "東京 \\"HQ\\" 🕒"}'),
    ]


def run_text(
    stack: Any, upstream: Any, unique_model: Any, client: str, wire: str, stream: bool
) -> Seen:
    seen = drive(stack, upstream, unique_model, client, wire, Answer(text=TEXT), stream=stream)
    assert seen.error is None, seen.error
    assert seen.text == TEXT
    native = "stop" if wire == "openai" else "end_turn"
    assert seen.stop == ("stop" if client == "openai" else "end_turn")
    assert seen.tools == []
    if client == "openai":
        assert seen.native == native
    check_extension(seen, stop="stop", native=native, wire=wire, truncated=False, stream=stream)
    check_received(seen, client, wire, stream=stream)
    return seen


def run_tools(
    stack: Any,
    upstream: Any,
    unique_model: Any,
    client: str,
    wire: str,
    stream: bool,
    tools: list[Tool],
    text: str = "",
) -> Seen:
    answer = Answer(text=text, tools=tools)
    seen = drive(stack, upstream, unique_model, client, wire, answer, stream=stream)
    assert seen.error is None, seen.error
    assert seen.text == text
    native = "tool_calls" if wire == "openai" else "tool_use"
    assert seen.stop == ("tool_calls" if client == "openai" else "tool_use")
    if client == "openai":
        assert seen.native == native
    # Same-format OpenAI is a passthrough: the argument strings themselves are unchanged.
    check_tools(seen, tools, client, exact_raw=client == wire == "openai")
    check_extension(
        seen, stop="tool_calls", native=native, wire=wire, truncated=False, stream=stream
    )
    check_received(seen, client, wire, stream=stream)
    return seen


@dataclass(frozen=True)
class Row:
    """One row of the stop-reason table (issue 2, point 5), from one upstream wire."""

    wire: str
    native: str
    normalized: str
    openai: str  # what an OpenAI client sees
    anthropic: str  # what an Anthropic client sees
    truncated: bool = False
    tools: bool = False
    stop_sequence: str | None = None

    @property
    def id(self) -> str:
        return f"{self.wire}:{self.native}" + ("+tools" if self.tools else "")


UNKNOWN_NATIVE = "some_future_reason"
STOP_ROWS = [
    Row("openai", "stop", "stop", "stop", "end_turn"),
    Row("openai", "tool_calls", "tool_calls", "tool_calls", "tool_use", tools=True),
    # A same-format relay keeps the legacy finish its upstream sent (formats.stop_reasons.relayed).
    Row("openai", "function_call", "tool_calls", "function_call", "tool_use", tools=True),
    Row("openai", "length", "length", "length", "max_tokens", truncated=True),
    Row("openai", "content_filter", "content_filter", "content_filter", "refusal"),
    # An unknown value goes through as sent to a client of the upstream's own format.
    Row("openai", UNKNOWN_NATIVE, "unknown", UNKNOWN_NATIVE, "end_turn"),
    Row("openai", UNKNOWN_NATIVE, "unknown", UNKNOWN_NATIVE, "tool_use", tools=True),
    Row("anthropic", "end_turn", "stop", "stop", "end_turn"),
    Row("anthropic", "tool_use", "tool_calls", "tool_calls", "tool_use", tools=True),
    Row("anthropic", "max_tokens", "length", "length", "max_tokens", truncated=True),
    Row(
        "anthropic",
        "stop_sequence",
        "stop_sequence",
        "stop",
        "stop_sequence",
        stop_sequence="\n###",
    ),
    Row("anthropic", "refusal", "refusal", "content_filter", "refusal"),
    Row("anthropic", "pause_turn", "pause", "stop", "pause_turn"),
    Row(
        "anthropic",
        "model_context_window_exceeded",
        "context_window",
        "length",
        "model_context_window_exceeded",
        truncated=True,
    ),
    Row("anthropic", UNKNOWN_NATIVE, "unknown", "stop", UNKNOWN_NATIVE),
    Row("anthropic", UNKNOWN_NATIVE, "unknown", "tool_calls", UNKNOWN_NATIVE, tools=True),
]
# Every row, to both client formats.
ROW_CASES = [(client, row) for row in STOP_ROWS for client in CLIENTS]
ROW_IDS = [f"{row.id}->{client}-client" for client, row in ROW_CASES]


def run_row(
    stack: Any, upstream: Any, unique_model: Any, client: str, row: Row, stream: bool
) -> Seen:
    tools = one_tool(row.wire) if row.tools else []
    text = f"Answer ending in {row.native}."
    answer = Answer(text=text, tools=tools, native_stop=row.native, stop_sequence=row.stop_sequence)
    seen = drive(stack, upstream, unique_model, client, row.wire, answer, stream=stream)
    assert seen.error is None, seen.error
    assert seen.text == text
    assert seen.stop == (row.openai if client == "openai" else row.anthropic)
    if client == "openai":
        assert seen.native == row.native
    elif row.stop_sequence is not None:
        assert seen.stop_sequence == row.stop_sequence
    # The tool calls of a complete answer (UNKNOWN included: never cut) are delivered.
    check_tools(seen, tools, client)
    check_extension(
        seen,
        stop=row.normalized,
        native=row.native,
        wire=row.wire,
        truncated=row.truncated,
        stream=stream,
    )
    return seen


CUT_TEXT = "Let me look that up."


def cut_tools(wire: str, both: bool) -> list[Tool]:
    """A tool call whose arguments were cut; with `both`, a complete one before it."""
    cut = Tool(TIME[wire], "get_time", '{"tz": "Europe/Zür')
    return [*one_tool(wire), cut] if both else [cut]


CUT_CASES = [
    (client, wire, policy, both)
    for client, wire in PAIRS
    for policy in ("withhold", "pass")
    for both in (False, True)
]
CUT_IDS = [
    f"{client}-client<-{wire}-wire-{policy}-{'complete+cut' if both else 'cut'}"
    for client, wire, policy, both in CUT_CASES
]


def run_cut(
    stack: Any,
    upstream: Any,
    unique_model: Any,
    client: str,
    wire: str,
    policy: str,
    both: bool,
    stream: bool,
) -> Seen:
    native = "length" if wire == "openai" else "max_tokens"
    tools = cut_tools(wire, both)
    answer = Answer(text=CUT_TEXT, tools=tools, native_stop=native)
    seen = drive(stack, upstream, unique_model, client, wire, answer, stream=stream, policy=policy)
    assert seen.error is None, seen.error
    assert seen.text == CUT_TEXT  # the text still arrives
    assert seen.stop == ("length" if client == "openai" else "max_tokens")
    if client == "openai":
        assert seen.native == native
    if policy == "withhold":
        assert seen.tools == [], "a cut response's tool calls must not be delivered"
        withheld = [{"id": t.id, "name": t.name} for t in tools]
    else:
        assert [(t.id, t.name) for t in seen.tools] == [(t.id, t.name) for t in tools]
        if both:
            assert seen.tools[0].args == json.loads(tools[0].arguments)
        if client == "openai" and (stream or wire == "openai"):
            # the cut arguments as the upstream sent them (a whole Anthropic body has none)
            assert seen.tools[-1].raw == tools[-1].arguments
        withheld = []
    check_extension(
        seen,
        stop="length",
        native=native,
        wire=wire,
        truncated=True,
        withheld=withheld,
        stream=stream,
    )
    return seen
