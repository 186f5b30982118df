"""What both Responses translators read the same way: tools, tool_choice, fields carried.

A Responses request is turned into a wire-neutral reading first, so the Chat and the Anthropic
translators differ only in how they write it (RESPONSES.md §2.2, §2.3):

    tools = read_tools(body.get("tools"))        # functions, with custom and namespaced tools
    choice = read_tool_choice(body.get("tool_choice"), tools)   # None when nothing is sent
    fields = dropped_fields(body, CARRIED_TO_CHAT)               # names, never values
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gateway.translate.fields import invalid
from gateway.translate.translation import ToolOrigin

# Fields the gateway itself reads on every route: they are never "dropped".
GATEWAY_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "stream",
        "stream_options",
        "store",
        "previous_response_id",
        "include",
        "metadata",
        "tools",
        "tool_choice",
    }
)
NAMESPACE_SEPARATOR = "__"
RAW_INPUT = "raw text, passed to the tool unchanged"


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """A tool the upstream sees as a function."""

    name: str  # as the upstream sees it (`<namespace>__<name>` for a namespaced tool)
    description: str | None
    parameters: dict[str, Any]
    strict: bool | None
    origin: ToolOrigin | None  # None: a plain function, named as the client named it


@dataclass(slots=True)
class ToolReading:
    functions: list[FunctionSpec] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # tool types the upstream cannot run

    @property
    def origins(self) -> dict[str, ToolOrigin]:
        return {f.name: f.origin for f in self.functions if f.origin is not None}

    def upstream_name(self, name: str, namespace: str | None = None) -> str:
        return f"{namespace}{NAMESPACE_SEPARATOR}{name}" if namespace else name


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """`mode`: auto | none | required | function (one named tool) | allowed (a subset)."""

    mode: str
    names: tuple[str, ...] = ()


def read_tools(tools: Any) -> ToolReading:
    reading = ToolReading()
    if tools is None:
        return reading
    if not isinstance(tools, list):
        raise invalid("tools", "must be an array")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise invalid(f"tools[{i}]", "must be an object")
        _read_tool(tool, f"tools[{i}]", None, reading)
    names = [f.name for f in reading.functions]
    clashing = sorted({n for n in names if names.count(n) > 1})
    if clashing:
        raise invalid("tools", f"two tools are named {clashing[0]!r} once namespaces are joined")
    return reading


def _read_tool(tool: dict[str, Any], path: str, namespace: str | None, out: ToolReading) -> None:
    kind = tool.get("type")
    if kind == "namespace" and namespace is None:
        ns = _name(tool, path)
        children = tool.get("tools")
        if not isinstance(children, list):
            raise invalid(f"{path}.tools", "must be an array")
        for k, child in enumerate(children):
            if not isinstance(child, dict):
                raise invalid(f"{path}.tools[{k}]", "must be an object")
            _read_tool(child, f"{path}.tools[{k}]", ns, out)
        return
    if kind not in ("function", "custom"):
        out.dropped.append(str(kind))  # hosted, or run by a client the upstream is not
        return
    name = _name(tool, path)
    description = tool.get("description")
    description = description if isinstance(description, str) else None
    custom = kind == "custom"
    parameters = _custom_parameters(tool) if custom else _parameters(tool, path)
    strict = tool.get("strict") if isinstance(tool.get("strict"), bool) else None
    origin = ToolOrigin(name, namespace, custom) if (custom or namespace) else None
    out.functions.append(
        FunctionSpec(out.upstream_name(name, namespace), description, parameters, strict, origin)
    )


def _name(tool: dict[str, Any], path: str) -> str:
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise invalid(f"{path}.name", "must be a non-empty string")
    return name


def _parameters(tool: dict[str, Any], path: str) -> dict[str, Any]:
    parameters = tool.get("parameters")
    if parameters is None:
        return {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise invalid(f"{path}.parameters", "must be an object")
    return parameters


def _custom_parameters(tool: dict[str, Any]) -> dict[str, Any]:
    """A custom tool takes raw text: the upstream sees one string property, `input`, described
    by the tool's grammar when it has one."""
    fmt = tool.get("format")
    description = RAW_INPUT
    if isinstance(fmt, dict) and fmt.get("type") == "grammar":
        syntax, definition = fmt.get("syntax"), fmt.get("definition")
        if isinstance(definition, str):
            description = f"raw text in this {syntax or 'grammar'} grammar:\n{definition}"
    return {
        "type": "object",
        "properties": {"input": {"type": "string", "description": description}},
        "required": ["input"],
        "additionalProperties": False,
    }


_FIXED_CHOICES = {"auto": "auto", "none": "none", "required": "required"}


def read_tool_choice(choice: Any, tools: ToolReading) -> ToolChoice | None:
    """The choice to send, or None (nothing to send: no choice, or no tool left). A choice that
    forces a tool the upstream cannot run is a 400: the model could not comply."""
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice not in _FIXED_CHOICES:
            raise invalid("tool_choice", "must be auto, none, required or an object")
        if choice == "required" and not tools.functions and tools.dropped:
            raise invalid("tool_choice", "requires a tool, and every tool given was dropped")
        return ToolChoice(choice) if tools.functions else None
    if not isinstance(choice, dict):
        raise invalid("tool_choice", "must be a string or an object")
    kind = choice.get("type")
    if kind in ("function", "custom"):
        name = choice.get("name")
        if not isinstance(name, str):
            raise invalid("tool_choice.name", "must be a string")
        return ToolChoice("function", (name,))
    if kind == "allowed_tools":
        return _allowed(choice, tools)
    raise invalid("tool_choice", f"forces the {kind!r} tool, which this upstream cannot run")


def _allowed(choice: dict[str, Any], tools: ToolReading) -> ToolChoice | None:
    listed = choice.get("tools")
    if not isinstance(listed, list):
        raise invalid("tool_choice.tools", "must be an array")
    names = []
    for k, tool in enumerate(listed):
        if not isinstance(tool, dict):
            raise invalid(f"tool_choice.tools[{k}]", "must be an object")
        if tool.get("type") in ("function", "custom") and isinstance(tool.get("name"), str):
            names.append(tool["name"])
    mode = "required" if choice.get("mode") == "required" else "auto"
    if not names:
        if mode == "required":
            raise invalid("tool_choice", "allows no tool this upstream can run")
        return None
    return ToolChoice(mode if len(names) == len(tools.functions) else "allowed", tuple(names))


def relayed_tool_origins(body: dict[str, Any]) -> dict[str, ToolOrigin]:
    """A Responses upstream names a call by the tool's own name: the custom tools, by name.

    Only the top-level custom tools are named, and only their names are read: the upstream
    judges the request it was sent unchanged, and reading every tool as a translation does
    (an agent's twenty function schemas) cost 35 us a request."""
    declared = body.get("tools")
    if not isinstance(declared, list):
        return {}
    origins: dict[str, ToolOrigin] = {}
    for tool in declared:
        if isinstance(tool, dict) and tool.get("type") == "custom":
            name = tool.get("name")
            if isinstance(name, str) and name:
                origins[name] = ToolOrigin(name, None, True)
    return origins


def dropped_fields(body: dict[str, Any], carried: Iterable[str]) -> tuple[str, ...]:
    """The request's top-level fields neither the gateway nor the translation carries."""
    kept = GATEWAY_FIELDS.union(carried)
    return tuple(sorted(key for key in body if key not in kept and body[key] is not None))
