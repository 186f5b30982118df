"""Loading the recorded provider streams in tests/fixtures and replaying them.

`*.sse` files are raw bodies; `*.chunks.jsonl` files hold one `data:` payload per line and are
rebuilt into wire form as the fixtures README says (OpenAI-wire: `data: <line>` frames and a final
`data: [DONE]`; Anthropic: an `event: <type>` line before each `data:`). A replay runs the same
pipeline as the gateway: SSE decoder -> wire decoder -> ChunkAggregator, stopping at the first
terminal event as the exchange does.

    body = stream_body("openai_chat/openai_python__tool_call_single_stream.sse")
    result = replay(body, "openai")
    assert result.response.tool_calls[0].name == "GetWeatherArgs"
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from gateway.events import Event, StreamEnd, StreamError
from gateway.formats import anthropic_messages, gemini, openai_chat, openai_responses
from gateway.formats.sse import SSEDecoder, SSEFrame
from gateway.normalize.aggregate import AggregatedResponse, ChunkAggregator

FIXTURES = Path(__file__).resolve().parent / "fixtures"

DECODERS: dict[str, Any] = {
    "openai": openai_chat.OpenAIChatDecoder,
    "anthropic": anthropic_messages.AnthropicDecoder,
    "openai_responses": openai_responses.OpenAIResponsesDecoder,
    "gemini": gemini.GeminiDecoder,
}
BODY_DECODERS: dict[str, Any] = {
    "openai": openai_chat.response_events,
    "anthropic": anthropic_messages.response_events,
    "openai_responses": openai_responses.response_events,
    "gemini": gemini.response_events,
}
WIRE_BY_FOLDER = {
    "openai_chat": "openai",
    "other": "openai",
    "anthropic": "anthropic",
    "openai_responses": "openai_responses",
    "gemini": "gemini",  # `data: <line>` frames and no terminator, as the fixtures README says
}
EVENT_LINES = frozenset({"anthropic", "openai_responses"})  # wires whose frames name their type


def fixture_path(name: str) -> Path:
    """The fixture file `name` (relative to the fixtures folder); they live in the repository, so
    a missing one is a failure, never a skip."""
    path = FIXTURES / name
    assert path.is_file(), f"fixture {name} not found under {FIXTURES}"
    return path


def wire_of(name: str) -> str:
    return WIRE_BY_FOLDER[name.split("/", 1)[0]]


def rebuild(lines: Iterable[bytes], wire: str) -> bytes:
    """Wire form of `*.chunks.jsonl` payload lines."""
    out: list[bytes] = []
    for line in lines:
        if wire in EVENT_LINES:
            kind = orjson.loads(line)["type"].encode()
            out.append(b"event: " + kind + b"\ndata: " + line + b"\n\n")
        else:
            out.append(b"data: " + line + b"\n\n")
    if wire == "openai":
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def payload_lines(name: str) -> list[bytes]:
    raw = fixture_path(name).read_bytes()
    return [line for line in raw.split(b"\n") if line.strip()]


def stream_body(name: str) -> bytes:
    """The raw stream body of a fixture: `*.sse` as recorded, `*.chunks.jsonl` rebuilt."""
    if name.endswith(".chunks.jsonl"):
        return rebuild(payload_lines(name), wire_of(name))
    return fixture_path(name).read_bytes()


def load_json(name: str) -> Any:
    return orjson.loads(fixture_path(name).read_bytes())


def split_events(body: bytes) -> list[bytes]:
    """The SSE events of a recorded body (the fixtures use `\\n\\n` separators)."""
    return [part for part in body.split(b"\n\n") if part.strip()]


def join_events(events: Iterable[bytes]) -> bytes:
    return b"".join(event + b"\n\n" for event in events)


def chunked(body: bytes, points: Iterable[int]) -> list[bytes]:
    """`body` cut at these byte offsets (duplicates and out-of-order points allowed)."""
    cuts = [0, *sorted({min(max(p, 0), len(body)) for p in points}), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(cuts)]


def drop_last_events(body: bytes, count: int) -> bytes:
    """The body cut before its last `count` events, as a connection that closed early."""
    return join_events(split_events(body)[:-count])


@dataclass
class Replay:
    response: AggregatedResponse
    events: list[Event]  # every event the wire decoder gave, in order


def sse_frames(chunks: Iterable[bytes]) -> list[SSEFrame]:
    """Every frame the SSE decoder gives for these chunks, `close()` included."""
    sse = SSEDecoder()
    frames: list[SSEFrame] = []
    for chunk in chunks:
        frames += sse.feed(chunk)
    return frames + sse.close()


def replay_frames(frames: Iterable[SSEFrame], wire: str, stop_at_end: bool = True) -> Replay:
    """Decoded SSE frames through the wire decoder and the aggregator, then `eof()`.

    With `stop_at_end` (the exchange's behaviour) nothing after the first StreamEnd or
    StreamError is fed; without it every frame goes through, as a naive recorded-file replay."""
    decoder = DECODERS[wire]()
    agg = ChunkAggregator()
    seen: list[Event] = []

    def take(events: list[Event]) -> bool:
        for event in events:
            seen.append(event)
            agg.handle(event)
            if stop_at_end and isinstance(event, StreamEnd | StreamError):
                return True
        return False

    for frame in frames:
        if take(decoder.decode(frame)[1]):
            break
    else:
        take(decoder.eof())
    return Replay(agg.final(), seen)


def replay(
    body: bytes,
    wire: str,
    chunks: Iterable[bytes] | None = None,
    stop_at_end: bool = True,
) -> Replay:
    """Run `body` (fed as `chunks` when given) through SSE decoder, wire decoder and aggregator."""
    return replay_frames(sse_frames([body] if chunks is None else chunks), wire, stop_at_end)


def replay_body(body: dict[str, Any], wire: str) -> Replay:
    """A non-streaming response body through its wire's body decoder and the aggregator."""
    events = BODY_DECODERS[wire](body)
    agg = ChunkAggregator()
    for event in events:
        agg.handle(event)
    return Replay(agg.final(), events)


def summary(resp: AggregatedResponse) -> dict[str, Any]:
    """Everything a client or the audit sees of an aggregated response, as plain data."""
    return {
        "id": resp.id,
        "model": resp.model,
        "text": resp.text,
        "thinking": resp.thinking,
        "thinking_signature": resp.thinking_signature,
        "refusal": resp.refusal,
        "tool_calls": [
            {
                "index": call.index,
                "id": call.id,
                "name": call.name,
                "arguments": call.arguments,
                "parsed": call.parsed,
                "parse_failure": None
                if call.parse_failure is None
                else (
                    call.parse_failure.error_class,
                    call.parse_failure.offset,
                    call.parse_failure.length,
                ),
            }
            for call in resp.tool_calls
        ],
        "stop_reason": resp.stop_reason,
        "native_stop_reason": resp.native_stop_reason,
        "stop_sequence": resp.stop_sequence,
        "stop_details": resp.stop_details,
        "usage": (
            resp.usage.input_tokens,
            resp.usage.output_tokens,
            resp.usage.cache_read_tokens,
            resp.usage.cache_creation_tokens,
            resp.usage.reasoning_tokens,
        ),
        "complete": resp.complete,
        "terminator_seen": resp.terminator_seen,
        "error": None if resp.error is None else (resp.error.kind, resp.error.error_type),
    }
