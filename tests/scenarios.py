"""Canonical upstream answers, rendered in either wire format, streamed and whole.

An `Answer` says what the model produced; `openai_wire` and `anthropic_wire` render it as the
bytes that provider would send, split at odd places like the real APIs do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from tests.upstream import Script, anthropic_sse, openai_sse


@dataclass
class Tool:
    id: str
    name: str
    arguments: str  # the raw JSON text, possibly cut


@dataclass
class Answer:
    text: str = ""
    tools: list[Tool] = field(default_factory=list)
    native_stop: str | None = None  # None: the wire's natural end
    stop_sequence: str | None = None
    stop_details: dict[str, Any] | None = None
    terminator: bool = True  # False: the stream just ends (no finish / message_stop)
    error_mid: bool = False  # an error event after the text
    usage: tuple[int, int] = (12, 34)
    # A thinking block before the text, with its signature (rendered on the Anthropic wire only).
    thinking: str = ""
    signature: str | None = None


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def openai_chunks(answer: Answer, model: str) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-up1", "object": "chat.completion.chunk", "created": 1, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice]}

    out = [chunk({"role": "assistant", "content": "" if answer.text else None})]
    out += [chunk({"content": piece}) for piece in _pieces(answer.text, 5)]
    for n, tool in enumerate(answer.tools):
        fn = {"name": tool.name, "arguments": ""}
        out.append(
            chunk({"tool_calls": [{"index": n, "id": tool.id, "type": "function", "function": fn}]})
        )
        for piece in _pieces(tool.arguments, 7):
            out.append(chunk({"tool_calls": [{"index": n, "function": {"arguments": piece}}]}))
    if answer.error_mid:
        return [
            *out,
            {"error": {"message": "The server had an error", "type": "server_error", "code": None}},
        ]
    if not answer.terminator:
        return out
    finish = answer.native_stop or ("tool_calls" if answer.tools else "stop")
    out.append(chunk({}, finish))
    prompt, completion = answer.usage
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    out.append({**base, "choices": [], "usage": usage})
    return out


def openai_body(answer: Answer, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None, "refusal": None}
    if answer.tools:
        message["tool_calls"] = [
            {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}
            for t in answer.tools
        ]
    prompt, completion = answer.usage
    return {
        "id": "chatcmpl-up1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": answer.native_stop or ("tool_calls" if answer.tools else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
        "system_fingerprint": "fp_unknown_field_kept",
    }


def anthropic_events(answer: Answer, model: str, cut_tool: bool = False) -> list[dict[str, Any]]:
    prompt, completion = answer.usage
    message = {
        "id": "msg_up1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": 1},
    }
    out: list[dict[str, Any]] = [{"type": "message_start", "message": message}, {"type": "ping"}]
    index = 0
    if answer.thinking or answer.signature:
        out += _thinking_events(answer, index)
        index += 1
    if answer.text:
        out.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
        )
        out += [
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": p},
            }
            for p in _pieces(answer.text, 5)
        ]
        out.append({"type": "content_block_stop", "index": index})
        index += 1
    if answer.error_mid:
        return [
            *out,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ]
    for n, tool in enumerate(answer.tools):
        block = {"type": "tool_use", "id": tool.id, "name": tool.name, "input": {}}
        out.append({"type": "content_block_start", "index": index, "content_block": block})
        for piece in ["", *_pieces(tool.arguments, 7)]:
            out.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                }
            )
        last = n == len(answer.tools) - 1
        if not (cut_tool and last):
            out.append({"type": "content_block_stop", "index": index})
        index += 1
    if not answer.terminator:
        return out
    stop = answer.native_stop or ("tool_use" if answer.tools else "end_turn")
    delta: dict[str, Any] = {"stop_reason": stop, "stop_sequence": answer.stop_sequence}
    if answer.stop_details:
        delta["stop_details"] = answer.stop_details
    out.append({"type": "message_delta", "delta": delta, "usage": {"output_tokens": completion}})
    out.append({"type": "message_stop"})
    return out


def _thinking_events(answer: Answer, index: int) -> list[dict[str, Any]]:
    block = {"type": "thinking", "thinking": "", "signature": ""}
    out: list[dict[str, Any]] = [
        {"type": "content_block_start", "index": index, "content_block": block}
    ]
    out += [
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "thinking_delta", "thinking": p},
        }
        for p in _pieces(answer.thinking, 6)
    ]
    if answer.signature:
        delta = {"type": "signature_delta", "signature": answer.signature}
        out.append({"type": "content_block_delta", "index": index, "delta": delta})
    out.append({"type": "content_block_stop", "index": index})
    return out


def anthropic_body(answer: Answer, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if answer.thinking or answer.signature:
        thinking = {"type": "thinking", "thinking": answer.thinking}
        content.append({**thinking, "signature": answer.signature or ""})
    if answer.text:
        content.append({"type": "text", "text": answer.text})
    for tool in answer.tools:
        try:
            arguments = orjson.loads(tool.arguments or "{}")
        except orjson.JSONDecodeError:
            arguments = {}
        content.append({"type": "tool_use", "id": tool.id, "name": tool.name, "input": arguments})
    prompt, completion = answer.usage
    body = {
        "id": "msg_up1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": answer.native_stop or ("tool_use" if answer.tools else "end_turn"),
        "stop_sequence": answer.stop_sequence,
        "usage": {"input_tokens": prompt, "output_tokens": completion},
        "unknown_future_field": {"kept": True},
    }
    if answer.stop_details:
        body["stop_details"] = answer.stop_details
    return body


def script_for(wire: str, answer: Answer, model: str, stream: bool, **knobs: Any) -> Script:
    """The Script an upstream of `wire` would play for this answer."""
    cut = answer.native_stop in ("max_tokens", "length") and bool(answer.tools)
    if wire == "openai":
        if stream:
            done = answer.terminator and not answer.error_mid
            return Script(chunks=openai_sse(openai_chunks(answer, model), done=done), **knobs)
        return Script(body=orjson.dumps(openai_body(answer, model)), **knobs)
    if stream:
        return Script(chunks=anthropic_sse(anthropic_events(answer, model, cut)), **knobs)
    return Script(body=orjson.dumps(anthropic_body(answer, model)), **knobs)
