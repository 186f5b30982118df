"""Anthropic Messages request body -> OpenAI Responses request body.

    >>> body = {"system": "Be brief.", "max_tokens": 64,
    ...         "messages": [{"role": "user", "content": "hi"}]}
    >>> translation = translate_request(body, "gpt-x")
    >>> translation.body["instructions"], translation.body["max_output_tokens"]
    ('Be brief.', 64)

`system` becomes `instructions`; `role: "system"` entries inside `messages` (Claude Code) stay in
place as system items. Text and images become input parts, `tool_use` blocks `function_call`
items (`call_id` = the tool_use id, unchanged, arguments as JSON text) and `tool_result` blocks
`function_call_output` items, placed before the rest of their user turn. Custom tools become flat
function tools; server tools (web search, bash, ...) are dropped and named in `Dropped.tools`.

Thinking: `enabled` asks for `reasoning.effort` by its budget (below 4096 tokens `low`, below
16384 `medium`, else `high`) and a reasoning summary, which comes back as thinking; `adaptive`
asks for the summary and leaves the effort to the model; `output_config.effort` names the effort
itself (`max` is `xhigh`). `disabled` cannot be honoured (OpenAI reasoning models always reason)
and is listed as dropped. `metadata.user_id` becomes `safety_identifier` (its SHA-256 when longer
than the 64 characters the field takes). The body always says `store: false`. Thinking blocks of
the history (their signatures mean nothing to OpenAI), documents without a usable source and
other block kinds are dropped and counted by type in `Dropped.items`; Anthropic-only fields
(stop_sequences, top_k, cache_control, context_management, ...) are listed in `Dropped.fields`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import InvalidRequest
from gateway.translate.fields import invalid, string
from gateway.translate.responses_items import (
    STATELESS,
    Block,
    Drops,
    function_call,
    function_call_output,
    function_tool,
    input_image,
    input_text,
    json_schema_format,
    message,
    output_text,
)
from gateway.translate.translation import Translation

READ = frozenset(
    {"model", "messages", "system", "max_tokens", "temperature", "top_p", "stream", "tools"}
    | {"tool_choice", "metadata", "thinking", "output_config"}
)
SAFETY_IDENTIFIER_MAX = 64
EFFORT_BUDGETS = ((4096, "low"), (16384, "medium"))  # budget_tokens below -> effort
EFFORTS = {"low": "low", "medium": "medium", "high": "high", "max": "xhigh"}


@dataclass
class _Turn:
    """One Anthropic message as Responses items: results first, then the message parts."""

    role: str
    drops: Drops
    results: list[Block] = field(default_factory=list)
    parts: list[Block] = field(default_factory=list)
    items: list[Block] = field(default_factory=list)  # assistant: messages and calls, in order

    def part(self, part: Block) -> None:
        if self.role == "assistant":
            if not self.items or self.items[-1]["type"] != "message":
                self.items.append(message("assistant", []))
            self.items[-1]["content"].append(part)
        else:
            self.parts.append(part)

    def done(self) -> list[Block]:
        if self.role == "assistant":
            return self.items
        return [*self.results, *([message(self.role, self.parts)] if self.parts else [])]


def translate_request(body: dict[str, Any], upstream_model: str) -> Translation:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object")
    drops = Drops()
    out: dict[str, Any] = {"model": upstream_model, **STATELESS}
    instructions = "\n\n".join(_texts(_blocks(body.get("system"), "system", drops), "system"))
    if instructions:
        out["instructions"] = instructions
    out["input"] = _convert_messages(body.get("messages"), drops)
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool):
        out["max_output_tokens"] = max_tokens
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            out[key] = body[key]
    if "stream" in body:
        out["stream"] = body["stream"] is True
    _user_id(body.get("metadata"), out)
    _reasoning_and_format(body, out, drops)
    out.update(_tools(body, drops))
    for key, value in body.items():
        if key not in READ and value is not None:
            drops.field(key)
    return Translation(out, drops.dropped())


def _user_id(metadata: Any, out: dict[str, Any]) -> None:
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user_id, str) or not user_id:
        return
    if len(user_id) > SAFETY_IDENTIFIER_MAX:
        user_id = hashlib.sha256(user_id.encode()).hexdigest()
    out["safety_identifier"] = user_id


def _reasoning_and_format(body: dict[str, Any], out: dict[str, Any], drops: Drops) -> None:
    reasoning: dict[str, Any] = {}
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind in ("enabled", "adaptive") and isinstance(thinking, dict):
        reasoning["summary"] = "auto"
        budget = thinking.get("budget_tokens")
        if kind == "enabled" and isinstance(budget, int) and not isinstance(budget, bool):
            below = (effort for limit, effort in EFFORT_BUDGETS if budget < limit)
            reasoning["effort"] = next(below, "high")
    elif thinking is not None:
        drops.field("thinking")
    config = body.get("output_config")
    if isinstance(config, dict):
        effort = config.get("effort")
        if isinstance(effort, str) and effort in EFFORTS:
            reasoning["effort"] = EFFORTS[effort]
        spec = config.get("format")
        if isinstance(spec, dict) and spec.get("type") == "json_schema":
            out["text"] = {"format": json_schema_format(spec, "output_config.format")}
        if set(config) - {"effort", "format"}:
            drops.field("output_config")
    if reasoning:
        out["reasoning"] = reasoning


def _blocks(content: Any, path: str, drops: Drops) -> list[Block]:
    """A string-or-blocks content as blocks; `cache_control` has no Responses field."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise invalid(path, "must be a string or an array of content blocks")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise invalid(f"{path}[{j}]", "must be a content block with a type")
        if block.get("cache_control") is not None:
            drops.field("cache_control")
    return content


def _texts(blocks: list[Block], path: str) -> list[str]:
    texts = [
        string(block, "text", f"{path}[{j}]")
        for j, block in enumerate(blocks)
        if block["type"] == "text"
    ]
    return [text for text in texts if text]


def _convert_messages(messages: Any, drops: Drops) -> list[Block]:
    if not isinstance(messages, list):
        raise invalid("messages", "must be an array")
    items: list[Block] = []
    for i, entry in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(entry, dict):
            raise invalid(path, "must be an object")
        role = entry.get("role")
        if role not in ("user", "assistant", "system"):
            raise invalid(f"{path}.role", "must be one of user, assistant, system")
        turn = _Turn(role, drops)
        blocks = _blocks(entry.get("content"), f"{path}.content", drops)
        for j, block in enumerate(blocks):
            convert = _BLOCKS[role].get(block["type"])
            if convert is None:
                drops.item(block["type"])
            else:
                convert(block, f"{path}.content[{j}]", turn)
        items += turn.done()
    return items


def _text(block: Block, path: str, turn: _Turn) -> None:
    text = string(block, "text", path)
    if text:
        turn.part(output_text(text) if turn.role == "assistant" else input_text(text))


def _image(block: Block, path: str, turn: _Turn) -> None:
    url = _source_url(block, path)
    if url is None:
        turn.drops.item("image")  # a `file` source is Anthropic's Files API, unknown upstream
        return
    turn.part(input_image(url))


def _document(block: Block, path: str, turn: _Turn) -> None:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "text":
        turn.part(input_text(string(source, "data", f"{path}.source")))
        return
    url = _source_url(block, path)
    if url is None:
        turn.drops.item("document")
    elif url.startswith("data:"):
        turn.part({"type": "input_file", "file_data": url, "filename": _title(block)})
    else:
        turn.part({"type": "input_file", "file_url": url})


def _title(block: Block) -> str:
    title = block.get("title")
    return title if isinstance(title, str) and title else "document.pdf"


def _source_url(block: Block, path: str) -> str | None:
    source = block.get("source")
    if not isinstance(source, dict):
        raise invalid(f"{path}.source", "must be an object")
    if source.get("type") == "base64":
        media_type = string(source, "media_type", f"{path}.source")
        return f"data:{media_type};base64,{string(source, 'data', f'{path}.source')}"
    if source.get("type") == "url":
        return string(source, "url", f"{path}.source")
    return None


def _tool_result(block: Block, path: str, turn: _Turn) -> None:
    call_id = string(block, "tool_use_id", path)
    inner = _Turn("user", turn.drops)
    content = _blocks(block.get("content"), f"{path}.content", turn.drops)
    for j, part in enumerate(content):
        convert = _RESULT_BLOCKS.get(part["type"])
        if convert is None:
            turn.drops.item(part["type"])
        else:
            convert(part, f"{path}.content[{j}]", inner)
    output: str | list[Block] = inner.parts  # images: the output takes parts, as a message does
    if all(p["type"] == "input_text" for p in inner.parts):
        output = "\n".join(p["text"] for p in inner.parts)
    if block.get("is_error") is True:
        output = f"Error: {output}" if isinstance(output, str) else [input_text("Error:"), *output]
    turn.results.append(function_call_output(call_id, output))


def _tool_use(block: Block, path: str, turn: _Turn) -> None:
    arguments = block.get("input")
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        raise invalid(f"{path}.input", "must be an object")
    name = string(block, "name", path)
    call = function_call(string(block, "id", path), name, orjson.dumps(arguments).decode())
    turn.items.append(call)


_Convert = Callable[[Block, str, _Turn], None]
_RESULT_BLOCKS: dict[str, _Convert] = {"text": _text, "image": _image, "document": _document}
_BLOCKS: dict[str, dict[str, _Convert]] = {
    "user": {**_RESULT_BLOCKS, "tool_result": _tool_result},
    "assistant": {"text": _text, "tool_use": _tool_use},
    "system": {"text": _text},
}


def _tools(body: dict[str, Any], drops: Drops) -> dict[str, Any]:
    raw = body.get("tools") or []
    if not isinstance(raw, list):
        raise invalid("tools", "must be an array")
    tools = [_tool(tool, f"tools[{i}]", drops) for i, tool in enumerate(raw)]
    kept = [tool for tool in tools if tool is not None]
    choice = body.get("tool_choice")
    if not kept:
        if choice is not None:
            drops.field("tool_choice")
        return {}
    out: dict[str, Any] = {"tools": kept}
    if choice is None:
        return out
    kind = choice.get("type") if isinstance(choice, dict) else None
    if not isinstance(kind, str) or kind not in _CHOICES or not isinstance(choice, dict):
        raise invalid("tool_choice", "must be one of auto, any, tool or none")
    out["tool_choice"] = _CHOICES[kind](choice)
    if choice.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False
    return out


def _tool(tool: Any, path: str, drops: Drops) -> Block | None:
    """A custom tool as a flat function tool; server tools are dropped, named by type."""
    if not isinstance(tool, dict):
        raise invalid(path, "must be an object")
    kind = tool.get("type", "custom")
    if kind != "custom":
        drops.tool(kind if isinstance(kind, str) else "unknown")
        return None
    if tool.get("cache_control") is not None:
        drops.field("cache_control")
    name = string(tool, "name", path)
    return function_tool(
        name, tool.get("description"), tool.get("input_schema"), tool.get("strict")
    )


_CHOICES: dict[str, Callable[[Block], Any]] = {
    "auto": lambda _: "auto",
    "any": lambda _: "required",
    "none": lambda _: "none",
    "tool": lambda choice: {"type": "function", "name": string(choice, "name", "tool_choice")},
}
