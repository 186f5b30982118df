"""What a request translator returns: the upstream body, and what it could not carry, by name.

Translation(body, Dropped(fields=("seed",), tools=("web_search",), items={"reasoning": 2}))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Dropped:
    """What a translation did not carry: top-level request fields, tools (by type, or name for
    a function), and input items (by type, counted)."""

    fields: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    items: Mapping[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.fields or self.tools or self.items)


NOTHING_DROPPED = Dropped()


@dataclass(frozen=True, slots=True)
class ToolOrigin:
    """How the client declared a tool the upstream sees as a plain function: its own name, the
    namespace it sits in, and whether it is a custom (raw text input) tool."""

    name: str
    namespace: str | None = None
    custom: bool = False


@dataclass(frozen=True, slots=True)
class Translation:
    body: dict[str, Any]
    dropped: Dropped = NOTHING_DROPPED
    # upstream function name -> the client's own tool, for the tools the translation reshaped
    tools: Mapping[str, ToolOrigin] = field(default_factory=dict)
