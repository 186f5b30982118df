"""The OpenAI Responses wire as the scripted upstream speaks it (PROTOCOLS.md §b, RESPONSES.md §4).

A stream is `event:` + `data:` pairs with rising `sequence_number`s: `response.created`,
`response.in_progress`, a message item (or a refusal part), a function_call item, and one
terminal event: `response.completed`, or `response.incomplete` with `incomplete_details.reason`.
A function call cut at max tokens has no `function_call_arguments.done` nor `output_item.done`.
The error event has the nested `error` object the recorded wire has, then `response.failed`.
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

ID: Final = "resp_conf0001"
MESSAGE_ID: Final = "msg_conf0001"
CALL_ID: Final = "call_conf0001"
ITEM_ID: Final = "fc_conf0001"
CREATED: Final = 1_760_000_000
ERROR: Final = {"code": "server_error", "message": "The upstream is overloaded (conformance)"}


def _usage(script: Script) -> dict[str, Any] | None:
    if not script.usage:
        return None
    return {
        "input_tokens": USAGE[0],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": USAGE[1],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": sum(USAGE),
    }


def _status(native: str | None) -> tuple[str, dict[str, str] | None]:
    status, _, reason = (native or "completed").partition(":")
    return status, {"reason": reason} if reason else None


def _response(model: str, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": ID,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": None,
    }


def _items(script: Script) -> list[dict[str, Any]]:
    """The output items as the terminal event (or a whole body) lists them."""
    status, _ = _status(script.native)
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    if script.text:
        text = "".join(script.text)
        parts.append({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
    if script.refusal:
        parts.append({"type": "refusal", "refusal": "".join(script.refusal)})
    item_status = "completed" if status == "completed" else "incomplete"
    if parts:
        items.append(
            {"type": "message", "id": MESSAGE_ID, "role": "assistant", "status": item_status}
            | {"content": parts}
        )
    if script.tool != "none":
        pieces = TOOL_PIECES if script.tool == "whole" else CUT_TOOL_PIECES
        call = {"type": "function_call", "id": ITEM_ID, "call_id": CALL_ID, "name": TOOL_NAME}
        call_status = "completed" if script.tool == "whole" else "incomplete"
        items.append(call | {"arguments": "".join(pieces), "status": call_status})
    return items


def whole(script: Script, model: str) -> dict[str, Any]:
    status, details = _status(script.native)
    body = _response(model, status, _items(script))
    body["incomplete_details"], body["usage"] = details, _usage(script)
    return body


class _Seq:
    def __init__(self) -> None:
        self.number = 0

    def event(self, obj: dict[str, Any], multiline: bool = False) -> bytes:
        obj = {"type": obj["type"], "sequence_number": self.number} | obj
        self.number += 1
        return frame(obj, event=str(obj["type"]), multiline=multiline)


def _message_frames(seq: _Seq, script: Script, done: bool) -> tuple[list[bytes], int, bytes]:
    item = {"type": "message", "id": MESSAGE_ID, "role": "assistant"}
    at = {"item_id": MESSAGE_ID, "output_index": 0, "content_index": 0}
    added = {"type": "response.output_item.added", "output_index": 0}
    frames = [seq.event(added | {"item": item | {"status": "in_progress", "content": []}})]
    kind, delta_type, pieces = "output_text", "response.output_text.delta", script.text
    if not script.text:
        kind, delta_type, pieces = "refusal", "response.refusal.delta", script.refusal
    part: dict[str, Any] = {"type": kind, kind if kind == "refusal" else "text": ""}
    if kind == "output_text":
        part["annotations"] = []
    frames.append(seq.event({"type": "response.content_part.added"} | at | {"part": part}))
    multiline = b""
    for number, piece in enumerate(pieces):
        delta = {"type": delta_type} | at | {"delta": piece}
        if number == 1:  # the multi-line twin of the second piece, numbered like it
            twin = _Seq()
            twin.number = seq.number
            multiline = twin.event(delta, multiline=True)
        frames.append(seq.event(delta))
    mid = min(4, len(frames))
    if done:
        full = "".join(pieces)
        done_type = (
            "response.output_text.done" if kind == "output_text" else "response.refusal.done"
        )
        field = "text" if kind == "output_text" else "refusal"
        frames.append(seq.event({"type": done_type} | at | {field: full}))
        whole_part = part | {field: full}
        frames.append(seq.event({"type": "response.content_part.done"} | at | {"part": whole_part}))
    return frames, mid, multiline or frames[mid - 1]


def stream(script: Script, model: str, request: dict[str, Any]) -> Frames:
    seq = _Seq()
    start = _response(model, "in_progress", [])
    head = [
        seq.event({"type": "response.created", "response": start}),
        seq.event({"type": "response.in_progress", "response": start}),
    ]
    items = _items(script)
    content: list[bytes] = []
    mid, multiline = 0, b""
    if script.text or script.refusal:
        content, mid, multiline = _message_frames(seq, script, done=True)
        message = {"type": "response.output_item.done", "output_index": 0, "item": items[0]}
        content.append(seq.event(message))
    if script.tool != "none":
        index = len(items) - 1
        call = dict(items[-1]) | {"arguments": "", "status": "in_progress"}
        added = {"type": "response.output_item.added", "output_index": index, "item": call}
        content.append(seq.event(added))
        at = {"item_id": ITEM_ID, "output_index": index}
        for piece in TOOL_PIECES if script.tool == "whole" else CUT_TOOL_PIECES:
            content.append(
                seq.event(
                    {"type": "response.function_call_arguments.delta"} | at | {"delta": piece}
                )
            )
        if script.tool == "whole":
            arguments = {"arguments": items[-1]["arguments"], "name": TOOL_NAME}
            content.append(
                seq.event({"type": "response.function_call_arguments.done"} | at | arguments)
            )
            done = {"type": "response.output_item.done", "output_index": index}
            content.append(seq.event(done | {"item": items[-1]}))
    at_error = seq.number
    status, _ = _status(script.native)
    final = whole(script, model)
    terminal = "response.completed" if status == "completed" else f"response.{status}"
    stop = [seq.event({"type": terminal, "response": final})]
    seq.number = at_error
    failed = _response(model, "failed", items) | {"error": ERROR}
    error = [
        seq.event({"type": "error", "error": {"type": "server_error", "param": None} | ERROR}),
        seq.event({"type": "response.failed", "response": failed}),
    ]
    return Frames(head, content, max(mid, 1), stop, error, multiline or content[0])


def error_body() -> tuple[int, dict[str, Any]]:
    error = {"message": ERROR["message"], "type": "server_error", "param": None}
    return ERROR_STATUS["responses"], {"error": error | {"code": "server_error"}}


def not_found(model: str) -> dict[str, Any]:
    message = f"no conformance case for model {model!r}"
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}
