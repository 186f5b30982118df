"""OpenAI client <- OpenAI-wire upstream, streaming: a passthrough, with these exceptions.

Chunks without tool calls or a finish_reason go out as the upstream sent them. Tool-call chunks
are held per choice until that choice's finish_reason, then re-emitted with indexes made
contiguous from 0 and id/name/type only on a call's first delta (the openai SDK's accumulator
needs both), or withheld when the choice was cut; a legacy `function_call` delta and finish keep
their legacy shape. The usage the gateway asked for and the client did not is stripped (the
usage-only chunk, each chunk's closing `"usage":null`). The finish chunk gains
`native_finish_reason` and the `gateway` object; its finish_reason is the native value's own (a
refusal keeps `stop`), while the `gateway` object says what the decoder made of it. A broken
stream ends with an error chunk: choice 0's ending is the exchange's to judge, other choices' the
relay's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import orjson

from gateway.encode import Parsed, ReplyTerms
from gateway.encode.openai_errors import stream_frame
from gateway.encode.openai_stream import OpenAIChatWriter
from gateway.events import Event, Stop, StopReason, StreamError
from gateway.formats.openai_chat import ToolSlots
from gateway.formats.sse import SSEFrame, encode
from gateway.formats.stop_reasons import from_openai, relayed, to_openai
from gateway.normalize.aggregate import AggregatedResponse
from gateway.normalize.truncation import Verdict

DONE_FRAME = b"data: [DONE]\n\n"
USAGE_NULL_LAST = b',"usage":null}'
USAGE_NULL_CUT = len(USAGE_NULL_LAST)
BROKEN = frozenset({StopReason.ERROR, StopReason.ABORTED})


class ChoiceState:
    __slots__ = ("held", "tools")

    def __init__(self) -> None:
        self.held: list[dict[str, Any]] = []  # single-choice chunks holding tool deltas
        self.tools = ToolSlots()


class OpenAIRelay:
    __slots__ = ("_choices", "_first", "_held_end", "_over", "_strip_usage", "_terms")

    def __init__(self, terms: ReplyTerms) -> None:
        self._terms = terms
        # The gateway asked for the stream's usage (gateway.translate.stream_usage), the client
        # did not: its usage-only chunk and each chunk's `"usage":null` are not the client's.
        self._strip_usage = not terms.include_usage
        self._choices: dict[int, ChoiceState] = {}
        self._over = False  # another choice broke: nothing more goes out
        self._first: dict[str, Any] | None = None  # the first chunk: its id, model, created
        # A finish at max tokens the exchange may continue, and what came after it: sent by
        # end(), or dropped by resume() when a continuation follows.
        self._held_end: list[bytes] = []

    def feed(self, frame: SSEFrame | None, obj: Parsed, events: Sequence[Event]) -> bytes:
        if self._over or obj is None:
            return b""  # [DONE] goes out in end()
        if self._first is None:
            self._first = obj
        choices = obj.get("choices")
        if self._strip_usage and not choices and obj.get("usage"):
            return b""  # the usage chunk only the gateway asked for
        if self._held_end:
            self._held_end.append(self._as_sent(frame))
            return b""
        if not choices or not _needs_work(choices):
            return self._as_sent(frame)
        stop = next((e for e in events if isinstance(e, Stop)), None)
        return b"".join(self._choice(obj, choice, stop) for choice in choices)

    def _as_sent(self, frame: SSEFrame | None) -> bytes:
        if frame is None:
            return b""
        data = frame.data
        if self._strip_usage and data.endswith(USAGE_NULL_LAST):
            # Where OpenAI puts it: the last member. A string cannot end so: its quote would
            # be escaped, and the object closes after it.
            return encode(data[:-USAGE_NULL_CUT] + b"}")
        return encode(data)

    def _choice(self, obj: dict[str, Any], choice: dict[str, Any], stop: Stop | None) -> bytes:
        index = choice.get("index", 0)
        state = self._choices.get(index)
        if state is None:
            state = self._choices[index] = ChoiceState()
        delta = choice.get("delta") or {}
        chunk = {**obj, "choices": [choice]}
        if self._strip_usage and "usage" in chunk and chunk["usage"] is None:
            del chunk["usage"]
        if delta.get("tool_calls") or delta.get("function_call"):
            choice["delta"] = _normalize_tool_deltas(delta, state)
            state.held.append(chunk)
        finish = choice.get("finish_reason")
        if finish is None:
            return b"" if state.held and state.held[-1] is chunk else encode(orjson.dumps(chunk))
        if state.held and state.held[-1] is chunk:
            state.held.pop()
        return self._finish(chunk, choice, finish, state, stop if index == 0 else None)

    def _finish(
        self,
        chunk: dict[str, Any],
        choice: dict[str, Any],
        finish: str,
        state: ChoiceState,
        stop: Stop | None,
    ) -> bytes:
        reason = stop.reason if stop is not None else from_openai(finish)
        # A refusal keeps its native `stop`; else the decoder's reading (a provider's own too).
        shown = from_openai(finish) if reason is StopReason.REFUSAL else reason
        verdict = self._terms.judge(reason, finish, state.tools.calls)
        ext = self._terms.extension(verdict)
        released = self._release(state, verdict.deliver_tool_calls)
        if reason in BROKEN:
            self._over = True
            error = StreamError(
                "aborted" if reason is StopReason.ABORTED else "upstream_error",
                f"upstream stopped the generation (finish_reason: {finish})",
            )
            return released + stream_frame(error, ext)
        if not verdict.deliver_tool_calls:
            _strip_tools(choice)
        held = self._holds(reason, index=choice.get("index", 0), state=state)
        if held:
            live = _without_finish(chunk, choice)  # its text goes now, its finish may not
            choice["delta"] = {}
        shown_value = to_openai(shown, verdict.delivered_tool_calls)
        choice["finish_reason"] = relayed(reason, finish, shown_value)
        choice["native_finish_reason"] = finish
        chunk["gateway"] = ext
        if held:
            self._held_end.append(encode(orjson.dumps(chunk)))
            return released + live
        return released + encode(orjson.dumps(chunk))

    def _holds(self, reason: StopReason, index: int, state: ChoiceState) -> bool:
        """Whether a finish at max tokens waits: the exchange may continue the answer."""
        splices = self._terms.splices
        if splices is None or reason is not StopReason.LENGTH or not splices.continues_length():
            return False
        return index == 0 and len(self._choices) == 1 and not state.tools.calls

    def _release(self, state: ChoiceState, deliver: bool) -> bytes:
        held, state.held = state.held, []
        out: list[bytes] = []
        for chunk in held:
            if not deliver and not _strip_tools(chunk["choices"][0]):
                continue
            out.append(encode(orjson.dumps(chunk)))
        return b"".join(out)

    def end(self, verdict: Verdict, response: AggregatedResponse) -> bytes:
        return b"" if self._over else b"".join(self._held_end) + DONE_FRAME

    def fail(self, error: StreamError, verdict: Verdict, response: AggregatedResponse) -> bytes:
        if self._over:
            return b""
        self._over = True
        deliver = verdict.deliver_tool_calls
        released = b"".join(self._release(state, deliver) for state in self._choices.values())
        held = b"".join(self._held_end)
        return held + released + stream_frame(error, self._terms.extension(verdict))

    def resume(self) -> OpenAIChatWriter:
        """Events writer for the continuation, with this stream's id, model and creation time
        (no tool call was streamed: a cut tool call is never continued)."""
        first = self._first or {}
        created = first.get("created")
        return OpenAIChatWriter.continuing(
            self._terms,
            str(first.get("id") or "chatcmpl-" + self._terms.request_id),
            str(first.get("model") or self._terms.model),
            created if isinstance(created, int) else int(time.time()),
        )


def _needs_work(choices: list[dict[str, Any]]) -> bool:
    """Whether a chunk's choices hold a finish_reason or tool calls (else it goes out as is)."""
    for choice in choices:
        if choice.get("finish_reason") is not None:
            return True
        delta = choice.get("delta")
        if delta and (delta.get("tool_calls") or delta.get("function_call")):
            return True
    return False


def _normalize_tool_deltas(delta: dict[str, Any], state: ChoiceState) -> dict[str, Any]:
    """The delta's tool calls with contiguous indexes and identity on each call's first delta.
    A legacy `function_call` delta goes out as sent (a client that asked with `functions` reads
    `delta.function_call`, never a `tool_calls` it did not ask for); it counts as a call for the
    verdict all the same."""
    delta = dict(delta)
    legacy = delta.get("function_call")
    if legacy:
        state.tools.assign(0, {"index": "function_call", "function": legacy})
    calls = delta.get("tool_calls")
    if not calls:
        return delta
    out = []
    for position, call in enumerate(calls):
        ordinal, new = state.tools.assign(position, call)
        arguments = (call.get("function") or {}).get("arguments") or ""
        if not isinstance(arguments, str):
            arguments = orjson.dumps(arguments).decode()
        if new:
            call_id, name = state.tools.calls[ordinal]
            fn = {"name": name, "arguments": arguments}
            out.append({"index": ordinal, "id": call_id, "type": "function", "function": fn})
        else:
            out.append({"index": ordinal, "function": {"arguments": arguments}})
    delta["tool_calls"] = out
    return delta


def _without_finish(chunk: dict[str, Any], choice: dict[str, Any]) -> bytes:
    """The chunk of a held finish, as it goes out now: its delta, if it has any, unfinished."""
    delta = choice.get("delta") or {}
    if not any(value for key, value in delta.items() if key != "role"):
        return b""
    live = {**choice, "finish_reason": None}
    return encode(orjson.dumps({**chunk, "choices": [live]}))


def _strip_tools(choice: dict[str, Any]) -> bool:
    """Drop tool calls from a choice's delta; True when something else is left to send."""
    delta = choice.get("delta")
    if not delta:
        return choice.get("finish_reason") is not None
    delta = {k: v for k, v in delta.items() if k not in ("tool_calls", "function_call")}
    choice["delta"] = delta
    return any(v for k, v in delta.items() if k != "role")
