"""What a client of each format saw, folded from the raw reply: `Observation`.

One small reducer per (client format, streamed or whole), reading only the fields that format's
SDK reads: the stop value in the format's own notation (OpenAI `finish_reason`, Anthropic
`stop_reason`, Responses `status` or `status:incomplete_details.reason`), the text, the refusal,
the tool calls, the usage, whether the stream's terminator came, and any error event. A
gateway's own `gateway` extension object or OpenAI `native_finish_reason` is noted as a bonus.

    seen = observe("openai", reply)
    seen.stop, seen.tools, seen.error_event
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.conformance.client import Reply
from gateway.conformance.sse import Event


@dataclass
class Tool:
    id: str = ""
    name: str = ""
    arguments: str = ""
    status: str | None = None  # Responses item status
    closed: bool = False  # Anthropic content_block_stop / Responses output_item.done came


@dataclass
class Observation:
    status: int | None
    end: str
    sse: bool = False
    json_ok: bool = True
    error_shape: bool = False  # the body is the client format's error JSON
    error_event: str | None = None  # which error event the stream carried
    stop: str | None = None
    terminator: bool = False  # [DONE], message_stop, or a Responses terminal event
    text: str = ""
    refusal: str = ""
    tools: list[Tool] = field(default_factory=list)
    usage: tuple[int | None, int | None] | None = None
    stop_sequence: str | None = None
    extension: bool = False  # a `gateway` object or `native_finish_reason` was present
    native: str | None = None  # the native value it carried
    unreadable: int = 0  # data lines (or a body) that were not JSON


def _json(data: bytes | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def _note_extension(seen: Observation, holder: Any) -> None:
    if not isinstance(holder, dict):
        return
    extension = holder.get("gateway")
    if isinstance(extension, dict):
        seen.extension = True
        native = extension.get("native_stop_reason")
        seen.native = str(native) if native is not None else seen.native
    native = holder.get("native_finish_reason")
    if native is not None:
        seen.extension, seen.native = True, str(native)


def _openai_error(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("error"), dict)


def _anthropic_error(obj: Any) -> bool:
    return (
        isinstance(obj, dict) and obj.get("type") == "error" and isinstance(obj.get("error"), dict)
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# --- OpenAI Chat -------------------------------------------------------------------------------


def _openai_message(seen: Observation, message: dict[str, Any], calls_key: str) -> None:
    content, refusal = message.get("content"), message.get("refusal")
    seen.text += content if isinstance(content, str) else ""
    seen.refusal += refusal if isinstance(refusal, str) else ""
    calls = message.get(calls_key)
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        index = _int(call.get("index"))
        index = len(seen.tools) if index is None else index
        while len(seen.tools) <= index:
            seen.tools.append(Tool())
        tool = seen.tools[index]
        tool.id = tool.id or str(call.get("id") or "")
        tool.name = tool.name or str(function.get("name") or "")
        arguments = function.get("arguments")
        tool.arguments += arguments if isinstance(arguments, str) else ""


def _openai_usage(seen: Observation, usage: Any) -> None:
    if isinstance(usage, dict):
        seen.usage = (_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))


def openai_stream(seen: Observation, events: list[Event]) -> None:
    for event in events:
        if event.data.strip() == "[DONE]":
            seen.terminator = True
            continue
        obj = _json(event.data)
        if not isinstance(obj, dict):
            seen.unreadable += 1
            continue
        if obj.get("error"):
            seen.error_event = "data: {error}"
        _note_extension(seen, obj)
        _openai_usage(seen, obj.get("usage"))
        choices = obj.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            _note_extension(seen, choice)
            delta = choice.get("delta")
            if isinstance(delta, dict):
                _openai_message(seen, delta, "tool_calls")
            if choice.get("finish_reason") is not None:
                seen.stop = str(choice["finish_reason"])


def openai_whole(seen: Observation, obj: Any) -> None:
    seen.error_shape = _openai_error(obj)
    if not isinstance(obj, dict):
        return
    _note_extension(seen, obj)
    _openai_usage(seen, obj.get("usage"))
    choices = obj.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict):
        return
    _note_extension(seen, choice)
    if isinstance(choice.get("message"), dict):
        _openai_message(seen, choice["message"], "tool_calls")
    if choice.get("finish_reason") is not None:
        seen.stop = str(choice["finish_reason"])


# --- Anthropic Messages ------------------------------------------------------------------------


def _anthropic_usage(seen: Observation, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    before = seen.usage or (None, None)
    given_in, given_out = _int(usage.get("input_tokens")), _int(usage.get("output_tokens"))
    seen.usage = (
        given_in if given_in is not None else before[0],
        given_out if given_out is not None else before[1],
    )


def _anthropic_block(seen: Observation, index: Any, block: Any, tools: dict[int, Tool]) -> None:
    if not isinstance(block, dict) or not isinstance(index, int):
        return
    if block.get("type") == "text":
        seen.text += str(block.get("text") or "")
    elif block.get("type") == "tool_use":
        tool = Tool(str(block.get("id") or ""), str(block.get("name") or ""))
        tools[index] = tool
        seen.tools.append(tool)


def anthropic_stream(seen: Observation, events: list[Event]) -> None:
    tools: dict[int, Tool] = {}
    for event in events:
        obj = _json(event.data)
        if not isinstance(obj, dict):
            seen.unreadable += 1
            continue
        kind = event.name or obj.get("type")
        if kind == "error" or obj.get("type") == "error":
            seen.error_event = "event: error"
        elif kind == "message_start" and isinstance(obj.get("message"), dict):
            _anthropic_usage(seen, obj["message"].get("usage"))
        elif kind == "content_block_start":
            _anthropic_block(seen, obj.get("index"), obj.get("content_block"), tools)
        elif kind == "content_block_delta" and isinstance(obj.get("delta"), dict):
            delta = obj["delta"]
            if delta.get("type") == "text_delta":
                seen.text += str(delta.get("text") or "")
            elif delta.get("type") == "input_json_delta" and obj.get("index") in tools:
                tools[obj["index"]].arguments += str(delta.get("partial_json") or "")
        elif kind == "content_block_stop" and obj.get("index") in tools:
            tools[obj["index"]].closed = True
        elif kind == "message_delta":
            _note_extension(seen, obj)
            delta = obj.get("delta")
            delta = delta if isinstance(delta, dict) else {}
            if delta.get("stop_reason") is not None:
                seen.stop = str(delta["stop_reason"])
            seen.stop_sequence = delta.get("stop_sequence") or seen.stop_sequence
            _anthropic_usage(seen, obj.get("usage"))
        elif kind == "message_stop":
            seen.terminator = True


def anthropic_whole(seen: Observation, obj: Any) -> None:
    seen.error_shape = _anthropic_error(obj)
    if not isinstance(obj, dict) or obj.get("type") != "message":
        return
    _note_extension(seen, obj)
    content = obj.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text":
            seen.text += str(block.get("text") or "")
        elif isinstance(block, dict) and block.get("type") == "tool_use":
            arguments = orjson.dumps(block.get("input")).decode()
            seen.tools.append(Tool(str(block.get("id")), str(block.get("name")), arguments))
            seen.tools[-1].closed = True
    if obj.get("stop_reason") is not None:
        seen.stop = str(obj["stop_reason"])
    seen.stop_sequence = obj.get("stop_sequence")
    _anthropic_usage(seen, obj.get("usage"))


# --- OpenAI Responses --------------------------------------------------------------------------


def _responses_outcome(seen: Observation, response: dict[str, Any], text: bool) -> None:
    """The status, usage, extension and items of a whole Response object."""
    status = str(response.get("status"))
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    seen.stop = f"{status}:{reason}" if reason else status
    _note_extension(seen, response)
    usage = response.get("usage")
    if isinstance(usage, dict):
        seen.usage = (_int(usage.get("input_tokens")), _int(usage.get("output_tokens")))
    output = response.get("output")
    seen.tools = []
    for item in output if isinstance(output, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            tool = Tool(str(item.get("call_id") or ""), str(item.get("name") or ""))
            tool.arguments, tool.status = str(item.get("arguments") or ""), item.get("status")
            seen.tools.append(tool)
        elif item.get("type") == "message" and text:
            parts = item.get("content")
            for part in parts if isinstance(parts, list) else []:
                if isinstance(part, dict) and part.get("type") == "output_text":
                    seen.text += str(part.get("text") or "")
                elif isinstance(part, dict) and part.get("type") == "refusal":
                    seen.refusal += str(part.get("refusal") or "")


def responses_stream(seen: Observation, events: list[Event]) -> None:
    texts: list[str] = []
    refusals: list[str] = []
    for event in events:
        obj = _json(event.data)
        if not isinstance(obj, dict):
            seen.unreadable += 1
            continue
        kind = obj.get("type") or event.name
        if kind == "response.output_text.delta":
            texts.append(str(obj.get("delta") or ""))
        elif kind == "response.refusal.delta":
            refusals.append(str(obj.get("delta") or ""))
        elif kind == "response.output_item.added" and isinstance(obj.get("item"), dict):
            item = obj["item"]
            if item.get("type") == "function_call":
                seen.tools.append(Tool(str(item.get("call_id") or ""), str(item.get("name"))))
        elif kind == "response.function_call_arguments.delta" and seen.tools:
            seen.tools[-1].arguments += str(obj.get("delta") or "")
        elif kind == "error":
            seen.error_event = "error"
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            seen.terminator = True
            if kind == "response.failed":
                seen.error_event = seen.error_event or "response.failed"
            if isinstance(obj.get("response"), dict):
                _responses_outcome(seen, obj["response"], text=not texts and not refusals)
    seen.text += "".join(texts)
    seen.refusal += "".join(refusals)


def responses_whole(seen: Observation, obj: Any) -> None:
    seen.error_shape = _openai_error(obj)
    if isinstance(obj, dict) and obj.get("object") == "response":
        _responses_outcome(seen, obj, text=True)


STREAMS: dict[str, Callable[[Observation, list[Event]], None]] = {
    "openai": openai_stream,
    "anthropic": anthropic_stream,
    "responses": responses_stream,
}
WHOLES: dict[str, Callable[[Observation, Any], None]] = {
    "openai": openai_whole,
    "anthropic": anthropic_whole,
    "responses": responses_whole,
}


def observe(client: str, reply: Reply) -> Observation:
    seen = Observation(reply.status, reply.end)
    seen.sse = reply.content_type.split(";")[0].strip().lower() == "text/event-stream"
    if seen.sse:
        STREAMS[client](seen, reply.events)
        return seen
    obj = _json(reply.body) if reply.body else None
    seen.json_ok = obj is not None
    if not seen.json_ok and reply.body:
        seen.unreadable = 1
    WHOLES[client](seen, obj)
    return seen
