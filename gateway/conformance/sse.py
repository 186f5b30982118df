"""A careful SSE reader (the WHATWG event-stream rules), fed bytes as they arrive.

    reader = SseReader()
    events = reader.feed(b'event: ping\\ndata: {"type":')
    events += reader.feed(b'"ping"}\\n\\n')     # [Event(name="ping", data='{"type":"ping"}')]

Lines end with LF, CRLF or CR; a line starting with ":" is a comment; `data:` lines of one event
are joined with a newline; one space after the colon is dropped; a blank line dispatches. An event
left without its blank line when the stream ends is not dispatched (`reader.pending` says so).
UTF-8 is decoded per whole line, so a character split across reads is never broken.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    name: str | None  # the `event:` field; None when the event had none
    data: str
    lines: int  # how many data: lines it was sent in


class SseReader:
    def __init__(self) -> None:
        self._buffer = b""
        self._name: str | None = None
        self._data: list[str] = []
        self._cr = False  # the last byte fed was a CR: a LF right after it ends no new line

    @property
    def pending(self) -> bool:
        """Bytes or fields of an event that no blank line has dispatched yet."""
        return bool(self._buffer.strip() or self._data or self._name is not None)

    def feed(self, data: bytes) -> list[Event]:
        if self._cr and data.startswith(b"\n"):
            data = data[1:]
        self._cr = data.endswith(b"\r")
        self._buffer += data
        events: list[Event] = []
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                return events
            end, width = cut
            line = self._buffer[:end].decode("utf-8", "replace")
            self._buffer = self._buffer[end + width :]
            event = self._line(line)
            if event is not None:
                events.append(event)

    def _line(self, line: str) -> Event | None:
        if not line:
            if not self._data:
                self._name = None
                return None
            event = Event(self._name, "\n".join(self._data), len(self._data))
            self._name, self._data = None, []
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._name = value
        return None


def _line_end(buffer: bytes) -> tuple[int, int] | None:
    """Where the first line ends and how wide its end is (CRLF: 2), or None."""
    lf, cr = buffer.find(b"\n"), buffer.find(b"\r")
    if cr == -1 and lf == -1:
        return None
    if cr == -1 or (lf != -1 and lf < cr):
        return lf, 1
    if cr + 1 < len(buffer):
        return cr, 2 if buffer[cr + 1 : cr + 2] == b"\n" else 1
    return cr, 1  # a CR at the end: `feed` drops the LF if the next read starts with one
