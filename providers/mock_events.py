"""The Anthropic stream events the mock's scenarios are built of (providers.mock): content blocks
of text, tool calls and thinking, each split into deltas as api.anthropic.com sends them."""

from __future__ import annotations

import base64
import secrets
from typing import Any

Event = dict[str, Any]


def pieces(text: str, words: int = 3) -> list[str]:
    """Split text into deltas of a few words, spaces kept, so that "".join() gives it back."""
    if not text:
        return []
    parts = text.split(" ")
    groups = [" ".join(parts[i : i + words]) for i in range(0, len(parts), words)]
    return [group + " " for group in groups[:-1]] + groups[-1:]


def block(index: int, start: Event, deltas: list[Event], *, close: bool = True) -> list[Event]:
    events: list[Event] = [{"type": "content_block_start", "index": index, "content_block": start}]
    events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
    if close:
        events.append({"type": "content_block_stop", "index": index})
    return events


def text_block(index: int, text: str, *, close: bool = True) -> list[Event]:
    deltas = [{"type": "text_delta", "text": p} for p in pieces(text)]
    return block(index, {"type": "text", "text": ""}, deltas, close=close)


def tool_block(index: int, name: str, json_pieces: list[str], *, close: bool = True) -> list[Event]:
    start = {"type": "tool_use", "id": f"toolu_mock_{secrets.token_hex(12)}", "name": name}
    deltas = [{"type": "input_json_delta", "partial_json": p} for p in json_pieces]
    return block(index, {**start, "input": {}}, deltas, close=close)


def thinking_block(index: int, text: str) -> list[Event]:
    signature = base64.b64encode(secrets.token_bytes(48)).decode()
    deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(text)]
    deltas.append({"type": "signature_delta", "signature": signature})
    return block(index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)


def count_tokens(blocks: list[Event]) -> int:
    """About four characters a token, as real tokenizers give on English text."""
    deltas = [e["delta"] for e in blocks if e["type"] == "content_block_delta"]
    text = "".join(
        d.get("text") or d.get("thinking") or d.get("partial_json") or "" for d in deltas
    )
    return max(1, len(text) // 4)
