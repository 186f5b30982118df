"""How deep a request may nest: the gateway must be able to encode whatever it forwards again.

orjson reads up to 1024 levels but writes at most 254, and a translated body nests a few levels
deeper than the client's (an Anthropic `input_schema` becomes `function.parameters`, parsed
OpenAI tool arguments become a `tool_use.input` six levels down), so a body, and a parsed
argument string, may nest at most MAX_DEPTH containers: far beyond any real schema, far below
what the encoder refuses.

    >>> too_deep({"tools": [{"input_schema": {"properties": {"a": {}}}}]}, limit=4)
    'tools[0].input_schema'

The path names the client's fields only as far as they are wire field names (array indexes
included) and at most NAMED_PARTS deep: a key of the client's own, such as a property name in a
schema, is not echoed.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 128
NAMED_PARTS = 6  # a path is named at most this many fields and indexes deep

# Field names of either wire format that may lead to a nested value.
WIRE_FIELDS = frozenset(
    {
        "messages",
        "content",
        "tools",
        "function",
        "functions",
        "parameters",
        "input_schema",
        "tool_calls",
        "function_call",
        "arguments",
        "input",
        "system",
        "metadata",
        "tool_choice",
        "response_format",
        "json_schema",
        "schema",
        "stream_options",
        "thinking",
        "stop",
        "stop_sequences",
        "source",
        "image_url",
        "text",
        "citations",
        "cache_control",
        "output_config",
        "context_management",
        "mcp_servers",
        "container",
        "logit_bias",
        "prediction",
        "audio",
        "modalities",
        "web_search_options",
        "extra_body",
    }
)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """None when `value` nests at most `limit` containers, else the path of the first field
    that goes deeper, named as far as WIRE_FIELDS allow ("" when not even the first key is)."""
    stack: list[tuple[Any, int, tuple[str, ...], bool]] = [(value, 1, (), True)]
    while stack:
        node, level, path, named = stack.pop()
        if isinstance(node, dict):
            items: Any = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        if level > limit:
            return _join(path)
        for key, child in items:
            if not isinstance(child, dict | list):
                continue
            if not named or len(path) >= NAMED_PARTS:
                stack.append((child, level + 1, path, False))
            elif isinstance(key, int):
                stack.append((child, level + 1, (*path, f"[{key}]"), True))
            elif key in WIRE_FIELDS:
                stack.append((child, level + 1, (*path, key), True))
            else:
                stack.append((child, level + 1, path, False))
    return None


def _join(path: tuple[str, ...]) -> str:
    out = ""
    for part in path:
        out += part if part.startswith("[") or not out else f".{part}"
    return out
