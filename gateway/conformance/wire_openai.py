"""The OpenAI Chat Completions wire as the scripted upstream speaks it (PROTOCOLS.md §a).

A stream is `data: <chunk>` events without `event:` lines, a last content chunk with the
`finish_reason`, the usage chunk (`choices: []`) only when the request asked for it with
`stream_options.include_usage`, as OpenAI does, and `data: [DONE]`.
"""

from __future__ import annotations

from typing import Any, Final

from gateway.conformance.cases import (
    CUT_TOOL_PIECES,
    ERROR_STATUS,
    TOOL_NAME,
    TOOL_PIECES,
    USAGE,
    Script,
)
from gateway.conformance.frames import Frames, frame

CALL_ID: Final = "call_conf0001"
ID: Final = "chatcmpl-conf0001"
CREATED: Final = 1_760_000_000


def _usage(script: Script) -> dict[str, int] | None:
    if not script.usage:
        return None
    return {"prompt_tokens": USAGE[0], "completion_tokens": USAGE[1], "total_tokens": sum(USAGE)}


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {
        "id": ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": None,
        "choices": [choice],
    }


def _tool_pieces(script: Script) -> tuple[str, ...]:
    return TOOL_PIECES if script.tool == "whole" else CUT_TOOL_PIECES


def stream(script: Script, model: str, request: dict[str, Any]) -> Frames:
    first: dict[str, Any] = {"role": "assistant", "content": "" if script.text else None}
    content = [frame(_chunk(model, first))]
    texts = [frame(_chunk(model, {"content": piece})) for piece in script.text]
    texts += [frame(_chunk(model, {"refusal": piece})) for piece in script.refusal]
    content += texts
    mid = min(3, len(content))
    if script.tool != "none":
        function = {"name": TOOL_NAME, "arguments": ""}
        opening = {"index": 0, "id": CALL_ID, "type": "function", "function": function}
        content.append(frame(_chunk(model, {"tool_calls": [opening]})))
        for piece in _tool_pieces(script):
            delta = {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
            content.append(frame(_chunk(model, delta)))
    stop = [frame(_chunk(model, {}, script.native))]
    options = request.get("stream_options")
    asked = isinstance(options, dict) and options.get("include_usage") is True
    usage = _usage(script)
    if asked and usage is not None:
        last = _chunk(model, {})
        last["choices"], last["usage"] = [], usage
        stop.append(frame(last))
    stop.append(b"data: [DONE]\n\n")
    return Frames(
        head=[],
        content=content,
        mid=mid,
        stop=stop,
        error=[frame({"error": error_body()[1]["error"]})],
        multiline=frame(_chunk(model, {"content": script.text[1]}), multiline=True)
        if len(script.text) > 1
        else content[mid - 1],
    )


def whole(script: Script, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(script.text) or None,
        "refusal": "".join(script.refusal) or None,
    }
    if script.tool != "none":
        arguments = "".join(_tool_pieces(script))
        call = {"id": CALL_ID, "type": "function"}
        message["tool_calls"] = [call | {"function": {"name": TOOL_NAME, "arguments": arguments}}]
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": script.native}
    body: dict[str, Any] = {
        "id": ID,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [choice],
    }
    usage = _usage(script)
    if usage is not None:
        body["usage"] = usage
    return body


def error_body() -> tuple[int, dict[str, Any]]:
    error = {"message": "The upstream is overloaded (conformance)", "type": "server_error"}
    return ERROR_STATUS["openai"], {"error": {**error, "param": None, "code": "overloaded"}}


def not_found(model: str) -> dict[str, Any]:
    message = f"no conformance case for model {model!r}"
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}
