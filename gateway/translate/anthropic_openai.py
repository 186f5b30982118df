"""Anthropic Messages request body -> OpenAI Chat Completions request body.

    >>> body = {"system": "Be brief.", "max_tokens": 64, "top_k": 5,
    ...         "messages": [{"role": "user", "content": "hi"}]}
    >>> translation = translate_request(body, "gpt-x")
    >>> translation.body["messages"], translation.dropped.fields
    ([{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'hi'}], ('top_k',))

Carried: system, messages, max_tokens (`max_completion_tokens`), temperature, top_p,
stop_sequences, metadata.user_id (`user`), custom tools (with `strict`), tool_choice and
disable_parallel_tool_use, output_config.format or the beta output_format (`response_format`),
output_config.effort and thinking (`reasoning_effort`), service_tier
(gateway.translate.request_options); cache_control, because OpenAI caches prompt prefixes by
itself. Every other field (top_k, container, context_management, mcp_servers, inference_geo,
speed, ...) is not sent and is named in `Translation.dropped`, as are server tools (by type) and
the content blocks Chat Completions cannot carry (documents, thinking, server tool blocks, file
images; counted by type): the request still goes through. Tool-use ids are kept unchanged so
that results match their calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import InvalidRequest
from gateway.translate.drops import ANTHROPIC_MESSAGES_FIELDS, Drops, anthropic_kind
from gateway.translate.fields import invalid, string
from gateway.translate.request_options import output_config_to_openai, service_tier_to_openai
from gateway.translate.translation import Translation

Block = dict[str, Any]
Message = dict[str, Any]


@dataclass
class _UserTurn:
    drops: Drops
    tool_messages: list[Message] = field(default_factory=list)
    parts: list[Block] = field(default_factory=list)


@dataclass
class _AssistantTurn:
    drops: Drops
    texts: list[str] = field(default_factory=list)
    tool_calls: list[Block] = field(default_factory=list)


UserBlock = Callable[[Block, str, _UserTurn], None]
AssistantBlock = Callable[[Block, str, _AssistantTurn], None]


# The fields read here: whatever else the body holds is reported as dropped.
_READ = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "temperature",
        "top_p",
        "stop_sequences",
        "metadata",
        "stream",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "output_format",
        "service_tier",
        "cache_control",
    }
)
# Values that ask for no more than what OpenAI does anyway: not sent, and nothing lost.
_DEFAULTS: dict[str, Any] = {"mcp_servers": [], "speed": "standard"}


def translate_request(body: dict[str, Any], upstream_model: str) -> Translation:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object")
    drops = Drops(ANTHROPIC_MESSAGES_FIELDS, anthropic_kind)
    system = _system_text(body.get("system"), "system", drops)
    messages = [{"role": "system", "content": system}] if system else []
    out: dict[str, Any] = {
        "model": upstream_model,
        "messages": messages + _convert_messages(body.get("messages"), drops),
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
    out.update(_tools(body, drops))
    out.update(output_config_to_openai(body, drops))
    service_tier = service_tier_to_openai(body.get("service_tier"), drops)
    if service_tier is not None:
        out["service_tier"] = service_tier
    drops.unread(body, _READ, _DEFAULTS)
    return Translation(out, drops.dropped())


def _system_text(system: Any, path: str, drops: Drops) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "\n\n".join(_block_texts(_blocks(system, path), path, drops))


def _blocks(content: Any, path: str) -> list[Block]:
    if not isinstance(content, list):
        raise invalid(path, "must be a string or an array of content blocks")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise invalid(f"{path}[{j}]", "must be a content block with a type")
    return content


def _block_texts(blocks: list[Block], path: str, drops: Drops) -> list[str]:
    """The non-empty texts of the text blocks; other blocks are dropped, and counted."""
    texts = []
    for j, block in enumerate(blocks):
        if block["type"] != "text":
            drops.item(block["type"])
        elif text := string(block, "text", f"{path}[{j}]"):
            texts.append(text)
    return texts


def _convert_messages(messages: Any, drops: Drops) -> list[Message]:
    if not isinstance(messages, list):
        raise invalid("messages", "must be an array")
    out: list[Message] = []
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(message, dict):
            raise invalid(path, "must be an object")
        role = message.get("role")
        handler = _ROLE_HANDLERS.get(role) if isinstance(role, str) else None
        if handler is None:
            raise invalid(f"{path}.role", f"must be one of {', '.join(_ROLE_HANDLERS)}")
        out += handler(message.get("content"), f"{path}.content", drops)
    return out


def _system_message(content: Any, path: str, drops: Drops) -> list[Message]:
    """Claude Code puts `role: "system"` entries inside `messages`."""
    text = _system_text(content, path, drops)
    return [{"role": "system", "content": text}] if text else []


def _user_message(content: Any, path: str, drops: Drops) -> list[Message]:
    """Tool results become `tool` messages, which must come before the rest of the turn."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    turn = _UserTurn(drops)
    for j, block in enumerate(_blocks(content, path)):
        user_block: UserBlock = _USER_BLOCKS.get(block["type"], _drop)
        user_block(block, f"{path}[{j}]", turn)
    if turn.parts:
        return [*turn.tool_messages, {"role": "user", "content": turn.parts}]
    return turn.tool_messages


def _assistant_message(content: Any, path: str, drops: Drops) -> list[Message]:
    if isinstance(content, str):
        return [{"role": "assistant", "content": content}]
    turn = _AssistantTurn(drops)
    for j, block in enumerate(_blocks(content, path)):
        assistant_block: AssistantBlock = _ASSISTANT_BLOCKS.get(block["type"], _drop)
        assistant_block(block, f"{path}[{j}]", turn)
    # Citations split one answer into many text blocks: join them without a separator.
    text = "".join(turn.texts)
    message: Message = {"role": "assistant", "content": text or (None if turn.tool_calls else "")}
    if turn.tool_calls:
        message["tool_calls"] = turn.tool_calls
    return [message]


_ROLE_HANDLERS: dict[str, Callable[[Any, str, Drops], list[Message]]] = {
    "user": _user_message,
    "assistant": _assistant_message,
    "system": _system_message,
}


def _drop(block: Block, path: str, turn: _UserTurn | _AssistantTurn) -> None:
    """Blocks Chat Completions cannot carry (document, thinking, server tools, new types)."""
    turn.drops.item(block["type"])


def _user_text(block: Block, path: str, turn: _UserTurn) -> None:
    text = string(block, "text", path)
    if text:
        turn.parts.append({"type": "text", "text": text})


def _user_image(block: Block, path: str, turn: _UserTurn) -> None:
    source = block.get("source")
    if not isinstance(source, dict):
        raise invalid(f"{path}.source", "must be an object")
    if source.get("type") == "base64":
        media_type = string(source, "media_type", f"{path}.source")
        url = f"data:{media_type};base64,{string(source, 'data', f'{path}.source')}"
    elif source.get("type") == "url":
        url = string(source, "url", f"{path}.source")
    else:
        turn.drops.item("image")  # a `file` source: Anthropic's Files API, unknown to OpenAI
        return
    turn.parts.append({"type": "image_url", "image_url": {"url": url}})


def _user_tool_result(block: Block, path: str, turn: _UserTurn) -> None:
    call_id = string(block, "tool_use_id", path)
    text = _tool_result_text(block.get("content"), f"{path}.content", turn.drops)
    if block.get("is_error") is True:
        text = f"Error: {text}"
    turn.tool_messages.append({"role": "tool", "tool_call_id": call_id, "content": text})


def _tool_result_text(content: Any, path: str, drops: Drops) -> str:
    """Text of a tool result; its images and documents cannot go into an OpenAI tool message."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(_block_texts(_blocks(content, path), path, drops))


_USER_BLOCKS: dict[str, UserBlock] = {
    "text": _user_text,
    "image": _user_image,
    "tool_result": _user_tool_result,
}


def _assistant_text(block: Block, path: str, turn: _AssistantTurn) -> None:
    turn.texts.append(string(block, "text", path))


def _assistant_tool_use(block: Block, path: str, turn: _AssistantTurn) -> None:
    arguments = block.get("input")
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        raise invalid(f"{path}.input", "must be an object")
    function = {"name": string(block, "name", path), "arguments": orjson.dumps(arguments).decode()}
    call_id = string(block, "id", path)
    turn.tool_calls.append({"id": call_id, "type": "function", "function": function})


_ASSISTANT_BLOCKS: dict[str, AssistantBlock] = {
    "text": _assistant_text,
    "tool_use": _assistant_tool_use,
}


def _tools(body: dict[str, Any], drops: Drops) -> dict[str, Any]:
    raw = body.get("tools") or []
    if not isinstance(raw, list):
        raise invalid("tools", "must be an array")
    tools = []
    for i, tool in enumerate(raw):
        converted = _tool(tool, f"tools[{i}]")
        if converted is None:
            drops.tool(tool.get("type"))
        else:
            tools.append(converted)
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, dict) else None
    if not tools:
        if choice is not None and kind not in ("auto", "none"):
            drops.field("tool_choice")  # it forces a tool that did not survive
        return {}
    out: dict[str, Any] = {"tools": tools}
    if choice is None:
        return out
    if not isinstance(kind, str) or kind not in _CHOICES:
        raise invalid("tool_choice", "must be one of auto, any, tool or none")
    out["tool_choice"] = _CHOICES[kind](choice)
    if choice.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False
    return out


def _tool(tool: Any, path: str) -> Block | None:
    """A custom tool as a function tool; server tools (web search, bash...) are dropped."""
    if not isinstance(tool, dict):
        raise invalid(path, "must be an object")
    if tool.get("type", "custom") != "custom":
        return None
    function: Block = {"name": string(tool, "name", path)}
    if tool.get("description"):
        function["description"] = tool["description"]
    function["parameters"] = tool.get("input_schema") or {"type": "object", "properties": {}}
    if isinstance(tool.get("strict"), bool):
        function["strict"] = tool["strict"]
    return {"type": "function", "function": function}


def _named_choice(choice: Block) -> Block:
    return {"type": "function", "function": {"name": string(choice, "name", "tool_choice")}}


_CHOICES: dict[str, Callable[[Block], Any]] = {
    "auto": lambda _: "auto",
    "any": lambda _: "required",
    "none": lambda _: "none",
    "tool": _named_choice,
}
