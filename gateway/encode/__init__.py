"""Client-side encoders: what a client of each format receives, streamed or whole.

A stream writer is fed, for each upstream frame, the frame, its parsed object and its events
(synthetic terminal events come with neither frame nor object), and returns the bytes to send.
"""

from __future__ import annotations

from typing import Any, Protocol

from gateway.events import Event
from gateway.formats.sse import SSEFrame

Parsed = dict[str, Any] | None


class StreamWriter(Protocol):
    def feed(self, frame: SSEFrame | None, obj: Parsed, events: list[Event]) -> bytes: ...
