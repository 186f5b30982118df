"""Anthropic Messages request body -> Bedrock Converse request body.

    >>> body = {"system": "Be brief.", "max_tokens": 64, "top_k": 5, "metadata": {"user_id": "u"},
    ...         "messages": [{"role": "user", "content": "hi"}]}
    >>> translation = translate_request(body, "anthropic.claude-x")
    >>> translation.body["system"], translation.body["inferenceConfig"]
    ([{'text': 'Be brief.'}], {'maxTokens': 64})
    >>> translation.body["additionalModelRequestFields"], translation.dropped.fields
    ({'top_k': 5}, ('metadata',))

The model and `stream` are not in the body (the provider puts them in the URL: `/converse` or
`/converse-stream`). Carried: system (text blocks; a `cache_control` becomes a cachePoint block
after its block, in system, messages and tools alike), messages
(`gateway.translate.anthropic_bedrock_content`), max_tokens, temperature, top_p and
stop_sequences (`inferenceConfig`), custom tools (`toolConfig.tools[].toolSpec`, with `strict`),
tool_choice auto / any / tool, output_config (`outputConfig`: effort, and a JSON schema format as
`textFormat`), and what only the model reads, in `additionalModelRequestFields` as
Anthropic-on-Bedrock takes it: top_k and thinking.

`tool_choice: none` has no Converse value: the tools are left out, so the model cannot call one,
unless the conversation already holds tool blocks (Bedrock refuses those without a toolConfig);
then the tools stay, the choice is left to the model and `tool_choice` is named as dropped. Not
carried and named in `Translation.dropped`: metadata (Converse's requestMetadata is for AWS's
invocation logs, not the model), disable_parallel_tool_use, service_tier, the top-level
cache_control, server tools (by type), container, context_management, mcp_servers and every
other field, and the content blocks Converse has no shape for (counted by type).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import InvalidRequest
from gateway.translate.anthropic_bedrock_content import blocks, cache_point, content_blocks
from gateway.translate.drops import ANTHROPIC_MESSAGES_FIELDS, Drops, anthropic_kind
from gateway.translate.fields import invalid, string
from gateway.translate.translation import Translation

Block = dict[str, Any]

# The fields read here (metadata and service_tier only to name them): whatever else the body
# holds is reported as dropped.
_READ = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "stream",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "service_tier",
    }
)
# Values that ask for no more than Bedrock does anyway: not sent, and nothing lost.
_DEFAULTS: dict[str, Any] = {"mcp_servers": [], "speed": "standard", "metadata": {}}
_INFERENCE = (
    ("max_tokens", "maxTokens"),
    ("temperature", "temperature"),
    ("top_p", "topP"),
    ("stop_sequences", "stopSequences"),
)
_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})


def translate_request(body: dict[str, Any], upstream_model: str) -> Translation:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object")
    drops = Drops(ANTHROPIC_MESSAGES_FIELDS, anthropic_kind)
    out: dict[str, Any] = {}
    system = _system(body.get("system"), drops)
    messages = _messages(body.get("messages"), drops, system)
    if system:
        out["system"] = system
    out["messages"] = messages
    inference = _inference(body)
    if inference:
        out["inferenceConfig"] = inference
    tool_config = _tool_config(body, drops, _has_tool_blocks(messages))
    if tool_config:
        out["toolConfig"] = tool_config
    output_config = _output_config(body.get("output_config"), drops)
    if output_config:
        out["outputConfig"] = output_config
    additional = {key: body[key] for key in ("top_k", "thinking") if body.get(key) is not None}
    if additional:
        out["additionalModelRequestFields"] = additional
    if body.get("service_tier") not in (None, "auto"):
        drops.field("service_tier")
    drops.unread(body, _READ, _DEFAULTS)
    return Translation(out, drops.dropped())


def _system(system: Any, drops: Drops) -> list[Block]:
    if system is None:
        return []
    if isinstance(system, str):
        return [{"text": system}] if system else []
    out: list[Block] = []
    for j, block in enumerate(blocks(system, "system")):
        path = f"system[{j}]"
        if block["type"] != "text":
            drops.item(block["type"])
            continue
        text = string(block, "text", path)
        if text:
            out.append({"text": text})
            point = cache_point(block, path)
            if point is not None:
                out.append(point)
    return out


def _messages(messages: Any, drops: Drops, system: list[Block]) -> list[Block]:
    """Converse roles are user and assistant; a `system` message (Claude Code sends them inside
    `messages`) joins the system blocks."""
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "must be a non-empty array")
    out: list[Block] = []
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(message, dict):
            raise invalid(path, "must be an object")
        role = message.get("role")
        if role == "system":
            system += _system(message.get("content"), drops)
            continue
        if role not in ("user", "assistant"):
            raise invalid(f"{path}.role", "must be one of user, assistant, system")
        content = content_blocks(message.get("content"), f"{path}.content", drops)
        if not content:
            continue  # Converse refuses an empty message
        if out and out[-1]["role"] == role:
            out[-1]["content"] += content  # roles alternate on Converse
        else:
            out.append({"role": role, "content": content})
    return out


def _has_tool_blocks(messages: list[Block]) -> bool:
    return any(
        "toolUse" in block or "toolResult" in block
        for message in messages
        for block in message["content"]
    )


def _inference(body: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key, name in _INFERENCE:
        value = body.get(key)
        if value is None or (key == "stop_sequences" and not value):
            continue
        if key == "max_tokens" and (not isinstance(value, int) or isinstance(value, bool)):
            raise invalid(key, "must be an integer")
        if key == "stop_sequences" and not (
            isinstance(value, list) and all(isinstance(s, str) for s in value)
        ):
            raise invalid(key, "must be an array of strings")
        config[name] = value
    return config


def _tool_config(body: dict[str, Any], drops: Drops, has_tool_blocks: bool) -> dict[str, Any]:
    raw = body.get("tools") or []
    if not isinstance(raw, list):
        raise invalid("tools", "must be an array")
    tools: list[Block] = []
    for i, tool in enumerate(raw):
        path = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise invalid(path, "must be an object")
        if tool.get("type", "custom") != "custom":
            drops.tool(tool.get("type"))  # server tools (web search, bash, ...)
            continue
        tools.append({"toolSpec": _tool_spec(tool, path)})
        point = cache_point(tool, path)
        if point is not None:
            tools.append(point)
    choice = body.get("tool_choice")
    if choice is not None and not isinstance(choice, dict):
        raise invalid("tool_choice", "must be an object")
    kind = choice.get("type") if choice is not None else "auto"
    if kind not in ("auto", "any", "tool", "none"):
        raise invalid("tool_choice.type", "must be one of auto, any, tool or none")
    if choice is not None and choice.get("disable_parallel_tool_use") is True:
        drops.field("tool_choice.disable_parallel_tool_use")
    if not any("toolSpec" in tool for tool in tools):
        if kind in ("any", "tool"):
            drops.field("tool_choice")  # it forces a tool that did not survive
        return {}
    if kind == "none":
        if not has_tool_blocks:
            return {}  # no tools: the model cannot call one
        drops.field("tool_choice")
        return {"tools": tools}
    config: dict[str, Any] = {"tools": tools}
    if kind == "any":
        config["toolChoice"] = {"any": {}}
    elif kind == "tool":
        assert choice is not None
        config["toolChoice"] = {"tool": {"name": string(choice, "name", "tool_choice")}}
    elif choice is not None:
        config["toolChoice"] = {"auto": {}}
    return config


def _tool_spec(tool: Block, path: str) -> Block:
    spec: Block = {"name": string(tool, "name", path)}
    if tool.get("description"):
        spec["description"] = string(tool, "description", path)
    schema = tool.get("input_schema") or {"type": "object", "properties": {}}
    if not isinstance(schema, dict):
        raise invalid(f"{path}.input_schema", "must be an object")
    spec["inputSchema"] = {"json": schema}
    if isinstance(tool.get("strict"), bool):
        spec["strict"] = tool["strict"]
    return spec


def _output_config(config: Any, drops: Drops) -> dict[str, Any]:
    """Converse's outputConfig: effort as it is, a JSON schema format as a `textFormat`, whose
    schema Converse takes as a JSON string."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise invalid("output_config", "must be an object")
    out: dict[str, Any] = {}
    effort = config.get("effort")
    if effort is not None:
        if not isinstance(effort, str) or effort not in _EFFORTS:
            raise invalid("output_config.effort", "must be one of " + ", ".join(sorted(_EFFORTS)))
        out["effort"] = effort
    fmt = config.get("format")
    if fmt is not None:
        if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
            raise invalid("output_config.format", "must be a json_schema format")
        schema = fmt.get("schema")
        if not isinstance(schema, dict):
            raise invalid("output_config.format.schema", "must be an object")
        structure = {"jsonSchema": {"schema": orjson.dumps(schema).decode(), "name": "response"}}
        out["textFormat"] = {"type": "json_schema", "structure": structure}
    if any(key not in ("effort", "format") for key in config):
        drops.field("output_config")  # a part of it Converse has no field for
    return out
