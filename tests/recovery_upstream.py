"""A loopback upstream on every wire whose text streams break where a test says: the recovery
tests' (tests/test_recovery*.py).

It speaks OpenAI Chat Completions, Anthropic Messages, OpenAI Responses, Gemini
(`streamGenerateContent?alt=sse`) and Bedrock (`converse-stream`, AWS's event stream) on their
real paths, on a raw socket (tests/fault_upstream.py's `Conn`), so a break is a real one: an RST,
a stall, the wire's own error event, or a clean close without the terminator. A test scripts
answers per model, one per request (the last repeats), and reads back every request body (a
request that is not streamed gets the whole answer of the same script, never a break):

    upstream.script("oa-x", Stream(TEXT, cut_at=40, how="reset"), Stream(TEXT[40:]))
    ...; upstream.requests("oa-x")  # every request (wire, path, body): the continuation second
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import orjson

from tests.bedrock_upstream import event_message, exception_message
from tests.fault_upstream import Conn, FaultUpstream, Play, Request, read_request

INPUT_TOKENS = 10


@dataclass(frozen=True)
class Stream:
    """One streamed answer: `text` in pieces of `piece` characters. `cut_at`: the characters
    sent before the break `how` ("reset", "stall", "error" event, "eof" without terminator);
    None: the whole text, ending with `end` ("stop" or "length", at max tokens). `tool`: a tool
    call starts after the text and the break comes inside its arguments."""

    text: str
    cut_at: int | None = None
    how: str = "reset"
    end: str = "stop"
    tool: bool = False
    status: int = 200  # an error status answers instead (e.g. 400: a refused prefill)
    piece: int = 6


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(obj: dict[str, Any], event: str | None = None, end: bytes = b"\n\n") -> bytes:
    head = b"" if event is None else b"event: " + event.encode() + b"\n"
    return head + b"data: " + orjson.dumps(obj) + end


# --- the wires: (head frames, a text frame, tool frames, ending frames, error frame) -----------


class OpenAIChat:
    content_type = "text/event-stream"

    def __init__(self, model: str) -> None:
        self.base = {"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 7}
        self.base["model"] = model

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**self.base, "choices": [choice]})

    def head(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def text(self, piece: str) -> bytes:
        return self._chunk({"content": piece})

    def tool(self) -> list[bytes]:
        fn = {"name": "weather", "arguments": ""}
        start = {"index": 0, "id": "call_1", "type": "function", "function": fn}
        more = {"index": 0, "function": {"arguments": '{"city": "Par'}}
        return [self._chunk({"tool_calls": [start]}), self._chunk({"tool_calls": [more]})]

    def ending(self, end: str, output: int) -> list[bytes]:
        usage = {"prompt_tokens": INPUT_TOKENS, "completion_tokens": output}
        usage["total_tokens"] = INPUT_TOKENS + output
        return [
            self._chunk({}, end),
            _sse({**self.base, "choices": [], "usage": usage}),
            b"data: [DONE]\n\n",
        ]

    def error(self) -> bytes:
        return _sse({"error": {"message": "upstream overloaded", "type": "server_error"}})


class AnthropicMessages:
    content_type = "text/event-stream"

    def __init__(self, model: str) -> None:
        self.model = model

    def head(self) -> list[bytes]:
        message = {
            "id": "msg_up",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1},
        }
        block = {"type": "content_block_start", "index": 0}
        block["content_block"] = {"type": "text", "text": ""}
        return [
            _sse({"type": "message_start", "message": message}, "message_start"),
            _sse(block, "content_block_start"),
        ]

    def text(self, piece: str) -> bytes:
        delta = {"type": "content_block_delta", "index": 0}
        delta["delta"] = {"type": "text_delta", "text": piece}
        return _sse(delta, "content_block_delta")

    def tool(self) -> list[bytes]:
        start = {"type": "content_block_start", "index": 1}
        start["content_block"] = {"type": "tool_use", "id": "toolu_1", "name": "weather"}
        start["content_block"]["input"] = {}
        args = {"type": "content_block_delta", "index": 1}
        args["delta"] = {"type": "input_json_delta", "partial_json": '{"city": "Par'}
        return [
            _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            _sse(start, "content_block_start"),
            _sse(args, "content_block_delta"),
        ]

    def ending(self, end: str, output: int) -> list[bytes]:
        stop = {"stop": "end_turn", "length": "max_tokens"}[end]
        delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
        delta["usage"] = {"output_tokens": output}
        return [
            _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            _sse(delta, "message_delta"),
            _sse({"type": "message_stop"}, "message_stop"),
        ]

    def error(self) -> bytes:
        error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return _sse(error, "error")


class OpenAIResponses:
    content_type = "text/event-stream"

    def __init__(self, model: str) -> None:
        self.model = model
        self.seq = 0
        self.text_so_far = ""

    def _event(self, kind: str, **fields: Any) -> bytes:
        obj = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return _sse(obj, kind)

    def _response(self, status: str, output: list[Any], usage: Any = None) -> dict[str, Any]:
        return {
            "id": "resp_up",
            "object": "response",
            "created_at": 7,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": usage,
        }

    def head(self) -> list[bytes]:
        item = {"type": "message", "id": "msg_up", "role": "assistant", "status": "in_progress"}
        item["content"] = []
        part = {"type": "output_text", "text": "", "annotations": []}
        where = {"item_id": "msg_up", "output_index": 0, "content_index": 0}
        return [
            self._event("response.created", response=self._response("in_progress", [])),
            self._event("response.output_item.added", output_index=0, item=item),
            self._event("response.content_part.added", **where, part=part),
        ]

    def text(self, piece: str) -> bytes:
        self.text_so_far += piece
        where = {"item_id": "msg_up", "output_index": 0, "content_index": 0}
        return self._event("response.output_text.delta", **where, delta=piece)

    def tool(self) -> list[bytes]:
        item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather"}
        item.update(arguments="", status="in_progress")
        return [
            self._event("response.output_item.added", output_index=1, item=item),
            self._event(
                "response.function_call_arguments.delta",
                item_id="fc_1",
                output_index=1,
                delta='{"city": "Par',
            ),
        ]

    def ending(self, end: str, output: int) -> list[bytes]:
        text = self.text_so_far
        part = {"type": "output_text", "text": text, "annotations": []}
        where = {"item_id": "msg_up", "output_index": 0, "content_index": 0}
        status = "completed" if end == "stop" else "incomplete"
        item = {"type": "message", "id": "msg_up", "role": "assistant", "status": status}
        item["content"] = [part]
        usage = {"input_tokens": INPUT_TOKENS, "output_tokens": output}
        usage["total_tokens"] = INPUT_TOKENS + output
        response = self._response(status, [item], usage)
        if end == "length":
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        terminal = "response.completed" if end == "stop" else "response.incomplete"
        return [
            self._event("response.output_text.done", **where, text=text),
            self._event("response.content_part.done", **where, part=part),
            self._event("response.output_item.done", output_index=0, item=item),
            self._event(terminal, response=response),
        ]

    def error(self) -> bytes:
        return self._event("error", code="server_error", message="upstream overloaded", param=None)


class Gemini:
    content_type = "text/event-stream"

    def __init__(self, model: str) -> None:
        self.model = model

    def _chunk(self, parts: list[Any], finish: str | None = None, output: int = 0) -> bytes:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish is not None:
            candidate["finishReason"] = finish
        usage = {"promptTokenCount": INPUT_TOKENS, "candidatesTokenCount": output}
        usage["totalTokenCount"] = INPUT_TOKENS + output
        obj = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": self.model}
        return _sse({**obj, "responseId": "gm_up"}, end=b"\r\n\r\n")

    def head(self) -> list[bytes]:
        return []

    def text(self, piece: str) -> bytes:
        return self._chunk([{"text": piece}])

    def tool(self) -> list[bytes]:  # Gemini sends a call whole: the break comes after it
        return [self._chunk([{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}])]

    def ending(self, end: str, output: int) -> list[bytes]:
        finish = {"stop": "STOP", "length": "MAX_TOKENS"}[end]
        return [self._chunk([{"text": ""}], finish, output)]

    def error(self) -> bytes:
        error = {"code": 503, "message": "upstream overloaded", "status": "UNAVAILABLE"}
        return _sse({"error": error}, end=b"\r\n\r\n")


class Bedrock:
    content_type = "application/vnd.amazon.eventstream"

    def __init__(self, model: str) -> None:
        self.model = model

    def head(self) -> list[bytes]:
        return [event_message("messageStart", {"role": "assistant"})]

    def text(self, piece: str) -> bytes:
        return event_message(
            "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}}
        )

    def tool(self) -> list[bytes]:
        start = {"toolUse": {"toolUseId": "tooluse_1", "name": "weather"}}
        args = {"toolUse": {"input": '{"city": "Par'}}
        return [
            event_message("contentBlockStop", {"contentBlockIndex": 0}),
            event_message("contentBlockStart", {"contentBlockIndex": 1, "start": start}),
            event_message("contentBlockDelta", {"contentBlockIndex": 1, "delta": args}),
        ]

    def ending(self, end: str, output: int) -> list[bytes]:
        stop = {"stop": "end_turn", "length": "max_tokens"}[end]
        usage = {"inputTokens": INPUT_TOKENS, "outputTokens": output}
        usage["totalTokens"] = INPUT_TOKENS + output
        return [
            event_message("contentBlockStop", {"contentBlockIndex": 0}),
            event_message("messageStop", {"stopReason": stop}),
            event_message("metadata", {"usage": usage, "metrics": {"latencyMs": 3}}),
        ]

    def error(self) -> bytes:
        return exception_message("serviceUnavailableException", "upstream overloaded")


Renderer = OpenAIChat | AnthropicMessages | OpenAIResponses | Gemini | Bedrock
RENDERERS: dict[str, Callable[[str], Renderer]] = {
    "openai": OpenAIChat,
    "anthropic": AnthropicMessages,
    "openai_responses": OpenAIResponses,
    "gemini": Gemini,
    "bedrock": Bedrock,
}


def whole_body(wire: str, model: str, text: str, end: str, output: int) -> bytes:
    """The non-streamed answer: `text`, stopped by `end` ("stop" or "length")."""
    usage_in, usage_out = INPUT_TOKENS, output
    if wire == "openai":
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": end, "logprobs": None}
        usage = {"prompt_tokens": usage_in, "completion_tokens": usage_out}
        body: dict[str, Any] = {"id": "chatcmpl-up", "object": "chat.completion", "created": 7}
        body.update(model=model, choices=[choice], usage=usage)
    elif wire == "anthropic":
        body = {"id": "msg_up", "type": "message", "role": "assistant", "model": model}
        body["content"] = [{"type": "text", "text": text}]
        body["stop_reason"] = {"stop": "end_turn", "length": "max_tokens"}[end]
        body["stop_sequence"] = None
        body["usage"] = {"input_tokens": usage_in, "output_tokens": usage_out}
    elif wire == "openai_responses":
        status = "completed" if end == "stop" else "incomplete"
        part = {"type": "output_text", "text": text, "annotations": []}
        item = {"type": "message", "id": "msg_up", "role": "assistant", "status": status}
        body = {"id": "resp_up", "object": "response", "created_at": 7, "status": status}
        body.update(model=model, output=[{**item, "content": [part]}])
        body["usage"] = {"input_tokens": usage_in, "output_tokens": usage_out}
        if end == "length":
            body["incomplete_details"] = {"reason": "max_output_tokens"}
    elif wire == "gemini":
        candidate = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
        candidate["finishReason"] = {"stop": "STOP", "length": "MAX_TOKENS"}[end]
        usage = {"promptTokenCount": usage_in, "candidatesTokenCount": usage_out}
        body = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}
    else:  # bedrock
        message = {"role": "assistant", "content": [{"text": text}]}
        body = {"output": {"message": message}}
        body["stopReason"] = {"stop": "end_turn", "length": "max_tokens"}[end]
        body["usage"] = {"inputTokens": usage_in, "outputTokens": usage_out}
    return orjson.dumps(body)


def streamed(wire: str, path: str, body: dict[str, Any]) -> bool:
    if wire == "gemini":
        return ":streamGenerateContent" in path
    if wire == "bedrock":
        return path.endswith("/converse-stream")
    return body.get("stream") is True


def wire_and_model(path: str, body: dict[str, Any]) -> tuple[str, str]:
    if path.endswith("/chat/completions"):
        return "openai", body.get("model", "")
    if path.endswith("/messages"):
        return "anthropic", body.get("model", "")
    if path.endswith("/responses"):
        return "openai_responses", body.get("model", "")
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return "gemini", unquote(path.split("/models/")[1].split(":")[0])
    if "/model/" in path:
        return "bedrock", unquote(path.split("/model/")[1].split("/")[0])
    raise ValueError(f"no wire serves {path}")


def error_body(wire: str, status: int) -> bytes:
    message = "assistant prefill is not supported by this model"
    if wire == "anthropic":
        return orjson.dumps(
            {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        )
    if wire == "gemini":
        return orjson.dumps(
            {"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}
        )
    if wire == "bedrock":
        return orjson.dumps({"message": message})
    return orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})


async def play(stream: Stream, wire: str, model: str, conn: Conn, whole: bool = False) -> None:
    if stream.status >= 400 or whole:
        status = stream.status
        body = error_body(wire, status) if status >= 400 else b""
        if not body:
            output = len(_pieces(stream.text, stream.piece))
            body = whole_body(wire, model, stream.text, stream.end, output)
        await conn.head(status, "application/json", len(body))
        await conn.send(body)
        return await conn.end()
    render = RENDERERS[wire](model)
    await conn.head(content_type=render.content_type)
    for frame in render.head():
        await conn.send(frame)
    sent = stream.text if stream.cut_at is None else stream.text[: stream.cut_at]
    for piece in _pieces(sent, stream.piece):
        await conn.send(render.text(piece))
    output = len(_pieces(sent, stream.piece))
    if stream.tool:
        for frame in render.tool():
            await conn.send(frame)
    elif stream.cut_at is None:
        for frame in render.ending(stream.end, output):
            await conn.send(frame)
        return await conn.end()
    await _break(stream.how, render, conn)


async def _break(how: str, render: Renderer, conn: Conn) -> None:
    if how == "error":
        await conn.send(render.error())
        return await conn.end()
    if how == "eof":
        return await conn.end()
    if how == "stall":
        await conn.wait_for_peer(10.0)
        return conn.reset()
    await asyncio.sleep(0.05)  # the frames reach the gateway before the RST drops them
    conn.reset()


def as_play(stream: Stream) -> Play:
    async def played(request: Request, conn: Conn) -> None:
        await play(stream, request.wire, request.model, conn, whole=not request.stream)

    return played


class RecoveryUpstream(FaultUpstream):
    """tests/fault_upstream.py's raw-socket server (on a loop of its own, in a thread), on
    every wire's path, scripted with `Stream`s."""

    def script(self, model: str, *streams: Stream) -> None:  # type: ignore[override]
        super().script(model, *(as_play(stream) for stream in streams))

    def requests(self, model: str) -> list[Request]:
        seen = self.seen.get(model)
        return seen.requests if seen is not None else []

    @staticmethod
    async def _read(reader: asyncio.StreamReader) -> Request | None:
        read = await read_request(reader)
        if read is None:
            return None
        path, body = read
        wire, model = wire_and_model(path, body)
        return Request(path, wire, model, streamed(wire, path, body), body)
