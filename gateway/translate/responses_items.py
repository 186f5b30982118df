"""The pieces of an OpenAI Responses request body, shared by the translators into that wire,
and the tally of what a translation could not carry (by name, never by value).

    drops = Drops()
    items = [message("user", [input_text("hi")]), function_call("call_1", "f", '{"a":1}')]
    drops.field("seed")
    Translation({"input": items, **STATELESS}, drops.dropped())
"""

from __future__ import annotations

from typing import Any

from gateway.translate.fields import invalid
from gateway.translate.translation import Dropped

Block = dict[str, Any]

# The gateway keeps no state upstream: a response is never stored there for a later turn.
STATELESS: Block = {"store": False}


class Drops:
    """What a translation left out: request fields, tools, and content blocks by type."""

    __slots__ = ("_fields", "_items", "_tools")

    def __init__(self) -> None:
        self._fields: dict[str, None] = {}  # insertion-ordered set
        self._tools: list[str] = []
        self._items: dict[str, int] = {}

    def field(self, name: str) -> None:
        self._fields[name] = None

    def tool(self, name: str) -> None:
        self._tools.append(name)

    def item(self, kind: str) -> None:
        self._items[kind] = self._items.get(kind, 0) + 1

    def dropped(self) -> Dropped:
        return Dropped(tuple(self._fields), tuple(self._tools), dict(self._items))


def message(role: str, content: list[Block]) -> Block:
    return {"type": "message", "role": role, "content": content}


def input_text(text: str) -> Block:
    return {"type": "input_text", "text": text}


def output_text(text: str) -> Block:
    return {"type": "output_text", "text": text}


def input_image(url: str, detail: Any = None) -> Block:
    return {"type": "input_image", "image_url": url, "detail": detail or "auto"}


def function_call(call_id: str, name: str, arguments: str) -> Block:
    """A call of the history; `call_id` is the client's id, unchanged, so its result matches."""
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments or "{}",
    }


def function_call_output(call_id: str, output: str | list[Block]) -> Block:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def function_tool(name: str, description: Any, parameters: Any, strict: Any) -> Block:
    """A flat function tool. `strict` is always sent: the Responses wire makes function tools
    strict when it is left out, Chat and Anthropic tools are not strict unless they say so."""
    tool: Block = {"type": "function", "name": name}
    if isinstance(description, str) and description:
        tool["description"] = description
    tool["parameters"] = parameters or {"type": "object", "properties": {}}
    tool["strict"] = strict is True
    return tool


def json_schema_format(spec: Block, path: str) -> Block:
    """`text.format` for a JSON schema: flat in Responses, nested in Chat's response_format."""
    out: Block = {"type": "json_schema", "name": spec.get("name") or "response"}
    if not isinstance(spec.get("schema"), dict):
        raise invalid(f"{path}.schema", "must be an object")
    out["schema"] = spec["schema"]
    for key in ("description", "strict"):
        if spec.get(key) is not None:
            out[key] = spec[key]
    return out
