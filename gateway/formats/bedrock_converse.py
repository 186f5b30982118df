"""AWS Bedrock Converse wire: ConverseStream events and Converse bodies -> events.

One body shape for every model family (botocore `bedrock-runtime`, PROTOCOLS.md §e.1). A stream
is binary event-stream messages (`gateway.formats.aws_eventstream`), each payload one event's
JSON object, its type in the frame's event name:

    messageStart? (contentBlockStart? contentBlockDelta* contentBlockStop)* messageStop metadata

A text block needs no contentBlockStart (only tool blocks are started); `messageStart` may be
missing too (recorded streams leave it out), so the first event opens the message. Completeness:
`messageStop` gives the stop; the usage comes in `metadata`, after it (some servers send it
before), so the stream is complete once both arrived, or at the end of the body once messageStop
did. A body that ends without messageStop is truncated. Exception events (`:message-type
exception`) break the stream with an error type and status a client acts on. Every field read
goes through `gateway.formats.shape`, so an event of the wrong shape is a protocol error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from gateway.events import (
    Event,
    MessageStart,
    Stop,
    StreamEnd,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from gateway.formats import stop_reasons
from gateway.formats.aws_frames import EXCEPTION_PREFIX, FRAMING_ERROR
from gateway.formats.shape import ShapeError, count, index, loose, mapping, objects, string
from gateway.formats.sse import SSEFrame
from gateway.formats.wire_error import WireError

# An exception event or error reply's name -> (error type a client acts on, HTTP status). The
# statuses are the service model's (`httpStatusCode`), but for the model's own failure behind
# Bedrock (424 there), which is a bad gateway to the client.
EXCEPTIONS: Final[Mapping[str, tuple[str, int]]] = {
    "internalServerException": ("api_error", 500),
    "modelStreamErrorException": ("api_error", 502),
    "validationException": ("invalid_request_error", 400),
    "throttlingException": ("rate_limit_error", 429),
    "serviceUnavailableException": ("overloaded_error", 503),
    # error replies (x-amzn-ErrorType), first letter lowered as the stream names them
    "accessDeniedException": ("permission_error", 403),
    "resourceNotFoundException": ("not_found_error", 404),
    "modelNotReadyException": ("overloaded_error", 429),
    "modelTimeoutException": ("timeout_error", 408),
    "modelErrorException": ("api_error", 502),
    "serviceQuotaExceededException": ("rate_limit_error", 400),
    "unrecognizedClientException": ("authentication_error", 403),
}
UNKNOWN_EXCEPTION: Final = ("api_error", 500)


def exception_kind(name: str) -> tuple[str, int]:
    """An exception's error type and status, by its name in either spelling."""
    return EXCEPTIONS.get(name[:1].lower() + name[1:], UNKNOWN_EXCEPTION)


def usage_event(usage: Any) -> Usage:
    """Bedrock counts cached input apart (as Anthropic does); the normalized total includes it."""
    usage = loose(usage)
    fresh = count(usage.get("inputTokens"))
    read = count(usage.get("cacheReadInputTokens"))
    written = count(usage.get("cacheWriteInputTokens"))
    total = None if fresh is None else fresh + (read or 0) + (written or 0)
    return Usage(
        input_tokens=count(total),
        output_tokens=count(usage.get("outputTokens")),
        cache_read_tokens=read,
        cache_creation_tokens=written,
    )


def stop_event(obj: dict[str, Any]) -> Stop:
    """`stopReason`, and the matched stop sequence Anthropic-on-Bedrock gives in
    `additionalModelResponseFields.delta.stop_sequence` (or at its top level)."""
    native = string(obj.get("stopReason"), "stopReason")
    fields = loose(obj.get("additionalModelResponseFields"))
    delta = loose(fields.get("delta"))
    sequence = delta.get("stop_sequence", fields.get("stop_sequence"))
    return Stop(
        stop_reasons.normalized(stop_reasons.BEDROCK_NATIVE, native),
        native,
        sequence if isinstance(sequence, str) else None,
    )


def exception_event(name: str, payload: bytes) -> StreamError:
    kind, status = exception_kind(name)
    message = None
    try:
        obj = orjson.loads(payload) if payload else None
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        text = obj.get("message") or obj.get("Message")
        message = text if isinstance(text, str) and text else None
    return StreamError(
        "upstream_error", message or f"upstream sent {name}", kind, status, {"exception": name}
    )


class BedrockConverseDecoder:
    """One ConverseStream's state: `decode(frame)` per event-stream message, `eof()` at the end."""

    __slots__ = ("_blocks", "_ended", "_metadata", "_started", "_stopped", "_tools")

    def __init__(self) -> None:
        self._started = False
        self._stopped = False
        self._metadata = False
        self._ended = False
        self._blocks: set[int] = set()  # content blocks seen (started, or given a delta)
        self._tools: dict[int, int] = {}  # block index -> tool ordinal

    def decode(self, frame: SSEFrame) -> tuple[dict[str, Any] | None, list[Event]]:
        event = frame.event or ""
        if event == FRAMING_ERROR:
            return self._broken(frame.data.decode("utf-8", "replace"))
        if event.startswith(EXCEPTION_PREFIX):
            self._ended = True
            return None, [exception_event(event.removeprefix(EXCEPTION_PREFIX), frame.data)]
        obj = orjson.loads(frame.data)
        if not isinstance(obj, dict):
            raise ShapeError("event is not a JSON object")
        handler = _HANDLERS.get(event)
        if handler is None:
            return obj, []  # event types not known yet pass through
        events: list[Event] = []
        if not self._started:
            self._started = True
            events.append(MessageStart("", ""))
        handler(self, obj, events)
        return obj, events

    def eof(self) -> list[Event]:
        if self._ended:
            return []
        self._ended = True
        if self._stopped:
            return [StreamEnd(terminator_seen=True)]
        return [StreamError("truncated", "upstream stream ended without messageStop")]

    def _broken(self, message: str) -> tuple[None, list[Event]]:
        self._ended = True
        return None, [StreamError("protocol", message)]

    def _message_start(self, obj: dict[str, Any], events: list[Event]) -> None:
        return  # the message was opened by the first event (this one, or one before it)

    def _block_start(self, obj: dict[str, Any], events: list[Event]) -> None:
        position = index(obj.get("contentBlockIndex"), "contentBlockIndex", -1)
        if position in self._blocks:
            events.append(self._error(f"upstream started content block {position} twice"))
            return
        self._blocks.add(position)
        start = mapping(obj.get("start"), "start")
        tool = start.get("toolUse")
        if tool is None:
            return
        tool = mapping(tool, "start.toolUse")
        ordinal = self._tools[position] = len(self._tools)
        call_id = string(tool.get("toolUseId"), "start.toolUse.toolUseId") or ""
        name = string(tool.get("name"), "start.toolUse.name") or ""
        events.append(ToolCallStart(ordinal, call_id, name))

    def _block_delta(self, obj: dict[str, Any], events: list[Event]) -> None:
        # Per chunk: the common shapes are checked inline, the helpers only name what is wrong.
        position = obj.get("contentBlockIndex", -1)
        if type(position) is not int:
            position = index(position, "contentBlockIndex", -1)
        self._blocks.add(position)  # a text block is never started
        delta = obj.get("delta")
        if type(delta) is not dict:
            delta = mapping(delta, "delta")
        text = delta.get("text")
        if text is not None:
            if type(text) is not str:
                text = string(text, "delta.text")
            if text:
                events.append(TextDelta(text))
            return
        tool = delta.get("toolUse")
        if tool is not None:
            part = string(mapping(tool, "delta.toolUse").get("input"), "delta.toolUse.input")
            ordinal = self._tools.get(position)
            if ordinal is None:
                message = f"upstream sent tool input for content block {position}, not a tool"
                events.append(self._error(message))
            elif part:
                events.append(ToolCallDelta(ordinal, part))
            return
        reasoning = delta.get("reasoningContent")
        if reasoning is not None:
            reasoning = mapping(reasoning, "delta.reasoningContent")
            thought = string(reasoning.get("text"), "delta.reasoningContent.text")
            signature = string(reasoning.get("signature"), "delta.reasoningContent.signature")
            if thought or signature:
                events.append(ThinkingDelta(thought or "", signature))
            # redactedContent (encrypted reasoning) has no event of its own: it is not relayed

    def _block_stop(self, obj: dict[str, Any], events: list[Event]) -> None:
        position = index(obj.get("contentBlockIndex"), "contentBlockIndex", -1)
        if position not in self._blocks:
            events.append(self._error(f"upstream stopped content block {position}, never started"))

    def _message_stop(self, obj: dict[str, Any], events: list[Event]) -> None:
        if self._stopped:
            events.append(self._error("upstream stopped the message twice"))
            return
        self._stopped = True
        events.append(stop_event(obj))
        self._end_when_done(events)

    def _metadata_event(self, obj: dict[str, Any], events: list[Event]) -> None:
        self._metadata = True
        if obj.get("usage") is not None:
            events.append(usage_event(obj["usage"]))
        self._end_when_done(events)

    def _end_when_done(self, events: list[Event]) -> None:
        if self._stopped and self._metadata and not self._ended:
            self._ended = True
            events.append(StreamEnd(terminator_seen=True))

    def _error(self, message: str) -> StreamError:
        self._ended = True
        return StreamError("protocol", message)


_HANDLERS = {
    "messageStart": BedrockConverseDecoder._message_start,
    "contentBlockStart": BedrockConverseDecoder._block_start,
    "contentBlockDelta": BedrockConverseDecoder._block_delta,
    "contentBlockStop": BedrockConverseDecoder._block_stop,
    "messageStop": BedrockConverseDecoder._message_stop,
    "metadata": BedrockConverseDecoder._metadata_event,
}


def block_events(block: dict[str, Any], ordinal: int) -> tuple[list[Event], bool]:
    """A whole content block's events, and whether it was a tool call (`ordinal` is its own)."""
    if "text" in block:
        text = string(block.get("text"), "content.text")
        return ([TextDelta(text)] if text else []), False
    if "toolUse" in block:
        tool = mapping(block.get("toolUse"), "content.toolUse")
        call_id = string(tool.get("toolUseId"), "content.toolUse.toolUseId") or ""
        name = string(tool.get("name"), "content.toolUse.name") or ""
        arguments = tool.get("input")
        text = orjson.dumps(arguments).decode() if arguments else "{}"
        return [ToolCallStart(ordinal, call_id, name), ToolCallDelta(ordinal, text)], True
    if "reasoningContent" in block:
        reasoning = mapping(block.get("reasoningContent"), "content.reasoningContent")
        thought = mapping(reasoning.get("reasoningText"), "content.reasoningContent.reasoningText")
        text = string(thought.get("text"), "reasoningText.text")
        signature = string(thought.get("signature"), "reasoningText.signature")
        return ([ThinkingDelta(text or "", signature)] if text or signature else []), False
    return [], False


def response_events(body: dict[str, Any]) -> list[Event]:
    """A Converse body as the events a stream of it would give."""
    output = mapping(body.get("output"), "output")
    message = mapping(output.get("message"), "output.message")
    if not isinstance(message.get("content"), list):
        raise ShapeError("output.message has no content array")
    events: list[Event] = [MessageStart("", "")]
    ordinal = 0
    for block in objects(message["content"], "output.message.content"):
        block_list, tool = block_events(block, ordinal)
        events += block_list
        ordinal += tool
    if body.get("usage") is not None:
        events.append(usage_event(body["usage"]))
    events.append(stop_event(body))
    events.append(StreamEnd(terminator_seen=True))
    return events


def error_fields(parsed: Any, headers: Mapping[str, str]) -> WireError | None:
    """A Bedrock error reply: JSON `{"message": ...}`, the exception's name in the
    `x-amzn-ErrorType` header (`ThrottlingException:http://internal...`), or in the body's
    `__type` (`com.amazon...#ThrottlingException`). The type is the one clients act on
    (`rate_limit_error`), so each client format's error table reads it as it reads Anthropic's;
    None when the reply names neither an exception nor a message."""
    name = (headers.get("x-amzn-errortype") or "").partition(":")[0].strip()
    body = parsed if isinstance(parsed, dict) else {}
    if not name:
        given = body.get("__type") or body.get("code")
        name = given.rpartition("#")[2] if isinstance(given, str) else ""
    message = body.get("message") or body.get("Message")
    if not name and not isinstance(message, str):
        return None
    kind = exception_kind(name)[0] if name else None
    return WireError(message if isinstance(message, str) else None, kind, None)
