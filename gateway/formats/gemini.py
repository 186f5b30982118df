"""Google Gemini wire (`generateContent`, `streamGenerateContent?alt=sse`): frames and bodies
-> events.

Every SSE `data:` frame is a whole GenerateContentResponse, and there is no terminator: a stream
is complete once its candidate gave a `finishReason` (a prompt blocked before any candidate,
`promptFeedback.blockReason`, completes it too), and one that ends without is truncated. Only
candidate 0 is read (a translated exchange asks for one).

Function calls arrive whole (`functionCall {name, args}`) and without ids: the gateway mints
them (`gateway.formats.gemini_ids`), with the call's `thoughtSignature` inside so the next turn
can restore it. Vertex AI may stream a call's arguments instead (`willContinue: true`, then
`partialArgs` parts addressed by JSON path): they are assembled, and the call's whole arguments
are given once the call closes. `STOP` after a function call is TOOL_CALLS (Gemini has no finish
reason of its own for it).

Usage: `promptTokenCount` is the input (it includes `cachedContentTokenCount`, the cache read);
`candidatesTokenCount` leaves out `thoughtsTokenCount`, so the normalized output is their sum,
as OpenAI's completion_tokens and Anthropic's output_tokens include reasoning; thoughts are also
the reasoning tokens. An `error` object in a frame ends the stream with a StreamError.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from gateway.errors import retry_after_header
from gateway.events import (
    Event,
    MessageStart,
    Stop,
    StopReason,
    StreamEnd,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from gateway.formats import gemini_ids
from gateway.formats.shape import ShapeError, count, loose, mapping, objects, sequence, string
from gateway.formats.sse import SSEFrame
from gateway.formats.stop_reasons import BLOCK_REASON_PREFIX, GEMINI_NATIVE, normalized

RETRY_INFO: Final = "type.googleapis.com/google.rpc.RetryInfo"
_DURATION: Final = re.compile(r"([0-9]+(?:\.[0-9]*)?)s")
_PATH_STEP: Final = re.compile(r"\.([^.\[\]]+)|\[([0-9]+)\]|\['([^']*)'\]")


def usage_event(usage: Any) -> Usage:
    usage = loose(usage)
    prompt = count(usage.get("promptTokenCount"))
    tool_prompt = count(usage.get("toolUsePromptTokenCount"))
    candidates = count(usage.get("candidatesTokenCount"))
    thoughts = count(usage.get("thoughtsTokenCount"))
    output = (
        None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    )
    return Usage(
        input_tokens=None if prompt is None else prompt + (tool_prompt or 0),
        output_tokens=output,
        cache_read_tokens=count(usage.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
    )


def has_usage(usage: Any) -> bool:
    """Whether `usageMetadata` holds counts (Vertex sends `{"trafficType": ...}` alone)."""
    return isinstance(usage, dict) and any(key.endswith("TokenCount") for key in usage)


def stream_error(error: Any) -> StreamError:
    """An error object inside a stream frame (or a whole body): its `status` string is the
    type, its `code` the HTTP status."""
    message, status, code, _ = error_details(error)
    return StreamError("upstream_error", message or "upstream error", status or "INTERNAL", code)


def error_details(error: Any) -> tuple[str | None, str | None, int | None, str | None]:
    """Message, status string, HTTP code and retry-after seconds of a Google error object."""
    if not isinstance(error, dict):
        return None, None, None, None
    message, status, code = error.get("message"), error.get("status"), error.get("code")
    return (
        message if isinstance(message, str) else None,
        status if isinstance(status, str) and status else None,
        code if type(code) is int else None,
        retry_delay(error.get("details")),
    )


def retry_delay(details: Any) -> str | None:
    """RetryInfo's `retryDelay` (a protobuf Duration, `"34.4s"`) as whole seconds."""
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and detail.get("@type") == RETRY_INFO:
            delay = detail.get("retryDelay")
            match = _DURATION.fullmatch(delay) if isinstance(delay, str) else None
            if match is not None:
                return retry_after_header(float(match.group(1)))
    return None


def set_path(args: dict[str, Any], path: str, part: Mapping[str, Any]) -> None:
    """Apply one `partialArgs` entry: its value at `path` (`$.a.b[0].c`); a string value is
    appended to what the path already holds (strings stream in pieces)."""
    steps: list[str | int] = []
    rest = path.removeprefix("$")
    position = 0
    for match in _PATH_STEP.finditer(rest):
        if match.start() != position:
            raise ShapeError("partialArgs.jsonPath is not a JSON path")
        position = match.end()
        key, number, quoted = match.groups()
        steps.append(int(number) if number is not None else (key if key is not None else quoted))
    if position != len(rest) or not steps:
        raise ShapeError("partialArgs.jsonPath is not a JSON path")
    node: Any = args
    for step, following in zip(steps, [*steps[1:], None], strict=True):
        container: Any = [] if isinstance(following, int) else {}
        if following is None:
            _assign(node, step, part)
            return
        node = _child(node, step, container)


def _child(node: Any, step: str | int, empty: Any) -> Any:
    if isinstance(step, int):
        if not isinstance(node, list):
            raise ShapeError("partialArgs.jsonPath indexes a value that is not an array")
        while len(node) <= step:
            node.append(None)
        if node[step] is None:
            node[step] = empty
        return node[step]
    if not isinstance(node, dict):
        raise ShapeError("partialArgs.jsonPath names a key of a value that is not an object")
    if node.get(step) is None:
        node[step] = empty
    return node[step]


_VALUE_KEYS: Final = ("numberValue", "boolValue", "structValue", "listValue")


def _assign(node: Any, step: str | int, part: Mapping[str, Any]) -> None:
    if "stringValue" in part:
        text = string(part["stringValue"], "partialArgs.stringValue") or ""
        current = _child(node, step, "")
        value: Any = (current if isinstance(current, str) else "") + text
    elif "nullValue" in part:
        value = None
    else:
        value = next((part[key] for key in _VALUE_KEYS if key in part), None)
    if isinstance(step, int):
        _child(node, step, None)
        node[step] = value
    else:
        if not isinstance(node, dict):
            raise ShapeError("partialArgs.jsonPath names a key of a value that is not an object")
        node[step] = value


class _Candidate:
    """Candidate 0's parts as events: text, thoughts and function calls (ids minted)."""

    __slots__ = ("_open", "calls", "response_id")

    def __init__(self) -> None:
        self.response_id = ""
        self.calls = 0
        self._open: tuple[int, dict[str, Any]] | None = None  # a call whose args still stream

    def parts(self, candidate: dict[str, Any], events: list[Event]) -> None:
        content = candidate.get("content")
        if content is None:
            return
        if type(content) is not dict:
            raise ShapeError("candidates.content is not an object")
        parts = content.get("parts")
        if not parts:
            return
        if type(parts) is not list:
            raise ShapeError("content.parts is not an array")
        for part in parts:
            if type(part) is not dict:
                raise ShapeError("an item of content.parts is not an object")
            call = part.get("functionCall")
            if call is not None:
                self._call(mapping(call, "functionCall"), part, events)
                continue
            self.close(events)
            text = part.get("text")
            if text is not None and type(text) is not str:
                raise ShapeError("part.text is not a string")
            if part.get("thought") is True:
                signature = string(part.get("thoughtSignature"), "thoughtSignature")
                if text or signature:
                    events.append(ThinkingDelta(text or "", signature or None))
            elif text:
                events.append(TextDelta(text))

    def close(self, events: list[Event]) -> None:
        """The call whose arguments streamed is over: its whole arguments."""
        if self._open is not None:
            ordinal, args = self._open
            self._open = None
            events.append(ToolCallDelta(ordinal, orjson.dumps(args).decode()))

    def _call(self, call: dict[str, Any], part: dict[str, Any], events: list[Event]) -> None:
        name = string(call.get("name"), "functionCall.name")
        if name and self._open is not None:
            self.close(events)  # a new call: the one before it is over
        if self._open is None:
            if not name:
                return  # the closing `functionCall: {}` of a call already given
            ordinal = self.calls
            self.calls += 1
            signature = string(part.get("thoughtSignature"), "thoughtSignature")
            call_id = gemini_ids.mint(self.response_id, ordinal, signature)
            events.append(ToolCallStart(ordinal, call_id, name))
            args = mapping(call.get("args"), "functionCall.args")
            if call.get("willContinue") is not True:
                events.append(ToolCallDelta(ordinal, orjson.dumps(args).decode()))
                return
            self._open = (ordinal, dict(args))
        ordinal, args = self._open
        for entry in objects(call.get("partialArgs"), "functionCall.partialArgs"):
            path = string(entry.get("jsonPath"), "partialArgs.jsonPath") or ""
            set_path(args, path, entry)
        if call.get("willContinue") is not True:
            self.close(events)


def stop_event(finish: str, called: bool) -> Stop:
    reason = normalized(GEMINI_NATIVE, finish)
    if reason is StopReason.STOP and called:
        reason = StopReason.TOOL_CALLS
    return Stop(reason, finish)


def blocked_event(feedback: dict[str, Any]) -> Stop | None:
    """A prompt blocked before any candidate: CONTENT_FILTER whatever the reason's value."""
    reason = string(feedback.get("blockReason"), "promptFeedback.blockReason")
    if not reason:
        return None
    return Stop(StopReason.CONTENT_FILTER, BLOCK_REASON_PREFIX + reason)


class GeminiDecoder:
    """One upstream stream's state: `decode(frame)` per SSE frame, `eof()` at the end."""

    __slots__ = ("_candidate", "_ended", "_finished", "_started")

    def __init__(self) -> None:
        self._started = False
        self._finished = False
        self._ended = False
        self._candidate = _Candidate()

    def decode(self, frame: SSEFrame) -> tuple[dict[str, Any] | None, list[Event]]:
        obj = orjson.loads(frame.data)
        if type(obj) is not dict:
            raise ShapeError("chunk is not a JSON object")
        return obj, self.read(obj)

    @property
    def finished(self) -> bool:
        return self._finished

    def read(self, obj: dict[str, Any]) -> list[Event]:
        """The events of one GenerateContentResponse (a frame's, or a whole body's)."""
        events: list[Event] = []
        if obj.get("error") is not None:
            self._ended = True
            return [stream_error(obj["error"])]
        if self._finished:  # after the finish: only usage may still change
            if has_usage(obj.get("usageMetadata")):
                events.append(usage_event(obj["usageMetadata"]))
            return events
        if not self._started:
            self._started = True
            response_id = string(obj.get("responseId"), "responseId") or ""
            self._candidate.response_id = response_id
            events.append(MessageStart(response_id, string(obj.get("modelVersion"), "model") or ""))
        self._read(obj, events)
        return events

    def eof(self) -> list[Event]:
        if self._ended:
            return []
        self._ended = True
        if self._finished:
            return [StreamEnd(terminator_seen=False)]
        return [StreamError("truncated", "upstream stream ended without a finishReason")]

    def _read(self, obj: dict[str, Any], events: list[Event]) -> None:
        candidates = obj.get("candidates")
        if candidates:
            if type(candidates) is not list:
                raise ShapeError("candidates is not an array")
            first = candidates[0]
            if type(first) is not dict:
                raise ShapeError("an item of candidates is not an object")
            self._candidate.parts(first, events)
            finish = string(first.get("finishReason"), "finishReason")
        else:
            finish = None
        usage = obj.get("usageMetadata")
        if has_usage(usage):
            events.append(usage_event(usage))
        if finish:
            self._candidate.close(events)
            self._finished = True
            events.append(stop_event(finish, self._candidate.calls > 0))
        elif not candidates:
            blocked = blocked_event(mapping(obj.get("promptFeedback"), "promptFeedback"))
            if blocked is not None:
                self._finished = True
                events.append(blocked)


def response_events(body: dict[str, Any]) -> list[Event]:
    """A whole GenerateContentResponse as the events a stream of it would give."""
    if "candidates" not in body and "promptFeedback" not in body:
        raise ShapeError("response has neither candidates nor promptFeedback")
    sequence(body.get("candidates"), "candidates")
    decoder = GeminiDecoder()
    events = decoder.read(body)
    if any(isinstance(event, StreamError) for event in events):
        return events
    if not decoder.finished:
        events.append(StreamError("truncated", "upstream response has no finishReason"))
        return events
    events.append(StreamEnd(terminator_seen=True))
    return events
