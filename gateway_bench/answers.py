"""The fake upstream's answers on the OpenAI Chat, OpenAI Responses and Anthropic Messages wires.

Each wire has two renderers: `whole(model, scenario)`, a non-streamed body, and
`stream(model, scenario)`, a streamed body as a list of writes: one SSE event each, so a paced
answer writes them one at a time and a burst joins them. They run once per (wire, model, stream)
and the upstream keeps the bytes: the answer to a request is never built per request. Ids and
timestamps are fixed for that reason; no client checks that they differ between answers.

The shapes are what the official SDKs and the gateway's decoders accept (tests/test_bench_wires.py
checks both): a plain text answer that ends normally (`stop`, `end_turn`, `completed`).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from gateway_bench.scenario import Scenario, words

CREATED: Final = 1_700_000_000
INPUT_TOKENS: Final = 12


def sse(data: dict[str, Any], event: str | None = None) -> bytes:
    body = orjson.dumps(data)
    if event is None:
        return b"data: " + body + b"\n\n"
    return b"event: " + event.encode() + b"\ndata: " + body + b"\n\n"


# --- OpenAI Chat Completions ------------------------------------------------------------------


def chat_usage(scenario: Scenario) -> dict[str, int]:
    return {
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": scenario.chunks,
        "total_tokens": INPUT_TOKENS + scenario.chunks,
    }


def chat_whole(model: str, scenario: Scenario) -> bytes:
    message = {"role": "assistant", "content": "".join(words(scenario.chunks)), "refusal": None}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
    return orjson.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "choices": [choice],
            "usage": chat_usage(scenario),
            "system_fingerprint": None,
        }
    )


def chat_stream(model: str, scenario: Scenario) -> list[bytes]:
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": CREATED}
    base["model"] = model

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse({**base, "choices": [choice]})

    writes = [chunk({"role": "assistant", "content": ""})]
    writes += [chunk({"content": piece}) for piece in words(scenario.chunks)]
    writes.append(chunk({}, "stop"))
    writes.append(sse({**base, "choices": [], "usage": chat_usage(scenario)}))
    writes.append(b"data: [DONE]\n\n")
    return writes


# --- OpenAI Responses ---------------------------------------------------------------------------

RESPONSE_ID: Final = "resp_bench"
MESSAGE_ID: Final = "msg_bench"


def responses_object(model: str, status: str, output: list[Any], usage: Any) -> dict[str, Any]:
    return {
        "id": RESPONSE_ID,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }


def responses_usage(scenario: Scenario) -> dict[str, Any]:
    return {
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": scenario.chunks,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT_TOKENS + scenario.chunks,
    }


def responses_message(status: str, text: str | None) -> dict[str, Any]:
    content = [] if text is None else [{"type": "output_text", "text": text, "annotations": []}]
    return {
        "type": "message",
        "id": MESSAGE_ID,
        "status": status,
        "role": "assistant",
        "content": content,
    }


def responses_whole(model: str, scenario: Scenario) -> bytes:
    item = responses_message("completed", "".join(words(scenario.chunks)))
    return orjson.dumps(responses_object(model, "completed", [item], responses_usage(scenario)))


def responses_stream(model: str, scenario: Scenario) -> list[bytes]:
    pieces = words(scenario.chunks)
    text = "".join(pieces)
    where = {"item_id": MESSAGE_ID, "output_index": 0, "content_index": 0}
    empty = {"type": "output_text", "text": "", "annotations": []}
    final = responses_message("completed", text)
    opened = responses_message("in_progress", None)
    steps: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": responses_object(model, "in_progress", [], None)}),
        ("response.in_progress", {"response": responses_object(model, "in_progress", [], None)}),
        ("response.output_item.added", {"output_index": 0, "item": opened}),
        ("response.content_part.added", {**where, "part": empty}),
    ]
    steps += [
        ("response.output_text.delta", {**where, "delta": piece, "logprobs": []})
        for piece in pieces
    ]
    done = {**empty, "text": text}
    steps += [
        ("response.output_text.done", {**where, "text": text, "logprobs": []}),
        ("response.content_part.done", {**where, "part": done}),
        ("response.output_item.done", {"output_index": 0, "item": final}),
    ]
    usage = responses_usage(scenario)
    completed = responses_object(model, "completed", [final], usage)
    steps.append(("response.completed", {"response": completed}))
    return [
        sse({"type": name, "sequence_number": seq, **data}, name)
        for seq, (name, data) in enumerate(steps)
    ]


# --- Anthropic Messages -----------------------------------------------------------------------


def anthropic_usage(output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": INPUT_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


def anthropic_message(model: str, content: list[Any], stop: str | None, out: int) -> Any:
    return {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": anthropic_usage(out),
    }


def anthropic_whole(model: str, scenario: Scenario) -> bytes:
    content = [{"type": "text", "text": "".join(words(scenario.chunks))}]
    return orjson.dumps(anthropic_message(model, content, "end_turn", scenario.chunks))


def anthropic_stream(model: str, scenario: Scenario) -> list[bytes]:
    def event(name: str, data: dict[str, Any]) -> bytes:
        return sse({"type": name, **data}, name)

    writes = [
        event("message_start", {"message": anthropic_message(model, [], None, 1)}),
        event(
            "content_block_start",
            {"index": 0, "content_block": {"type": "text", "text": ""}},
        ),
    ]
    writes += [
        event(
            "content_block_delta",
            {"index": 0, "delta": {"type": "text_delta", "text": piece}},
        )
        for piece in words(scenario.chunks)
    ]
    writes += [
        event("content_block_stop", {"index": 0}),
        event(
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": scenario.chunks},
            },
        ),
        event("message_stop", {}),
    ]
    return writes
