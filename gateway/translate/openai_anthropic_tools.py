"""OpenAI Chat tools and tool choice -> Anthropic Messages tools and tool choice.

    >>> tools_to_anthropic({"tools": [{"type": "function", "function": {"name": "now"}}],
    ...                     "parallel_tool_calls": False}, Drops(()))["tool_choice"]
    {'type': 'auto', 'disable_parallel_tool_use': True}

Only function tools exist on both wires: any other tool type is refused, not dropped.
"""

from __future__ import annotations

from typing import Any

from gateway.translate.drops import Drops
from gateway.translate.fields import invalid, mapping, string

Block = dict[str, Any]


def tools_to_anthropic(body: dict[str, Any], drops: Drops) -> dict[str, Any]:
    """`tools` (or the legacy `functions`), `tool_choice` (or `function_call`) and
    `parallel_tool_calls` as Anthropic's `tools` and `tool_choice`."""
    raw = body.get("tools") or []
    if not isinstance(raw, list):
        raise invalid("tools", "must be an array")
    if raw:
        tools = [_tool(tool, f"tools[{i}]") for i, tool in enumerate(raw)]
        choice = _tool_choice(body.get("tool_choice"))
        allowed = _allowed(body.get("tool_choice"))
        if allowed is not None:  # Anthropic has no such choice: only those tools are sent
            tools = [tool for tool in tools if tool["name"] in allowed]
        for legacy in ("functions", "function_call"):
            if body.get(legacy):
                drops.field(legacy)  # `tools` supersedes them
    else:
        tools, choice = _legacy_functions(body)
    if not tools:
        for key in ("tool_choice", "function_call"):
            if body.get(key) not in (None, "none", "auto"):
                drops.field(key)  # it forces a tool the request does not define
        return {}
    out: dict[str, Any] = {"tools": tools}
    if body.get("parallel_tool_calls") is False:
        choice = choice or {"type": "auto"}
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    if choice:
        out["tool_choice"] = choice
    return out


def _tool(tool: Any, path: str) -> Block:
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        raise invalid(path, "only function tools can be sent to Anthropic")
    return _function_tool(mapping(tool, "function", path), f"{path}.function")


def _function_tool(function: Any, path: str) -> Block:
    if not isinstance(function, dict):
        raise invalid(path, "must be an object")
    out: Block = {"name": string(function, "name", path)}
    if function.get("description"):
        out["description"] = function["description"]
    out["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
    if isinstance(function.get("strict"), bool):
        out["strict"] = function["strict"]
    return out


def _legacy_functions(body: dict[str, Any]) -> tuple[list[Block], dict[str, Any] | None]:
    """The deprecated `functions` / `function_call` pair, read as tools and a tool choice."""
    raw = body.get("functions") or []
    if not isinstance(raw, list):
        raise invalid("functions", "must be an array")
    tools = [_function_tool(function, f"functions[{i}]") for i, function in enumerate(raw)]
    choice = body.get("function_call")
    if not tools or choice is None:
        return tools, None
    if isinstance(choice, str) and choice in ("none", "auto"):
        return tools, {"type": choice}
    if isinstance(choice, dict) and isinstance(choice.get("name"), str):
        return tools, {"type": "tool", "name": choice["name"]}
    raise invalid("function_call", "must be none, auto or a named function")


_CHOICE_STRINGS: dict[str, str] = {"none": "none", "auto": "auto", "required": "any"}


def _allowed(choice: Any) -> set[str] | None:
    """The names an `allowed_tools` choice lets the model call, or None for any other choice."""
    if not isinstance(choice, dict) or choice.get("type") != "allowed_tools":
        return None
    listed = choice.get("allowed_tools")
    listed = listed.get("tools") if isinstance(listed, dict) else None
    if not isinstance(listed, list):
        raise invalid("tool_choice", "an allowed_tools choice must list its tools")
    names = {
        tool["function"]["name"]
        for tool in listed
        if isinstance(tool, dict)
        and isinstance(tool.get("function"), dict)
        and isinstance(tool["function"].get("name"), str)
    }
    return names


def _tool_choice(choice: Any) -> dict[str, Any] | None:
    if choice is None:
        return None
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        listed = choice.get("allowed_tools")
        mode = listed.get("mode") if isinstance(listed, dict) else None
        return {"type": "any" if mode == "required" else "auto"}
    if isinstance(choice, str) and choice in _CHOICE_STRINGS:
        return {"type": _CHOICE_STRINGS[choice]}
    function = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return {"type": "tool", "name": function["name"]}
    raise invalid("tool_choice", "must be none, auto, required or a named function")
