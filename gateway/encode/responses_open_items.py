"""The output items a Responses stream has open: what the writer keeps of each until it closes."""

from __future__ import annotations

from typing import Any


class OpenMessage:
    """The message item being streamed: its parts so far, the part open now."""

    __slots__ = ("delta_tail", "id", "index", "kind", "parts", "text")

    def __init__(self, item_id: str, index: int) -> None:
        self.id = item_id
        self.index = index
        self.parts: list[dict[str, Any]] = []
        self.kind: str | None = None  # "output_text" | "refusal" while a part is open
        self.text: list[str] = []
        self.delta_tail = b""  # the fixed fields of the open text part's delta events


class OpenReasoning:
    """The reasoning item being streamed: its summary text so far and its signature."""

    __slots__ = ("id", "index", "signature", "text")

    def __init__(self, item_id: str, index: int) -> None:
        self.id = item_id
        self.index = index
        self.text: list[str] = []
        self.signature: str | None = None
