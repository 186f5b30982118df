"""Incremental Server-Sent Events decoding and encoding.

The decoder accepts any chunking of the byte stream: it splits on line ends at the byte level
(`\\n`, `\\r\\n`, `\\r`, including a `\\r\\n` pair split across two chunks) and never decodes
text, so a chunk boundary inside a UTF-8 character cannot corrupt anything. Data stays bytes for
orjson; only the short `event:` name is decoded.

    decoder = SSEDecoder()
    for chunk in body:
        for frame in decoder.feed(chunk):
            handle(frame.event, frame.data)
    for frame in decoder.close():
        handle(frame.event, frame.data)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SSEFrame:
    event: str | None
    data: bytes


class SSEDecoder:
    __slots__ = ("_data", "_event", "_has_data", "_pending")

    def __init__(self) -> None:
        self._pending = b""
        self._event: str | None = None
        self._data: list[bytes] = []
        self._has_data = False

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        buf = self._pending + chunk if self._pending else chunk
        if b"\r" in buf:
            # A trailing \r may be the first half of \r\n: keep it for the next chunk.
            tail = b"\r" if buf.endswith(b"\r") else b""
            if tail:
                buf = buf[:-1]
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        else:
            tail = b""
        lines = buf.split(b"\n")
        self._pending = lines.pop() + tail
        frames: list[SSEFrame] = []
        for line in lines:
            if not line:
                if self._has_data:
                    frames.append(self._dispatch())
                else:
                    self._event = None
            else:
                self._field(line)
        return frames

    def close(self) -> list[SSEFrame]:
        """End of stream: a last event without its blank line is still delivered."""
        frames: list[SSEFrame] = []
        pending, self._pending = self._pending.rstrip(b"\r"), b""
        if pending:
            self._field(pending)
        if self._has_data:
            frames.append(self._dispatch())
        return frames

    def _field(self, line: bytes) -> None:
        if line[0] == 0x3A:  # ":" comment / keep-alive
            return
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._has_data = True
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        # id, retry and unknown fields carry nothing the gateway uses

    def _dispatch(self) -> SSEFrame:
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        frame = SSEFrame(self._event, data)
        self._event = None
        self._data = []
        self._has_data = False
        return frame


def encode(data: bytes, event: str | None = None) -> bytes:
    """One SSE event. Data that spans lines (a relayed event the upstream sent as several `data:`
    lines, which the decoder joined with `\\n`) gets a `data: ` prefix on every line again."""
    if b"\n" in data:
        data = data.replace(b"\n", b"\ndata: ")
    if event is None:
        return b"data: " + data + b"\n\n"
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"
