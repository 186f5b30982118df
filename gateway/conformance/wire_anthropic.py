"""The Anthropic Messages wire as the scripted upstream speaks it (PROTOCOLS.md §c).

A stream is `event:` + `data:` pairs: `message_start` (input usage), a `ping`, one block per
text or tool use, `message_delta` (the stop and the output usage), `message_stop`. A tool call
cut at max tokens has no `content_block_stop`, as in the recorded
`anthropic_sdk__incomplete_partial_json_response`.
"""

from __future__ import annotations

from typing import Any, Final

from gateway.conformance.cases import (
    CUT_TOOL_PIECES,
    ERROR_STATUS,
    TOOL_ARGS,
    TOOL_NAME,
    TOOL_PIECES,
    USAGE,
    Script,
)
from gateway.conformance.frames import Frames, frame

TOOL_ID: Final = "toolu_conf0001"
ID: Final = "msg_conf0001"
OVERLOADED: Final = {
    "type": "error",
    "error": {"type": "overloaded_error", "message": "Overloaded"},
}


def _event(obj: dict[str, Any], multiline: bool = False) -> bytes:
    return frame(obj, event=str(obj["type"]), multiline=multiline)


def _message(model: str) -> dict[str, Any]:
    return {
        "id": ID,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
    }


def _text_delta(index: int, piece: str) -> dict[str, Any]:
    delta = {"type": "text_delta", "text": piece}
    return {"type": "content_block_delta", "index": index, "delta": delta}


def stream(script: Script, model: str, request: dict[str, Any]) -> Frames:
    start = _message(model)
    if script.usage:
        start["usage"] = {"input_tokens": USAGE[0], "output_tokens": 1}
    head = [_event({"type": "message_start", "message": start}), _event({"type": "ping"})]
    content: list[bytes] = []
    index = 0
    if script.text:
        text = {"type": "text", "text": ""}
        content.append(_event({"type": "content_block_start", "index": 0, "content_block": text}))
        content += [_event(_text_delta(0, piece)) for piece in script.text]
        content.append(_event({"type": "content_block_stop", "index": 0}))
        index = 1
    mid = min(3, len(content))
    if script.tool != "none":
        block = {"type": "tool_use", "id": TOOL_ID, "name": TOOL_NAME, "input": {}}
        opening = {"type": "content_block_start", "index": index, "content_block": block}
        content.append(_event(opening))
        pieces = ("", *(TOOL_PIECES if script.tool == "whole" else CUT_TOOL_PIECES))
        for piece in pieces:
            delta = {"type": "input_json_delta", "partial_json": piece}
            content.append(_event({"type": "content_block_delta", "index": index, "delta": delta}))
        if script.tool == "whole":
            content.append(_event({"type": "content_block_stop", "index": index}))
    final: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": script.native, "stop_sequence": script.stop_sequence},
    }
    if script.usage:
        final["usage"] = {"output_tokens": USAGE[1]}
    stop = [_event(final), _event({"type": "message_stop"})]
    multiline = (
        _event(_text_delta(0, script.text[1]), multiline=True)
        if len(script.text) > 1
        else content[mid - 1]
    )
    return Frames(head, content, mid, stop, [_event(OVERLOADED)], multiline)


def whole(script: Script, model: str) -> dict[str, Any]:
    body = _message(model)
    content: list[dict[str, Any]] = []
    if script.text:
        content.append({"type": "text", "text": "".join(script.text)})
    if script.tool == "whole":
        content.append({"type": "tool_use", "id": TOOL_ID, "name": TOOL_NAME, "input": TOOL_ARGS})
    elif script.tool == "cut":  # what of the cut arguments was whole
        partial = {"path": TOOL_ARGS["path"]}
        content.append({"type": "tool_use", "id": TOOL_ID, "name": TOOL_NAME, "input": partial})
    body |= {"content": content, "stop_reason": script.native}
    body["stop_sequence"] = script.stop_sequence
    if script.usage:
        body["usage"] = {"input_tokens": USAGE[0], "output_tokens": USAGE[1]}
    return body


def error_body() -> tuple[int, dict[str, Any]]:
    return ERROR_STATUS["anthropic"], OVERLOADED


def not_found(model: str) -> dict[str, Any]:
    error = {"type": "not_found_error", "message": f"no conformance case for model {model!r}"}
    return {"type": "error", "error": error}
