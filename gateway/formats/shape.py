"""Reading upstream JSON into the types the gateway relies on, at the edge where it arrives.

An upstream that sends a string where an object belongs breaks its own wire format: the decoders
read every field they use through these helpers, so a wrong shape becomes one `ShapeError` (a
protocol error of the upstream) instead of an AttributeError deep in an encoder.

    delta = mapping(choice.get("delta"), "delta")       # {} for null/absent, else a dict
    text = string(delta.get("content"), "content")      # None for null/absent, else a str
    tokens = count(usage.get("prompt_tokens"))          # a non-negative int64, else None
"""

from __future__ import annotations

from typing import Any

INT64_MAX = 2**63 - 1


class ShapeError(ValueError):
    """An upstream JSON value of the wrong type; the message names the field, never its value."""


def mapping(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ShapeError(f"{field} is not an object")
    return value


def sequence(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ShapeError(f"{field} is not an array")
    return value


def objects(value: Any, field: str) -> list[dict[str, Any]]:
    items = sequence(value, field)
    for item in items:
        if not isinstance(item, dict):
            raise ShapeError(f"an item of {field} is not an object")
    return items


def string(value: Any, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ShapeError(f"{field} is not a string")


def index(value: Any, field: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ShapeError(f"{field} is not an integer")
    return value


def loose(value: Any) -> dict[str, Any]:
    """An object whose absence or wrong shape costs nothing but its figures (usage)."""
    return value if isinstance(value, dict) else {}


def count(value: Any, limit: int = INT64_MAX) -> int | None:
    """A count as a record can hold it: a whole number in 0..limit (12.0 counts), else None.

    Usage figures only inform; a strange one must not break an answer, so it is dropped."""
    if type(value) is int:  # the common case first: this runs for every usage figure
        return value if 0 <= value <= limit else None
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():  # also NaN and the infinities
            return None
        value = int(value)
    if isinstance(value, int) and 0 <= value <= limit:
        return value
    return None


def token_count(body: Any, field: str) -> int:
    """A token-count answer's number (`input_tokens`, `totalTokens`, ...): a count, else the
    answer is not its wire's."""
    value = count(mapping(body, "answer").get(field))
    if value is None:
        raise ValueError(f"{field}: not a token count")
    return value
