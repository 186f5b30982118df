"""Reading a client's request fields in a translator: a wrong field is a 400 naming its path
(`messages[2].tool_calls[0].function.name`), never its value.

    name = string(function, "name", "tools[0].function")
    raise invalid("tool_choice", "must be auto, none or required")
"""

from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest


def invalid(path: str, problem: str) -> InvalidRequest:
    return InvalidRequest(f"{path}: {problem}", path)


def string(obj: dict[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise invalid(f"{path}.{key}", "must be a string")
    return value


def mapping(obj: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise invalid(f"{path}.{key}", "must be an object")
    return value
