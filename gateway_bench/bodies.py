"""Request bodies the load generator sends, one builder per wire, with an optional history.

`history_bytes` pads the conversation with earlier turns (alternating user and assistant, about
1 KB each) until their text reaches that size: the growth mode's "request size" axis, since
what grows in real agent traffic is the message history, not one message.

    chat_body("bench-c20", stream=True, history_bytes=0)
"""

from __future__ import annotations

from typing import Any, Final

import orjson

PROMPT: Final = "Say hello in twenty words."
MAX_TOKENS: Final = 256
TURN_BYTES: Final = 1000
_FILLER: Final = (
    "The quick brown fox jumps over the lazy dog while the gateway relays every byte. " * 13
)


def turns(history_bytes: int) -> list[tuple[str, str]]:
    """(role, text) pairs: the padding turns (user first), then the prompt as the last user turn.
    Roles are `user` and `assistant`; each builder renames them as its wire has it."""
    out: list[tuple[str, str]] = []
    remaining = max(0, history_bytes)
    index = 0
    while remaining > 0:
        text = f"turn {index}: " + _FILLER
        text = text[: min(TURN_BYTES, remaining)]
        out.append(("user" if index % 2 == 0 else "assistant", text))
        remaining -= len(text)
        index += 1
    if out and out[-1][0] == "user":
        out.append(("assistant", "ok"))  # the roles must alternate before the prompt
    out.append(("user", PROMPT))
    return out


def chat_body(model: str, stream: bool, history_bytes: int = 0) -> bytes:
    messages = [{"role": role, "content": text} for role, text in turns(history_bytes)]
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": MAX_TOKENS}
    if stream:
        body["stream"] = True
    return orjson.dumps(body)


def anthropic_body(model: str, stream: bool, history_bytes: int = 0) -> bytes:
    """A Messages body: the Chat body's fields (model, messages, max_tokens, stream) are its."""
    return chat_body(model, stream, history_bytes)


def responses_body(model: str, stream: bool, history_bytes: int = 0) -> bytes:
    items = [{"role": role, "content": text} for role, text in turns(history_bytes)]
    # store: false, as Codex sends it: no answer kept for previous_response_id to find.
    body: dict[str, Any] = {"model": model, "input": items, "store": False}
    body["max_output_tokens"] = MAX_TOKENS
    if stream:
        body["stream"] = True
    return orjson.dumps(body)


def gemini_body(model: str, stream: bool, history_bytes: int = 0) -> bytes:
    roles = {"user": "user", "assistant": "model"}
    contents = [
        {"role": roles[role], "parts": [{"text": text}]} for role, text in turns(history_bytes)
    ]
    return orjson.dumps({"contents": contents, "generationConfig": {"maxOutputTokens": MAX_TOKENS}})


def bedrock_body(model: str, stream: bool, history_bytes: int = 0) -> bytes:
    messages = [{"role": role, "content": [{"text": text}]} for role, text in turns(history_bytes)]
    return orjson.dumps({"messages": messages, "inferenceConfig": {"maxTokens": MAX_TOKENS}})
