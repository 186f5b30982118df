"""OpenAI Chat Completions request body -> Anthropic Messages request body.

    >>> body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50, "seed": 7}
    >>> translation = translate_request(body, "claude-x")
    >>> translation.body["messages"], translation.dropped.fields
    ([{'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]}], ('seed',))

Carried: messages (system and developer folded into `system`), max_completion_tokens or
max_tokens, temperature, top_p, top_k (an extension of OpenAI-compatible servers), stop,
safety_identifier or user (`metadata.user_id`), tools and the legacy functions, tool_choice and
function_call, parallel_tool_calls (`disable_parallel_tool_use`), response_format and
reasoning_effort (`output_config`), service_tier (gateway.translate.request_options). Every other
field that asks for something (seed, logprobs, penalties, logit_bias, store, metadata, verbosity,
prompt_cache_key, ...) is not sent, and is named in `Translation.dropped`. Content parts Anthropic
cannot take are refused, not dropped. Tool-call ids are kept unchanged: Anthropic matches
`tool_result.tool_use_id` exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import InvalidRequest
from gateway.translate.drops import OPENAI_CHAT_FIELDS, Drops
from gateway.translate.fields import invalid, mapping, string
from gateway.translate.nesting import MAX_DEPTH, too_deep
from gateway.translate.openai_anthropic_tools import tools_to_anthropic
from gateway.translate.request_options import (
    output_config_to_anthropic,
    service_tier_to_anthropic,
)
from gateway.translate.translation import Translation

Block = dict[str, Any]


@dataclass
class _Conversation:
    system: list[str] = field(default_factory=list)
    turns: list[tuple[str, list[Block]]] = field(default_factory=list)
    # Legacy `function_call` has no id; the `role: "function"` result that follows refers to it.
    legacy_call_id: str | None = None


# The fields read here, and transport the gateway handles itself (stream_options): whatever else
# the body holds is reported as dropped.
_READ = frozenset(
    {
        "model",
        "messages",
        "max_completion_tokens",
        "max_tokens",
        "n",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "top_k",
        "stop",
        "safety_identifier",
        "user",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "functions",
        "function_call",
        "response_format",
        "reasoning_effort",
        "service_tier",
    }
)
# Values that ask for no more than what Anthropic does anyway: not sent, and nothing lost.
_DEFAULTS: dict[str, Any] = {
    "logprobs": False,
    "presence_penalty": 0,
    "frequency_penalty": 0,
    "logit_bias": {},
    "store": False,
    "metadata": {},
    "modalities": ["text"],
}


def translate_request(
    body: dict[str, Any], upstream_model: str, *, default_max_tokens: int | None = 4096
) -> Translation:
    """`default_max_tokens=None` leaves `max_tokens` out when the client gave none (for wires
    translated onward from this one, whose budget is optional)."""
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object")
    n = body.get("n")
    if isinstance(n, int) and n > 1:
        raise InvalidRequest("n > 1 is not supported by this upstream: one answer a request", "n")
    drops = Drops(OPENAI_CHAT_FIELDS)
    conversation = _convert_messages(body.get("messages"))
    out: dict[str, Any] = {"model": upstream_model}
    max_tokens = _max_tokens(body, default_max_tokens)
    if max_tokens is not None:
        out["max_tokens"] = max_tokens
    out["messages"] = _merge_turns(conversation.turns)
    if conversation.system:
        out["system"] = "\n\n".join(conversation.system)
    for key in ("temperature", "top_p", "top_k"):
        if body.get(key) is not None:
            out[key] = body[key]
    stop = _stop_sequences(body.get("stop"))
    if stop:
        out["stop_sequences"] = stop
    out.update(_metadata(body, drops))
    if "stream" in body:
        out["stream"] = body["stream"] is True
    out.update(tools_to_anthropic(body, drops))
    out.update(output_config_to_anthropic(body, drops))
    service_tier = service_tier_to_anthropic(body.get("service_tier"), drops)
    if service_tier is not None:
        out["service_tier"] = service_tier
    drops.unread(body, _READ, _DEFAULTS)
    return Translation(out, drops.dropped())


def _max_tokens(body: dict[str, Any], default: int | None) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise invalid(key, "must be an integer")
        return value
    return default


def _metadata(body: dict[str, Any], drops: Drops) -> dict[str, Any]:
    """`metadata.user_id` from safety_identifier (OpenAI's successor of `user`), else user."""
    given = []
    for key in ("safety_identifier", "user"):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            raise invalid(key, "must be a string")
        if value:
            given.append(key)
    if not given:
        return {}
    for key in given[1:]:
        drops.field(key)  # Anthropic has one user id
    return {"metadata": {"user_id": body[given[0]]}}


def _stop_sequences(stop: Any) -> list[str]:
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop] if stop else []
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return [s for s in stop if s]
    raise invalid("stop", "must be a string or an array of strings")


def _convert_messages(messages: Any) -> _Conversation:
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "must be a non-empty array")
    conversation = _Conversation()
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(message, dict):
            raise invalid(path, "must be an object")
        role = message.get("role")
        handler = _MESSAGE_HANDLERS.get(role) if isinstance(role, str) else None
        if handler is None:
            raise invalid(f"{path}.role", f"must be one of {', '.join(_MESSAGE_HANDLERS)}")
        handler(message, path, conversation)
    return conversation


def _merge_turns(turns: list[tuple[str, list[Block]]]) -> list[dict[str, Any]]:
    """Merge consecutive same-role turns so roles alternate; tool results lead their user turn."""
    merged: list[dict[str, Any]] = []
    for role, blocks in turns:
        if not blocks:
            continue
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": role, "content": list(blocks)})
    for message in merged:
        if message["role"] == "user":
            message["content"].sort(key=lambda block: block["type"] != "tool_result")
    return merged


def _system_message(message: Block, path: str, conversation: _Conversation) -> None:
    text = "\n".join(_texts(message.get("content"), f"{path}.content"))
    if text:
        conversation.system.append(text)


def _user_message(message: Block, path: str, conversation: _Conversation) -> None:
    content, content_path = message.get("content"), f"{path}.content"
    blocks: Sequence[Block | None]
    if isinstance(content, str):
        blocks = _text_blocks([content])
    elif isinstance(content, list):
        blocks = [_user_part(part, f"{content_path}[{j}]") for j, part in enumerate(content)]
    else:
        raise invalid(content_path, "must be a string or an array of content parts")
    conversation.turns.append(("user", [b for b in blocks if b is not None]))


def _assistant_message(message: Block, path: str, conversation: _Conversation) -> None:
    content = _texts(message.get("content"), f"{path}.content", ("text", "refusal"))
    blocks = _text_blocks(content)
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise invalid(f"{path}.tool_calls", "must be an array")
    blocks += [_tool_use(call, f"{path}.tool_calls[{k}]") for k, call in enumerate(calls)]
    legacy = message.get("function_call")
    if legacy is not None:
        conversation.legacy_call_id = f"call_legacy_{len(conversation.turns)}"
        blocks.append(_function_use(legacy, conversation.legacy_call_id, f"{path}.function_call"))
    conversation.turns.append(("assistant", blocks))


def _tool_message(message: Block, path: str, conversation: _Conversation) -> None:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise invalid(f"{path}.tool_call_id", "must be a non-empty string")
    result = _tool_result(call_id, message.get("content"), f"{path}.content")
    conversation.turns.append(("user", [result]))


def _function_message(message: Block, path: str, conversation: _Conversation) -> None:
    if conversation.legacy_call_id is None:
        raise invalid(path, "a function message must follow an assistant function_call")
    result = _tool_result(conversation.legacy_call_id, message.get("content"), f"{path}.content")
    conversation.turns.append(("user", [result]))
    conversation.legacy_call_id = None


_MESSAGE_HANDLERS: dict[str, Callable[[Block, str, _Conversation], None]] = {
    "system": _system_message,
    "developer": _system_message,
    "user": _user_message,
    "assistant": _assistant_message,
    "tool": _tool_message,
    "function": _function_message,
}


def _texts(content: Any, path: str, kinds: tuple[str, ...] = ("text",)) -> list[str]:
    """The text of a string-or-parts content; parts of other kinds are refused, not dropped."""
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        raise invalid(path, "must be a string or an array of parts")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in kinds:
            raise invalid(f"{path}[{j}].type", f"must be one of {', '.join(kinds)}")
        texts.append(string(part, kind, f"{path}[{j}]"))
    return texts


def _text_blocks(texts: list[str]) -> list[Block]:
    return [{"type": "text", "text": text} for text in texts if text]


def _user_part(part: Any, path: str) -> Block | None:
    kind = part.get("type") if isinstance(part, dict) else None
    handler = _USER_PARTS.get(kind) if isinstance(kind, str) else None
    if handler is None:
        # Only a type of the OpenAI wire is named: the client's own values are never echoed.
        known = isinstance(kind, str) and kind in _OPENAI_PART_TYPES
        named = f"content part type {kind!r}" if known else "a content part"
        kinds = ", ".join(_USER_PARTS)
        raise invalid(f"{path}.type", f"{named} cannot be sent to Anthropic (only {kinds})")
    return handler(part, path)


def _text_part(part: Block, path: str) -> Block | None:
    text = string(part, "text", path)
    return {"type": "text", "text": text} if text else None


def _image_part(part: Block, path: str) -> Block:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    url_path = f"{path}.image_url.url"
    if isinstance(url, str) and url.startswith("data:"):
        media_type, data = _parse_data_url(url, url_path)
        source = {"type": "base64", "media_type": media_type, "data": data}
        return {"type": "image", "source": source}
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise invalid(url_path, "must be an http(s) URL or a base64 data URL")


def _parse_data_url(url: str, path: str) -> tuple[str, str]:
    header, comma, data = url.removeprefix("data:").partition(",")
    media_type, _, encoding = header.partition(";")
    if not comma or encoding != "base64" or not media_type or not data:
        raise invalid(path, "a data URL must look like data:<media type>;base64,<data>")
    return media_type, data


_USER_PARTS: dict[str, Callable[[Block, str], Block | None]] = {
    "text": _text_part,
    "image_url": _image_part,
}
_OPENAI_PART_TYPES = frozenset({"text", "image_url", "input_audio", "file", "refusal"})


def _tool_use(call: Any, path: str) -> Block:
    if not isinstance(call, dict):
        raise invalid(path, "must be an object")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise invalid(f"{path}.id", "must be a non-empty string")
    return _function_use(mapping(call, "function", path), call_id, f"{path}.function")


def _function_use(function: Any, call_id: str, path: str) -> Block:
    if not isinstance(function, dict):
        raise invalid(path, "must be an object")
    name = string(function, "name", path)
    arguments = _parse_arguments(function.get("arguments"), f"{path}.arguments")
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def _parse_arguments(arguments: Any, path: str) -> dict[str, Any]:
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if not isinstance(arguments, str):
        raise invalid(path, "must be a JSON string")
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        # `from None`: the parser's message quotes the argument text, which must not reach logs.
        raise invalid(path, "is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise invalid(path, "must encode a JSON object")
    if too_deep(parsed, MAX_DEPTH) is not None:
        raise invalid(path, f"nests deeper than {MAX_DEPTH} levels")
    return parsed


def _tool_result(call_id: str, content: Any, path: str) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": call_id}
    if isinstance(content, str):
        if content:
            block["content"] = content
    elif texts := _text_blocks(_texts(content, path)):
        block["content"] = texts
    return block
