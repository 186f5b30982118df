"""Incremental Server-Sent Events decoding and encoding.

The decoder accepts any chunking of the byte stream: it splits on line ends at the byte level
(`\\n`, `\\r\\n`, `\\r`, including a `\\r\\n` pair split across two chunks) and never decodes
text, so a chunk boundary inside a UTF-8 character cannot corrupt anything. Data stays bytes for
orjson; only the short `event:` name is decoded. A byte search here is `find`, never `in`:
`bytes.__contains__` first tries its argument as a byte value, and for a bytes argument that
TypeError is formatted and cleared (CPython 3.11: some 1,000 instructions more than `find`, on
every chunk and every event). Bytes are put together by one `join` or one `%`, never a chain
of `+`: each `+` goes through the buffer protocol and allocates (CPython 3.11: a chain of four
takes about twice as long as one `join`).

    decoder = SSEDecoder()
    for chunk in body:
        for frame in decoder.feed(chunk):
            handle(frame.event, frame.data)
    for frame in decoder.close():
        handle(frame.event, frame.data)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A run of events that are each one `event: ` line and one `data: ` line (Anthropic's and the
# Responses wire's): matched in one pass, see `SSEDecoder._pairs`.
PAIR = re.compile(rb"event: ([^\n]*)\ndata: ([^\n]*)\n\n")
PAIR_FRAMING = 16  # len(b"event: ") + len(b"\ndata: ") + len(b"\n\n")
# Decoded event names, by their bytes: a stream repeats a handful (bounded, as names are the
# upstream's to choose).
_NAMES: dict[bytes, str] = {}
_NAMES_MAX = 256


@dataclass(slots=True)
class SSEFrame:
    event: str | None
    data: bytes


class SSEDecoder:
    """Events from a byte stream; see the module docstring.

    A chunk's complete events (up to its last blank line) are decoded at once; the rest waits
    for the next chunk. The common event, one `data: ` line, is a slice of its block; a chunk
    of events that are all an `event: ` line and a `data: ` line is read in one regex pass; any
    other block is read line by line, as the SSE specification reads it."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        buf = self._pending + chunk if self._pending else chunk
        if buf.find(b"\r") >= 0:
            # A trailing \r may be the first half of \r\n: keep it for the next chunk.
            tail = b"\r" if buf.endswith(b"\r") else b""
            if tail:
                buf = buf[:-1]
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        else:
            tail = b""
        if buf[:7] == b"event: ":
            paired = self._pairs(buf, tail)
            if paired is not None:
                return paired
        blocks = buf.split(b"\n\n")
        self._pending = blocks.pop() + tail
        frames: list[SSEFrame] = []
        for block in blocks:
            if block[:6] == b"data: ":
                if block.find(b"\n") < 0:  # OpenAI's events: one data line
                    frames.append(SSEFrame(None, block[6:]))
                    continue
            elif block[:7] == b"event: ":  # Anthropic's: a name line, then one data line
                end = block.find(b"\n")
                if block[end + 1 : end + 7] == b"data: " and block.find(b"\n", end + 1) < 0:
                    name = block[7:end].decode("utf-8", "replace")
                    frames.append(SSEFrame(name, block[end + 7 :]))
                    continue
            _read_block(block, frames)
        return frames

    def _pairs(self, buf: bytes, tail: bytes) -> list[SSEFrame] | None:
        """The complete events of `buf` when they are all name-and-data pairs (what splitting
        on blank lines would give them), else None. The pairs found tile the complete part
        exactly when their lengths add up to it: matches do not overlap, and each ends at the
        first blank line after its start, as a split block does."""
        end = buf.rfind(b"\n\n") + 2
        if end < 2:
            self._pending = buf + tail
            return []
        pairs = PAIR.findall(buf, 0, end)
        frames: list[SSEFrame] = []
        append = frames.append
        names = _NAMES
        size = PAIR_FRAMING * len(pairs)
        for head, data in pairs:
            size += len(head) + len(data)
            name = names.get(head)
            if name is None:
                name = head.decode("utf-8", "replace")
                if len(names) < _NAMES_MAX:
                    names[head] = name
            append(SSEFrame(name, data))
        if size != end:
            return None  # another kind of event among them: read block by block
        self._pending = buf[end:] + tail
        return frames

    def close(self) -> list[SSEFrame]:
        """End of stream: a last event without its blank line is still delivered."""
        pending, self._pending = self._pending.rstrip(b"\r"), b""
        frames: list[SSEFrame] = []
        if pending:
            _read_block(pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n"), frames)
        return frames


def _read_block(block: bytes, frames: list[SSEFrame]) -> None:
    """The events of lines with no blank line between them but, maybe, blank lines first (a
    block split off at a blank line starts with the rest of a longer run of line ends)."""
    event: str | None = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line:
            if data:
                frames.append(_frame(event, data))
                data = []
            event = None
            continue
        if line[0] == 0x3A:  # ":" comment / keep-alive
            continue
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value.decode("utf-8", "replace")
        # id, retry and unknown fields carry nothing the gateway uses
    if data:
        frames.append(_frame(event, data))


def _frame(event: str | None, data: list[bytes]) -> SSEFrame:
    return SSEFrame(event, data[0] if len(data) == 1 else b"\n".join(data))


def encode(data: bytes, event: str | None = None) -> bytes:
    """One SSE event. Data that spans lines (a relayed event the upstream sent as several `data:`
    lines, which the decoder joined with `\\n`) gets a `data: ` prefix on every line again."""
    if data.find(b"\n") >= 0:
        data = data.replace(b"\n", b"\ndata: ")
    if event is None:
        return b"".join((b"data: ", data, b"\n\n"))
    return b"".join((b"event: ", event.encode(), b"\ndata: ", data, b"\n\n"))
