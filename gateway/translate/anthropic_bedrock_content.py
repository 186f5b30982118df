"""Anthropic Messages content blocks -> Bedrock Converse content blocks (one shape per family).

    text                 -> {"text"}                      (+ {"cachePoint"} after it for a
                                                             block with cache_control)
    image (base64)       -> {"image": {"format", "source": {"bytes": <base64>}}}
    document (pdf, text) -> {"document": {"format", "name", "source": {"bytes" | "text"}}}
    tool_use             -> {"toolUse": {"toolUseId", "name", "input"}}
    tool_result          -> {"toolResult": {"toolUseId", "content": [{"text"} | {"image"}],
                                            "status": "error" when is_error}}
    thinking             -> {"reasoningContent": {"reasoningText": {"text", "signature"}}}
    redacted_thinking    -> {"reasoningContent": {"redactedContent": <data>}}

Blobs travel base64-encoded in Converse's JSON, as Anthropic's base64 sources already are. An
image by URL is refused (Bedrock takes bytes or S3 only; the model would answer about an image it
never saw); other blocks (server tool blocks, search results, file sources) are dropped and
counted by type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from gateway.translate.drops import Drops
from gateway.translate.fields import invalid, string

Block = dict[str, Any]
IMAGE_FORMATS: Final = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
CACHE_TTLS: Final = frozenset({"5m", "1h"})


def blocks(content: Any, path: str) -> list[Block]:
    if not isinstance(content, list):
        raise invalid(path, "must be a string or an array of content blocks")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise invalid(f"{path}[{j}]", "must be a content block with a type")
    return content


def cache_point(block: Block, path: str) -> Block | None:
    """The cachePoint block that stands for a block's `cache_control` (None without one)."""
    control = block.get("cache_control")
    if control is None:
        return None
    if not isinstance(control, dict):
        raise invalid(f"{path}.cache_control", "must be an object")
    point: Block = {"type": "default"}
    ttl = control.get("ttl")
    if isinstance(ttl, str) and ttl in CACHE_TTLS:
        point["ttl"] = ttl
    return {"cachePoint": point}


def content_blocks(content: Any, path: str, drops: Drops) -> list[Block]:
    """A message's content as Converse blocks."""
    if isinstance(content, str):
        return [{"text": content}] if content else []
    out: list[Block] = []
    for j, block in enumerate(blocks(content, path)):
        at = f"{path}[{j}]"
        convert = _BLOCKS.get(block["type"])
        if convert is None:
            drops.item(block["type"])
            continue
        converted = convert(block, at, drops)
        if converted is not None:
            out.append(converted)
            point = cache_point(block, at)
            if point is not None:
                out.append(point)
    return out


def _text(block: Block, path: str, drops: Drops) -> Block | None:
    text = string(block, "text", path)
    return {"text": text} if text else None


def image(block: Block, path: str, drops: Drops) -> Block | None:
    source = block.get("source")
    if not isinstance(source, dict):
        raise invalid(f"{path}.source", "must be an object")
    kind = source.get("type")
    if kind == "url":
        raise invalid(f"{path}.source", "images by URL cannot be sent to Bedrock (only base64)")
    if kind != "base64":
        drops.item("image")  # a `file` source: Anthropic's Files API, unknown to Bedrock
        return None
    media_type = string(source, "media_type", f"{path}.source")
    fmt = IMAGE_FORMATS.get(media_type)
    if fmt is None:
        raise invalid(f"{path}.source.media_type", "must be one of " + ", ".join(IMAGE_FORMATS))
    data = string(source, "data", f"{path}.source")
    return {"image": {"format": fmt, "source": {"bytes": data}}}


def _document(block: Block, path: str, drops: Drops) -> Block | None:
    source = block.get("source")
    if not isinstance(source, dict):
        raise invalid(f"{path}.source", "must be an object")
    # Bedrock names every document (letters, digits, spaces, hyphens, brackets): not the
    # client's title, which could be anything.
    name = f"document-{path.rpartition('[')[2].rstrip(']')}"
    kind, media_type = source.get("type"), source.get("media_type")
    if kind == "base64" and media_type == "application/pdf":
        data = string(source, "data", f"{path}.source")
        return {"document": {"format": "pdf", "name": name, "source": {"bytes": data}}}
    if kind == "text":
        data = string(source, "data", f"{path}.source")
        return {"document": {"format": "txt", "name": name, "source": {"text": data}}}
    drops.item("document")  # URL, file and content sources
    return None


def _tool_use(block: Block, path: str, drops: Drops) -> Block:
    arguments = block.get("input")
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        raise invalid(f"{path}.input", "must be an object")
    call = {"toolUseId": string(block, "id", path), "name": string(block, "name", path)}
    return {"toolUse": {**call, "input": arguments}}


def _tool_result(block: Block, path: str, drops: Drops) -> Block:
    call_id = string(block, "tool_use_id", path)
    content = block.get("content")
    parts: list[Block] = []
    if isinstance(content, str):
        parts = [{"text": content}] if content else []
    elif content is not None:
        for j, part in enumerate(blocks(content, f"{path}.content")):
            at = f"{path}.content[{j}]"
            if part["type"] == "text":
                parts.append({"text": string(part, "text", at)})
            elif part["type"] == "image" and (converted := image(part, at, drops)) is not None:
                parts.append(converted)
            elif part["type"] != "image":
                drops.item(part["type"])
    result: Block = {"toolUseId": call_id, "content": parts or [{"text": ""}]}
    if block.get("is_error") is True:
        result["status"] = "error"
    return {"toolResult": result}


def _thinking(block: Block, path: str, drops: Drops) -> Block:
    reasoning: Block = {"text": string(block, "thinking", path)}
    signature = block.get("signature")
    if isinstance(signature, str) and signature:
        reasoning["signature"] = signature
    return {"reasoningContent": {"reasoningText": reasoning}}


def _redacted_thinking(block: Block, path: str, drops: Drops) -> Block:
    return {"reasoningContent": {"redactedContent": string(block, "data", path)}}


_BLOCKS: dict[str, Callable[[Block, str, Drops], Block | None]] = {
    "text": _text,
    "image": image,
    "document": _document,
    "tool_use": _tool_use,
    "tool_result": _tool_result,
    "thinking": _thinking,
    "redacted_thinking": _redacted_thinking,
}
