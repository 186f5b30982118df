"""OpenAI Chat Completions request body -> OpenAI Responses request body.

    >>> body = {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 50}
    >>> translation = translate_request(body, "gpt-x")
    >>> translation.body["input"], translation.body["max_output_tokens"]
    ([{'type': 'message', 'role': 'user', 'content': [{'type': 'input_text', 'text': 'hi'}]}], 50)

Messages become input items in order: system and developer messages stay in place with their
role, assistant tool calls become `function_call` items (`call_id` = the Chat id, unchanged) and
`tool` messages `function_call_output` items. Function tools become flat tools, `tool_choice`
and `response_format` their Responses shapes, `reasoning_effort` / `verbosity` the `reasoning`
and `text` objects. The body always says `store: false`. Fields the Responses wire has no place
for (stop, seed, penalties, logprobs, ...) are listed in `Dropped.fields`, non-function tools in
`Dropped.tools`, and message names, which Responses has no field for, as `messages.name`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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

# Carried as they are (same name, same meaning on both wires).
COPIED = (
    *("temperature", "top_p", "parallel_tool_calls", "user", "safety_identifier"),
    *("prompt_cache_key", "service_tier", "metadata"),
)
# Read below; anything else the client sent is dropped, by name.
READ = frozenset(
    {"model", "messages", "n", "store", "stream", "stream_options", "max_tokens", "tools"}
    | {"max_completion_tokens", "tool_choice", "functions", "function_call", "response_format"}
    | {"reasoning_effort", "verbosity", *COPIED}
)


@dataclass
class _Conversation:
    items: list[Block] = field(default_factory=list)
    drops: Drops = field(default_factory=Drops)
    legacy_calls: int = 0
    # Legacy `function_call` has no id; the `role: "function"` result that follows refers to it.
    legacy_call_id: str | None = None


def translate_request(body: dict[str, Any], upstream_model: str) -> Translation:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object")
    n = body.get("n")
    if isinstance(n, int) and n > 1:
        raise InvalidRequest("n > 1 is not supported by OpenAI Responses upstreams", "n")
    conversation = _convert_messages(body.get("messages"))
    drops = conversation.drops
    out: dict[str, Any] = {"model": upstream_model, "input": conversation.items, **STATELESS}
    if body.get("store") not in (None, False):
        drops.field("store")
    max_tokens = _max_tokens(body)
    if max_tokens is not None:
        out["max_output_tokens"] = max_tokens
    for key in COPIED:
        if body.get(key) is not None:
            out[key] = body[key]
    if "stream" in body:
        out["stream"] = body["stream"] is True
    _stream_options(body, out)
    _text_and_reasoning(body, out)
    out.update(_tools(body, drops))
    for key, value in body.items():
        if key not in READ and value is not None:
            drops.field(key)
    return Translation(out, drops.dropped())


def _max_tokens(body: dict[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise invalid(key, "must be an integer")
        return value
    return None


def _stream_options(body: dict[str, Any], out: dict[str, Any]) -> None:
    """Responses streams always end with usage, so only `include_obfuscation` is carried."""
    options = body.get("stream_options")
    if isinstance(options, dict) and isinstance(options.get("include_obfuscation"), bool):
        out["stream_options"] = {"include_obfuscation": options["include_obfuscation"]}


def _text_and_reasoning(body: dict[str, Any], out: dict[str, Any]) -> None:
    text: dict[str, Any] = {}
    response_format = body.get("response_format")
    if response_format is not None:
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        if kind in ("text", "json_object"):
            text["format"] = {"type": kind}
        elif kind == "json_schema" and isinstance(response_format, dict):
            spec = response_format.get("json_schema")
            if not isinstance(spec, dict):
                raise invalid("response_format.json_schema", "must be an object")
            text["format"] = json_schema_format(spec, "response_format.json_schema")
        else:
            raise invalid("response_format.type", "must be one of text, json_object, json_schema")
    if body.get("verbosity") is not None:
        text["verbosity"] = body["verbosity"]
    if text:
        out["text"] = text
    if body.get("reasoning_effort") is not None:
        out["reasoning"] = {"effort": body["reasoning_effort"]}


def _convert_messages(messages: Any) -> _Conversation:
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "must be a non-empty array")
    conversation = _Conversation()
    for i, entry in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(entry, dict):
            raise invalid(path, "must be an object")
        role = entry.get("role")
        handler = _ROLES.get(role) if isinstance(role, str) else None
        if handler is None:
            raise invalid(f"{path}.role", f"must be one of {', '.join(_ROLES)}")
        if entry.get("name") is not None:
            conversation.drops.field("messages.name")
        handler(entry, path, conversation)
    return conversation


def _instruction(entry: Block, path: str, conversation: _Conversation) -> None:
    texts = _texts(entry.get("content"), f"{path}.content", ("text",))
    if any(texts):
        parts = [input_text(text) for text in texts if text]
        conversation.items.append(message(entry["role"], parts))


def _user(entry: Block, path: str, conversation: _Conversation) -> None:
    content, content_path = entry.get("content"), f"{path}.content"
    if isinstance(content, str):
        parts = [input_text(content)]
    elif isinstance(content, list):
        parts = [_user_part(part, f"{content_path}[{j}]") for j, part in enumerate(content)]
    else:
        raise invalid(content_path, "must be a string or an array of content parts")
    conversation.items.append(message("user", parts))


def _assistant(entry: Block, path: str, conversation: _Conversation) -> None:
    parts = _assistant_parts(entry.get("content"), f"{path}.content")
    refusal = entry.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append(_refusal(refusal))
    if parts:
        conversation.items.append(message("assistant", parts))
    calls = entry.get("tool_calls") or []
    if not isinstance(calls, list):
        raise invalid(f"{path}.tool_calls", "must be an array")
    for k, call in enumerate(calls):
        conversation.items.append(_tool_call(call, f"{path}.tool_calls[{k}]"))
    legacy = entry.get("function_call")
    if legacy is not None:
        conversation.legacy_call_id = f"call_legacy_{conversation.legacy_calls}"
        conversation.legacy_calls += 1
        item = _function(legacy, conversation.legacy_call_id, f"{path}.function_call")
        conversation.items.append(item)
    if entry.get("audio") is not None:
        conversation.drops.item("audio")


def _tool(entry: Block, path: str, conversation: _Conversation) -> None:
    call_id = entry.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise invalid(f"{path}.tool_call_id", "must be a non-empty string")
    output = "\n".join(_texts(entry.get("content"), f"{path}.content", ("text",)))
    conversation.items.append(function_call_output(call_id, output))


def _function_result(entry: Block, path: str, conversation: _Conversation) -> None:
    if conversation.legacy_call_id is None:
        raise invalid(path, "a function message must follow an assistant function_call")
    output = "\n".join(_texts(entry.get("content"), f"{path}.content", ("text",)))
    conversation.items.append(function_call_output(conversation.legacy_call_id, output))
    conversation.legacy_call_id = None


_ROLES: dict[str, Callable[[Block, str, _Conversation], None]] = {
    "system": _instruction,
    "developer": _instruction,
    "user": _user,
    "assistant": _assistant,
    "tool": _tool,
    "function": _function_result,
}


def _texts(content: Any, path: str, kinds: tuple[str, ...]) -> list[str]:
    """The texts of a string-or-parts content; parts of other kinds are refused, not dropped."""
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


def _assistant_parts(content: Any, path: str) -> list[Block]:
    """History text as `output_text` parts, refusal parts as `refusal` parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [output_text(content)] if content else []
    if not isinstance(content, list):
        raise invalid(path, "must be a string or an array of parts")
    parts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(part, dict) or kind not in ("text", "refusal"):
            raise invalid(f"{path}[{j}].type", "must be one of text, refusal")
        text = string(part, kind, f"{path}[{j}]")
        if text:
            parts.append(output_text(text) if kind == "text" else _refusal(text))
    return parts


def _refusal(text: str) -> Block:
    return {"type": "refusal", "refusal": text}


def _user_part(part: Any, path: str) -> Block:
    kind = part.get("type") if isinstance(part, dict) else None
    handler = _USER_PARTS.get(kind) if isinstance(kind, str) else None
    if handler is None or not isinstance(part, dict):
        kinds = ", ".join(_USER_PARTS)
        raise invalid(f"{path}.type", f"must be one of {kinds}")
    return handler(part, path)


def _image_part(part: Block, path: str) -> Block:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url:
        raise invalid(f"{path}.image_url.url", "must be a URL or a data URL")
    detail = image.get("detail") if isinstance(image, dict) else None
    return input_image(url, detail)


def _file_part(part: Block, path: str) -> Block:
    file = part.get("file")
    if not isinstance(file, dict):
        raise invalid(f"{path}.file", "must be an object")
    out: Block = {"type": "input_file"}
    for key in ("file_id", "file_data", "filename"):
        if isinstance(file.get(key), str):
            out[key] = file[key]
    if "file_id" not in out and "file_data" not in out:
        raise invalid(f"{path}.file", "must hold file_id or file_data")
    return out


def _audio_part(part: Block, path: str) -> Block:
    audio = part.get("input_audio")
    if not isinstance(audio, dict):
        raise invalid(f"{path}.input_audio", "must be an object")
    return {"type": "input_audio", "input_audio": audio}


_USER_PARTS: dict[str, Callable[[Block, str], Block]] = {
    "text": lambda part, path: input_text(string(part, "text", path)),
    "image_url": _image_part,
    "file": _file_part,
    "input_audio": _audio_part,
}


def _tool_call(call: Any, path: str) -> Block:
    if not isinstance(call, dict):
        raise invalid(path, "must be an object")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise invalid(f"{path}.id", "must be a non-empty string")
    if call.get("type") == "custom":
        custom = call.get("custom")
        if not isinstance(custom, dict):
            raise invalid(f"{path}.custom", "must be an object")
        name = string(custom, "name", f"{path}.custom")
        raw = string(custom, "input", f"{path}.custom")
        return {"type": "custom_tool_call", "call_id": call_id, "name": name, "input": raw}
    return _function(call.get("function"), call_id, f"{path}.function")


def _function(function: Any, call_id: str, path: str) -> Block:
    if not isinstance(function, dict):
        raise invalid(path, "must be an object")
    arguments = function.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        raise invalid(f"{path}.arguments", "must be a JSON string")
    return function_call(call_id, string(function, "name", path), arguments or "")


def _tools(body: dict[str, Any], drops: Drops) -> dict[str, Any]:
    raw = body.get("tools") or []
    legacy = body.get("functions") or []
    if not isinstance(raw, list) or not isinstance(legacy, list):
        raise invalid("tools" if not isinstance(raw, list) else "functions", "must be an array")
    tools = [_tool_def(tool, f"tools[{i}]", drops) for i, tool in enumerate(raw)]
    tools += [_function_def(fn, f"functions[{i}]") for i, fn in enumerate(legacy)]
    kept = [tool for tool in tools if tool is not None]
    if not kept:
        if body.get("tool_choice") is not None or body.get("function_call") is not None:
            drops.field("tool_choice")
        return {}
    out: dict[str, Any] = {"tools": kept}
    choice = _tool_choice(body.get("tool_choice"), "tool_choice")
    if choice is None:
        choice = _legacy_choice(body.get("function_call"))
    if choice is not None:
        out["tool_choice"] = choice
    return out


def _tool_def(tool: Any, path: str, drops: Drops) -> Block | None:
    if not isinstance(tool, dict):
        raise invalid(path, "must be an object")
    kind = tool.get("type", "function")
    if kind == "function":
        return _function_def(tool.get("function"), f"{path}.function")
    if kind == "custom" and isinstance(tool.get("custom"), dict):
        custom = tool["custom"]
        out: Block = {"type": "custom", "name": string(custom, "name", f"{path}.custom")}
        for key in ("description", "format"):
            if custom.get(key) is not None:
                out[key] = custom[key]
        return out
    drops.tool(kind if isinstance(kind, str) else "unknown")
    return None


def _function_def(function: Any, path: str) -> Block:
    if not isinstance(function, dict):
        raise invalid(path, "must be an object")
    name = string(function, "name", path)
    return function_tool(
        name, function.get("description"), function.get("parameters"), function.get("strict")
    )


_CHOICE_STRINGS = frozenset({"none", "auto", "required"})


def _tool_choice(choice: Any, path: str) -> Any:
    if choice is None or (isinstance(choice, str) and choice in _CHOICE_STRINGS):
        return choice
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "function" and isinstance(choice, dict):
        function = choice.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return {"type": "function", "name": function["name"]}
    if kind == "custom" and isinstance(choice, dict):
        custom = choice.get("custom")
        if isinstance(custom, dict) and isinstance(custom.get("name"), str):
            return {"type": "custom", "name": custom["name"]}
    if kind == "allowed_tools" and isinstance(choice, dict):
        allowed = choice.get("allowed_tools")
        if isinstance(allowed, dict) and isinstance(allowed.get("tools"), list):
            tools = [_tool_choice(t, f"{path}.allowed_tools.tools") for t in allowed["tools"]]
            return {"type": "allowed_tools", "mode": allowed.get("mode", "auto"), "tools": tools}
    raise invalid(path, "must be none, auto, required, a named function or allowed_tools")


def _legacy_choice(choice: Any) -> Any:
    if choice is None or choice in ("none", "auto"):
        return choice
    if isinstance(choice, dict) and isinstance(choice.get("name"), str):
        return {"type": "function", "name": choice["name"]}
    raise invalid("function_call", "must be none, auto or a named function")
