"""A small server-sent-events reader: bytes in any pieces -> (event, data) pairs.

reader = SSEReader()
for event, data in reader.feed(b'event: ping\\ndata: {}\\n\\n'):
    ...                                   # ("ping", "{}")
"""

from __future__ import annotations

import re

_BLANK_LINE = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE = re.compile(r"\r\n|\n|\r")


class SSEReader:
    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        self._buffer += chunk
        frames = _BLANK_LINE.split(self._buffer)
        self._buffer = frames.pop()
        return [frame for raw in frames if (frame := _parse(raw)) is not None]

    def close(self) -> list[tuple[str, str]]:
        """A last frame the server ended without its blank line."""
        raw, self._buffer = self._buffer, b""
        frame = _parse(raw)
        return [frame] if frame is not None else []


def _parse(raw: bytes) -> tuple[str, str] | None:
    event = "message"
    data: list[str] = []
    for line in _LINE.split(raw.decode("utf-8", "replace")):
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    return (event, "\n".join(data)) if data else None
