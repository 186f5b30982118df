"""The client formats the gateway speaks, one row each: what a client of the format sends and
what it must receive. The exchange, error rendering, the agent guard and the app read these rows;
adding a format is adding a row and its modules.

    client = CLIENT_FORMATS["anthropic"]
    body = validate(client.body_model, obj, client.endpoint)
    writer = client.stream_writer(wire.name, terms)     # relay for its own wire, else translate
    status, payload, headers = client.render_error(err, request_id)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.agent_guard import TurnReader, anthropic_turns, openai_turns, responses_turns
from gateway.encode import ReplyTerms, StreamWriter, anthropic_body, openai_body, responses_body
from gateway.encode.anthropic_errors import ERRORS as ANTHROPIC_ERRORS
from gateway.encode.anthropic_relay import AnthropicRelay
from gateway.encode.anthropic_stream import AnthropicMessagesWriter
from gateway.encode.errors import ErrorFormat, render_error
from gateway.encode.openai_errors import ERRORS as OPENAI_ERRORS
from gateway.encode.openai_errors import RESPONSES_ERRORS
from gateway.encode.openai_relay import OpenAIRelay
from gateway.encode.openai_stream import OpenAIChatWriter
from gateway.encode.responses_stream import ResponsesWriter
from gateway.errors import GatewayError
from gateway.handlers.validation import (
    ChatCompletionsBody,
    MessagesBody,
    RequestBody,
    ResponsesBody,
)
from gateway.normalize.aggregate import AggregatedResponse
from gateway.normalize.truncation import Verdict
from gateway.translate.continuation import (
    ContinuedBody,
    continued_chat,
    continued_messages,
    continued_responses,
)
from gateway.translate.responses_request import relayed_tool_origins
from gateway.translate.responses_thinking import without_gateway_reasoning
from gateway.translate.stream_usage import with_stream_usage
from gateway.translate.translation import Dropped, ToolOrigin

RelayBody = Callable[[dict[str, Any], Verdict, ReplyTerms], dict[str, Any]]
BuildBody = Callable[[AggregatedResponse, Verdict, ReplyTerms], dict[str, Any]]
RelayRequest = Callable[[dict[str, Any]], tuple[dict[str, Any], Dropped] | None]


@dataclass(frozen=True, slots=True)
class ClientFormat:
    name: str
    endpoint: str  # how error messages name the endpoint
    paths: tuple[str, ...]  # where it is served
    marker_headers: tuple[str, ...]  # headers only this format's clients send
    body_model: type[RequestBody]
    relay_wire: str  # the upstream wire whose requests go upstream as the client sent them
    # The writer and body renderer that relay `relay_wire`'s frames and bodies to the client
    # unchanged; None: answers of that wire are rebuilt from events like any other's.
    relay: Callable[[ReplyTerms], StreamWriter] | None
    writer: Callable[[ReplyTerms], StreamWriter]  # stream writer from events, any other wire
    relay_body: RelayBody | None
    build_body: BuildBody
    errors: ErrorFormat
    tool_turns: TurnReader  # its conversation history, read for the runaway signal
    models_body: Callable[[Sequence[str]], dict[str, Any]]
    # The request continuing a cut answer: the body, the answer so far, and whether to ask for
    # the continuation in a user turn (gateway.translate.continuation).
    continued_body: ContinuedBody
    # GET on its paths with `Upgrade: websocket` is refused with 426 (Codex then uses HTTP).
    refuses_websocket: bool = False
    # How the client declared the tools of a request relayed unchanged, for answers rebuilt
    # from events (a custom tool's call goes back as the format's own custom call).
    relay_tools: Callable[[dict[str, Any]], Mapping[str, ToolOrigin]] = lambda body: {}
    # Its answers are kept for `previous_response_id` (gateway.handlers.chaining).
    keeps_responses: bool = False
    # A whole upstream body that stopped with an error (vLLM `abort`) is answered as the
    # format's own failed response (HTTP 200) rather than as an error status.
    broken_in_body: bool = False
    # What of a request relayed to `relay_wire` must not go up as sent (the gateway's own
    # tokens): the body to send instead, with what was left out; None to send it unchanged.
    relay_request: RelayRequest = lambda body: None

    def relays(self, wire: str) -> bool:
        return wire == self.relay_wire

    def stream_writer(self, wire: str, terms: ReplyTerms) -> StreamWriter:
        if self.relay is not None and self.relays(wire):
            return self.relay(terms)
        return self.writer(terms)

    def render_body(
        self,
        wire: str,
        upstream: dict[str, Any],
        response: AggregatedResponse,
        verdict: Verdict,
        terms: ReplyTerms,
    ) -> dict[str, Any]:
        if self.relay_body is not None and self.relays(wire):
            return self.relay_body(upstream, verdict, terms)
        return self.build_body(response, verdict, terms)

    def render_error(
        self, err: GatewayError, request_id: str, extension: dict[str, Any] | None = None
    ) -> tuple[int, bytes, dict[str, str]]:
        return render_error(self.errors, self.relay_wire, err, request_id, extension)


OPENAI = ClientFormat(
    name="openai",
    endpoint="chat completions",
    paths=("/v1/chat/completions", "/chat/completions"),
    marker_headers=(),
    body_model=ChatCompletionsBody,
    relay_wire="openai",
    relay=OpenAIRelay,
    writer=OpenAIChatWriter,
    relay_body=openai_body.relay_body,
    build_body=openai_body.build_body,
    errors=OPENAI_ERRORS,
    tool_turns=openai_turns,
    continued_body=continued_chat,
    models_body=openai_body.models_body,
    relay_request=with_stream_usage,  # a stream's usage, for the record and the key's budget
)
ANTHROPIC = ClientFormat(
    name="anthropic",
    endpoint="messages",
    paths=("/v1/messages",),
    marker_headers=("anthropic-version",),
    body_model=MessagesBody,
    relay_wire="anthropic",
    relay=AnthropicRelay,
    writer=AnthropicMessagesWriter,
    relay_body=anthropic_body.relay_body,
    build_body=anthropic_body.build_body,
    errors=ANTHROPIC_ERRORS,
    tool_turns=anthropic_turns,
    continued_body=continued_messages,
    models_body=anthropic_body.models_body,
)

RESPONSES = ClientFormat(
    name="responses",
    endpoint="responses",
    paths=("/v1/responses", "/responses"),
    marker_headers=(),
    body_model=ResponsesBody,
    relay_wire="openai_responses",
    relay=None,  # a Responses upstream's answer is rebuilt from its events
    writer=ResponsesWriter,
    relay_body=None,
    build_body=responses_body.build_body,
    errors=RESPONSES_ERRORS,
    tool_turns=responses_turns,
    continued_body=continued_responses,
    models_body=openai_body.models_body,
    refuses_websocket=True,
    relay_tools=relayed_tool_origins,
    keeps_responses=True,
    broken_in_body=True,
    relay_request=without_gateway_reasoning,
)

CLIENT_FORMATS: Mapping[str, ClientFormat] = {
    row.name: row for row in (OPENAI, ANTHROPIC, RESPONSES)
}
# Who is answered when nothing in the request names a format: the most common clients.
DEFAULT_FORMAT = OPENAI


def detect(path: str, headers: Mapping[str, str]) -> ClientFormat:
    """The format of a request outside an endpoint's handler (404s, server-level errors,
    `/v1/models`): by its path, then by headers only one format's clients send."""
    for row in CLIENT_FORMATS.values():
        if any(path == p or path.startswith(p + "/") for p in row.paths):
            return row
    for row in CLIENT_FORMATS.values():
        if any(name in headers for name in row.marker_headers):
            return row
    return DEFAULT_FORMAT
