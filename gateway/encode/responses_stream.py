"""Responses client <- events: the full Responses streaming grammar (RESPONSES.md §4, §4.1).

    created in_progress (reasoning | message | call)* [error] terminal

Every event carries `sequence_number` 0, 1, 2, … and one output item is open at a time, with
fresh `output_index`es in order and stable ids. Reasoning and text stream live (reasoning as a
summary, text as `output_text` then a `refusal` part when the model refuses). Tool calls are
held until the upstream stream is over (the aggregator has them); so is anything after the first
call, so item order is kept. At the end the open item is closed (`completed`, or `incomplete`
when the response is not), the calls are emitted whole when they are delivered, and one terminal
event carries the full response with its `gateway` object: `response.completed`,
`response.incomplete`, or, for a stream that broke, an `error` event then `response.failed`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import orjson

from gateway.encode import Parsed, ReplyTerms
from gateway.encode.responses_body import (
    Item,
    call_item,
    call_status,
    echo_members,
    item_id,
    reasoning_item,
    refusal_text,
    response_id,
    response_object,
    status_of,
)
from gateway.encode.responses_open_items import OpenMessage, OpenReasoning
from gateway.encode.responses_templates import (
    ITEM_DONE,
    LIFECYCLE,
    MESSAGE_ADDED,
    MESSAGE_ITEM,
    STARTED,
    STARTED_EVENTS,
    TERMINAL_EVENTS,
    TEXT_DELTA,
    TEXT_DONE,
    TEXT_PART,
    TEXT_PART_ADDED,
)
from gateway.events import (
    Event,
    MessageStart,
    RefusalDelta,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
)
from gateway.formats.sse import SSEFrame, encode
from gateway.normalize.aggregate import AggregatedResponse
from gateway.normalize.truncation import Verdict

# Codex stops retrying on these codes (and retries anything else); the SDK reads them as-is.
STREAM_ERROR_CODES = {"rate_limit_error": "rate_limit_exceeded"}


class ResponsesWriter:
    __slots__ = (
        "_created_at",
        "_echo",
        "_held",
        "_message",
        "_model",
        "_output",
        "_reasoning",
        "_seq",
        "_started",
        "_streamed",
        "_terms",
    )

    def __init__(self, terms: ReplyTerms) -> None:
        self._terms = terms
        self._seq = 0
        self._created_at = int(time.time())
        self._echo = echo_members(terms)  # in each of the stream's three response objects
        self._model = terms.model
        self._started = False
        # The closed items, in output order, for the terminal response: a message as its JSON
        # (written once, for its output_item.done), the others as they are.
        self._output: list[Item | orjson.Fragment] = []
        self._message: OpenMessage | None = None
        self._reasoning: OpenReasoning | None = None
        self._held = False  # a tool call arrived: what follows is held until the end
        self._streamed = 0  # characters of text sent live

    def resume(self) -> ResponsesWriter:
        return self

    # --- framing ------------------------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = orjson.dumps({"type": kind, "sequence_number": self._seq, **fields})
        self._seq += 1
        return encode(data, kind)

    def _start(self) -> bytes:
        """response.created and response.in_progress: the same response object in both, from a
        byte template (the bytes `_event` would write for each of `response_object`'s)."""
        if self._started:
            return b""
        self._started = True
        echo = self._echo
        response = STARTED % (
            orjson.dumps(response_id(self._terms)),
            self._created_at,
            orjson.dumps(self._model),
            b"," + echo if echo else b"",
        )
        seq = self._seq
        self._seq = seq + 2
        return STARTED_EVENTS % (seq, response, seq + 1, response)

    def _next_index(self) -> int:
        return len(self._output) + (self._message is not None) + (self._reasoning is not None)

    # --- live events --------------------------------------------------------------------------

    def feed(self, frame: SSEFrame | None, obj: Parsed, events: Sequence[Event]) -> bytes:
        if not events:
            return b""
        if len(events) == 1 and events[0].__class__ is TextDelta:
            # The hot path: one more delta of the open text part (what `_text` does for it).
            text = events[0].text
            message = self._message
            if text and not self._held and message is not None and message.kind == "output_text":
                message.text.append(text)
                self._streamed += len(text)
                return self._text_delta(message, text)
        out: list[bytes] = []
        for event in events:
            match event:
                case MessageStart(model=model):
                    self._model = model or self._model
                    out.append(self._start())
                case TextDelta(text=text) if text and not self._held:
                    out.append(self._text(text, "output_text"))
                    self._streamed += len(text)
                case RefusalDelta(text=text) if text and not self._held:
                    out.append(self._text(text, "refusal"))
                case ThinkingDelta() if not self._held:
                    out.append(self._thinking(event))
                case ToolCallStart():
                    self._held = True
        return b"".join(out)

    def _thinking(self, event: ThinkingDelta) -> bytes:
        out = [self._start()]
        if self._reasoning is None:
            out.append(self._close_message("completed"))
            index = self._next_index()
            self._reasoning = OpenReasoning(item_id("rs", self._terms, index), index)
            rs = self._reasoning
            added = {"type": "reasoning", "id": rs.id, "summary": []}
            out.append(self._event("response.output_item.added", output_index=index, item=added))
            out.append(
                self._event(
                    "response.reasoning_summary_part.added",
                    item_id=rs.id,
                    output_index=index,
                    summary_index=0,
                    part={"type": "summary_text", "text": ""},
                )
            )
        rs = self._reasoning
        if event.signature:
            rs.signature = event.signature
        if event.text:
            rs.text.append(event.text)
            out.append(
                self._event(
                    "response.reasoning_summary_text.delta",
                    item_id=rs.id,
                    output_index=rs.index,
                    summary_index=0,
                    delta=event.text,
                )
            )
        return b"".join(out)

    def _close_reasoning(self) -> bytes:
        rs = self._reasoning
        if rs is None:
            return b""
        self._reasoning = None
        text = "".join(rs.text)
        where = {"item_id": rs.id, "output_index": rs.index, "summary_index": 0}
        item = reasoning_item(self._terms, rs.index, text, rs.signature)
        item["id"] = rs.id
        self._output.append(item)
        return b"".join(
            (
                self._event("response.reasoning_summary_text.done", **where, text=text),
                self._event(
                    "response.reasoning_summary_part.done",
                    **where,
                    part={"type": "summary_text", "text": text},
                ),
                self._event("response.output_item.done", output_index=rs.index, item=item),
            )
        )

    def _text(self, text: str, kind: str) -> bytes:
        message = self._message
        if message is not None and message.kind == kind == "output_text":
            message.text.append(text)  # the hot path: one more delta of the open text part
            return self._text_delta(message, text)
        out = [self._start(), self._close_reasoning()]
        message = self._message
        if message is None:
            index = self._next_index()
            message = self._message = OpenMessage(item_id("msg", self._terms, index), index)
            seq = self._seq
            self._seq = seq + 1
            out.append(MESSAGE_ADDED % (seq, index, orjson.dumps(message.id)))
        if message.kind != kind:
            out.append(self._close_part(message))
            out.append(self._open_part(message, kind))
        message.text.append(text)
        where = {
            "item_id": message.id,
            "output_index": message.index,
            "content_index": len(message.parts),
        }
        if kind == "output_text":
            out.append(self._text_delta(message, text))
        else:
            out.append(self._event("response.refusal.delta", **where, delta=text))
        return b"".join(out)

    def _text_delta(self, message: OpenMessage, text: str) -> bytes:
        """`response.output_text.delta` from a byte template: its fields but the sequence
        number and the delta are fixed for the part (the same bytes `_event` would write)."""
        seq = self._seq
        self._seq = seq + 1
        return TEXT_DELTA % (seq, message.delta_tail, orjson.dumps(text))

    def _open_part(self, message: OpenMessage, kind: str) -> bytes:
        message.kind = kind
        message.text = []
        where = orjson.dumps(
            {
                "item_id": message.id,
                "output_index": message.index,
                "content_index": len(message.parts),
            }
        )[1:-1]
        message.where = where
        message.delta_tail = b"," + where + b',"delta":'
        if kind == "output_text":
            seq = self._seq
            self._seq = seq + 1
            return TEXT_PART_ADDED % (seq, where)
        return self._event(
            "response.content_part.added",
            item_id=message.id,
            output_index=message.index,
            content_index=len(message.parts),
            part={"type": "refusal", "refusal": ""},
        )

    def _close_part(self, message: OpenMessage) -> bytes:
        if message.kind is None:
            return b""
        text = "".join(message.text)
        if message.kind == "output_text":
            # The bytes `_event` would write for the two events, the text encoded once.
            encoded = orjson.dumps(text)
            part_json = TEXT_PART % encoded
            seq = self._seq
            self._seq = seq + 2
            where = message.where
            message.parts.append("output_text")
            message.encoded.append(part_json)
            message.kind = None
            return TEXT_DONE % (seq, where, encoded, seq + 1, where, part_json)
        fields = {
            "item_id": message.id,
            "output_index": message.index,
            "content_index": len(message.parts),
        }
        part = {"type": "refusal", "refusal": text}
        done = self._event("response.refusal.done", **fields, refusal=text)
        message.parts.append("refusal")
        message.encoded.append(orjson.dumps(part))
        message.kind = None
        return done + self._event("response.content_part.done", **fields, part=part)

    def _close_message(self, status: str) -> bytes:
        message = self._message
        if message is None:
            return b""
        self._message = None
        out = self._close_part(message)
        item = MESSAGE_ITEM % (
            orjson.dumps(message.id),
            orjson.dumps(status),
            b",".join(message.encoded),
        )
        self._output.append(orjson.Fragment(item))
        seq = self._seq
        self._seq = seq + 1
        return out + ITEM_DONE % (seq, message.index, item)

    # --- the end ------------------------------------------------------------------------------

    def _calls(self, response: AggregatedResponse, verdict: Verdict) -> bytes:
        out: list[bytes] = []
        status = call_status(verdict)
        for call in response.tool_calls:
            index = self._next_index()
            item = call_item(self._terms, index, call, status)
            custom = item["type"] == "custom_tool_call"
            opened = {**item, "status": "in_progress", ("input" if custom else "arguments"): ""}
            out.append(self._event("response.output_item.added", output_index=index, item=opened))
            where = {"item_id": item["id"], "output_index": index}
            if custom:
                out.append(
                    self._event(
                        "response.custom_tool_call_input.delta", **where, delta=item["input"]
                    )
                )
                out.append(
                    self._event(
                        "response.custom_tool_call_input.done", **where, input=item["input"]
                    )
                )
            else:
                arguments = item["arguments"]
                out.append(
                    self._event("response.function_call_arguments.delta", **where, delta=arguments)
                )
                out.append(
                    self._event(
                        "response.function_call_arguments.done",
                        **where,
                        arguments=arguments,
                        name=item["name"],
                    )
                )
            out.append(self._event("response.output_item.done", output_index=index, item=item))
            self._output.append(item)
        return b"".join(out)

    def _rest(self, response: AggregatedResponse, verdict: Verdict, item_status: str) -> bytes:
        """What arrived after the first tool call (held), and a refusal the stop explained."""
        out = []
        held = response.text[self._streamed :]
        if held:
            out.append(self._text(held, "output_text"))
        refusal = refusal_text(response, verdict)
        message = self._message
        streamed_refusal = "refusal" in message.parts if message else False
        if refusal and not response.refusal and not streamed_refusal:
            out.append(self._text(refusal, "refusal"))
        out.append(self._close_message(item_status))
        return b"".join(out)

    def end(self, verdict: Verdict, response: AggregatedResponse) -> bytes:
        status, reason = status_of(verdict)
        item_status = "completed" if status == "completed" else "incomplete"
        out = [self._start(), self._close_reasoning()]
        if verdict.delivered_tool_calls:
            out.append(self._close_message(item_status))
            out.append(self._calls(response, verdict))
        out.append(self._rest(response, verdict, item_status))
        error = None
        if status == "failed":
            error = {"code": "server_error", "message": "The upstream stopped the generation"}
        out.append(self._terminal(status, response, verdict, reason, error))
        return b"".join(out)

    def fail(self, error: StreamError, verdict: Verdict, response: AggregatedResponse) -> bytes:
        out = [self._start(), self._close_reasoning(), self._close_message("incomplete")]
        if verdict.delivered_tool_calls:
            out.append(self._calls(response, verdict))
        code = STREAM_ERROR_CODES.get(error.error_type or "", "server_error")
        kind = error.error_type or "server_error"
        fields = {"code": code, "message": error.message, "param": None}
        out.append(self._event("error", **fields, error={"type": kind, **fields}))
        failure = {"code": code, "message": error.message}
        out.append(self._terminal("failed", response, verdict, None, failure))
        return b"".join(out)

    def _terminal(
        self,
        status: str,
        response: AggregatedResponse,
        verdict: Verdict,
        reason: str | None,
        error: dict[str, Any] | None,
    ) -> bytes:
        body = response_object(
            self._terms,
            status,
            self._output,
            response.usage,
            response.model or self._model,
            verdict,
            created_at=self._created_at,
            incomplete_reason=reason,
            error=error,
            echo=self._echo,
        )
        name = TERMINAL_EVENTS[status]
        seq = self._seq
        self._seq = seq + 1
        return LIFECYCLE % (name, name, seq, orjson.dumps(body))
