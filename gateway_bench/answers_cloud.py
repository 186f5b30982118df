"""The fake upstream's answers on the Gemini and Bedrock Converse wires (see `answers`).

Gemini streams SSE frames each holding a whole GenerateContentResponse, with no terminator: the
last one carries the finishReason. Bedrock's ConverseStream is AWS's binary event stream (our
own encoder, `gateway_bench.eventstream`): messageStart, the text deltas, contentBlockStop,
messageStop and the usage in a last `metadata` event.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from gateway_bench.answers import INPUT_TOKENS
from gateway_bench.eventstream import event_message
from gateway_bench.scenario import Scenario, words

GEMINI_VERSION: Final = "gemini-bench"


def gemini_usage(scenario: Scenario) -> dict[str, int]:
    return {
        "promptTokenCount": INPUT_TOKENS,
        "candidatesTokenCount": scenario.chunks,
        "totalTokenCount": INPUT_TOKENS + scenario.chunks,
    }


def gemini_chunk(text: str, usage: dict[str, int], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}}
    candidate["index"] = 0
    if finish is not None:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": GEMINI_VERSION,
        "responseId": "gemini-bench",
    }


def gemini_whole(model: str, scenario: Scenario) -> bytes:
    text = "".join(words(scenario.chunks))
    return orjson.dumps(gemini_chunk(text, gemini_usage(scenario), "STOP"))


def gemini_stream(model: str, scenario: Scenario) -> list[bytes]:
    usage = gemini_usage(scenario)
    pieces = words(scenario.chunks)
    chunks = [gemini_chunk(piece, usage) for piece in pieces[:-1]]
    chunks.append(gemini_chunk(pieces[-1], usage, "STOP"))
    return [b"data: " + orjson.dumps(chunk) + b"\r\n\r\n" for chunk in chunks]


def bedrock_usage(scenario: Scenario) -> dict[str, int]:
    return {
        "inputTokens": INPUT_TOKENS,
        "outputTokens": scenario.chunks,
        "totalTokens": INPUT_TOKENS + scenario.chunks,
    }


def bedrock_whole(model: str, scenario: Scenario) -> bytes:
    text = "".join(words(scenario.chunks))
    return orjson.dumps(
        {
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": "end_turn",
            "usage": bedrock_usage(scenario),
            "metrics": {"latencyMs": 1},
        }
    )


def bedrock_stream(model: str, scenario: Scenario) -> list[bytes]:
    def event(name: str, payload: dict[str, Any]) -> bytes:
        return event_message(name, orjson.dumps(payload))

    writes = [event("messageStart", {"role": "assistant"})]
    writes += [
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
        for piece in words(scenario.chunks)
    ]
    metadata = {"usage": bedrock_usage(scenario), "metrics": {"latencyMs": 1}}
    writes += [
        event("contentBlockStop", {"contentBlockIndex": 0}),
        event("messageStop", {"stopReason": "end_turn"}),
        event("metadata", metadata),
    ]
    return writes
