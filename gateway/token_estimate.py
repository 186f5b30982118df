"""An estimate of a Messages request's input tokens, for upstreams that offer no count of their
own (OpenAI-wire models, the mock): the request's text counted with OpenAI's `o200k_base`
encoding, plus fixed overheads per message and per image. It is always reported as an estimate.

The encoding comes from `bpe-openai`, which ships its tables: `tiktoken` fetches them over the
network on first use, which a gateway without egress cannot do. Loading them takes about 1.5 s
and 100 MB, so it happens on the first estimate, in a worker thread, like every count.

    tokens = await estimate_input_tokens(body)     # never in the event loop itself
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import orjson

ENCODING = "o200k_base"
PER_MESSAGE = 3  # role and separators, OpenAI's own rule of thumb for chat messages
PRIMING = 3  # the assistant turn the answer starts
# An image's tokens depend on its size, which the estimate does not decode: Anthropic's
# (width x height) / 750 for a 1092 x 1092 image, the largest it keeps unscaled.
PER_IMAGE = 1600
IMAGE_BLOCKS = frozenset({"image", "document"})
# bpe-openai refuses inputs of more than 200,000 tokens per call; a piece of 100,000
# characters always has fewer.
PIECE = 100_000

_lock = threading.Lock()
_encoding: Any = None


def _encode_count(text: str) -> int:
    global _encoding
    with _lock:
        if _encoding is None:
            import bpe_openai  # loaded on first use: its tables are large

            _encoding = bpe_openai.get_encoding(ENCODING)
    encoding = _encoding
    return sum(
        len(encoding.encode(text[i : i + PIECE], disallowed_special=()))
        for i in range(0, len(text), PIECE)
    )


def _block_texts(block: Any) -> Iterator[str]:
    """The text a content block puts before the model (its JSON for kinds with no text)."""
    if isinstance(block, str):
        yield block
        return
    if not isinstance(block, dict):
        return
    kind = block.get("type")
    if kind in ("text", "thinking"):
        text = block.get(kind if kind == "thinking" else "text")
        if isinstance(text, str):
            yield text
    elif kind == "tool_use":
        yield str(block.get("name", ""))
        yield orjson.dumps(block.get("input", {})).decode()
    elif kind == "tool_result":
        content = block.get("content")
        for part in content if isinstance(content, list) else [content]:
            yield from _block_texts(part)
    elif kind not in IMAGE_BLOCKS and kind != "redacted_thinking":
        yield orjson.dumps(block).decode()


def _images(content: Any) -> int:
    if not isinstance(content, list):
        return 0
    found = 0
    for block in content:
        if isinstance(block, dict):
            if block.get("type") in IMAGE_BLOCKS:
                found += 1
            elif block.get("type") == "tool_result":
                found += _images(block.get("content"))
    return found


def _request_text(body: dict[str, Any]) -> tuple[str, int, int]:
    """The request's text joined, its message count and its image count."""
    parts: list[str] = []
    system = body.get("system")
    for block in system if isinstance(system, list) else [system]:
        parts.extend(_block_texts(block))
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    images = 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else [content]:
            parts.extend(_block_texts(block))
        images += _images(content)
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        parts.append(orjson.dumps(tool).decode())
    return "\n".join(parts), len(messages), images


def estimate_sync(body: dict[str, Any]) -> int:
    text, messages, images = _request_text(body)
    return _encode_count(text) + PER_MESSAGE * messages + PER_IMAGE * images + PRIMING


async def estimate_input_tokens(body: dict[str, Any]) -> int:
    """The estimate, computed in a worker thread (tokenizing a long history takes milliseconds,
    and the first call loads the tables)."""
    return await asyncio.to_thread(estimate_sync, body)
