"""OpenAI Responses request body -> OpenAI Chat Completions request body (RESPONSES.md §2, §6).

    >>> body = {"model": "m", "instructions": "Be brief.", "input": "hi"}
    >>> translate_request(body, "gpt-x").body["messages"]
    [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'hi'}]

Items keep their order; only contiguous function calls join one assistant message (grouping
across a user turn would reorder the history). System and developer items stay in place as
`system` messages. Call ids are the items' `call_id`, never their `id`. Reasoning items and
built-in call items have no Chat form: they are dropped and counted, as hosted tools are; every
top-level field not carried is named in the translation's `dropped`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from gateway.translate.fields import invalid, string
from gateway.translate.responses_request import (
    ToolChoice,
    ToolReading,
    dropped_fields,
    read_tool_choice,
    read_tools,
)
from gateway.translate.translation import Dropped, Translation

Item = dict[str, Any]
Message = dict[str, Any]

CARRIED = frozenset(
    {
        "parallel_tool_calls",
        "max_output_tokens",
        "temperature",
        "top_p",
        "top_logprobs",
        "reasoning",
        "text",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "service_tier",
    }
)
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


class _History:
    """The Chat messages being built, and what had no Chat form."""

    def __init__(self, tools: ToolReading) -> None:
        self.tools = tools
        self.messages: list[Message] = []
        self.dropped: dict[str, int] = {}
        self._calls_open = False  # the last message is an assistant turn taking more calls

    def append(self, message: Message, *, takes_calls: bool = False) -> None:
        self.messages.append(message)
        self._calls_open = takes_calls

    def call(self, call: dict[str, Any]) -> None:
        if not self._calls_open:
            self.append({"role": "assistant", "content": None}, takes_calls=True)
        self.messages[-1].setdefault("tool_calls", []).append(call)

    def drop(self, kind: str) -> None:
        self.dropped[kind] = self.dropped.get(kind, 0) + 1


def translate_request(body: dict[str, Any], upstream_model: str) -> Translation:
    tools = read_tools(body.get("tools"))
    history = _History(tools)
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        history.append({"role": "system", "content": instructions})
    _read_input(body.get("input"), history)
    out: dict[str, Any] = {"model": upstream_model, "messages": history.messages}
    _sampling(body, out)
    _tools(body, tools, out)
    if body.get("stream") is True:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}  # response.usage needs it
    dropped = Dropped(dropped_fields(body, CARRIED), tuple(tools.dropped), history.dropped)
    return Translation(out, dropped, tools.origins)


def _read_input(value: Any, history: _History) -> None:
    if isinstance(value, str):
        history.append({"role": "user", "content": value})
        return
    if value is None:
        return
    if not isinstance(value, list):
        raise invalid("input", "must be a string or an array of items")
    for i, item in enumerate(value):
        path = f"input[{i}]"
        if not isinstance(item, dict):
            raise invalid(path, "must be an object")
        kind = item.get("type", "message" if "role" in item else None)
        handler = _ITEMS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            history.drop(str(kind))
            continue
        handler(item, path, history)


def _message(item: Item, path: str, history: _History) -> None:
    role = _ROLES.get(item.get("role"))  # type: ignore[arg-type]
    if role is None:
        raise invalid(f"{path}.role", f"must be one of {', '.join(_ROLES)}")
    content = item.get("content")
    content_path = f"{path}.content"
    if isinstance(content, str):
        history.append({"role": role, "content": content}, takes_calls=role == "assistant")
        return
    if not isinstance(content, list):
        raise invalid(content_path, "must be a string or an array of content parts")
    if role == "assistant":
        _assistant_parts(content, content_path, history)
        return
    parts = [_part(part, f"{content_path}[{k}]") for k, part in enumerate(content)]
    if role == "system":
        texts = [p["text"] for p in parts if p.get("type") == "text"]
        history.append({"role": "system", "content": "\n".join(texts)})
        return
    history.append({"role": role, "content": parts})


def _assistant_parts(content: list[Any], path: str, history: _History) -> None:
    texts: list[str] = []
    refusals: list[str] = []
    for k, part in enumerate(content):
        part_path = f"{path}[{k}]"
        if not isinstance(part, dict):
            raise invalid(part_path, "must be an object")
        kind = part.get("type")
        if kind in ("output_text", "input_text", "text"):
            texts.append(string(part, "text", part_path))
        elif kind == "refusal":
            refusals.append(string(part, "refusal", part_path))
        else:
            raise invalid(f"{part_path}.type", "an assistant message holds only text and refusals")
    message: Message = {"role": "assistant", "content": "".join(texts) or None}
    if refusals:
        message["refusal"] = "".join(refusals)
    history.append(message, takes_calls=True)


def _part(part: Any, path: str) -> dict[str, Any]:
    if not isinstance(part, dict):
        raise invalid(path, "must be an object")
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": string(part, "text", path)}
    if kind == "input_image":
        return _image(part, path)
    if kind == "input_file":
        return _file(part, path)
    raise invalid(f"{path}.type", "must be input_text, input_image or input_file")


def _image(part: dict[str, Any], path: str) -> dict[str, Any]:
    url = part.get("image_url")
    if not isinstance(url, str) or not url:
        what = "file_id images are not supported" if part.get("file_id") else "is required"
        raise invalid(f"{path}.image_url", what)
    image: dict[str, Any] = {"url": url}
    if isinstance(part.get("detail"), str):
        image["detail"] = part["detail"]
    return {"type": "image_url", "image_url": image}


def _file(part: dict[str, Any], path: str) -> dict[str, Any]:
    if part.get("file_url") is not None:
        raise invalid(f"{path}.file_url", "file URLs cannot be sent to Chat Completions")
    file: dict[str, Any] = {}
    for key in ("file_data", "file_id", "filename"):
        if isinstance(part.get(key), str):
            file[key] = part[key]
    if "file_data" not in file and "file_id" not in file:
        raise invalid(path, "needs file_data or file_id")
    return {"type": "file", "file": file}


def _function_call(item: Item, path: str, history: _History) -> None:
    arguments = item.get("arguments")
    if arguments is None:
        arguments = "{}"
    if not isinstance(arguments, str):
        raise invalid(f"{path}.arguments", "must be a JSON string")
    namespace = item.get("namespace") if isinstance(item.get("namespace"), str) else None
    name = history.tools.upstream_name(item["name"], namespace)
    history.call(_call(item["call_id"], name, arguments or "{}"))


def _custom_call(item: Item, path: str, history: _History) -> None:
    raw = item.get("input")
    if not isinstance(raw, str):
        raise invalid(f"{path}.input", "must be a string")
    namespace = item.get("namespace") if isinstance(item.get("namespace"), str) else None
    name = history.tools.upstream_name(item["name"], namespace)
    history.call(_call(item["call_id"], name, orjson.dumps({"input": raw}).decode()))


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _call_output(item: Item, path: str, history: _History) -> None:
    output = item.get("output")
    if isinstance(output, list):
        parts = [_part(part, f"{path}.output[{k}]") for k, part in enumerate(output)]
        output = "".join(p["text"] for p in parts if p["type"] == "text")
    elif output is None:
        output = ""
    elif not isinstance(output, str):
        raise invalid(f"{path}.output", "must be a string or an array of content parts")
    history.append({"role": "tool", "tool_call_id": item["call_id"], "content": output})


def _item_reference(item: Item, path: str, history: _History) -> None:
    raise invalid(f"{path}.id", "item references need a stored response, and none is held")


_ITEMS: dict[str, Callable[[Item, str, _History], None]] = {
    "message": _message,
    "function_call": _function_call,
    "custom_tool_call": _custom_call,
    "function_call_output": _call_output,
    "custom_tool_call_output": _call_output,
    "item_reference": _item_reference,
}


def _sampling(body: dict[str, Any], out: dict[str, Any]) -> None:
    for key in ("temperature", "top_p", "prompt_cache_key", "service_tier", "safety_identifier"):
        if body.get(key) is not None:
            out[key] = body[key]
    if isinstance(body.get("user"), str):
        out["user"] = body["user"]
    max_output = body.get("max_output_tokens")
    if max_output is not None:
        if not isinstance(max_output, int) or isinstance(max_output, bool):
            raise invalid("max_output_tokens", "must be an integer")
        out["max_completion_tokens"] = max_output  # reasoning models reject max_tokens
    if isinstance(body.get("top_logprobs"), int):
        out["logprobs"] = True
        out["top_logprobs"] = body["top_logprobs"]
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("effort"), str):
        out["reasoning_effort"] = reasoning["effort"]
    text = body.get("text")
    if isinstance(text, dict):
        _text_options(text, out)


def _text_options(text: dict[str, Any], out: dict[str, Any]) -> None:
    fmt = text.get("format")
    if isinstance(fmt, dict):
        kind = fmt.get("type")
        if kind == "json_schema":
            schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
            out["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif kind == "json_object":
            out["response_format"] = {"type": "json_object"}
    if isinstance(text.get("verbosity"), str):
        out["verbosity"] = text["verbosity"]


def _tools(body: dict[str, Any], tools: ToolReading, out: dict[str, Any]) -> None:
    choice = read_tool_choice(body.get("tool_choice"), tools)
    if not tools.functions:
        return
    out["tools"] = [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                **({"description": spec.description} if spec.description else {}),
                "parameters": spec.parameters,
                **({"strict": spec.strict} if spec.strict is not None else {}),
            },
        }
        for spec in tools.functions
    ]
    if choice is not None:
        out["tool_choice"] = _choice(choice, tools)
    if isinstance(body.get("parallel_tool_calls"), bool):
        out["parallel_tool_calls"] = body["parallel_tool_calls"]


def _choice(choice: ToolChoice, tools: ToolReading) -> Any:
    if choice.mode in ("auto", "none", "required"):
        return choice.mode
    names = [_upstream(name, tools) for name in choice.names]
    if choice.mode == "function":
        return {"type": "function", "function": {"name": names[0]}}
    allowed = [{"type": "function", "function": {"name": n}} for n in names]
    return {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": allowed}}


def _upstream(name: str, tools: ToolReading) -> str:
    """A choice names the client's tool; a namespaced one is known upstream by its joined name."""
    for spec in tools.functions:
        if spec.origin is not None and spec.origin.name == name:
            return spec.name
    return name
