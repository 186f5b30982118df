"""Anthropic Messages request body -> OpenAI Chat Completions request body.

    >>> body = {"system": "Be brief.", "max_tokens": 64,
    ...         "messages": [{"role": "user", "content": "hi"}]}
    >>> translate_request(body, "gpt-x")["messages"]
    [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'hi'}]

Anthropic-only fields (thinking, top_k, service_tier, context_management, output_config,
container, mcp_servers, cache_control, ...) are dropped, as are content blocks Chat Completions
cannot carry (documents, thinking, server tool blocks): the request still goes through.
Tool-use ids are kept unchanged so that results match their calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import InvalidRequest

Block = dict[str, Any]
Message = dict[str, Any]


@dataclass
class _UserTurn:
    tool_messages: list[Message] = field(default_factory=list)
    parts: list[Block] = field(default_factory=list)


@dataclass
class _AssistantTurn:
    texts: list[str] = field(default_factory=list)
    tool_calls: list[Block] = field(default_factory=list)


UserBlock = Callable[[Block, str, _UserTurn], None]
AssistantBlock = Callable[[Block, str, _AssistantTurn], None]


def translate_request(body: dict[str, Any], upstream_model: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object")
    system = _system_text(body.get("system"), "system")
    messages = [{"role": "system", "content": system}] if system else []
    out: dict[str, Any] = {
        "model": upstream_model,
        "messages": messages + _convert_messages(body.get("messages")),
    }
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool):
        # Reasoning models reject the deprecated `max_tokens` (PROTOCOLS.md §g.15).
        out["max_completion_tokens"] = max_tokens
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            out[key] = body[key]
    stop = body.get("stop_sequences")
    if isinstance(stop, list) and stop:
        out["stop"] = stop
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        out["user"] = metadata["user_id"]
    if "stream" in body:
        out["stream"] = body["stream"] is True
        if out["stream"]:
            # Without it OpenAI streams no usage, and the Anthropic message_delta needs it.
            out["stream_options"] = {"include_usage": True}
    out.update(_tools(body))
    return out


def _invalid(path: str, problem: str) -> InvalidRequest:
    return InvalidRequest(f"{path}: {problem}", path)


def _system_text(system: Any, path: str) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "\n\n".join(_block_texts(_blocks(system, path), path))


def _blocks(content: Any, path: str) -> list[Block]:
    if not isinstance(content, list):
        raise _invalid(path, "must be a string or an array of content blocks")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _invalid(f"{path}[{j}]", "must be a content block with a type")
    return content


def _block_texts(blocks: list[Block], path: str) -> list[str]:
    """The non-empty texts of the text blocks; other blocks are dropped."""
    texts = [
        _string(b, "text", f"{path}[{j}]") for j, b in enumerate(blocks) if b["type"] == "text"
    ]
    return [text for text in texts if text]


def _convert_messages(messages: Any) -> list[Message]:
    if not isinstance(messages, list):
        raise _invalid("messages", "must be an array")
    out: list[Message] = []
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _invalid(path, "must be an object")
        role = message.get("role")
        handler = _ROLE_HANDLERS.get(role) if isinstance(role, str) else None
        if handler is None:
            raise _invalid(f"{path}.role", f"must be one of {', '.join(_ROLE_HANDLERS)}")
        out += handler(message.get("content"), f"{path}.content")
    return out


def _system_message(content: Any, path: str) -> list[Message]:
    """Claude Code puts `role: "system"` entries inside `messages`."""
    text = _system_text(content, path)
    return [{"role": "system", "content": text}] if text else []


def _user_message(content: Any, path: str) -> list[Message]:
    """Tool results become `tool` messages, which must come before the rest of the turn."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    turn = _UserTurn()
    for j, block in enumerate(_blocks(content, path)):
        user_block: UserBlock = _USER_BLOCKS.get(block["type"], _drop)
        user_block(block, f"{path}[{j}]", turn)
    if turn.parts:
        return [*turn.tool_messages, {"role": "user", "content": turn.parts}]
    return turn.tool_messages


def _assistant_message(content: Any, path: str) -> list[Message]:
    if isinstance(content, str):
        return [{"role": "assistant", "content": content}]
    turn = _AssistantTurn()
    for j, block in enumerate(_blocks(content, path)):
        assistant_block: AssistantBlock = _ASSISTANT_BLOCKS.get(block["type"], _drop)
        assistant_block(block, f"{path}[{j}]", turn)
    # Citations split one answer into many text blocks: join them without a separator.
    text = "".join(turn.texts)
    message: Message = {"role": "assistant", "content": text or (None if turn.tool_calls else "")}
    if turn.tool_calls:
        message["tool_calls"] = turn.tool_calls
    return [message]


_ROLE_HANDLERS: dict[str, Callable[[Any, str], list[Message]]] = {
    "user": _user_message,
    "assistant": _assistant_message,
    "system": _system_message,
}


def _drop(block: Block, path: str, turn: Any) -> None:
    """Blocks Chat Completions cannot carry (document, thinking, server tools, new types)."""


def _string(block: Block, key: str, path: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise _invalid(f"{path}.{key}", "must be a string")
    return value


def _user_text(block: Block, path: str, turn: _UserTurn) -> None:
    text = _string(block, "text", path)
    if text:
        turn.parts.append({"type": "text", "text": text})


def _user_image(block: Block, path: str, turn: _UserTurn) -> None:
    source = block.get("source")
    if not isinstance(source, dict):
        raise _invalid(f"{path}.source", "must be an object")
    if source.get("type") == "base64":
        media_type = _string(source, "media_type", f"{path}.source")
        url = f"data:{media_type};base64,{_string(source, 'data', f'{path}.source')}"
    elif source.get("type") == "url":
        url = _string(source, "url", f"{path}.source")
    else:
        return  # a `file` source refers to Anthropic's Files API, unknown to OpenAI
    turn.parts.append({"type": "image_url", "image_url": {"url": url}})


def _user_tool_result(block: Block, path: str, turn: _UserTurn) -> None:
    call_id = _string(block, "tool_use_id", path)
    text = _tool_result_text(block.get("content"), f"{path}.content")
    if block.get("is_error") is True:
        text = f"Error: {text}"
    turn.tool_messages.append({"role": "tool", "tool_call_id": call_id, "content": text})


def _tool_result_text(content: Any, path: str) -> str:
    """Text of a tool result; its images and documents cannot go into an OpenAI tool message."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(_block_texts(_blocks(content, path), path))


_USER_BLOCKS: dict[str, UserBlock] = {
    "text": _user_text,
    "image": _user_image,
    "tool_result": _user_tool_result,
}


def _assistant_text(block: Block, path: str, turn: _AssistantTurn) -> None:
    turn.texts.append(_string(block, "text", path))


def _assistant_tool_use(block: Block, path: str, turn: _AssistantTurn) -> None:
    arguments = block.get("input")
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        raise _invalid(f"{path}.input", "must be an object")
    function = {"name": _string(block, "name", path), "arguments": orjson.dumps(arguments).decode()}
    call_id = _string(block, "id", path)
    turn.tool_calls.append({"id": call_id, "type": "function", "function": function})


_ASSISTANT_BLOCKS: dict[str, AssistantBlock] = {
    "text": _assistant_text,
    "tool_use": _assistant_tool_use,
}


def _tools(body: dict[str, Any]) -> dict[str, Any]:
    raw = body.get("tools") or []
    if not isinstance(raw, list):
        raise _invalid("tools", "must be an array")
    converted = (_tool(tool, f"tools[{i}]") for i, tool in enumerate(raw))
    tools = [tool for tool in converted if tool is not None]
    if not tools:
        return {}
    out: dict[str, Any] = {"tools": tools}
    choice = body.get("tool_choice")
    if choice is None:
        return out
    kind = choice.get("type") if isinstance(choice, dict) else None
    if not isinstance(kind, str) or kind not in _CHOICES:
        raise _invalid("tool_choice", "must be one of auto, any, tool or none")
    out["tool_choice"] = _CHOICES[kind](choice)
    if choice.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False
    return out


def _tool(tool: Any, path: str) -> Block | None:
    """A custom tool as a function tool; server tools (web search, bash...) are dropped."""
    if not isinstance(tool, dict):
        raise _invalid(path, "must be an object")
    if tool.get("type", "custom") != "custom":
        return None
    function: Block = {"name": _string(tool, "name", path)}
    if tool.get("description"):
        function["description"] = tool["description"]
    function["parameters"] = tool.get("input_schema") or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def _named_choice(choice: Block) -> Block:
    return {"type": "function", "function": {"name": _string(choice, "name", "tool_choice")}}


_CHOICES: dict[str, Callable[[Block], Any]] = {
    "auto": lambda _: "auto",
    "any": lambda _: "required",
    "none": lambda _: "none",
    "tool": _named_choice,
}
