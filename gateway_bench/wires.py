"""The wires the bench speaks, one row each: both sides of one protocol.

A row says, for the fake upstream, which request paths are its own and how to render its
answers; and for the load generator, where to post, what body and headers to send and which
bytes say a streamed answer ended as it should (`terminator`) or a whole one did (`ended`).
The gateway's three client formats are the rows `openai`, `anthropic` and `openai_responses`;
`gemini` and `bedrock` are only ever spoken directly to the upstream.

    wire = WIRES["anthropic"]
    wire.request_path("bench-c20", stream=True)   # "/v1/messages"
    wire.route("/v1/messages")                    # PathInfo(model=None, stream=None)
    wire.stream("bench-c20", Scenario.parse("bench-c20"))  # the SSE writes
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

from gateway_bench import answers, answers_cloud, bodies
from gateway_bench.eventstream import event_type_marker
from gateway_bench.scenario import Scenario

SSE: Final = "text/event-stream"
JSON: Final = "application/json"
EVENT_STREAM: Final = "application/vnd.amazon.eventstream"


@dataclass(frozen=True, slots=True)
class PathInfo:
    """What a request's path says; None where the body says it (`model`, `stream`)."""

    model: str | None = None
    stream: bool | None = None


@dataclass(frozen=True, slots=True)
class Wire:
    name: str
    route: Callable[[str], PathInfo | None]  # upstream: this path is the wire's (or None)
    request_path: Callable[[str, bool], str]  # client: where to post (model, stream)
    body: Callable[[str, bool, int], bytes]  # client: (model, stream, history_bytes)
    headers: Mapping[str, str]
    terminator: bytes  # in a streamed answer: its last event arrived
    ended: bytes  # in a whole answer: it ended normally
    whole: Callable[[str, Scenario], bytes]
    stream: Callable[[str, Scenario], list[bytes]]
    stream_type: str = SSE


def exact(*paths: str) -> Callable[[str], PathInfo | None]:
    known = frozenset(paths)

    def route(path: str) -> PathInfo | None:
        return PathInfo() if path in known else None

    return route


def fixed(path: str) -> Callable[[str, bool], str]:
    return lambda model, stream: path


GEMINI_PREFIX: Final = "/v1beta/models/"
GEMINI_METHODS: Final = {"generateContent": False, "streamGenerateContent": True}


def gemini_route(path: str) -> PathInfo | None:
    if not path.startswith(GEMINI_PREFIX):
        return None
    model, _, method = path.removeprefix(GEMINI_PREFIX).rpartition(":")
    stream = GEMINI_METHODS.get(method)
    return None if stream is None or not model else PathInfo(unquote(model), stream)


def gemini_path(model: str, stream: bool) -> str:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"{GEMINI_PREFIX}{quote(model, safe='')}:{method}"


BEDROCK_ACTIONS: Final = {"converse": False, "converse-stream": True}


def bedrock_route(path: str) -> PathInfo | None:
    parts = path.split("/")  # "", "model", id, action
    if len(parts) != 4 or parts[1] != "model" or not parts[2]:
        return None
    stream = BEDROCK_ACTIONS.get(parts[3])
    return None if stream is None else PathInfo(unquote(parts[2]), stream)


def bedrock_path(model: str, stream: bool) -> str:
    return f"/model/{quote(model, safe='')}/{'converse-stream' if stream else 'converse'}"


WIRES: Final[Mapping[str, Wire]] = {
    wire.name: wire
    for wire in (
        Wire(
            "openai",
            exact("/v1/chat/completions", "/chat/completions"),
            fixed("/v1/chat/completions"),
            bodies.chat_body,
            {},
            b"data: [DONE]",
            b'"stop"',
            answers.chat_whole,
            answers.chat_stream,
        ),
        Wire(
            "anthropic",
            exact("/v1/messages"),
            fixed("/v1/messages"),
            bodies.anthropic_body,
            {"anthropic-version": "2023-06-01"},
            b"message_stop",
            b'"end_turn"',
            answers.anthropic_whole,
            answers.anthropic_stream,
        ),
        Wire(
            "openai_responses",
            exact("/v1/responses", "/responses"),
            fixed("/v1/responses"),
            bodies.responses_body,
            {},
            b"response.completed",
            b'"completed"',
            answers.responses_whole,
            answers.responses_stream,
        ),
        Wire(
            "gemini",
            gemini_route,
            gemini_path,
            bodies.gemini_body,
            {},
            b'"finishReason"',
            b'"STOP"',
            answers_cloud.gemini_whole,
            answers_cloud.gemini_stream,
        ),
        Wire(
            "bedrock",
            bedrock_route,
            bedrock_path,
            bodies.bedrock_body,
            {},
            event_type_marker("messageStop"),
            b'"end_turn"',
            answers_cloud.bedrock_whole,
            answers_cloud.bedrock_stream,
            EVENT_STREAM,
        ),
    )
}


def wire_of_path(path: str) -> tuple[Wire, PathInfo] | None:
    """The upstream's router: the first row whose `route` claims the path."""
    for wire in WIRES.values():
        info = wire.route(path)
        if info is not None:
            return wire, info
    return None
