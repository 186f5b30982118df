"""The output items a Responses stream has open: what the writer keeps of each until it closes."""

from __future__ import annotations


class OpenMessage:
    """The message item being streamed: its parts so far, the part open now."""

    __slots__ = ("delta_tail", "encoded", "id", "index", "kind", "parts", "text", "where")

    def __init__(self, item_id: str, index: int) -> None:
        self.id = item_id
        self.index = index
        self.parts: list[str] = []  # the kinds of the closed parts
        self.encoded: list[bytes] = []  # their JSON, as the item's content holds it
        self.kind: str | None = None  # "output_text" | "refusal" while a part is open
        self.text: list[str] = []
        self.where = b""  # the open part's `"item_id":…,"output_index":…,"content_index":…`
        self.delta_tail = b""  # the fixed fields of the open text part's delta events


class OpenReasoning:
    """The reasoning item being streamed: its summary text so far and its signature."""

    __slots__ = ("id", "index", "signature", "text")

    def __init__(self, item_id: str, index: int) -> None:
        self.id = item_id
        self.index = index
        self.text: list[str] = []
        self.signature: str | None = None
