"""Anthropic Messages request body -> Gemini `generateContent` request body.

    >>> body = {"model": "m", "max_tokens": 50, "system": "be brief",
    ...         "messages": [{"role": "user", "content": "hi"}]}
    >>> out = translate_request(body, "gemini-2.5-pro").body
    >>> out["systemInstruction"], out["generationConfig"]
    ({'parts': [{'text': 'be brief'}]}, {'maxOutputTokens': 50})
    >>> out["contents"]
    [{'role': 'user', 'parts': [{'text': 'hi'}]}]

Carried: system (and `role: "system"` entries of `messages`) as `systemInstruction`; messages
as `contents` (roles user / model, same-role turns merged); text, images (base64 -> inlineData,
url -> fileData), documents, tool_use -> functionCall (its thought signature restored from the
gateway-minted id, `gateway.formats.gemini_ids`), tool_result -> functionResponse (named after
the tool_use it answers, found by id earlier in the history), thinking -> a thought part with
its signature; tools as `functionDeclarations` (`parametersJsonSchema` takes full JSON Schema);
tool_choice as `toolConfig.functionCallingConfig`; max_tokens, temperature, top_p, top_k,
stop_sequences, thinking and output_config in `generationConfig`; a `safety_settings` /
`safetySettings` field passed through. The model and the stream flag go in the URL. Everything
else is named in `Dropped`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from gateway.errors import InvalidRequest
from gateway.formats import gemini_ids
from gateway.translate.drops import ANTHROPIC_MESSAGES_FIELDS, Drops, anthropic_kind
from gateway.translate.fields import invalid
from gateway.translate.translation import Translation

Part = dict[str, Any]

_READ: Final = frozenset(
    {
        "model",
        "messages",
        "system",
        "stream",
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "output_format",
        "safety_settings",
        "safetySettings",
    }
)
ROLES: Final = {"user": "user", "assistant": "model"}
CHOICE_MODES: Final = {"auto": "AUTO", "any": "ANY", "none": "NONE"}
# Anthropic's effort -> a thinking budget in tokens, within what every Gemini thinking model takes
# (Pro 128..32768, Flash 0..24576); Gemini 3 reads a budget as the nearest thinking level.
EFFORT_BUDGET: Final = {"low": 1024, "medium": 8192, "high": 24576, "xhigh": 24576, "max": 24576}
DYNAMIC_BUDGET: Final = -1  # the model decides (Anthropic's adaptive thinking)
JSON_MIME: Final = "application/json"


@dataclass
class _History:
    """The conversation as Gemini contents, and what it needs to remember while walking it."""

    drops: Drops
    system: list[Part] = field(default_factory=list)
    contents: list[dict[str, Any]] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # tool_use id -> function name

    def add(self, role: str, parts: list[Part]) -> None:
        if not parts:
            return
        if self.contents and self.contents[-1]["role"] == role:
            self.contents[-1]["parts"].extend(parts)
        else:
            self.contents.append({"role": role, "parts": parts})


def translate_request(body: dict[str, Any], upstream_model: str) -> Translation:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object")
    drops = Drops(ANTHROPIC_MESSAGES_FIELDS, anthropic_kind)
    history = _History(drops)
    history.system += _system_parts(body.get("system"), "system")
    _messages(body.get("messages"), history)
    out: dict[str, Any] = {"contents": history.contents}
    if history.system:
        out["systemInstruction"] = {"parts": history.system}
    out.update(_tools(body, drops))
    config = _generation_config(body, drops)
    if config:
        out["generationConfig"] = config
    safety = body.get("safety_settings", body.get("safetySettings"))
    if safety is not None:
        if not isinstance(safety, list):
            raise invalid("safety_settings", "must be an array")
        out["safetySettings"] = safety
    drops.unread(body, _READ)
    return Translation(out, drops.dropped())


def _system_parts(system: Any, path: str) -> list[Part]:
    if system is None:
        return []
    if isinstance(system, str):
        return [{"text": system}] if system else []
    if not isinstance(system, list):
        raise invalid(path, "must be a string or an array of text blocks")
    parts = []
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise invalid(f"{path}[{i}]", "must be a text block")
        text = _text(block, "text", f"{path}[{i}]")
        if text:
            parts.append({"text": text})
    return parts


def _text(block: dict[str, Any], key: str, path: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise invalid(f"{path}.{key}", "must be a string")
    return value


def _messages(messages: Any, history: _History) -> None:
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "must be a non-empty array")
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(message, dict):
            raise invalid(path, "must be an object")
        role = message.get("role")
        content = message.get("content")
        if role == "system":  # Claude Code sends these inside messages
            history.system += _system_parts(content, f"{path}.content")
            continue
        if role not in ROLES:
            raise invalid(f"{path}.role", "must be user, assistant or system")
        if isinstance(content, str):
            history.add(ROLES[role], [{"text": content}] if content else [])
            continue
        if not isinstance(content, list):
            raise invalid(f"{path}.content", "must be a string or an array of blocks")
        parts = []
        for j, block in enumerate(content):
            part = _block(block, f"{path}.content[{j}]", history)
            if part is not None:
                parts.append(part)
        history.add(ROLES[role], parts)


def _block(block: Any, path: str, history: _History) -> Part | None:
    kind = block.get("type") if isinstance(block, dict) else None
    if not isinstance(kind, str):
        raise invalid(f"{path}.type", "must be a string")
    handler = _BLOCKS.get(kind)
    if handler is None:
        history.drops.item(kind)
        return None
    return handler(block, path, history)


def _text_block(block: dict[str, Any], path: str, history: _History) -> Part | None:
    text = _text(block, "text", path)
    return {"text": text} if text else None


def _media_block(block: dict[str, Any], path: str, history: _History) -> Part | None:
    """An image or document: base64 data inline, a URL as fileData, plain text as text."""
    source = block.get("source")
    kind = source.get("type") if isinstance(source, dict) else None
    if not isinstance(source, dict) or not isinstance(kind, str):
        raise invalid(f"{path}.source", "must be an object with a type")
    if kind == "base64":
        media = _text(source, "media_type", f"{path}.source")
        return {"inlineData": {"mimeType": media, "data": _text(source, "data", f"{path}.source")}}
    if kind == "url":
        data: dict[str, Any] = {"fileUri": _text(source, "url", f"{path}.source")}
        if block.get("type") == "document":
            data["mimeType"] = "application/pdf"  # Anthropic's URL documents are PDFs
        return {"fileData": data}
    if kind == "text":
        text = _text(source, "data", f"{path}.source")
        return {"text": text} if text else None
    history.drops.item(block["type"])  # a source kind Gemini cannot take (file ids)
    return None


def _tool_use(block: dict[str, Any], path: str, history: _History) -> Part:
    call_id = _text(block, "id", path)
    name = _text(block, "name", path)
    args = block.get("input")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise invalid(f"{path}.input", "must be an object")
    history.names[call_id] = name
    part: Part = {"functionCall": {"name": name, "args": args}}
    signature = gemini_ids.read_signature(call_id)
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def _tool_result(block: dict[str, Any], path: str, history: _History) -> Part:
    call_id = _text(block, "tool_use_id", path)
    name = history.names.get(call_id)
    if name is None:
        raise invalid(f"{path}.tool_use_id", "answers no tool_use earlier in the conversation")
    content = block.get("content")
    texts: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for k, item in enumerate(content):
            if isinstance(item, dict) and item.get("type") == "text":
                texts.append(_text(item, "text", f"{path}.content[{k}]"))
            else:
                history.drops.item(item.get("type") if isinstance(item, dict) else None)
    elif content is not None:
        raise invalid(f"{path}.content", "must be a string or an array of blocks")
    # Gemini reads `output` as the function's output and `error` as its failure.
    key = "error" if block.get("is_error") is True else "output"
    return {"functionResponse": {"name": name, "response": {key: "\n".join(texts)}}}


def _thinking(block: dict[str, Any], path: str, history: _History) -> Part | None:
    text = _text(block, "thinking", path)
    signature = block.get("signature")
    part: Part = {"text": text, "thought": True}
    if isinstance(signature, str) and signature:
        part["thoughtSignature"] = signature
    elif not text:
        return None
    return part


_BLOCKS: Final[dict[str, Callable[[dict[str, Any], str, _History], Part | None]]] = {
    "text": _text_block,
    "image": _media_block,
    "document": _media_block,
    "tool_use": _tool_use,
    "tool_result": _tool_result,
    "thinking": _thinking,
}


def _tools(body: dict[str, Any], drops: Drops) -> dict[str, Any]:
    raw = body.get("tools") or []
    if not isinstance(raw, list):
        raise invalid("tools", "must be an array")
    declarations = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict):
            raise invalid(f"tools[{i}]", "must be an object")
        if tool.get("type", "custom") != "custom":
            drops.tool(tool.get("type"))  # a server tool: Gemini has its own, under other names
            continue
        declaration: dict[str, Any] = {"name": _text(tool, "name", f"tools[{i}]")}
        if tool.get("description"):
            declaration["description"] = tool["description"]
        schema = tool.get("input_schema")
        if schema is not None:
            if not isinstance(schema, dict):
                raise invalid(f"tools[{i}].input_schema", "must be an object")
            declaration["parametersJsonSchema"] = schema
        declarations.append(declaration)
    out: dict[str, Any] = {}
    if declarations:
        out["tools"] = [{"functionDeclarations": declarations}]
    config = _tool_choice(body.get("tool_choice"), drops)
    if config is not None and declarations:
        out["toolConfig"] = {"functionCallingConfig": config}
    elif config is not None and config["mode"] != "NONE":
        drops.field("tool_choice")  # it forces a tool the request does not define
    return out


def _tool_choice(choice: Any, drops: Drops) -> dict[str, Any] | None:
    if choice is None:
        return None
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "tool":
        name = _text(choice, "name", "tool_choice")
        config: dict[str, Any] = {"mode": "ANY", "allowedFunctionNames": [name]}
    elif isinstance(kind, str) and kind in CHOICE_MODES:
        config = {"mode": CHOICE_MODES[kind]}
    else:
        raise invalid("tool_choice.type", "must be auto, any, tool or none")
    if choice.get("disable_parallel_tool_use") is True:
        drops.field("tool_choice.disable_parallel_tool_use")  # Gemini has no such switch
    return config


def _generation_config(body: dict[str, Any], drops: Drops) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key, name in (
        ("max_tokens", "maxOutputTokens"),
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("top_k", "topK"),
    ):
        value = body.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise invalid(key, "must be a number")
            config[name] = value
    stop = body.get("stop_sequences")
    if stop:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise invalid("stop_sequences", "must be an array of strings")
        config["stopSequences"] = stop
    output_config = body.get("output_config")
    if output_config is None:
        output_config = {}
    if not isinstance(output_config, dict):
        raise invalid("output_config", "must be an object")
    thinking = _thinking_config(body.get("thinking"), output_config.get("effort"), drops)
    if thinking:
        config["thinkingConfig"] = thinking
    config.update(_output_format(body, output_config, drops))
    for key, value in output_config.items():
        if key not in ("effort", "format") and value is not None:
            known = key in ("task_budget",)
            drops.field(f"output_config.{key}" if known else "output_config")
    return config


def _thinking_config(thinking: Any, effort: Any, drops: Drops) -> dict[str, Any]:
    """Anthropic's thinking switch and effort as Gemini's `thinkingConfig`: a budget (enabled),
    a dynamic budget (adaptive), or the effort's budget; thoughts are shown when thinking is on."""
    kind = None
    if thinking is not None:
        kind = thinking.get("type") if isinstance(thinking, dict) else None
        if not isinstance(kind, str):
            raise invalid("thinking.type", "must be a string")
    if effort is not None and not isinstance(effort, str):
        raise invalid("output_config.effort", "must be a string")
    config: dict[str, Any] = {}
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 0:
            raise invalid("thinking.budget_tokens", "must be a non-negative integer")
        config = {"includeThoughts": True, "thinkingBudget": budget}
        if effort is not None:
            drops.field("output_config.effort")  # the budget already says how much
        return config
    if kind in ("adaptive", "between_tools"):
        config["includeThoughts"] = True
    elif kind not in (None, "disabled"):
        drops.field("thinking")  # a thinking mode of the future
    if effort is not None:
        budget = EFFORT_BUDGET.get(effort)
        if budget is None:
            drops.field("output_config.effort")
        else:
            config["thinkingBudget"] = budget
    elif kind in ("adaptive", "between_tools"):
        config["thinkingBudget"] = DYNAMIC_BUDGET
    return config


def _output_format(
    body: dict[str, Any], output_config: dict[str, Any], drops: Drops
) -> dict[str, Any]:
    """`output_config.format` (or the beta `output_format`) as a JSON response schema."""
    fmt = output_config.get("format")
    path = "output_config.format"
    beta = body.get("output_format")
    if fmt is None and beta is not None:
        fmt, path = beta, "output_format"
    elif fmt is not None and beta is not None:
        drops.field("output_format")  # output_config.format already says it
    if fmt is None:
        return {}
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind != "json_schema":
        drops.field(path)
        return {}
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise invalid(f"{path}.schema", "must be an object")
    return {"responseMimeType": JSON_MIME, "responseJsonSchema": schema}
